// `zoo config diff|stats`: both read each file as a run reads it (either
// layout, defaults applied), so they compare and measure the params a run
// would train with, not the text.
#include <iostream>
#include <map>

#include "data/loader.h"
#include "runner/log.h"
#include "runner/tools/model_stats.h"
#include "runner/tools/tools.h"

namespace zoo::tools {
namespace {

// Every scalar of the resolved params by its dotted path (list items by index).
void flatten(const YAML::Node& node, const std::string& path, std::map<std::string, std::string>& out) {
  if (node.IsMap()) {
    for (const auto& kv : node) flatten(kv.second, (path.empty() ? "" : path + ".") + kv.first.as<std::string>(), out);
  } else if (node.IsSequence()) {
    for (size_t i = 0; i < node.size(); ++i) flatten(node[i], path + "." + std::to_string(i), out);
    if (node.size() == 0) out[path] = "[]";
  } else if (node.IsScalar()) {
    out[path] = node.Scalar();
  } else {
    out[path] = "null";
  }
}

std::map<std::string, std::string> resolved(const std::string& file) {
  const Params p = load_params(file, YAML::Node());
  std::map<std::string, std::string> out;
  flatten(p.resolved(), "", out);
  return out;
}

}  // namespace

int config_diff(const std::string& a, const std::string& b, std::ostream& out) {
  const auto left = resolved(a), right = resolved(b);
  int only_a = 0, only_b = 0, differ = 0;
  for (const auto& [key, value] : left) {
    const auto it = right.find(key);
    if (it == right.end()) ++only_a, out << "  " << key << ": " << value << " only in A\n";
    else if (it->second != value) ++differ, out << "  " << key << ": " << value << " vs " << it->second << "\n";
  }
  for (const auto& [key, value] : right)
    if (!left.count(key)) ++only_b, out << "  " << key << ": " << value << " only in B\n";
  if (only_a + only_b + differ == 0) {
    out << "A " << a << " and B " << b << " resolve to the same params (" << left.size() << " keys).\n";
    return 0;
  }
  out << differ << " differ, " << only_a << " only in A (" << a << "), " << only_b << " only in B (" << b
      << "), after defaults.\n";
  return 1;
}

int config_stats(const std::string& params_file, int64_t ranks, std::ostream& out) {
  const Params params = load_params(params_file, YAML::Node());
  for (const auto& w : params.warnings) log::warn(w);
  if (ranks <= 0) ranks = data::TaskShard::from_environment().num_tasks;
  out << "Params: " << params.file << (params.trainer_format ? " (Trainer format)" : "") << "\n";
  describe_model_stats(params, ranks, out);
  return 0;
}

}  // namespace zoo::tools
