// Helpers every Hugging Face converter uses: taking keys out of a state dict
// with clear errors, and the rotary row order between HF's half-split layout
// and modelzoo's interleaved one. Defines: take_key, require_consumed,
// permute_rotary, rotary_decoder_shape.
#pragma once

#include <torch/torch.h>
#include <yaml-cpp/yaml.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>

namespace zoo::models {

// Takes `key` out of `from`; "missing Hugging Face key: <key>" when absent.
torch::Tensor take_key(std::map<std::string, torch::Tensor>& from, const std::string& key);

// Every key a map leaves unconsumed is an error (`what`: <keys>) that lists them all.
void require_consumed(const std::map<std::string, torch::Tensor>& rest, const std::string& what);

// HF keeps each head's rotary dims as two halves; modelzoo interleaves them:
// zoo row 2j = HF row j, zoo row 2j+1 = HF row j + R/2 (per head of w's
// `heads` row blocks, first R rows of each; w 2-D, or 1-D for a bias).
torch::Tensor permute_rotary(const torch::Tensor& w, int64_t heads, int64_t rotary_dim, bool to_zoo);

// The `model` keys of a rotary decoder read from the config.json fields
// LLaMA, Mistral and GPT-NeoX share (vocab_size, hidden_size,
// num_hidden_layers, num_attention_heads, intermediate_size,
// max_position_embeddings), with model.name `family`.
YAML::Node rotary_decoder_shape(const nlohmann::json& config, const std::string& family);

}  // namespace zoo::models
