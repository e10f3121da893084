// The `model` keys every modelzoo decoder-only LM family shares (GPT-2/3,
// LLaMA, GPT-J, GPT-NeoX, Falcon, ...): DecoderLmOptions holds them with
// GPT-2's defaults, a family's options derive from it (changing defaults in
// their constructor) and add the keys only they have. Defines:
// ExtraAttentionParams, DecoderLmOptions, add_decoder_lm_fields,
// check_decoder_lm_options.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "configs/schema/schema.h"
#include "models/common/embedding.h"
#include "models/common/ffn.h"
#include "models/common/initializers.h"

namespace zoo::models {

namespace decoder_limits {
// Sizes beyond these make a model no machine can hold; catching them at
// validation beats minutes of building followed by bad_alloc.
constexpr int64_t kMaxLayers = 4096;                   // the deepest published decoders have ~100-1000 layers
constexpr int64_t kMaxWidth = (int64_t{1} << 31) - 1;  // tensor dims LibTorch kernels index with int32
constexpr int64_t kMaxParameters = int64_t{1} << 50;   // ~10^15, a thousand times today's largest models

inline config::Check<int64_t> size(int64_t limit) {
  return [limit](const int64_t& v) {
    if (v <= 0) return std::string("expected a value > 0");
    return config::at_most<int64_t>(limit, "zoo's limit")(v);
  };
}
}  // namespace decoder_limits

// modelzoo's `extra_attention_params` mapping.
struct ExtraAttentionParams {
  int64_t num_kv_groups = 1;  // key/value heads for multiquery_attention
  static const config::Schema<ExtraAttentionParams>& schema();
};

// modelzoo's `pos_scaling_extra_args`: which keys apply depends on
// pos_scaling_type (unset: modelzoo's defaults, see the schema).
struct PosScalingExtraArgs {
  std::optional<int64_t> original_max_position_embeddings;
  std::optional<double> low_freq_factor, high_freq_factor;                               // llama3
  std::optional<double> beta_fast, beta_slow, extrapolation_factor, mscale_a, mscale_b;  // yarn
  std::optional<bool> truncate;                                                          // yarn
  static const config::Schema<PosScalingExtraArgs>& schema();
};

struct DecoderLmOptions {
  int64_t vocab_size = 50257;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_heads = 12;
  int64_t filter_size = 3072;
  int64_t max_position_embeddings = 1024;
  std::string position_embedding_type = "learned";
  std::optional<int64_t> rotary_dim;           // rotary: dims per head rotated (null: hidden_size / num_heads)
  std::optional<int64_t> attention_inner_dim;  // heads x head size of q/k/v (null: hidden_size); gpt2 family
  double rope_theta = 10000.0;                 // rotary: base of the rotation frequencies
  double pos_scaling_factor = 1.0;             // rotary or alibi: longer contexts than trained (see the schema)
  std::string pos_scaling_type = "linear";
  std::optional<PosScalingExtraArgs> pos_scaling_extra_args;
  std::string norm_type = "layernorm";
  std::string attention_module = "aiayn_attention";
  ExtraAttentionParams extra_attention_params;
  bool share_embedding_weights = true;
  double layer_norm_epsilon = 1e-5;
  std::string nonlinearity = "gelu";
  bool use_projection_bias_in_attention = true;
  bool use_ffn_bias_in_attention = true;
  bool use_ffn_bias = true;
  bool use_bias_in_output = false;
  std::string attention_type = "scaled_dot_product";
  bool attention_softmax_fp32 = true;
  double initializer_range = 0.02;
  std::optional<InitializerSpec> embedding_initializer;
  std::optional<InitializerSpec> initializer;
  std::optional<InitializerSpec> output_layer_initializer;      // each family documents what it covers
  std::optional<InitializerSpec> ffn_initializer;               // first FFN layer (each family documents its default)
  std::optional<InitializerSpec> ffn_output_layer_initializer;  // last FFN layer (default: output_layer_initializer)
  // muP: embeddings_scale, scale_qk_dot_by_d and attention_logits_alpha
  // shape the forward pass; from the base model's widths (modelzoo >= 2.3)
  // come the initializers, the logits scale and the learning rates.
  double embeddings_scale = 1.0;        // times the embeddings (after their norm)
  bool scale_qk_dot_by_d = false;       // scores / head dim instead of / sqrt(head dim)
  double attention_logits_alpha = 1.0;  // times the attention scores
  std::optional<double> mup_base_hidden_size, mup_base_filter_size;
  std::optional<double> output_logits_alpha;  // logits times alpha * base / hidden_size
  bool scale_output_logits_by_d = true;       // ... or alpha * sqrt(base / hidden_size)
  std::string loss_scaling = "num_tokens";
  double loss_weight = 1.0;
  bool activation_checkpointing = false;  // zoo's own
};

template <class O>
config::Schema<O> add_decoder_lm_fields(config::Schema<O> s) {
  static_assert(std::is_base_of_v<DecoderLmOptions, O>);
  using config::positive;
  using decoder_limits::kMaxLayers;
  using decoder_limits::kMaxWidth;
  using decoder_limits::size;
  s.field("vocab_size", &O::vocab_size, "Vocabulary size.", size(kMaxWidth))
      .field("hidden_size", &O::hidden_size, "Model width C.", size(kMaxWidth))
      .field("num_hidden_layers", &O::num_hidden_layers, "Number of decoder layers.", size(kMaxLayers))
      .field("num_heads", &O::num_heads, "Attention heads; must divide hidden_size.", size(kMaxWidth))
      .field("filter_size", &O::filter_size, "FFN hidden units.", size(kMaxWidth))
      .field("max_position_embeddings", &O::max_position_embeddings, "Longest sequence supported.", size(kMaxWidth))
      .field("position_embedding_type", &O::position_embedding_type, "Position embeddings.",
             config::one_of(kPositionEmbeddingTypes))
      .field("rotary_dim", &O::rotary_dim, "Rotary embeddings: dims per head to rotate (null: the head size).",
             config::if_set(positive<int64_t>()))
      .field("rope_theta", &O::rope_theta, "Rotary embeddings: base of the frequencies (Code Llama: 1e6).",
             positive<double>())
      .field("pos_scaling_factor", &O::pos_scaling_factor,
             "rotary or alibi: stretch positions by this factor for contexts longer than trained (linear: "
             "positions / factor, alibi: slopes / factor).",
             positive<double>())
      .field("pos_scaling_type", &O::pos_scaling_type,
             "rotary: linear (position interpolation), llama3 (Llama 3.1's frequency bands) or yarn (YaRN); "
             "alibi: linear.",
             config::one_of({"linear", "llama3", "yarn", "YaRN", "longrope"}))
      .field("pos_scaling_extra_args", &O::pos_scaling_extra_args,
             "llama3: original_max_position_embeddings (8192), low_freq_factor (1), high_freq_factor (4); yarn: "
             "original_max_position_embeddings (required), beta_fast (32), beta_slow (1), extrapolation_factor "
             "(1), mscale_a (0.1), mscale_b (1), truncate (true).")
      .field("norm_type", &O::norm_type, "layernorm, rmsnorm, or biasless-layernorm (LayerNorm without its bias: MPT).",
             config::one_of({"layernorm", "rmsnorm", "biasless-layernorm"}))
      .field("attention_module", &O::attention_module,
             "aiayn_attention, or multiquery_attention with extra_attention_params.num_kv_groups key/value heads.",
             config::one_of({"aiayn_attention", "multiquery_attention"}))
      .field("extra_attention_params", &O::extra_attention_params, "Settings of the attention module.")
      .field("share_embedding_weights", &O::share_embedding_weights,
             "Tie the output projection to the word embeddings.")
      .field("layer_norm_epsilon", &O::layer_norm_epsilon, "LayerNorm epsilon.", positive<double>())
      .field("nonlinearity", &O::nonlinearity, "FFN activation.", config::one_of(kActivationNames))
      .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention, "Bias on the q/k/v projections.")
      .field("use_ffn_bias_in_attention", &O::use_ffn_bias_in_attention, "Bias on the attention output projection.")
      .field("use_ffn_bias", &O::use_ffn_bias, "Bias in the FFN layers.")
      .field("use_bias_in_output", &O::use_bias_in_output, "Bias on the LM head.")
      .field("attention_type", &O::attention_type,
             "scaled_dot_product divides scores by sqrt(head dim); dot_product does not.",
             config::one_of({"scaled_dot_product", "dot_product"}))
      .field("attention_softmax_fp32", &O::attention_softmax_fp32,
             "Compute the attention softmax in float32 under reduced precision.")
      .field("initializer_range", &O::initializer_range, "Std of the default truncated-normal initializers.",
             positive<double>())
      .field("embedding_initializer", &O::embedding_initializer, "Embedding initializer (null: the `initializer`).")
      .field("initializer", &O::initializer,
             "Weight initializer (null: truncated_normal std=initializer_range, +-2 std).")
      .field("ffn_initializer", &O::ffn_initializer,
             "Initializer of the first FFN layer (null: see initializer / "
             "output_layer_initializer).")
      .field("ffn_output_layer_initializer", &O::ffn_output_layer_initializer,
             "Initializer of the last FFN layer (null: output_layer_initializer).")
      .field("embeddings_scale", &O::embeddings_scale, "muP: multiplies the embeddings (after embedding_ln_f).")
      .field("scale_qk_dot_by_d", &O::scale_qk_dot_by_d,
             "muP: with scaled_dot_product, divide attention scores by the head size instead of its square root.")
      .field("attention_logits_alpha", &O::attention_logits_alpha, "muP: multiplies the attention scores.")
      .field("mup_base_hidden_size", &O::mup_base_hidden_size,
             "muP: hidden_size of the base model the hyperparameters were tuned on. The attention and first FFN "
             "initializers' std scale by sqrt(base / hidden_size), the output layer's too (gpt2: also by "
             "1/sqrt(2 * num_hidden_layers)), the logits by output_logits_alpha * base / hidden_size, and the "
             "learning rates of decoder_attention and decoder_input_ffn by base / hidden_size.",
             config::if_set(positive<double>()))
      .field("mup_base_filter_size", &O::mup_base_filter_size,
             "muP: filter_size of the base model. The last FFN layer's initializer std scales by "
             "sqrt(base / filter_size) (gpt2: also by 1/sqrt(2 * num_hidden_layers)) and its learning rate "
             "(decoder_output_ffn) by base / filter_size.",
             config::if_set(positive<double>()))
      .field("output_logits_alpha", &O::output_logits_alpha, "muP: see mup_base_hidden_size (null: 1).")
      .field("scale_output_logits_by_d", &O::scale_output_logits_by_d,
             "muP: the logits scale by base / hidden_size (true) or by its square root (false).")
      .field("loss_scaling", &O::loss_scaling,
             "num_tokens: loss = sum / number of unmasked tokens; batch_size: sum / B * loss_weight.",
             config::one_of({"num_tokens", "batch_size"}))
      .field("loss_weight", &O::loss_weight, "Loss multiplier for loss_scaling: batch_size.")
      .field("activation_checkpointing", &O::activation_checkpointing,
             "zoo's own: keep only each decoder layer's input in the forward pass and recompute the layer in "
             "the backward pass (activation memory of one layer instead of all; ~1/3 more compute).")
      .hardware_only({"boundary_casting"}, "Cerebras-only numerics")
      .hardware_only({"attention_kernel"}, "selects a Cerebras attention kernel; the math is the same")
      .hardware_only({"fold_rope_consts"}, "folds rotary tables into Cerebras constants; the math is the same")
      .hardware_only({"tf_summary"}, "a summary-only key of modelzoo's Cerebras runs; zoo writes no such summary");
  return s;
}

