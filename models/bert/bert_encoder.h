// The encoder every modelzoo BERT model builds (its BertModel): word,
// position and segment embeddings, embed_ln_f, the bidirectional transformer
// encoder and the tanh pooler of [CLS], with the `model` keys they read.
// Pre-training (bert.h) and fine-tuning heads (classifier.h) compose it.
// Defines: BertEncoderOptions, add_bert_encoder_fields, check_bert_encoder,
// BertEncoderShape, packed_sequence_bias, BertEncoder, fine_tuning_head_initializer.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "models/common/decoder_lm_fields.h"
#include "models/common/embedding.h"
#include "models/common/initializers.h"
#include "models/common/layers.h"
#include "models/common/transformer_encoder.h"
#include "models/model.h"

namespace zoo::models {

// The keys of modelzoo's BertModelConfig every BERT model takes.
struct BertEncoderOptions {
  int64_t vocab_size = 50257;
  int64_t hidden_size = 768;
  int64_t num_hidden_layers = 12;
  int64_t num_heads = 12;
  int64_t filter_size = 3072;
  int64_t max_position_embeddings = 512;
  std::string position_embedding_type = "learned";
  std::optional<int64_t> rotary_dim;  // rotary: null is a quarter of the head size, as modelzoo's bert
  double rope_theta = 10000.0;
  bool mask_padding_in_positional_embed = false;  // RoBERTa: positions count from 1, padding takes row 0
  int64_t pad_token_id = 0;                       // its word embedding row gets no gradient
  std::optional<int64_t> num_segments;            // token types (null: each model's default)
  double layer_norm_epsilon = 1e-5;
  bool norm_first = false;
  bool embedding_layer_norm = true;
  bool use_final_layer_norm = false;
  bool activation_checkpointing = false;  // zoo's own
  std::string attention_module = "aiayn_attention";
  ExtraAttentionParams extra_attention_params;
  std::string attention_type = "scaled_dot_product";
  bool attention_softmax_fp32 = true;
  double dropout_rate = 0.1;
  std::optional<double> attention_dropout_rate;  // null: dropout_rate
  std::string encoder_nonlinearity = "gelu";
  std::optional<std::string> pooler_nonlinearity;  // null: encoder_nonlinearity
  bool use_projection_bias_in_attention = true;
  bool use_ffn_bias_in_attention = true;
  bool use_ffn_bias = true;
  double initializer_range = 0.02;
  std::optional<InitializerSpec> default_initializer;  // null: truncated_normal(initializer_range)
  std::optional<InitializerSpec> embeddings_initializer, position_embeddings_initializer,
      segment_embeddings_initializer;  // null: default_initializer
  std::optional<double> mup_base_hidden_size, mup_base_filter_size;
  double embeddings_scale = 1.0;
  std::optional<bool> scale_qk_dot_by_d;  // null: true under muP
  double attention_logits_alpha = 1.0;
  double output_logits_alpha = 1.0;
  bool scale_output_logits_by_d = true;
  // ESM-2 (its family's keys only): mask tokens embed as 0 and the rest are
  // scaled by (1 - 0.12) / (1 - the sample's share of mask tokens).
  bool token_dropout = false;
  std::optional<int64_t> mask_token_id;

