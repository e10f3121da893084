// A whole params file, parsed once into typed, frozen specs: runconfig
// (merged with CLI overrides), optimizer (with its learning-rate schedule),
// the model family's spec and the data processors' specs. Keys that modelzoo
// keeps in the wrong section (mixed_precision, fp16_type in `model`) move to
// their owner here, at the parse boundary. modelzoo's Trainer format
// (`trainer:` at the top) is read into the same specs (runner/params/trainer_format.h).
// Nothing downstream reads raw YAML.
// Defines: PrecisionConfig, Params, ignored_section, load_params,
// params_from_node, check_inputs_for_mode, describe_all_schemas, config_reference_markdown.
#pragma once

#include <yaml-cpp/yaml.h>

#include <memory>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "models/common/lora_config.h"
#include "runner/eval_tasks/eval_tasks_config.h"
#include "runner/optim/optimizer_config.h"
#include "runner/params/runconfig.h"
#include "runner/sparsity_config.h"

namespace zoo::models {
class ModelSpec;
}
namespace zoo::data {
class InputSpec;
}

namespace zoo {

struct PrecisionConfig {
  bool mixed_precision = false;
  std::string fp16_type = "float16";
  static const config::Schema<PrecisionConfig>& schema();
};

struct Params {
  std::string file;             // where it was read from, for messages
  bool trainer_format = false;  // read from modelzoo's `trainer:` layout
  RunConfig runconfig;
  OptimizerConfig optimizer;
  bool has_optimizer = false;
  PrecisionConfig precision;
  std::string model_name = "gpt2";  // zoo's `model.name`; modelzoo picks it by run.py
  std::shared_ptr<const models::ModelSpec> model;
  std::shared_ptr<const data::InputSpec> train_input;  // null when absent
  std::shared_ptr<const data::InputSpec> eval_input;   // null when absent
  std::optional<SparsityConfig> sparsity;              // modelzoo's weight sparsity, when given
  std::vector<models::LoraGroup> lora;        // model.lora_params (Trainer format: the Lora callback); empty: none
  std::optional<EvalTasksConfig> eval_tasks;  // downstream tasks with each evaluation (Trainer format: EvalTasks)
  std::vector<std::string> warnings;

  // For errors found at run time about a section as a whole.
  config::Context context(const std::string& section) const;
  // The merged, resolved params (legacy layout) as written to params_<mode>.yaml.
  YAML::Node resolved() const;
};

// Why a top-level section that is not zoo's is skipped with a warning, or
// nullptr when it is an error: modelzoo 2.1's notes on the file
// (description, tag) and the Cerebras system section `csconfig`.
const char* ignored_section(const std::string& name);

// Reads `file`, applies `runconfig_overrides` (a mapping, e.g. from the CLI) on
// top of its runconfig, and validates everything. Throws config::ConfigError.
Params load_params(const std::string& file, const YAML::Node& runconfig_overrides);
Params params_from_node(const YAML::Node& root, const std::string& name, const YAML::Node& runconfig_overrides);

// What runconfig.mode needs (train_input, optimizer and a step count to
// train, eval_frequency for train_and_eval by steps, eval_input to
// evaluate): ConfigError naming the file and the missing key.
void check_inputs_for_mode(const Params& params);

// Every schema as text, for `zoo --help-config` and docs.
std::string describe_all_schemas();
// The same as a Markdown page (docs/config_reference.md).
std::string config_reference_markdown();

}  // namespace zoo
