// Implementation of runner/params.h.
#include "runner/params.h"

#include "data/registry.h"
#include "models/registry.h"
#include "runner/config/yaml_util.h"
#include "runner/optim/lr_schedule.h"

namespace zoo {

const config::Schema<PrecisionConfig>& PrecisionConfig::schema() {
  using P = PrecisionConfig;
  static const config::Schema<P> s =
      config::Schema<P>("model (precision keys)", "Mixed precision, read from the model section as in modelzoo.")
          .field("mixed_precision", &P::mixed_precision, "Train with reduced-precision activations.")
          .field("fp16_type", &P::fp16_type, "float16, bfloat16 or cbfloat16 (treated as bfloat16).",
                 config::one_of({"float16", "bfloat16", "cbfloat16"}));
  return s;
}

namespace {
const std::vector<std::string> kSections = {"train_input", "eval_input", "model", "optimizer", "runconfig"};
const std::vector<std::string> kPrecisionKeys = {"mixed_precision", "fp16_type"};
}  // namespace

config::Context Params::context(const std::string& section) const {
  config::Context c;
  c.file = file;
  c.path = section;
  c.warnings = const_cast<std::vector<std::string>*>(&warnings);
  return c;
}

Params params_from_node(const YAML::Node& root_in, const std::string& name, const YAML::Node& overrides) {
  Params p;
  p.file = name;
  config::Context top = p.context("");
  if (!root_in.IsMap()) top.fail(root_in, "", "expected a mapping with sections " + std::string("train_input, eval_input, model, optimizer, runconfig"));
  for (const auto& kv : root_in) {
    const std::string key = kv.first.as<std::string>();
    if (std::find(kSections.begin(), kSections.end(), key) == kSections.end())
      top.fail(kv.first, key,
               "unknown section" + config::did_you_mean(key, kSections) +
                   " (expected train_input, eval_input, model, optimizer, runconfig)");
  }

  // runconfig: CLI overrides win over the file.
  // Fresh map holding the original nodes, so messages keep their line numbers.
  YAML::Node runconfig(YAML::NodeType::Map);
  const YAML::Node runconfig_in = root_in["runconfig"];
  if (runconfig_in && runconfig_in.IsMap())
    for (const auto& kv : runconfig_in) runconfig[kv.first] = kv.second;
  else if (runconfig_in && !runconfig_in.IsNull())
    top.fail(runconfig_in, "runconfig", "expected a mapping, got " + config::describe_node(runconfig_in));
  if (overrides.IsMap())
    for (const auto& kv : overrides) runconfig[kv.first.as<std::string>()] = kv.second;
  p.runconfig = RunConfig::schema().parse(runconfig, p.context("runconfig"));

  if (root_in["optimizer"]) {
    p.has_optimizer = true;
    p.optimizer = OptimizerConfig::schema().parse(root_in["optimizer"], p.context("optimizer"));
  }

  // model: split off runner-owned keys, then validate with the family's schema.
  const YAML::Node model_in = root_in["model"];
  if (!model_in || !model_in.IsMap()) top.fail(model_in ? model_in : root_in, "model", "required: a mapping of model keys");
  YAML::Node model(YAML::NodeType::Map), precision(YAML::NodeType::Map);
  for (const auto& kv : model_in) {
    const std::string key = kv.first.as<std::string>();
    if (key == "name") p.model_name = kv.second.as<std::string>();
    else if (std::find(kPrecisionKeys.begin(), kPrecisionKeys.end(), key) != kPrecisionKeys.end()) precision[key] = kv.second;
    else model[kv.first] = kv.second;  // keep the original key node (and its line)
  }
  p.precision = PrecisionConfig::schema().parse(precision, p.context("model"));
  const models::ModelFamily* family = nullptr;
  try {
    family = &models::find_model(p.model_name);
  } catch (const std::invalid_argument& e) {
    top.fail(model_in["name"], "model.name", e.what());
  }
  family->validate(model, p.context("model"));
  p.model = model;

  for (const char* section : {"train_input", "eval_input"}) {
    YAML::Node in = root_in[section];
    if (!in) continue;
    config::Context ctx = p.context(section);
    data::find_data_processor(in, ctx).validate(in, ctx);
    (std::string(section) == "train_input" ? p.train_input : p.eval_input) = in;
  }
  return p;
}

Params load_params(const std::string& file, const YAML::Node& overrides) {
  return params_from_node(config::load_yaml_file(file), file, overrides);
}

YAML::Node Params::resolved() const {
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& [name, node] : {std::pair{"train_input", train_input}, std::pair{"eval_input", eval_input}}) {
    if (!node) continue;
    config::Context ctx = context(name);
    out[name] = data::find_data_processor(node, ctx).validate(node, ctx);
  }
  YAML::Node model_out = models::find_model(model_name).validate(model, context("model"));
  model_out["name"] = model_name;
  YAML::Node prec = PrecisionConfig::schema().to_yaml(precision);
  for (const auto& kv : prec) model_out[kv.first] = kv.second;
  out["model"] = model_out;
  if (has_optimizer) out["optimizer"] = OptimizerConfig::schema().to_yaml(optimizer);
  out["runconfig"] = RunConfig::schema().to_yaml(runconfig);
  return out;
}

std::string describe_all_schemas() {
  std::string s;
  s += config::format_field_table("runconfig:", RunConfig::schema().describe()) + "\n";
  s += config::format_field_table("optimizer:", OptimizerConfig::schema().describe()) + "\n";
  s += config::format_field_table("optimizer.learning_rate (each scheduler mapping):", optim::scheduler_fields()) + "\n";
  s += config::format_field_table("model (all families): " + PrecisionConfig::schema().doc(),
                                  PrecisionConfig::schema().describe()) + "\n";
  for (const models::ModelFamily* f : models::model_families()) {
    std::string title = "model, name: " + f->name;
    for (const auto& a : f->aliases) title += " | " + a;
    s += config::format_field_table(title + " -- " + f->doc, f->fields) + "\n";
  }
  for (const data::DataProcessor* d : data::data_processors())
    s += config::format_field_table("train_input / eval_input, data_processor: " + d->name + " -- " + d->doc,
                                    d->fields) + "\n";
  return s;
}

}  // namespace zoo
