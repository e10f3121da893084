// Declarative config schemas: each YAML key is declared once, bound to a
// member of an options struct whose in-class initializer is the default.
// Parsing, type and range validation, unknown-key errors, defaults, the echoed
// params file and the --help/docs tables are all derived from that one
// declaration.
//
// Defines: ConfigError, Context, Check (+ helpers positive, non_negative,
// in_range, one_of), PathList, Value<V> (YAML <-> C++ conversions), Schema<T>.
//
// Usage:
//   struct FooOptions { int64_t size = 8; static const Schema<FooOptions>& schema(); };
//   const Schema<FooOptions>& FooOptions::schema() {
//     static const Schema<FooOptions> s = Schema<FooOptions>("foo")
//         .field("size", &FooOptions::size, "Number of things.", positive<int64_t>());
//     return s;
//   }
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace zoo::config {

// Every config problem is a ConfigError whose message names the file, line,
// key path and what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Where a section being parsed came from, for messages; collects warnings.
struct Context {
  std::string file;                        // params file name ("" when built in code)
  std::string path;                        // key path of the section, e.g. "model"
  std::vector<std::string>* warnings = nullptr;

  std::string key_path(const std::string& key) const;
  // "file:line:col" of `node` (or of the file alone when the node has no mark).
  std::string where(const YAML::Node& node) const;
  Context child(const std::string& key) const;
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key,
                         const std::string& what) const;
  void warn(const YAML::Node& at, const std::string& key, const std::string& what) const;
};

// A check returns "" when the value is fine, else what was expected.
template <class V>
using Check = std::function<std::string(const V&)>;

template <class V>
Check<V> positive() {
  return [](const V& v) { return v > 0 ? "" : std::string("expected a value > 0"); };
}
template <class V>
Check<V> non_negative() {
  return [](const V& v) { return v >= 0 ? "" : std::string("expected a value >= 0"); };
}
// Range [lo, hi) when hi_open, else [lo, hi].
Check<double> in_range(double lo, double hi, bool hi_open);
Check<std::string> one_of(std::vector<std::string> choices);
// Applies `check` to the value inside an optional when it is set.
template <class V>
Check<std::optional<V>> if_set(Check<V> check) {
  return [check](const std::optional<V>& v) { return v ? check(*v) : std::string(); };
}

// A string or a list of strings (modelzoo's data_dir accepts both).
struct PathList {
  std::vector<std::string> items;
  bool operator==(const PathList& o) const { return items == o.items; }
};

// A number or a list of numbers (e.g. Adafactor's eps pair beside scalar eps).
struct NumberList {
  std::vector<double> items;
  bool operator==(const NumberList& o) const { return items == o.items; }
};

// Levenshtein-based "did you mean" suffix ("" when nothing is close).
std::string did_you_mean(const std::string& key, const std::vector<std::string>& known);
std::string describe_node(const YAML::Node& node);  // short text of a value, for messages

// --- YAML <-> C++ value conversion. parse() throws ConfigError via ctx.fail.
template <class V, class Enable = void>
struct Value;  // nested option structs: see the specialization at the bottom

template <>
struct Value<bool> {
  static bool parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(bool v) { return YAML::Node(v); }
  static std::string type_name() { return "bool"; }
};
template <>
struct Value<int64_t> {
  static int64_t parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(int64_t v) { return YAML::Node(v); }
  static std::string type_name() { return "int"; }
};
template <>
struct Value<double> {
  static double parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(double v) { return YAML::Node(v); }
  static std::string type_name() { return "float"; }
};
template <>
struct Value<std::string> {
  static std::string parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(const std::string& v) { return YAML::Node(v); }
  static std::string type_name() { return "string"; }
};
template <>
struct Value<PathList> {
  static PathList parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(const PathList& v);
  static std::string type_name() { return "string or list of strings"; }
};
template <>
struct Value<NumberList> {
  static NumberList parse(const YAML::Node& n, const Context& c, const std::string& k);
  static YAML::Node emit(const NumberList& v);
  static std::string type_name() { return "number or list of numbers"; }
};
// Raw YAML, validated by its consumer (e.g. learning_rate schedules).
template <>
struct Value<YAML::Node> {
  static YAML::Node parse(const YAML::Node& n, const Context&, const std::string&) {
    return YAML::Clone(n);
  }
  static YAML::Node emit(const YAML::Node& v) { return YAML::Clone(v); }
  static std::string type_name() { return "yaml"; }
};
template <class V>
struct Value<std::optional<V>> {
  static std::optional<V> parse(const YAML::Node& n, const Context& c, const std::string& k) {
    if (!n.IsDefined() || n.IsNull()) return std::nullopt;
    return Value<V>::parse(n, c, k);
  }
  static YAML::Node emit(const std::optional<V>& v) {
    return v ? Value<V>::emit(*v) : YAML::Node(YAML::NodeType::Null);
  }
  static std::string type_name() { return Value<V>::type_name() + " or null"; }
};
template <class V>
struct Value<std::vector<V>> {
  static std::vector<V> parse(const YAML::Node& n, const Context& c, const std::string& k) {
    if (!n.IsSequence()) c.fail(n, k, "expected a list of " + Value<V>::type_name() + ", got " + describe_node(n));
    std::vector<V> out;
    for (const auto& item : n) out.push_back(Value<V>::parse(item, c, k));
    return out;
  }
  static YAML::Node emit(const std::vector<V>& v) {
    YAML::Node n(YAML::NodeType::Sequence);
    for (const auto& x : v) n.push_back(Value<V>::emit(x));
    n.SetStyle(YAML::EmitterStyle::Flow);
    return n;
  }
  static std::string type_name() { return "list of " + Value<V>::type_name(); }
};

