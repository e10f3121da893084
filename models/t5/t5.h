// T5 (Raffel et al., 2020) and the original encoder-decoder Transformer
// (Vaswani et al., 2017) as modelzoo's t5 / transformer models build them
// (T5ForConditionalGeneration; the transformer model is the same class with
// other keys): embeddings, an encoder, a decoder that attends to it, and an
// LM head over the target vocabulary. Parameter names are modelzoo's
// (encoder_embeddings.*, encoder.layers.{i}.*, decoder.*, lm_head.weight).
// Defines: T5Options, T5Model, t5_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/common/cross_decoder.h"
#include "models/common/embedding.h"
#include "models/common/layers.h"
#include "models/common/relative_position.h"
#include "models/common/transformer_encoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// Every key of modelzoo's t5 / transformer `model` section, with its defaults.
struct T5Options {
  int64_t src_vocab_size = 0;
  std::optional<int64_t> tgt_vocab_size;  // null: src_vocab_size
  int64_t extra_ids = 0;                  // sentinel ids appended to both vocabularies
  int64_t d_model = 512;
  int64_t d_kv = 64;  // per head; d_kv * num_heads need not be d_model
  int64_t d_ff = 2048;
  int64_t encoder_num_hidden_layers = 6;
  std::optional<int64_t> decoder_num_hidden_layers;  // null: encoder_num_hidden_layers
  int64_t num_heads = 8;
  int64_t relative_attention_num_buckets = 32;
  std::string norm_type = "rmsnorm";
  double dropout_rate = 0.1;
  std::optional<double> relu_dropout_rate;  // after the FFN's activation; null: dropout_rate
  double layer_norm_epsilon = 1e-5;
  double initializer_factor = 1.0;
  std::string encoder_nonlinearity = "relu";
  std::string decoder_nonlinearity = "relu";
  bool use_projection_bias_in_attention = false;
  bool attention_softmax_fp32 = true;
  std::optional<std::string> position_embedding_type = std::string("relative");  // null: none
  std::optional<int64_t> src_max_position_embeddings;  // null: train_input's src_max_sequence_length
  std::optional<int64_t> tgt_max_position_embeddings;
  bool use_dropout_outside_residual_path = true;
  bool share_encoder_decoder_embedding = true;
  bool share_embedding_weights = true;
  bool use_pre_encoder_decoder_dropout = false;
  bool use_pre_encoder_decoder_layer_norm = true;
  bool use_ffn_bias = false;
  double label_smoothing = 0.0;
  bool use_transformer_initialization = false;
  double lm_loss_weight = 1.0;
  std::string mlm_loss_scaling = "batch_size";
  bool compute_eval_metrics = true;
  bool activation_checkpointing = false;  // zoo's own
  // muP (modelzoo >= 2.4)
  std::optional<int64_t> mup_base_d_model, mup_base_d_ff, mup_base_d_kv;
  double embeddings_alpha = 1.0;
  double encoder_attention_logits_alpha = 1.0, decoder_attention_logits_alpha = 1.0;
  std::optional<bool> scale_encoder_qk_dot_by_d, scale_decoder_qk_dot_by_d;
  bool scale_output_logits_by_d = false;
  std::optional<double> output_logits_alpha;

  static const config::Schema<T5Options>& schema();
  int64_t source_vocab() const { return src_vocab_size + extra_ids; }
  int64_t target_vocab() const { return tgt_vocab_size ? *tgt_vocab_size + extra_ids : source_vocab(); }
  int64_t decoder_layers() const { return decoder_num_hidden_layers.value_or(encoder_num_hidden_layers); }
  // muP's width scaling is on (both base dimensions given, and not the Transformer's initialization).
  bool mup() const { return mup_base_d_model.has_value() && !use_transformer_initialization; }
};

class T5Model : public Model {
 public:
  T5Model(const T5Options& options, const torch::TensorOptions& param_options);
  // Loss: cross-entropy of the logits against labels over
  // decoder_attention_mask, scaled by mlm_loss_scaling as modelzoo's
  // T5ForConditionalGenerationLoss; metrics accuracy_lm and perplexity_lm.
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // Logits (B, T, >= target vocab) of decoder_input_ids (B, T) given
  // input_ids (B, S) and their attention_mask (B, S) (undefined: no padding).
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& decoder_input_ids);
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return options_.source_vocab(); }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override;

  EmbeddingLayer encoder_embeddings{nullptr}, decoder_embeddings{nullptr};
  RelativePositionBias encoder_relative_bias{nullptr}, decoder_relative_bias{nullptr};  // "relative" only
  TransformerEncoder encoder{nullptr};
  CrossDecoder decoder{nullptr};
  OutputHead lm_head{nullptr};

 private:
  torch::Tensor embed(EmbeddingLayer& embeddings, const torch::Tensor& ids);
  T5Options options_;
};

ModelFamily t5_family();

}  // namespace zoo::models
