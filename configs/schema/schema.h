// Declarative config schemas: each YAML key is declared once, bound to a
// member of an options struct whose in-class initializer is the default.
// Parsing, type and range validation, unknown-key errors, renamed legacy keys,
// defaults, the echoed params file and the --help/docs tables are all derived
// from that one declaration. Used by runner/, models/ and data/ alike (this
// library needs yaml-cpp only).
//
// Defines: ConfigError, Context, Origin, Check (+ helpers positive,
// non_negative, at_most, in_range, one_of), PathList, NumberList, Value<V>
// (YAML <-> C++ conversions), KeyFilter, Schema<T>.
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
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace zoo::config {

// Every config problem is a ConfigError whose message names the file, line,
// key path and what was expected.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Key paths as the user wrote them when the file's layout differs from the
// one zoo parses (modelzoo's Trainer format): {"runconfig.checkpoint_steps",
// "trainer.init.checkpoint.steps"}; the longest matching prefix wins.
using PathAliases = std::vector<std::pair<std::string, std::string>>;

// Where a section being parsed came from, for messages; collects warnings.
struct Context {
  std::string file;                              // params file name ("" when built in code)
  std::string path;                              // key path of the section, e.g. "model"
  std::vector<std::string>* warnings = nullptr;  // null: warnings go to stderr
  std::shared_ptr<const PathAliases> aliases;    // null: paths are shown as parsed

  // The key path shown to the user, e.g. "model.num_heads".
  std::string key_path(const std::string& key) const;
  // "file:line:col" of `node` (or of the file alone when the node has no mark).
  std::string where(const YAML::Node& node) const;
  std::string where(const YAML::Mark& mark) const;
  Context child(const std::string& key) const;
  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& what) const;
  [[noreturn]] void fail(const YAML::Mark& at, const std::string& key, const std::string& what) const;
  void warn(const YAML::Node& at, const std::string& key, const std::string& what) const;
};

// Where each key of a parsed section stood, so that problems found later
// (a data_dir that does not exist, a model/data mismatch) name the same
// file:line:col as a parse error would, without keeping the YAML.
class Origin {
 public:
  Origin() = default;
  Origin(Context ctx, const YAML::Node& section);
  void record(const std::string& key, const YAML::Node& value);
  const Context& context() const { return ctx_; }
  // The mark of `key`'s value, or of the section when the key was not given.
  YAML::Mark mark(const std::string& key) const;
  [[noreturn]] void fail(const std::string& key, const std::string& what) const;

