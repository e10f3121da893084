// The list of built-in model families. Adding a family: a folder under
// models/ exposing a `ModelFamily <name>_family()`, and one line below.
#include "models/registry.h"

#include <algorithm>
#include <stdexcept>

#include "models/bert/bert.h"
#include "models/bert/classifier.h"
#include "models/bert/esm2_classifier.h"
#include "models/bert/qa.h"
#include "models/bert/summarizer.h"
#include "models/bert/token_classifier.h"
#include "models/dit/dit.h"
#include "models/dpo/dpo.h"
#include "models/dpr/dpr.h"
#include "models/fc_mnist/fc_mnist.h"
#include "models/gpt2/gpt2.h"
#include "models/gptj/gptj.h"
#include "models/layers_api_demo/layers_api_demo.h"
#include "models/llava/llava.h"
#include "models/multimodal_simple/multimodal_simple.h"
#include "models/t5/t5.h"
#include "models/unet/unet.h"
#include "models/vit/vit.h"

namespace zoo::models {

std::vector<const ModelFamily*> model_families() {
  static const std::vector<ModelFamily> families = {gpt2_family(),
                                                    gptj_family(),
                                                    bert_family(),
                                                    bert_classifier_family(),
                                                    bert_token_classifier_family(),
                                                    bert_qa_family(),
                                                    bert_summarizer_family(),
                                                    esm2_family(),
                                                    esm2_classifier_family(),
                                                    t5_family(),
                                                    dpo_family(),
                                                    dpr_family(),
                                                    fc_mnist_family(),
                                                    unet_family(),
                                                    vit_family(),
                                                    dit_family(),
                                                    llava_family(),
                                                    multimodal_simple_family(),
                                                    layers_api_demo_family()};
  std::vector<const ModelFamily*> out;
  for (const auto& f : families) out.push_back(&f);
  return out;
}

namespace {

// modelzoo's models zoo does not build: their names (the Trainer format's
// model.name) and keys only they have (legacy files name no model).
struct UnbuiltModel {
  std::vector<std::string> names;
  std::string what;
  std::vector<std::string> keys;
};

const std::vector<UnbuiltModel>& unbuilt_models() {
  static const std::vector<UnbuiltModel> m = {
      {{"dino", "resnet"}, "a vision model", {}},
  };
  return m;
}

std::string builds() {
  std::string list;
  for (const ModelFamily* f : model_families()) list += (list.empty() ? "" : ", ") + f->name;
  return "zoo builds " + list + " and their aliases (see `zoo --help-config`)";
}

}  // namespace

std::optional<std::pair<std::string, std::string>> unbuilt_model_key(const std::vector<std::string>& keys) {
  for (const UnbuiltModel& m : unbuilt_models())
    for (const auto& key : keys)
      if (std::find(m.keys.begin(), m.keys.end(), key) != m.keys.end())
        return std::make_pair(key, "a key of modelzoo's " + m.names.front() + " model (" + m.what +
                                       "), which zoo does not build; " + builds());
  return std::nullopt;
}

std::optional<std::string> unbuilt_model_name(const std::string& name) {
  for (const UnbuiltModel& m : unbuilt_models())
    if (std::find(m.names.begin(), m.names.end(), name) != m.names.end())
      return "modelzoo's " + name + " model (" + m.what + ") is not one zoo builds; " + builds();
  return std::nullopt;
}

const ModelFamily& find_model(const std::string& name) {
  if (auto unbuilt = unbuilt_model_name(name)) throw std::invalid_argument(*unbuilt);
  std::string known;
  for (const ModelFamily* f : model_families()) {
    if (f->name == name) return *f;
    for (const auto& a : f->aliases)
      if (a == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
    for (const auto& a : f->aliases) known += ", " + a;
  }
  throw std::invalid_argument("unknown model '" + name + "' (known: " + known + ")");
}

const ModelFamily* family_taking_keys(const std::vector<std::string>& keys) {
  auto takes_all = [&](const ModelFamily& f) {
    return std::all_of(keys.begin(), keys.end(), [&](const std::string& k) { return f.accepts_key(k); }) &&
           std::all_of(f.required_keys.begin(), f.required_keys.end(),
                       [&](const std::string& k) { return std::find(keys.begin(), keys.end(), k) != keys.end(); });
  };
  const ModelFamily& gpt2 = find_model("gpt2");
  if (takes_all(gpt2)) return &gpt2;
  const ModelFamily* found = nullptr;
  for (const ModelFamily* f : model_families()) {
    if (!takes_all(*f)) continue;
    if (found) return nullptr;
    found = f;
  }
  return found;
}

std::vector<std::string> hf_converter_names() {
  std::vector<std::string> names;
  for (const ModelFamily* f : model_families())
    for (const auto& [name, adapter] : f->hf) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

std::string hf_converter_list() {
  std::string out;
  for (const auto& n : hf_converter_names()) out += (out.empty() ? "" : ", ") + n;
  return out;
}

const std::vector<std::pair<std::string, std::string>>& hf_converter_aliases() {
  // modelzoo's registry's names for models whose checkpoints another converter reads.
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"llamaV2", "llama"},         {"code-llama", "llama"},   {"wizardlm", "llama"}, {"octocoder", "starcoder"},
      {"wizardcoder", "starcoder"}, {"sqlcoder", "starcoder"}, {"ul2", "t5"},         {"flan-ul2", "t5"},
      {"transformer", "t5"},        {"esm-2", "esm"}};
  return aliases;
}

std::string hf_converter_alias_list() {
  std::string out;
  for (const auto& [alias, name] : hf_converter_aliases()) out += (out.empty() ? "" : ", ") + alias + " (" + name + ")";
  return out;
}

const HfAdapter& find_hf_converter(const std::string& requested) {
  std::string name = requested;
  for (const auto& [alias, canonical] : hf_converter_aliases())
    if (alias == requested) name = canonical;
  for (const ModelFamily* f : model_families()) {
    auto it = f->hf.find(name);
    if (it != f->hf.end()) return it->second;
  }
  throw std::runtime_error("no Hugging Face converter named '" + requested + "' (there are: " + hf_converter_list() +
                           "; and modelzoo's names " + hf_converter_alias_list() + ")");
}

std::string hf_converter_for(const nlohmann::json& config) {
  const std::string type = config.contains("model_type") && config.at("model_type").is_string()
                               ? config.at("model_type").get<std::string>()
                               : std::string();
  if (type.empty())
    throw std::runtime_error("config.json has no model_type: pass --model (one of " + hf_converter_list() + ")");
  // A converter that claims the config by more than its model_type comes first, a headless one (claiming a
  // base class) before all.
  for (int pass = 0; pass < 3; ++pass)
    for (const ModelFamily* f : model_families())
      for (const auto& [name, adapter] : f->hf) {
        const int rank = adapter.headless ? 0 : adapter.claims ? 1 : 2;
        const auto& types = adapter.model_types;
        if (rank != pass || std::find(types.begin(), types.end(), type) == types.end()) continue;
        if (adapter.claims && !adapter.claims(config)) continue;
        return name;
      }
  throw std::runtime_error("config.json: model_type \"" + type +
                           "\" has no zoo converter (there are: " + hf_converter_list() + ")");
}

}  // namespace zoo::models
