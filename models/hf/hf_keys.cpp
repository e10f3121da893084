// Implementation of models/hf/hf_keys.h.
#include "models/hf/hf_keys.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "models/common/ffn.h"

namespace zoo::models {

torch::Tensor take_key(std::map<std::string, torch::Tensor>& from, const std::string& key) {
  auto it = from.find(key);
  if (it == from.end()) throw std::runtime_error("missing Hugging Face key: " + key);
  torch::Tensor t = it->second;
  from.erase(it);
  return t;
}

torch::Tensor cls_row_last(const torch::Tensor& rows) {
  return torch::cat({rows.narrow(0, 1, rows.size(0) - 1), rows.narrow(0, 0, 1)});
}

torch::Tensor cls_row_first(const torch::Tensor& rows) {
  const int64_t n = rows.size(0);
  return torch::cat({rows.narrow(0, n - 1, 1), rows.narrow(0, 0, n - 1)});
}

torch::Tensor permute_rotary(const torch::Tensor& w, int64_t heads, int64_t rotary_dim, bool to_zoo) {
  if (w.dim() < 1 || heads <= 0 || w.size(0) % heads != 0 || rotary_dim < 0 || rotary_dim % 2 != 0 ||
      rotary_dim > w.size(0) / heads)
    throw std::invalid_argument("permute_rotary: " + std::to_string(heads) + " heads and a rotary dimension of " +
                                std::to_string(rotary_dim) + " do not fit a tensor of shape " + c10::str(w.sizes()));
  const int64_t D = w.size(0) / heads, R = rotary_dim;
  std::vector<int64_t> order(D);
  for (int64_t r = 0; r < D; ++r) order[r] = r;
  for (int64_t j = 0; j < R / 2; ++j) {
    if (to_zoo) order[2 * j] = j, order[2 * j + 1] = j + R / 2;
    else order[j] = 2 * j, order[j + R / 2] = 2 * j + 1;
  }
  torch::Tensor index = torch::tensor(order, torch::kLong);
  return w.view({heads, D, -1}).index_select(1, index).reshape(w.sizes()).contiguous();
}

YAML::Node rotary_decoder_shape(const nlohmann::json& c, const std::string& family) {
  YAML::Node m = transformer_shape(c, family);
  m["position_embedding_type"] = "rotary";
  return m;
}

YAML::Node transformer_shape(const nlohmann::json& c, const std::string& family) {
  YAML::Node m(YAML::NodeType::Map);
  m["name"] = family;
  m["vocab_size"] = c.at("vocab_size").get<int64_t>();
  m["hidden_size"] = c.at("hidden_size").get<int64_t>();
  m["num_hidden_layers"] = c.at("num_hidden_layers").get<int64_t>();
  m["num_heads"] = c.at("num_attention_heads").get<int64_t>();
  m["filter_size"] = c.at("intermediate_size").get<int64_t>();
  m["max_position_embeddings"] = c.at("max_position_embeddings").get<int64_t>();
  return m;
}

bool config_sets(const nlohmann::json& c, const std::string& key) {
  return c.contains(key) && !c.at(key).is_null() && c.at(key) != false;
}

nlohmann::json config_value(const nlohmann::json& c, const std::vector<std::string>& names,
                            const std::optional<nlohmann::json>& fallback) {
  for (const auto& n : names)
    if (c.contains(n) && !c.at(n).is_null()) return c.at(n);
  if (fallback) return *fallback;
  std::string list;
  for (const auto& n : names) list += (list.empty() ? "" : " or ") + n;
  throw std::runtime_error("config.json: missing " + list);
}

void refuse_config(const nlohmann::json& c, const std::string& key, const std::string& why,
                   const std::string& section) {
  const std::string value = c.contains(key) ? c.at(key).dump() : std::string("(absent)");
  throw std::runtime_error("config.json: " + (section.empty() ? key : section + "." + key) + " = " + value + " " + why +
                           "; zoo will not convert the model without it");
}

std::string hf_architecture(const nlohmann::json& c) {
  if (!c.contains("architectures") || !c.at("architectures").is_array() || c.at("architectures").empty()) return "";
  const nlohmann::json& first = c.at("architectures").front();
  return first.is_string() ? first.get<std::string>() : "";
}

HfRope read_hf_rope(const nlohmann::json& c, const std::vector<std::string>& theta_keys, double default_theta) {
  HfRope rope;
  rope.theta = config_get<double>(c, theta_keys, default_theta);
  if (!config_sets(c, "rope_parameters")) {
    if (config_sets(c, "rope_scaling") && !c.at("rope_scaling").is_object())
      refuse_config(c, "rope_scaling", "is not an object");
    if (config_sets(c, "rope_scaling")) rope.scaling = c.at("rope_scaling");
    return rope;
  }
  rope.field = "rope_parameters";
  nlohmann::json p = c.at("rope_parameters");
  if (!p.is_object()) refuse_config(c, "rope_parameters", "is not an object");
  // Hybrid models key it by layer type ({"full_attention": {...}, "sliding_attention": {...}}).
  if (!p.contains("rope_theta") && !p.contains("rope_type") && !p.empty() && p.begin()->is_object()) {
    for (const auto& [type, params] : p.items())
      if (params != p.begin().value())
        refuse_config(c, "rope_parameters",
                      "differs between layer types (`" + type + "`), which zoo's decoders do not");
    p = p.begin().value();
  }
  if (p.contains("rope_theta")) rope.theta = p.at("rope_theta").get<double>();
  if (p.contains("partial_rotary_factor")) rope.partial_rotary_factor = p.at("partial_rotary_factor").get<double>();
  p.erase("rope_theta");
  p.erase("partial_rotary_factor");
  const std::string type = p.value("rope_type", p.value("type", std::string("default")));
  if (type != "default") rope.scaling = p;
  return rope;
}

std::string zoo_activation(const nlohmann::json& c, const std::string& key, const std::string& fallback) {
  std::string name = c.contains(key) && c.at(key).is_string() ? c.at(key).get<std::string>() : fallback;
  if (name == "gelu_pytorch_tanh") name = "gelu_new";  // both are GELU's tanh approximation
  if (std::find(kActivationNames.begin(), kActivationNames.end(), name) == kActivationNames.end() || is_glu(name))
    refuse_config(c, key, "is not an activation zoo has for this model");
  return name;
}

const ExportCheck& ExportCheck::expect(bool ok, const std::string& key, const std::string& value,
                                       const std::string& has) const {
  if (!ok)
    throw std::runtime_error("model." + key + " = " + value + ": Hugging Face's " + model_type_ + " " + has +
                             "; zoo will not export the model without it");
  return *this;
}

}  // namespace zoo::models