 private:
  Context ctx_;
  YAML::Mark section_ = YAML::Mark::null_mark();
  std::map<std::string, YAML::Mark> keys_;
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
template <class V>
Check<V> at_most(V limit, std::string why) {
  return [limit, why](const V& v) {
    return v <= limit ? std::string() : "expected at most " + std::to_string(limit) + " (" + why + ")";
  };
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

// Whether an options struct has modelzoo's sequence-length keys, so that
// registries can compare a model's limit with its inputs without knowing
// the family or processor.
template <class T, class = void>
struct has_max_position_embeddings : std::false_type {};
template <class T>
struct has_max_position_embeddings<T, std::void_t<decltype(std::declval<T>().max_position_embeddings)>>
    : std::true_type {};
template <class T, class = void>
struct has_max_sequence_length : std::false_type {};
template <class T>
struct has_max_sequence_length<T, std::void_t<decltype(std::declval<T>().max_sequence_length)>> : std::true_type {};

// Levenshtein-based "did you mean" suffix ("" when nothing is close).
std::string did_you_mean(const std::string& key, const std::vector<std::string>& known);
std::string describe_node(const YAML::Node& node);  // short text of a value, for messages
// A value as flow YAML with numbers at 15 digits (0.1, not 0.10000000000000001).
std::string describe_value(const YAML::Node& node);
// Numbers compare as numbers (0.9 == 9.0e-1), anything else as described.
bool same_value(const YAML::Node& a, const YAML::Node& b);

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
  template <class W = V>  // only for nested option structs
  static auto nested_fields() -> decltype(Value<W>::nested_fields()) {
    return Value<W>::nested_fields();
  }
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
  template <class W = V>  // only for nested option structs: their keys as "[].key"
  static auto nested_fields() -> decltype(Value<W>::nested_fields()) {
    auto rows = Value<W>::nested_fields();
    for (auto& r : rows) r.key = "[]." + r.key;
    return rows;
  }
};
template <class V>
struct Value<std::map<std::string, V>> {
  static std::map<std::string, V> parse(const YAML::Node& n, const Context& c, const std::string& k) {
    if (!n.IsMap())
      c.fail(n, k, "expected a mapping of names to " + Value<V>::type_name() + ", got " + describe_node(n));
    std::map<std::string, V> out;
    for (const auto& kv : n) {
      const std::string name = kv.first.as<std::string>();
      out[name] = Value<V>::parse(kv.second, c, k + "." + name);
    }
    return out;
  }
  static YAML::Node emit(const std::map<std::string, V>& m) {
    YAML::Node n(YAML::NodeType::Map);
    for (const auto& [name, x] : m) n[name] = Value<V>::emit(x);
    return n;
  }
  static std::string type_name() { return "mapping of names to " + Value<V>::type_name(); }
};

// Help/doc row for one declared key.
struct FieldInfo {
  std::string key;
  std::string type;
  std::string default_text;
  std::string doc;
};

// Nested option structs whose keys --help-config leaves out (S::kHelpCollapsed).
template <class S, class = void>
struct collapsed_in_help : std::false_type {};
template <class S>
struct collapsed_in_help<S, std::void_t<decltype(S::kHelpCollapsed)>> : std::true_type {};
// Whether a value type documents nested keys (Value<V>::nested_fields()).
template <class V, class = void>
struct has_nested_fields : std::false_type {};
template <class V>
struct has_nested_fields<V, std::void_t<decltype(Value<V>::nested_fields())>> : std::true_type {};

// Which keys a use of a schema accepts, when that depends on another key's
// value (AdamW takes betas, SGD takes momentum): "" when `key` is accepted,
// else why not ("not a key of the AdamW optimizer (it takes ...)").
using KeyFilter = std::function<std::string(const std::string& key)>;

template <class T>
class Schema {
 public:
  // Cross-field validation: call fail(key, what) to report at that key's line.
  using Fail = std::function<void(const std::string& key, const std::string& what)>;
  using Validator = std::function<void(const T&, const Fail&)>;

  explicit Schema(std::string name, std::string doc = "") : name_(std::move(name)), doc_(std::move(doc)) {}

  // `member` may belong to a base of T (options shared by several families).
  template <class V, class Owner>
  Schema& field(const std::string& key, V Owner::*owner_member, const std::string& doc, Check<V> check = nullptr) {
    static_assert(std::is_base_of_v<Owner, T>, "a member of T or of one of its bases");
    V T::*member = owner_member;
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
    if constexpr (has_nested_fields<V>::value) f.nested = [] { return Value<V>::nested_fields(); };
    T defaults{};
    f.info.default_text = describe_value(f.emit(defaults));  // 0.3, not 0.29999999999999999
    fields_.push_back(std::move(f));
    return *this;
  }
  // Modelzoo keys that only matter on Cerebras hardware: accepted, one warning.
  Schema& hardware_only(const std::vector<std::string>& keys, const std::string& why) { return ignored(keys, why); }
  // Keys modelzoo itself accepts and does not read: one warning saying `why`.
  Schema& ignored(const std::vector<std::string>& keys, const std::string& why) {
    for (const auto& k : keys) tolerated_[k] = why;
    return *this;
  }
  // An old key name (modelzoo R1.x): read as `new_key` with one warning that
  // names the new key; an error only when both are given and disagree.
  // `part` >= 0: the old key is element `part` of the list `new_key`
  // (beta2 -> betas[1]); the other elements come from `new_key`'s value
  // after the rest of the section is read (a default, or a filler's).
  Schema& renamed(const std::string& old_key, const std::string& new_key, int part = -1) {
    renamed_[old_key] = {new_key, part, nullptr};
    return *this;
  }
  // An old key whose value also changed form (use_bfloat16: true -> fp16_type:
  // bfloat16): `convert` gives the new key's value (an old value it does not
  // know comes back as it is, for the new key's parser to report).
  Schema& renamed(const std::string& old_key, const std::string& new_key,
                  std::function<YAML::Node(const YAML::Node&)> convert) {
    renamed_[old_key] = {new_key, -1, std::move(convert)};
    return *this;
  }
  Schema& validate(Validator v) {
    validators_.push_back(std::move(v));
    return *this;
  }