  bool mup() const { return mup_base_hidden_size.has_value(); }
  // muP's factor on the heads' logits (unset without muP).
  std::optional<double> logits_scale() const;
  InitializerSpec default_init() const {
    return default_initializer.value_or(truncated_normal_spec(initializer_range));
  }
};

template <class O>
config::Schema<O> add_bert_encoder_fields(config::Schema<O> s) {
  static_assert(std::is_base_of_v<BertEncoderOptions, O>);
  using config::positive;
  using decoder_limits::kMaxLayers;
  using decoder_limits::kMaxWidth;
  using decoder_limits::size;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  auto nonlinearity = config::one_of(kActivationNames);
  s.field("vocab_size", &O::vocab_size, "Vocabulary size.", size(kMaxWidth))
      .field("hidden_size", &O::hidden_size, "Model width C.", size(kMaxWidth))
      .field("num_hidden_layers", &O::num_hidden_layers, "Number of encoder layers.", size(kMaxLayers))
      .field("num_heads", &O::num_heads, "Attention heads; must divide hidden_size.", size(kMaxWidth))
      .field("filter_size", &O::filter_size, "FFN hidden units.", size(kMaxWidth))
      .field("max_position_embeddings", &O::max_position_embeddings, "Longest sequence supported.", size(kMaxWidth))
      .field("position_embedding_type", &O::position_embedding_type, "learned, fixed (sinusoidal) or rotary.",
             config::one_of({"learned", "fixed", "rotary", "alibi", "relative"}))
      .field("rotary_dim", &O::rotary_dim, "rotary: dims per head to rotate (null: a quarter of the head size).",
             config::if_set(positive<int64_t>()))
      .field("rope_theta", &O::rope_theta, "rotary: base of the frequencies.", positive<double>())
      .field("mask_padding_in_positional_embed", &O::mask_padding_in_positional_embed,
             "learned: tokens take positions pad_token_id + 1, + 2, ... and padding the position pad_token_id "
             "(RoBERTa; padding must come last).")
      .field("num_segments", &O::num_segments,
             "Token types (segment_embeddings rows; null: the model's default, see its doc).",
             config::if_set(config::non_negative<int64_t>()))
      .field("layer_norm_epsilon", &O::layer_norm_epsilon, "LayerNorm epsilon.", positive<double>())
      .field("norm_first", &O::norm_first, "Pre-norm layers instead of BERT's post-norm.")
      .field("embedding_layer_norm", &O::embedding_layer_norm, "A norm (embed_ln_f) on the embeddings.")
      .field("use_final_layer_norm", &O::use_final_layer_norm, "A norm after the last encoder layer.")
      .field("activation_checkpointing", &O::activation_checkpointing,
             "zoo's own: recompute each encoder layer in the backward pass (less activation memory for about a "
             "third more compute).")
      .field("attention_module", &O::attention_module,
             "aiayn_attention, or multiquery_attention with extra_attention_params.num_kv_groups key/value heads.",
             config::one_of({"aiayn_attention", "multiquery_attention"}))
      .field("extra_attention_params", &O::extra_attention_params, "Settings of the attention module.")
      .field("attention_type", &O::attention_type,
             "scaled_dot_product divides scores by sqrt(head dim); dot_product does not.",
             config::one_of({"scaled_dot_product", "dot_product"}))
      .field("attention_softmax_fp32", &O::attention_softmax_fp32,
             "Compute the attention softmax in float32 under reduced precision.")
      .field("dropout_rate", &O::dropout_rate, "Dropout after the embeddings, on residual branches and in the FFN.",
             dropout)
      .field("attention_dropout_rate", &O::attention_dropout_rate,
             "Dropout on attention probabilities (null: dropout_rate).", config::if_set(dropout))
      .field("encoder_nonlinearity", &O::encoder_nonlinearity, "FFN activation.", nonlinearity)
      .field("pooler_nonlinearity", &O::pooler_nonlinearity,
             "Activation of the [CLS] pooler (null: encoder_nonlinearity; BERT: tanh).", config::if_set(nonlinearity))
      .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention, "Bias on the q/k/v projections.")
      .field("use_ffn_bias_in_attention", &O::use_ffn_bias_in_attention, "Bias on the attention output projection.")
      .field("use_ffn_bias", &O::use_ffn_bias, "Bias in the FFN layers, the pooler and the NSP head.")
      .field("initializer_range", &O::initializer_range,
             "Std of the truncated-normal default initializer and of the heads' initializers.", positive<double>())
      .field("default_initializer", &O::default_initializer,
             "Initializer of the encoder's layers and the pooler (null: truncated_normal std=initializer_range, "
             "+-2 std).")
      .field("embeddings_initializer", &O::embeddings_initializer, "Word embeddings (null: default_initializer).")
      .field("position_embeddings_initializer", &O::position_embeddings_initializer,
             "Learned position embeddings (null: default_initializer).")
      .field("segment_embeddings_initializer", &O::segment_embeddings_initializer,
             "Segment embeddings (null: default_initializer).")
      .field("mup_base_hidden_size", &O::mup_base_hidden_size,
             "muP: hidden_size of the base model. The attention, first FFN and pooler initializers' std scale "
             "by sqrt(base / hidden_size), the attention output's also by 1/sqrt(2 * num_hidden_layers); the "
             "heads' logits by output_logits_alpha * base / hidden_size; the learning rates of "
             "encoder_attention, encoder_input_ffn and pooler by base / hidden_size.",
             config::if_set(positive<double>()))
      .field("mup_base_filter_size", &O::mup_base_filter_size,
             "muP: filter_size of the base model. The last FFN layer's initializer std scales by "
             "sqrt(base / filter_size) / sqrt(2 * num_hidden_layers), its learning rate (encoder_output_ffn) by "
             "base / filter_size.",
             config::if_set(positive<double>()))
      .field("embeddings_scale", &O::embeddings_scale, "muP: multiplies the embeddings (before embed_ln_f).")
      .field("scale_qk_dot_by_d", &O::scale_qk_dot_by_d,
             "Divide attention scores by the head size instead of its square root (null: under muP only).")
      .field("attention_logits_alpha", &O::attention_logits_alpha, "muP: multiplies the attention scores.")
      .field("output_logits_alpha", &O::output_logits_alpha, "muP: see mup_base_hidden_size.")
      .field("scale_output_logits_by_d", &O::scale_output_logits_by_d,
             "muP: the logits scale by base / hidden_size (true) or by its square root (false).")
      .hardware_only({"attention_kernel"}, "selects a Cerebras attention kernel; the math is the same")
      .hardware_only({"fold_rope_consts"}, "folds rotary tables into Cerebras constants; the math is the same");
  return s;
}

