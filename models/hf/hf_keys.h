// Helpers every Hugging Face converter uses: taking keys out of a state dict
// with clear errors, and the rotary row order between HF's half-split layout
// and modelzoo's interleaved one, reading config.json and checking an
// export. Defines: take_key, permute_rotary, cls_row_last, cls_row_first,
// transformer_shape, rotary_decoder_shape, config_sets, config_value, config_get, refuse_config,
// HfRope, read_hf_rope, hf_architecture, zoo_activation, ExportCheck.
#pragma once

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace zoo::models {

// Takes `key` out of `from`; "missing Hugging Face key: <key>" when absent.
torch::Tensor take_key(std::map<std::string, torch::Tensor>& from, const std::string& key);

// HF keeps each head's rotary dims as two halves; modelzoo interleaves them:
// zoo row 2j = HF row j, zoo row 2j+1 = HF row j + R/2 (per head of w's
// `heads` row blocks, first R rows of each; w 2-D, or 1-D for a bias).
torch::Tensor permute_rotary(const torch::Tensor& w, int64_t heads, int64_t rotary_dim, bool to_zoo);

// A ViT position table's [CLS] row (rows (N + 1, C)): HF's vision models
// keep it first, modelzoo's ViTModel last.
torch::Tensor cls_row_last(const torch::Tensor& hf_rows);
torch::Tensor cls_row_first(const torch::Tensor& zoo_rows);

// The `model` keys read from the config.json fields BERT, LLaMA, Mistral,
// GPT-NeoX and their kin share (vocab_size, hidden_size, num_hidden_layers,
// num_attention_heads, intermediate_size, max_position_embeddings), with
// model.name `family`; rotary_decoder_shape adds rotary positions.
YAML::Node transformer_shape(const nlohmann::json& config, const std::string& family);
YAML::Node rotary_decoder_shape(const nlohmann::json& config, const std::string& family);

// True when config.json sets `key` to something other than null or false.
bool config_sets(const nlohmann::json& config, const std::string& key);

// The first of `names` config.json has (HF renamed several fields over
// time: n_embed / hidden_size, n_head / num_attention_heads); `fallback`
// when none is there and it is given, else an error naming them.
nlohmann::json config_value(const nlohmann::json& config, const std::vector<std::string>& names,
                            const std::optional<nlohmann::json>& fallback = std::nullopt);

// config_value read as T: a value of another type is an error naming the key
// and what was expected (nlohmann's own names no key for a copied value).
template <class T>
T config_get(const nlohmann::json& config, const std::vector<std::string>& names,
             const std::optional<nlohmann::json>& fallback = std::nullopt) {
  const nlohmann::json value = config_value(config, names, fallback);
  try {
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    std::string key = names.front();
    for (const auto& n : names)
      if (config.contains(n)) key = n;
    const char* expected = std::is_same_v<T, bool>       ? "true or false"
                           : std::is_integral_v<T>       ? "an integer"
                           : std::is_floating_point_v<T> ? "a number"
                                                         : "a string";
    throw std::runtime_error("config.json: " + key + ": expected " + expected + ", got " + value.dump());
  }
}

// "config.json: <key> = <value> <why>; zoo will not convert the model without it";
// `config` may be a nested object, named `section` (MPT's attn_config).
[[noreturn]] void refuse_config(const nlohmann::json& config, const std::string& key, const std::string& why,
                                const std::string& section = "");

// config.json's first `architectures` entry ("" when none): which head a
// checkpoint of one model_type carries (BertForTokenClassification, ...).
std::string hf_architecture(const nlohmann::json& config);

// A config.json's rotary settings. transformers 4 writes rope_theta (or a
// model's own name for it) and rope_scaling; transformers 5 writes one
// rope_parameters object holding both (per layer type for hybrid models).
struct HfRope {
  double theta = 10000.0;
  // The scaling fields (rope_type or type, factor, ...), null when the
  // rotary is unscaled (rope_type "default"); `field` names where they were.
  nlohmann::json scaling;
  std::string field = "rope_scaling";
  // transformers 5 keeps partial_rotary_factor inside rope_parameters.
  std::optional<double> partial_rotary_factor;
};
// `theta_keys`: the top-level names of the base, first found wins (else
// `default_theta`). rope_parameters that differ between layer types are
// refused by name: zoo's decoders have one rotary for every layer.
HfRope read_hf_rope(const nlohmann::json& config, const std::vector<std::string>& theta_keys, double default_theta);

// zoo's name for the activation config.json's `key` names (default
// `fallback`): HF's gelu_pytorch_tanh is gelu_new; gated or unknown ones are refused.
std::string zoo_activation(const nlohmann::json& config, const std::string& key, const std::string& fallback);

// Export checks: each model option a Hugging Face model type has no field
// for is an error naming it, never dropped from the export.
class ExportCheck {
 public:
  explicit ExportCheck(std::string model_type) : model_type_(std::move(model_type)) {}
  // Unless `ok`: "model.<key> = <value>: Hugging Face's <type> <has>; ...".
  const ExportCheck& expect(bool ok, const std::string& key, const std::string& value, const std::string& has) const;

 private:
  std::string model_type_;
};

}  // namespace zoo::models
