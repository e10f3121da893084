// Model families register here by name; the runner builds models only through
// this registry and never includes a family's header.
// Defines: StateDict, HfAdapter, ModelFamily, make_model_family, find_model, model_families.
#pragma once

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "runner/config/schema.h"

namespace zoo::models {

using StateDict = std::map<std::string, torch::Tensor>;

// Conversion between a family and its Hugging Face counterpart (torchtitan's
// state_dict_adapter): config.json <-> `model` section, and state dicts
// without the "model." prefix. Functions throw std::runtime_error listing
// missing or unexpected keys.
struct HfAdapter {
  std::function<YAML::Node(const nlohmann::json& config)> config_from_hf;
  std::function<nlohmann::json(const YAML::Node& model)> config_to_hf;
  std::function<StateDict(const StateDict& hf, const YAML::Node& model)> from_hf;
  std::function<StateDict(const StateDict& zoo, const YAML::Node& model)> to_hf;
};

struct ModelFamily {
  std::string name;
  std::vector<std::string> aliases;
  std::string doc;
  // Validates a `model` section; returns every option resolved (defaults filled).
  std::function<YAML::Node(const YAML::Node&, const config::Context&)> validate;
  // Builds the model with parameters created with `param_options` (use the meta
  // device to inspect a model without allocating it) and initialized.
  std::function<std::shared_ptr<Model>(const YAML::Node&, const config::Context&,
                                       const torch::TensorOptions& param_options)>
      build;
  std::vector<config::FieldInfo> fields;
  // Hugging Face converters by HF model type (e.g. "gpt2", "llama").
  std::map<std::string, HfAdapter> hf;
};

// Options must have `static const config::Schema<Options>& schema()`;
// ModelT must be constructible from (Options, torch::TensorOptions).
template <class Options, class ModelT>
ModelFamily make_model_family(std::string name, std::vector<std::string> aliases, std::string doc) {
  ModelFamily f;
  f.name = std::move(name);
  f.aliases = std::move(aliases);
  f.doc = std::move(doc);
  f.validate = [](const YAML::Node& section, const config::Context& ctx) {
    return Options::schema().to_yaml(Options::schema().parse(section, ctx));
  };
  f.build = [](const YAML::Node& section, const config::Context& ctx, const torch::TensorOptions& p) {
    auto model = std::make_shared<ModelT>(Options::schema().parse(section, ctx), p);
    model->reset_parameters();
    return std::static_pointer_cast<Model>(model);
  };
  f.fields = Options::schema().describe();
  return f;
}

// Throws std::invalid_argument naming the known families.
const ModelFamily& find_model(const std::string& name);
std::vector<const ModelFamily*> model_families();

}  // namespace zoo::models
