// Non-template parts of runner/config/schema.h: locations, scalar conversions,
// common checks and "did you mean" hints.
#include "runner/config/schema.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "runner/log.h"

namespace zoo::config {

std::string Context::key_path(const std::string& key) const {
  if (key.empty()) return path;
  return path.empty() ? key : path + "." + key;
}

std::string Context::where(const YAML::Node& node) const {
  std::string f = file.empty() ? "<params>" : file;
  if (node.IsDefined()) {
    YAML::Mark m = node.Mark();
    if (m.line >= 0) return f + ":" + std::to_string(m.line + 1) + ":" + std::to_string(m.column + 1);
  }
  return f;
}

Context Context::child(const std::string& key) const {
  Context c = *this;
  c.path = key_path(key);
  return c;
}

void Context::fail(const YAML::Node& at, const std::string& key, const std::string& what) const {
  std::string kp = key_path(key);
  throw ConfigError(where(at) + ": " + (kp.empty() ? "" : kp + ": ") + what);
}

void Context::warn(const YAML::Node& at, const std::string& key, const std::string& what) const {
  std::string text = where(at) + ": " + key_path(key) + ": " + what;
  if (warnings) warnings->push_back(text);
  else log::warn(text);
}

std::string describe_node(const YAML::Node& node) {
  if (!node.IsDefined()) return "nothing";
  if (node.IsNull()) return "null";
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsSequence()) return "a list";
  if (node.IsMap()) return "a mapping";
  return "an unsupported value";
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

static size_t edit_distance(const std::string& a, const std::string& b) {
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

static void require_scalar(const YAML::Node& n, const Context& c, const std::string& k,
                           const std::string& expected) {
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
  const std::string& s = n.Scalar();
  try {
    size_t used = 0;
    double v = std::stod(s, &used);
    if (used == s.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
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
