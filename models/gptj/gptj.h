// GPT-J, GPT-NeoX and Falcon as modelzoo builds them (its gptj model, which
// Falcon's run.py also uses): GPT-2's decoder with attention and FFN in
// parallel off the same input, rotary positions, and GPT-J's own defaults
// and initializers. Defines: GptjOptions, GptjModel, GptjSpec, gptj_family.
#pragma once

#include <optional>
#include <string>

#include "models/gpt2/gpt2.h"

namespace zoo::models {

// Every key of modelzoo's gptj `model` section, with its defaults (which
// differ from gpt2's: rotary positions, no FFN bias, 0.1 dropouts).
struct GptjOptions {
  int64_t vocab_size = 50257;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_heads = 12;
  int64_t filter_size = 3072;
  int64_t max_position_embeddings = 1024;
  std::string position_embedding_type = "rotary";
  std::optional<int64_t> rotary_dim;
  double rope_theta = 10000.0;
  std::string norm_type = "layernorm";
  std::string attention_module = "aiayn_attention";
  ExtraAttentionParams extra_attention_params;
  bool share_embedding_weights = true;
  bool use_untied_layer_norm = false;  // GPT-NeoX, Falcon 40B: the FFN reads its own norm
  double residual_dropout_rate = 0.1;  // after attention and after the FFN
  double embedding_dropout_rate = 0.1;
  double attention_dropout_rate = 0.1;
  double layer_norm_epsilon = 1e-5;
  std::string nonlinearity = "gelu";
  bool use_projection_bias_in_attention = true;
  bool use_ffn_bias_in_attention = true;
  bool use_ffn_bias = false;
  bool use_bias_in_output = false;
  std::string attention_type = "scaled_dot_product";
  bool attention_softmax_fp32 = true;
  double initializer_range = 0.02;
  std::optional<InitializerSpec> embedding_initializer;
  std::optional<InitializerSpec> initializer;               // q/k/v projections
  std::optional<InitializerSpec> output_layer_initializer;  // attention output and both FFN layers
  std::string loss_scaling = "num_tokens";
  double loss_weight = 1.0;
  bool activation_checkpointing = false;  // zoo's own

  static const config::Schema<GptjOptions>& schema();
  // The same model in GPT-2's terms, and what GPT-2's model does differently.
  Gpt2Options as_gpt2() const;
  DecoderVariant variant() const;
};

class GptjModel : public Gpt2Model {
 public:
  GptjModel(const GptjOptions& options, const torch::TensorOptions& param_options)
      : Gpt2Model(options.as_gpt2(), param_options, options.variant()) {}
};

using GptjSpec = TypedModelSpec<GptjOptions, GptjModel>;

ModelFamily gptj_family();

}  // namespace zoo::models