// normal(0, 0.02): how modelzoo's fine-tuning heads (classifier,
// token classifier, summarizer) start, whatever the encoder's initializers.
InitializerSpec fine_tuning_head_initializer();

// Cross-key checks of the shared keys; `fail(key, what)` reports at the key's line.
void check_bert_encoder(const BertEncoderOptions& o,
                        const std::function<void(const std::string&, const std::string&)>& fail);

// What a model asks of its encoder beyond the keys.
struct BertEncoderShape {
  int64_t segments = 2;  // segment_embeddings rows (0: none)
  bool pooler = true;    // pooler.pooler: dense + pooler_nonlinearity on [CLS]
  double embedding_dropout = 0.1;
};

// modelzoo's variable-sequence-length (VSL) samples pack several sequences:
// key k's attention_span counts the tokens after it in its sequence and its
// position_ids the tokens before it. Returns the (B, 1, T, T) float32 bias
// that hides every key of another sequence (-inf; 0 within one), modelzoo's
// create_vsl_mask without causality. Rotary scores depend only on position
// differences, which packing keeps within a sequence, so only this mask
// tells packed sequences apart.
torch::Tensor packed_sequence_bias(const torch::Tensor& attention_span, const torch::Tensor& position_ids);

// modelzoo's BertModel: embedding_layer, embed_ln_f, transformer_encoder, pooler.pooler.
class BertEncoderImpl : public torch::nn::Module {
 public:
  BertEncoderImpl(const BertEncoderOptions& options, const BertEncoderShape& shape, const torch::TensorOptions& p);
  // input_ids (B, T); attention_mask (B, T) 0 at padding, and token_type_ids
  // may be undefined. Returns the hidden states (B, T, C) and, with a
  // pooler, the pooled [CLS] state (B, C).
  // attention_bias (B, 1, T, T), when given, replaces attention_mask's key
  // masking: packed_sequence_bias's, for samples that pack several sequences.
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                                  const torch::Tensor& token_type_ids,
                                                  const torch::Tensor& attention_bias = {});
  void reset_parameters();
  // modelzoo's lr groups with muP's scales: embedding, encoder_attention,
  // encoder_input_ffn, encoder_output_ffn, pooler.
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const;
  // Kaplan et al. (2020): the encoder's matmuls and attention per token.
  double forward_flops_per_token() const;

  EmbeddingLayer embedding_layer{nullptr};
  LayerNorm embed_ln_f{nullptr};
  TransformerEncoder transformer_encoder{nullptr};
  Dense pooler{nullptr};  // at pooler.pooler.ffn.0.linear_layer

 private:
  BertEncoderOptions options_;
  BertEncoderShape shape_;
};
TORCH_MODULE(BertEncoder);

}  // namespace zoo::models