  const std::string& name() const { return name_; }
  const std::string& doc() const { return doc_; }
  // Each key's row, followed by the rows of a nested struct's keys ("moe.top_k", "mixture[].weight").
  std::vector<FieldInfo> describe() const {
    std::vector<FieldInfo> out;
    for (const auto& f : fields_) {
      out.push_back(f.info);
      if (!f.nested) continue;
      for (FieldInfo row : f.nested()) {
        row.key = f.info.key + (row.key.rfind("[]", 0) == 0 ? "" : ".") + row.key;
        out.push_back(std::move(row));
      }
    }
    return out;
  }
  std::vector<std::string> keys() const {
    std::vector<std::string> out;
    for (const auto& f : fields_) out.push_back(f.info.key);
    return out;
  }
  bool has_key(const std::string& key) const { return find(key) != nullptr; }
  // Whether parse() takes `key` without an error (a field, an old name, or an ignored key).
  bool accepts_key(const std::string& key) const {
    return has_key(key) || renamed_.count(key) > 0 || tolerated_.count(key) > 0;
  }

  // Parses a YAML mapping (null = all defaults) into T, or throws ConfigError.
  // `filter` narrows the accepted keys; `origin` (optional) records where
  // each key stood; `start` holds the defaults when they depend on another
  // key (an optimizer's own betas), else T's initializers are used.
  T parse(const YAML::Node& section, const Context& ctx, const KeyFilter& filter = nullptr, Origin* origin = nullptr,
          const T* start = nullptr) const {
    T obj = start ? *start : T{};
    if (origin) *origin = Origin(ctx, section);
    if (!section.IsDefined() || section.IsNull()) {
      run_validators(obj, section, ctx);
      return obj;
    }
    if (!section.IsMap())
      ctx.fail(section, "", "expected a mapping of " + name_ + " keys, got " + describe_node(section));
    std::set<std::string> seen, given;
    std::vector<std::pair<YAML::Node, YAML::Node>> old_keys;  // (key node, value) of renamed keys
    for (const auto& kv_in : section) {
      // A key moved here from another layout (the Trainer format) has no
      // mark of its own: report at its value's line instead.
      const std::pair<YAML::Node, YAML::Node> kv{kv_in.first.Mark().line >= 0 ? kv_in.first : kv_in.second,
                                                 kv_in.second};
      const std::string key = kv_in.first.as<std::string>();
      const YAML::Node& value = kv.second;
      if (!seen.insert(key).second) ctx.fail(kv.first, key, "duplicate key (it appears more than once)");
      const Field* f = find(key);
      // A key that is a field for some uses and an old name for others
      // (beta1: Adafactor's own key, Adam's old betas[0]): the filter decides.
      if (f && filter && renamed_.count(key) && !filter(key).empty()) f = nullptr;
      const bool legacy = !f && renamed_.count(key);
      if ((f || legacy) && filter) {
        std::string why = filter(legacy ? renamed_.at(key).new_key : key);
        if (!why.empty()) ctx.fail(kv.first, key, why);
      }
      if (f) {
        if (!value.IsNull()) f->parse(obj, value, ctx), given.insert(key);
        if (origin) origin->record(key, value);
        continue;
      }
      if (legacy) {
        old_keys.emplace_back(kv_in.first, value);
        continue;
      }
      if (auto t = tolerated_.find(key); t != tolerated_.end()) {
        ctx.warn(kv.first, key, "ignored (" + t->second + ")");
        continue;
      }
      ctx.fail(kv.first, key,
               "unknown key" + did_you_mean(key, keys()) + " (known " + name_ + " keys: see `zoo --help-config`)");
    }
    apply_renamed(obj, old_keys, given, ctx, origin);
    run_validators(obj, section, ctx);
    return obj;
  }

  // Every declared key with its resolved value: the echoed params file.
  YAML::Node to_yaml(const T& obj) const {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& f : fields_) out[f.info.key] = f.emit(obj);
    return out;
  }
  // Only `keys`, in declaration order.
  YAML::Node to_yaml(const T& obj, const std::function<bool(const std::string&)>& keep) const {
    YAML::Node out(YAML::NodeType::Map);
    for (const auto& f : fields_)
      if (keep(f.info.key)) out[f.info.key] = f.emit(obj);
    return out;
  }

