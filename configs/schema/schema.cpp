// Non-template parts of configs/schema/schema.h: locations, scalar conversions,
// common checks and "did you mean" hints.
#include "configs/schema/schema.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>

namespace zoo::config {

std::string Context::key_path(const std::string& key) const {
  std::string p = key.empty() ? path : path.empty() ? key : path + "." + key;
  if (!aliases) return p;
  // The longest alias prefix that ends at a path component.
  const std::pair<std::string, std::string>* best = nullptr;
  for (const auto& a : *aliases) {
    const std::string& from = a.first;
    const bool prefix = p.compare(0, from.size(), from) == 0 && (p.size() == from.size() || p[from.size()] == '.');
    if (prefix && (!best || from.size() > best->first.size())) best = &a;
  }
  return best ? best->second + p.substr(best->first.size()) : p;
}

std::string Context::where(const YAML::Mark& m) const {
  std::string f = file.empty() ? "<params>" : file;
  if (m.line >= 0) return f + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  return f;
}

std::string Context::where(const YAML::Node& node) const {
  return where(node.IsDefined() ? node.Mark() : YAML::Mark::null_mark());
}

Context Context::child(const std::string& key) const {
  Context c = *this;
  c.path = key_path(key);
  return c;
}

void Context::fail(const YAML::Mark& at, const std::string& key, const std::string& what) const {
  std::string kp = key_path(key);
  throw ConfigError(where(at) + ": " + (kp.empty() ? "" : kp + ": ") + what);
}

void Context::fail(const YAML::Node& at, const std::string& key, const std::string& what) const {
  fail(at.IsDefined() ? at.Mark() : YAML::Mark::null_mark(), key, what);
}

void Context::warn(const YAML::Node& at, const std::string& key, const std::string& what) const {
  std::string text = where(at) + ": " + key_path(key) + ": " + what;
  if (warnings) warnings->push_back(text);
  else std::cerr << "zoo: warning: " << text << "\n";
}

Origin::Origin(Context ctx, const YAML::Node& section)
    : ctx_(std::move(ctx)), section_(section.IsDefined() ? section.Mark() : YAML::Mark::null_mark()) {}

void Origin::record(const std::string& key, const YAML::Node& value) {
  if (value.IsDefined()) keys_[key] = value.Mark();
}

YAML::Mark Origin::mark(const std::string& key) const {
  auto it = keys_.find(key);
  return it != keys_.end() ? it->second : section_;
}

void Origin::fail(const std::string& key, const std::string& what) const { ctx_.fail(mark(key), key, what); }

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  if (node.IsNull()) return "null";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "an unsupported value";
}

