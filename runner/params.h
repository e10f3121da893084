// A whole params YAML: read, merged with CLI overrides, validated section by
// section (runconfig, optimizer, model via the model registry, inputs via the
// data-processor registry), then frozen. Keys that modelzoo keeps in the
// wrong section (mixed_precision, fp16_type in `model`) move to their owner
// here, at the parse boundary.
// Defines: PrecisionConfig, Params, load_params, params_from_node.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <vector>

#include "runner/config/schema.h"
#include "runner/optimizer_config.h"
#include "runner/runconfig.h"

namespace zoo {

struct PrecisionConfig {
  bool mixed_precision = false;
  std::string fp16_type = "float16";
  static const config::Schema<PrecisionConfig>& schema();
};

struct Params {
  std::string file;            // where it was read from, for messages
  RunConfig runconfig;
  OptimizerConfig optimizer;
  bool has_optimizer = false;
  PrecisionConfig precision;
  std::string model_name = "gpt2";  // zoo's `model.name`; modelzoo picks it by run.py
  YAML::Node model;            // the model section without runner-owned keys
  YAML::Node train_input;      // undefined when absent
  YAML::Node eval_input;
  std::vector<std::string> warnings;

  config::Context context(const std::string& section) const;
  // The merged, resolved params as written to params_<mode>.yaml.
  YAML::Node resolved() const;
};

// Reads `file`, applies `runconfig_overrides` (a mapping, e.g. from the CLI) on
// top of its runconfig, and validates everything. Throws config::ConfigError.
Params load_params(const std::string& file, const YAML::Node& runconfig_overrides);
Params params_from_node(const YAML::Node& root, const std::string& name, const YAML::Node& runconfig_overrides);

// Every schema as text, for `zoo --help-config` and docs.
std::string describe_all_schemas();

}  // namespace zoo