 private:
  struct Field {
    FieldInfo info;
    std::function<void(T&, const YAML::Node&, const Context&)> parse;
    std::function<YAML::Node(const T&)> emit;
    std::function<std::vector<FieldInfo>()> nested;  // a nested struct's rows, for describe()
  };
  struct Renamed {
    std::string new_key;
    int part = -1;
    std::function<YAML::Node(const YAML::Node&)> convert;  // null: the value keeps its form
  };
  const Field* find(const std::string& key) const {
    for (const auto& f : fields_)
      if (f.info.key == key) return &f;
    return nullptr;
  }
  // Old keys become their new key (whole, or one element of a list).
  void apply_renamed(T& obj, const std::vector<std::pair<YAML::Node, YAML::Node>>& old_keys,
                     std::set<std::string>& given, const Context& ctx, Origin* origin) const {
    std::map<std::string, YAML::Node> parts;  // new key -> list assembled from old part keys
    std::map<std::string, YAML::Node> part_at;
    for (const auto& [key_node, value] : old_keys) {
      const std::string old_key = key_node.template as<std::string>();
      const Renamed& r = renamed_.at(old_key);
      const Field& f = *find(r.new_key);
      const bool new_given = given.count(r.new_key) > 0;
      if (r.part < 0) {
        T probe = obj;
        f.parse(probe, r.convert ? r.convert(value) : value, ctx);
        if (new_given && describe_value(f.emit(probe)) != describe_value(f.emit(obj)))
          ctx.fail(key_node, old_key,
                   "old name of '" + r.new_key + "', which is also given, with another value (" +
                       describe_value(f.emit(probe)) + " vs " + describe_value(f.emit(obj)) + "); keep only '" +
                       r.new_key + "'");
        if (!new_given) {
          obj = probe;
          given.insert(r.new_key);
          if (origin) origin->record(r.new_key, value);
        }
      } else if (new_given) {
        YAML::Node current = f.emit(obj);
        if (!current.IsSequence() || static_cast<int>(current.size()) <= r.part || !same_value(current[r.part], value))
          ctx.fail(key_node, old_key,
                   "old name of " + r.new_key + "[" + std::to_string(r.part) +
                       "], which is also given, with another value (" + describe_value(value) + " vs " +
                       describe_value(current) + "); keep only '" + r.new_key + "'");
      } else {
        YAML::Node& list = parts[r.new_key];
        if (!list.IsDefined() || list.IsNull()) list = YAML::Node(YAML::NodeType::Sequence);
        while (static_cast<int>(list.size()) <= r.part) list.push_back(YAML::Node(YAML::NodeType::Null));
        list[r.part] = value;
        part_at[r.new_key] = value;
      }
      ctx.warn(key_node, old_key,
               "old name, read as '" + r.new_key + (r.part >= 0 ? "[" + std::to_string(r.part) + "]" : std::string()) +
                   "'; rename it to keep this file working with newer modelzoo");
    }
    // Elements not given fall back to the new key's default value.
    for (auto& [new_key, list] : parts) {
      const Field& f = *find(new_key);
      YAML::Node fallback = f.emit(obj);
      YAML::Node full(YAML::NodeType::Sequence);
      for (size_t i = 0; i < list.size(); ++i) {
        if (!list[i].IsNull()) full.push_back(list[i]);
        else if (fallback.IsSequence() && i < fallback.size()) full.push_back(fallback[i]);
        else ctx.fail(part_at[new_key], new_key, "give every element of '" + new_key + "' (or the list itself)");
      }
      if (fallback.IsSequence())
        for (size_t i = list.size(); i < fallback.size(); ++i) full.push_back(fallback[i]);
      f.parse(obj, full, ctx);
      given.insert(new_key);
      if (origin) origin->record(new_key, part_at[new_key]);
    }
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
  std::map<std::string, Renamed> renamed_;
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
  // Its keys for --help-config, unless the struct keeps them out (kHelpCollapsed:
  // initializers, whose keys would repeat under every initializer field).
  template <class W = S, class = std::enable_if_t<!collapsed_in_help<W>::value>>
  static std::vector<FieldInfo> nested_fields() {
    return W::schema().describe();
  }
};

}  // namespace zoo::config
