// Implementation of runner/convert/peft.h.
#include "runner/convert/peft.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>

#include "data/text/regex_splitter.h"
#include "data/text/tokenizer_json.h"
#include "models/common/lora.h"
#include "models/hf/hf_key_map.h"
#include "runner/convert/hf_config.h"
#include "runner/convert/safetensors.h"

namespace zoo::convert {
namespace fs = std::filesystem;
namespace {

const std::string kPrefix = "base_model.model.";

models::HfKeyMap key_map_of(const std::string& converter, const models::ModelSpec& spec) {
  const models::HfAdapter& a = models::find_hf_converter(converter);
  if (!a.key_map)
    throw std::runtime_error("zoo convert: the " + converter +
                             " converter maps its weights by code, not by a table, "
                             "so zoo cannot name its layers for PEFT");
  return a.key_map(spec);
}

// The name PEFT's target_modules use for a module: its last part.
std::string leaf(const std::string& module) { return module.substr(module.rfind('.') + 1); }

}  // namespace

std::vector<AdapterLayer> adapter_layers(const models::ModelSpec& spec, const std::vector<models::LoraGroup>& groups) {
  auto model = spec.build(torch::TensorOptions().device(torch::kMeta));
  std::vector<AdapterLayer> out;
  for (const auto& [path, layer] : models::apply_lora(*model, groups)) {
    const int64_t r = layer->lora_A.size(0);
    out.push_back({path, r, layer->lora_scaling * static_cast<double>(r), layer->lora_dropout});
  }
  return out;
}

void merge_adapters(models::StateDict& state, const std::vector<AdapterLayer>& layers) {
  for (const AdapterLayer& l : layers) {
    auto find = [&](const std::string& key) -> torch::Tensor& {
      auto it = state.find(key);
      if (it == state.end())
        throw std::runtime_error(key + ": missing from the checkpoint, which lora_params says it has");
      return it->second;
    };
    torch::Tensor& w = find(l.path + ".weight");
    w = models::merge_lora(w, find(l.path + ".lora_A"), find(l.path + ".lora_B"), l.alpha / static_cast<double>(l.r));
    state.erase(l.path + ".lora_A");
    state.erase(l.path + ".lora_B");
  }
}

void write_peft_adapter(const std::string& dir, const std::string& converter, const models::ModelSpec& spec,
                        const std::vector<AdapterLayer>& layers, const models::StateDict& state,
                        const std::string& base) {
  if (layers.empty()) throw std::logic_error("write_peft_adapter: no adapters");
  const models::HfKeyMap map = key_map_of(converter, spec);
  TensorMap tensors;
  std::set<std::string> targets;
  nlohmann::json rank_pattern = nlohmann::json::object(), alpha_pattern = nlohmann::json::object();
  const AdapterLayer& first = layers.front();
  for (const AdapterLayer& l : layers) {
    const std::string hf = hf_linear_of(map, l.path);
    tensors[kPrefix + hf + ".lora_A.weight"] = state.at(l.path + ".lora_A").contiguous();
    tensors[kPrefix + hf + ".lora_B.weight"] =
        models::weight_rows_to_hf(map, l.path, state.at(l.path + ".lora_B")).contiguous();
    targets.insert(leaf(hf));
    if (l.r != first.r) rank_pattern[hf] = l.r;  // PEFT matches these keys against the module's full name
    if (l.alpha != first.alpha) alpha_pattern[hf] = l.alpha;
  }
  nlohmann::json config = {{"peft_type", "LORA"},
                           {"task_type", "CAUSAL_LM"},
                           {"base_model_name_or_path", base},
                           {"r", first.r},
                           {"lora_alpha", first.alpha},
                           {"lora_dropout", first.dropout},
                           {"target_modules", std::vector<std::string>(targets.begin(), targets.end())},
                           {"rank_pattern", rank_pattern},
                           {"alpha_pattern", alpha_pattern},
                           {"bias", "none"},
                           {"fan_in_fan_out", false},
                           {"use_rslora", false},
                           {"use_dora", false},
                           {"init_lora_weights", true},
                           {"inference_mode", true},
                           {"modules_to_save", nullptr},
                           {"layers_to_transform", nullptr}};
  fs::create_directories(dir);
  write_safetensors((fs::path(dir) / "adapter_model.safetensors").string(), tensors, {{"format", "pt"}});
  std::ofstream((fs::path(dir) / "adapter_config.json").string()) << config.dump(2) << "\n";
}

namespace {

nlohmann::json pattern_map(const nlohmann::json& config, const char* key, const std::string& where) {
  const auto it = config.find(key);
  if (it == config.end() || it->is_null()) return nlohmann::json::object();
  if (!it->is_object()) throw std::runtime_error(where + ": " + key + ": expected {module name or pattern: value}");
  return *it;
}

// PEFT's rule for rank_pattern / alpha_pattern: a key applies to a module whose name is the key, or ends with "." and
// a match of the key read as a regex. The first key that applies wins.
std::optional<std::string> pattern_key(const nlohmann::json& patterns, const std::string& module,
                                       const std::string& where) {
  for (const auto& [key, value] : patterns.items()) {
    if (key == module) return key;
    try {
      const text::Regex re("^(?:.*\\.)?(?:" + key + ")$");
      const auto found = re.matches(module);
      if (!found.empty() && found.front().first == 0 && found.front().second == module.size()) return key;
    } catch (const std::exception& e) {
      throw std::runtime_error(where + ": " + key + ": " + e.what());
    }
  }
  return std::nullopt;
}

}  // namespace

PeftImport read_peft_adapter(const std::string& dir, const std::string& converter, const models::ModelSpec& spec) {
  const std::string config_path = (fs::path(dir) / "adapter_config.json").string();
  const std::string weights_path = (fs::path(dir) / "adapter_model.safetensors").string();
  const nlohmann::json c = read_json_object(config_path, "a PEFT adapter's settings");
  auto refuse = [&](const std::string& key, const std::string& why) {
    throw std::runtime_error(config_path + ": " + key + ": " + why);
  };
  if (text::string_or(c, "peft_type", "LORA", config_path) != "LORA")
    refuse("peft_type", "zoo imports LoRA adapters only");
  if (text::bool_or(c, "use_rslora", false, config_path))
    refuse("use_rslora", "rank-stabilized scaling (alpha / sqrt(r)) is not zoo's alpha / r");
  if (text::bool_or(c, "use_dora", false, config_path))
    refuse("use_dora", "DoRA's magnitude vectors are not part of zoo's LoRA");
  if (text::string_or(c, "bias", "none", config_path) != "none")
    refuse("bias", "trained biases are not part of zoo's LoRA");
  if (text::bool_or(c, "fan_in_fan_out", false, config_path))
    refuse("fan_in_fan_out", "zoo's layers hold (out, in) weights, as nn.Linear");
  if (c.contains("modules_to_save") && !c["modules_to_save"].is_null() && !c["modules_to_save"].empty())
    refuse("modules_to_save", "fully trained modules beside the adapters are not part of zoo's LoRA");
  auto rank_of = [&](const nlohmann::json& node, const char* key, int64_t fallback) {
    const int64_t value = text::int_or(node, key, fallback, config_path);
    if (value < 1 || value > 65536) refuse(key, std::to_string(value) + " is not a rank from 1 to 65536");
    return value;
  };
  const int64_t r = rank_of(c, "r", 8);
  const double alpha = text::number_or(c, "lora_alpha", 8.0, config_path);
  const double dropout = text::number_or(c, "lora_dropout", 0.0, config_path);
  if (alpha < 0 || alpha > 1e6) refuse("lora_alpha", "expected 0 to 1e6");
  const nlohmann::json ranks = pattern_map(c, "rank_pattern", config_path);
  const nlohmann::json alphas = pattern_map(c, "alpha_pattern", config_path);

  const models::HfKeyMap map = key_map_of(converter, spec);
  auto base = spec.build(torch::TensorOptions().device(torch::kMeta));
  std::map<std::string, models::DenseImpl*> dense;
  for (const auto& item : base->named_modules())
    if (auto* d = item.value()->as<models::DenseImpl>()) dense[item.key()] = d;
  const std::string base_name = c.value("base_model_name_or_path", std::string());
  const std::string other_base =
      " (the adapter was made for another base model" + (base_name.empty() ? std::string(")") : ": " + base_name + ")");
  PeftImport out;
  std::map<std::string, std::set<std::string>> kinds;  // zoo kind -> adapted layers
  std::map<std::string, std::pair<int64_t, double>> kind_settings;
  for (auto& [key, t] : read_safetensors(weights_path)) {
    const bool is_a = key.size() > 14 && key.compare(key.size() - 14, 14, ".lora_A.weight") == 0;
    const bool is_b = key.size() > 14 && key.compare(key.size() - 14, 14, ".lora_B.weight") == 0;
    if (key.rfind(kPrefix, 0) != 0 || (!is_a && !is_b))
      throw std::runtime_error(weights_path + ": " + key +
                               ": not a LoRA tensor (base_model.model.<module>.lora_A.weight / "
                               ".lora_B.weight)");
    const std::string hf = key.substr(kPrefix.size(), key.size() - kPrefix.size() - 14);
    std::string path;
    try {
      path = models::zoo_linear_of(map, hf);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(weights_path + ": " + key + ": " + e.what() + other_base);
    }
    const models::DenseImpl* d = dense.at(path);
    const auto rank_key = pattern_key(ranks, hf, config_path + ": rank_pattern");
    const int64_t layer_r = rank_key ? rank_of(ranks, rank_key->c_str(), r) : r;
    const std::vector<int64_t> want =
        is_a ? std::vector<int64_t>{layer_r, d->weight.size(1)} : std::vector<int64_t>{d->weight.size(0), layer_r};
    if (t.sizes() != torch::IntArrayRef(want))
      throw std::runtime_error(weights_path + ": " + key + " has shape " + c10::str(t.sizes()) + " where the base's " +
                               hf + " (" + c10::str(d->weight.sizes()) + ") and r = " + std::to_string(layer_r) +
                               " give " + c10::str(want) + other_base);
    out.tensors[path + (is_a ? ".lora_A" : ".lora_B")] =
        (is_a ? t : models::weight_rows_to_zoo(map, path, t)).to(torch::kFloat).contiguous();
    const std::string kind = models::peft_name_of(path);  // the kind's name in zoo's target_modules
    if (kind.empty())
      throw std::runtime_error(weights_path + ": " + key + ": zoo's lora_params name no kind of layer for " + path);
    if (!torch::isfinite(t).all().item<bool>())
      throw std::runtime_error(weights_path + ": " + key + " holds NaN or infinite values");
    const auto alpha_key = pattern_key(alphas, hf, config_path + ": alpha_pattern");
    const double layer_alpha =
        alpha_key ? text::number_or(alphas, alpha_key->c_str(), alpha, config_path + ": alpha_pattern") : alpha;
    const std::pair<int64_t, double> settings = {layer_r, layer_alpha};
    if (kind_settings.count(kind) && kind_settings[kind] != settings)
      throw std::runtime_error(weights_path + ": the " + kind +
                               " layers have different ranks or alphas (rank_pattern / "
                               "alpha_pattern per layer); zoo's lora_params give one per kind of layer");
    kind_settings[kind] = settings;
    kinds[kind].insert(path);
  }
  if (kinds.empty()) throw std::runtime_error(weights_path + ": no LoRA tensors");
  for (const auto& [kind, settings] : kind_settings) {
    models::LoraGroup g;
    g.r = settings.first;
    g.alpha = settings.second;
    g.dropout = dropout;
    g.target_modules = std::vector<std::string>{kind};
    out.groups.push_back(g);
  }
  // Every layer of each kind, and both matrices of each: else the model zoo builds would differ from the file.
  for (const AdapterLayer& l : adapter_layers(spec, out.groups))
    for (const char* m : {".lora_A", ".lora_B"})
      if (!out.tensors.count(l.path + m))
        throw std::runtime_error(weights_path + ": no " + m + " for " + hf_linear_of(map, l.path) +
                                 "; zoo imports adapters that cover every layer of a kind (layers_to_transform is not "
                                 "supported)");
  return out;
}

}  // namespace zoo::convert
