// BERT pre-training as modelzoo's bert model builds it (Devlin et al., 2018;
// RoBERTa without NSP): a bidirectional encoder with word, position and
// segment embeddings, a masked-LM head tied to the word embeddings and a
// next-sentence head on the pooled [CLS] state. Parameter names are
// modelzoo's (bert_encoder.*, bert_mlm_head.*, bert_cls_head.*).
// Defines: BertOptions, BertModel, BertSpec, bert_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/common/decoder_lm_fields.h"
#include "models/common/embedding.h"
#include "models/common/initializers.h"
#include "models/common/layers.h"
#include "models/common/transformer_encoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// Every key of modelzoo's bert `model` section, with its defaults.
struct BertOptions {
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
  int64_t pad_token_id = 0;
  std::optional<int64_t> num_segments;  // token types (null: 2, or none without NSP)
  double layer_norm_epsilon = 1e-5;
  bool norm_first = false;
  bool embedding_layer_norm = true;
  bool use_final_layer_norm = false;
  std::string attention_module = "aiayn_attention";
  ExtraAttentionParams extra_attention_params;
  std::string attention_type = "scaled_dot_product";
  bool attention_softmax_fp32 = true;
  double dropout_rate = 0.1;
  std::optional<double> attention_dropout_rate;  // null: dropout_rate
  std::string encoder_nonlinearity = "gelu";
  std::optional<std::string> pooler_nonlinearity;  // null: encoder_nonlinearity
  std::optional<std::string> mlm_nonlinearity;     // null: encoder_nonlinearity
  bool use_projection_bias_in_attention = true;
  bool use_ffn_bias_in_attention = true;
  bool use_ffn_bias = true;
  bool use_ffn_bias_in_mlm = true;
  bool use_output_bias_in_mlm = true;
  bool share_embedding_weights = true;
  double initializer_range = 0.02;
  std::optional<InitializerSpec> default_initializer;  // null: truncated_normal(initializer_range)
  std::optional<InitializerSpec> embeddings_initializer, position_embeddings_initializer,
      segment_embeddings_initializer;  // null: default_initializer
  // muP (see the schema)
  std::optional<double> mup_base_hidden_size, mup_base_filter_size;
  double embeddings_scale = 1.0;
  std::optional<bool> scale_qk_dot_by_d;  // null: true under muP
  double attention_logits_alpha = 1.0;
  double output_logits_alpha = 1.0;
  bool scale_output_logits_by_d = true;
  // Loss and heads
  double mlm_loss_weight = 1.0;
  double label_smoothing = 0.0;
  bool disable_nsp = false;
  int64_t num_classes = 2;
  bool compute_eval_metrics = true;

  static const config::Schema<BertOptions>& schema();
  int64_t segments() const { return num_segments.value_or(disable_nsp ? 0 : 2); }
  bool mup() const { return mup_base_hidden_size.has_value(); }
};

class BertModel : public Model {
 public:
  BertModel(const BertOptions& options, const torch::TensorOptions& param_options);
  // Loss = sum over masked positions of the MLM cross-entropy / batch size *
  // mlm_loss_weight, plus the mean NSP cross-entropy (modelzoo's BertPretrainModelLoss).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return options_.vocab_size; }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override;

  struct Outputs {
    torch::Tensor hidden;      // (B, T, C), the encoder's output
    torch::Tensor mlm_logits;  // (B, P, V) at the gathered positions (or every position without them)
    torch::Tensor nsp_logits;  // (B, num_classes), undefined with disable_nsp
  };
  // token_type_ids and masked_lm_positions may be undefined.
  Outputs run(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, const torch::Tensor& token_type_ids,
              const torch::Tensor& masked_lm_positions);

  // modelzoo's module tree: bert_encoder.{embedding_layer, embed_ln_f,
  // transformer_encoder, pooler.pooler}, bert_mlm_head.{mlm_transform.{ffn, ln},
  // classifier}, bert_cls_head.classifier.
  std::shared_ptr<torch::nn::Module> bert_encoder, bert_mlm_head, bert_cls_head;
  EmbeddingLayer embedding_layer{nullptr};
  LayerNorm embed_ln_f{nullptr};
  TransformerEncoder transformer_encoder{nullptr};
  Dense pooler{nullptr}, mlm_transform{nullptr}, nsp_classifier{nullptr};
  LayerNorm mlm_ln{nullptr};
  OutputHead mlm_classifier{nullptr};

 private:
  std::optional<double> logits_scale() const;
  BertOptions options_;
};

// The features a bert spec reads depend on disable_nsp.
class BertSpec : public TypedModelSpec<BertOptions, BertModel> {
 public:
  BertSpec(const YAML::Node& section, const config::Context& ctx) : TypedModelSpec(section, ctx, {}) {}
  std::vector<std::string> consumes() const override;
};

ModelFamily bert_family();

}  // namespace zoo::models