// Help/doc row for one declared key.
struct FieldInfo {
  std::string key;
  std::string type;
  std::string default_text;
  std::string doc;
};

template <class T>
class Schema {
 public:
  // Cross-field validation: call fail(key, what) to report at that key's line.
  using Fail = std::function<void(const std::string& key, const std::string& what)>;
  using Validator = std::function<void(const T&, const Fail&)>;

  explicit Schema(std::string name, std::string doc = "") : name_(std::move(name)), doc_(std::move(doc)) {}

  template <class V>
  Schema& field(const std::string& key, V T::*member, const std::string& doc,
                Check<V> check = nullptr) {
    Field f;
    f.info = {key, Value<V>::type_name(), "", doc};
    f.parse = [member, check, key](T& obj, const YAML::Node& n, const Context& c) {
      V v = Value<V>::parse(n, c, key);
      if (check) {
        std::string problem = check(v);
        if (!problem.empty()) c.fail(n, key, problem + ", got " + describe_node(n));
      }
      obj.*member = std::move(v);
    };
    f.emit = [member](const T& obj) { return Value<V>::emit(obj.*member); };
    T defaults{};
    YAML::Emitter e;
    e << YAML::Flow << f.emit(defaults);
    f.info.default_text = e.c_str();
    fields_.push_back(std::move(f));
    return *this;
  }
  // Modelzoo keys that only matter on Cerebras hardware: accepted, one warning.
  Schema& hardware_only(const std::vector<std::string>& keys, const std::string& why) {
    for (const auto& k : keys) tolerated_[k] = why;
    return *this;
  }
  // Old key names: a clear error that names the replacement.
  Schema& renamed(const std::string& old_key, const std::string& new_key) {
    renamed_[old_key] = new_key;
    return *this;
  }
  Schema& validate(Validator v) {
    validators_.push_back(std::move(v));
    return *this;
  }

  const std::string& name() const { return name_; }
  const std::string& doc() const { return doc_; }
  std::vector<FieldInfo> describe() const {
    std::vector<FieldInfo> out;
    for (const auto& f : fields_) out.push_back(f.info);
    return out;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& f : fields_) out.push_back(f.info.key);
    return out;
  }
  bool has_key(const std::string& key) const {
    for (const auto& f : fields_) if (f.info.key == key) return true;
    return false;
  }

  // Parses a YAML mapping (null = all defaults) into T, or throws ConfigError.
  T parse(const YAML::Node& section, const Context& ctx) const {
    T obj{};
    if (!section.IsDefined() || section.IsNull()) {
      run_validators(obj, section, ctx);
      return obj;
    }
    if (!section.IsMap())
      ctx.fail(section, "", "expected a mapping of " + name_ + " keys, got " + describe_node(section));
    std::set<std::string> seen;
    for (const auto& kv : section) {
      const std::string key = kv.first.as<std::string>();
      const YAML::Node& value = kv.second;
      if (!seen.insert(key).second) ctx.fail(kv.first, key, "duplicate key (it appears more than once)");
      const Field* f = find(key);
      if (f) {
        if (!value.IsNull()) f->parse(obj, value, ctx);
        continue;
      }
      if (auto r = renamed_.find(key); r != renamed_.end())
        ctx.fail(kv.first, key, "this key was renamed; use '" + r->second + "' instead");
      if (auto t = tolerated_.find(key); t != tolerated_.end()) {
        ctx.warn(kv.first, key, "ignored (" + t->second + ")");
        continue;
      }
      ctx.fail(kv.first, key, "unknown key" + did_you_mean(key, keys()) +
                                  " (known " + name_ + " keys: see `zoo --help-config`)");
    }
    run_validators(obj, section, ctx);
    return obj;
  }

  // Every declared key with its resolved value: the echoed params file.
  YAML::Node to_yaml(const T& obj) const {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& f : fields_) out[f.info.key] = f.emit(obj);
    return out;
  }

 private:
  struct Field {
    FieldInfo info;
    std::function<void(T&, const YAML::Node&, const Context&)> parse;
    std::function<YAML::Node(const T&)> emit;
  };
  const Field* find(const std::string& key) const {
    for (const auto& f : fields_) if (f.info.key == key) return &f;
    return nullptr;
  }
  void run_validators(const T& obj, const YAML::Node& section, const Context& ctx) const {
    Fail fail = [&](const std::string& key, const std::string& what) {
      YAML::Node at = section.IsMap() && section[key] ? section[key] : section;
      ctx.fail(at, key, what);
    };
    for (const auto& v : validators_) v(obj, fail);
  }

  std::string name_;
  std::string doc_;
  std::vector<Field> fields_;
  std::map<std::string, std::string> tolerated_;
  std::map<std::string, std::string> renamed_;
  std::vector<Validator> validators_;
};

// Nested option structs (e.g. an initializer spec) parse through their own schema.
template <class S>
struct Value<S, std::void_t<decltype(S::schema())>> {
  static S parse(const YAML::Node& n, const Context& c, const std::string& k) {
    return S::schema().parse(n, c.child(k));
  }
  static YAML::Node emit(const S& v) { return S::schema().to_yaml(v); }
  static std::string type_name() { return S::schema().name(); }
};

}  // namespace zoo::config