// The shared keys' values the cross-key checks read.
struct DecoderLmShape {
  int64_t vocab_size, hidden_size, num_hidden_layers, num_heads, filter_size, max_position_embeddings;
  std::string position_embedding_type;
  std::optional<int64_t> rotary_dim;
  std::string attention_module;
  int64_t num_kv_groups;
  std::optional<int64_t> attention_inner_dim;
};

// Heads dividing the width, rotary_dim, key/value groups, and a parameter
// count no machine could hold; `fail(key, what)` reports at the key's line.
void check_decoder_lm_shape(const DecoderLmShape& shape,
                            const std::function<void(const std::string&, const std::string&)>& fail);

// pos_scaling_*: a scaling the position embedding can take, and extra
// arguments that belong to the scaling type.
void check_position_scaling(const DecoderLmOptions& o,
                            const std::function<void(const std::string&, const std::string&)>& fail);

// muP needs both base widths, and scales only (truncated) normal initializers.
void check_mup(const DecoderLmOptions& o, const std::function<void(const std::string&, const std::string&)>& fail);

inline void check_decoder_lm_options(const DecoderLmOptions& o,
                                     const std::function<void(const std::string&, const std::string&)>& fail) {
  check_position_scaling(o, fail);
  check_mup(o, fail);
  check_decoder_lm_shape({o.vocab_size, o.hidden_size, o.num_hidden_layers, o.num_heads, o.filter_size,
                          o.max_position_embeddings, o.position_embedding_type, o.rotary_dim, o.attention_module,
                          o.extra_attention_params.num_kv_groups, o.attention_inner_dim},
                         fail);
}

}  // namespace zoo::models