// `s` as a whole number text (not a prefix of it), else nullopt.
static std::optional<double> whole_number(const std::string& s) {
  try {
    size_t used = 0;
    const double v = std::stod(s, &used);
    if (used == s.size()) return v;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

std::string describe_value(const YAML::Node& n) {
  if (n.IsScalar()) {
    const std::optional<double> v = whole_number(n.Scalar());
    if (!v) return n.Scalar();
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.15g", *v);
    return buf;
  }
  if (n.IsSequence()) {
    std::string out = "[";
    for (size_t i = 0; i < n.size(); ++i) out += (i ? ", " : "") + describe_value(n[i]);
    return out + "]";
  }
  if (n.IsMap()) {  // numbers inside at 15 digits too: {eps: 1e-05}, not 1.0000000000000001e-05
    std::string out = "{";
    for (const auto& kv : n)
      out += (out.size() > 1 ? ", " : "") + kv.first.Scalar() + ": " +
             (kv.second.IsNull() ? "~" : describe_value(kv.second));
    return out + "}";
  }
  YAML::Emitter e;
  e << YAML::Flow << n;
  return e.c_str();
}

bool same_value(const YAML::Node& a, const YAML::Node& b) {
  if (a.IsScalar() && b.IsScalar()) {
    const std::optional<double> x = whole_number(a.Scalar()), y = whole_number(b.Scalar());
    if (x && y) return *x == *y;
  }
  return describe_value(a) == describe_value(b);
}

Check<double> in_range(double lo, double hi, bool hi_open) {
  return [=](const double& v) {
    bool ok = v >= lo && (hi_open ? v < hi : v <= hi);
    if (ok) return std::string();
    std::ostringstream s;
    s << "expected a value in [" << lo << ", " << hi << (hi_open ? ")" : "]");
    return s.str();
  };
}

Check<std::string> one_of(std::vector<std::string> choices) {
  return [choices](const std::string& v) {
    if (std::find(choices.begin(), choices.end(), v) != choices.end()) return std::string();
    std::string s = "expected one of";
    for (size_t i = 0; i < choices.size(); ++i) s += (i ? ", " : " ") + choices[i];
    return s;
  };
}

static size_t edit_distance(std::string a, std::string b) {
  // Case does not count: 'Adamw2' is closest to 'AdamW'.
  std::transform(a.begin(), a.end(), a.begin(), ::tolower);
  std::transform(b.begin(), b.end(), b.begin(), ::tolower);
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string did_you_mean(const std::string& key, const std::vector<std::string>& known) {
  std::string best;
  size_t best_d = std::max<size_t>(2, key.size() / 3) + 1;
  for (const auto& k : known) {
    size_t d = edit_distance(key, k);
    if (d < best_d) best_d = d, best = k;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

static void require_scalar(const YAML::Node& n, const Context& c, const std::string& k, const std::string& expected) {
  if (!n.IsScalar()) c.fail(n, k, "expected " + expected + ", got " + describe_node(n));
}

bool Value<bool>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  require_scalar(n, c, k, "true or false");
  bool v = false;
  if (!YAML::convert<bool>::decode(n, v)) c.fail(n, k, "expected true or false, got " + describe_node(n));
  return v;
}

int64_t Value<int64_t>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  require_scalar(n, c, k, "an integer");
  const std::string& s = n.Scalar();
  try {
    size_t used = 0;
    long long v = std::stoll(s, &used, 10);
    if (used == s.size()) return v;
    // Accept integral floats such as 1e3 or 2.0, which YAML writers produce.
    double d = std::stod(s, &used);
    if (used == s.size() && std::floor(d) == d && std::fabs(d) < 9e18) return static_cast<int64_t>(d);
  } catch (const std::exception&) {
  }
  c.fail(n, k, "expected an integer, got " + describe_node(n));
}

double Value<double>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  require_scalar(n, c, k, "a number");
  const std::optional<double> v = whole_number(n.Scalar());
  if (v && std::isfinite(*v)) return *v;
  c.fail(n, k, "expected a number, got " + describe_node(n));
}

std::string Value<std::string>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  require_scalar(n, c, k, "a string");
  return n.Scalar();
}

PathList Value<PathList>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  PathList out;
  if (n.IsScalar()) {
    out.items.push_back(n.Scalar());
  } else if (n.IsSequence()) {
    for (const auto& item : n) out.items.push_back(Value<std::string>::parse(item, c, k));
  } else {
    c.fail(n, k, "expected a string or a list of strings, got " + describe_node(n));
  }
  return out;
}

YAML::Node Value<PathList>::emit(const PathList& v) {
  if (v.items.size() == 1) return YAML::Node(v.items[0]);
  YAML::Node n(YAML::NodeType::Sequence);
  for (const auto& s : v.items) n.push_back(s);
  return n;
}

NumberList Value<NumberList>::parse(const YAML::Node& n, const Context& c, const std::string& k) {
  NumberList out;
  if (n.IsSequence()) {
    for (const auto& item : n) out.items.push_back(Value<double>::parse(item, c, k));
  } else {
    out.items.push_back(Value<double>::parse(n, c, k));
  }
  return out;
}

YAML::Node Value<NumberList>::emit(const NumberList& v) {
  if (v.items.size() == 1) return YAML::Node(v.items[0]);
  YAML::Node n(YAML::NodeType::Sequence);
  for (double x : v.items) n.push_back(x);
  n.SetStyle(YAML::EmitterStyle::Flow);
  return n;
}

}  // namespace zoo::config
