// BERT pre-training as modelzoo's bert model builds it (Devlin et al., 2018;
// RoBERTa without NSP): the BERT encoder (bert_encoder.h), a masked-LM head
// tied to the word embeddings and a next-sentence head on the pooled [CLS]
// state. Parameter names are modelzoo's (bert_encoder.*, bert_mlm_head.*,
// bert_cls_head.*). Defines: BertOptions, Esm2Options, BertModel, bert_pretraining_features,
// BertPretrainingSpec (BertSpec, Esm2Spec), bert_family, esm2_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/bert/bert_encoder.h"
#include "models/common/ffn.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// Every key of modelzoo's bert `model` section, with its defaults.
struct BertOptions : BertEncoderOptions {
  std::optional<std::string> mlm_nonlinearity;  // null: encoder_nonlinearity
  bool use_ffn_bias_in_mlm = true;
  bool use_output_bias_in_mlm = true;
  bool share_embedding_weights = true;
  double mlm_loss_weight = 1.0;
  double label_smoothing = 0.0;
  bool disable_nsp = false;
  int64_t num_classes = 2;
  bool compute_eval_metrics = true;

  static const config::Schema<BertOptions>& schema();
  int64_t segments() const { return num_segments.value_or(disable_nsp ? 0 : 2); }
};

class BertModel : public Model {
 public:
  BertModel(const BertOptions& options, const torch::TensorOptions& param_options);
  // Loss = sum over masked positions of the MLM cross-entropy / batch size *
  // mlm_loss_weight, plus the mean NSP cross-entropy (modelzoo's BertPretrainModelLoss).
  // A batch with attention_span and position_ids packs sequences (VSL): each attends within its own.
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  double forward_flops_per_token() const override { return bert_encoder->forward_flops_per_token(); }
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return options_.vocab_size; }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override {
    return bert_encoder->lr_adjustment_groups();
  }

  struct Outputs {
    torch::Tensor hidden;      // (B, T, C), the encoder's output
    torch::Tensor mlm_logits;  // (B, P, >= V) at the gathered positions (or every position without them)
    torch::Tensor nsp_logits;  // (B, num_classes), undefined with disable_nsp
  };
  // token_type_ids, masked_lm_positions and attention_bias (packed samples: BertEncoder::forward) may be undefined.
  Outputs run(const torch::Tensor& input_ids, const torch::Tensor& attention_mask, const torch::Tensor& token_type_ids,
              const torch::Tensor& masked_lm_positions, const torch::Tensor& attention_bias = {});

  BertEncoder bert_encoder{nullptr};
  // bert_mlm_head.{mlm_transform.{ffn, ln}, classifier}, bert_cls_head.classifier
  std::shared_ptr<torch::nn::Module> bert_mlm_head, bert_cls_head;
  Dense mlm_transform{nullptr}, nsp_classifier{nullptr};
  LayerNorm mlm_ln{nullptr};
  OutputHead mlm_classifier{nullptr};

 private:
  BertOptions options_;
};

// ESM-2 (modelzoo's esm2, a protein language model): BERT pre-training with
// token dropout (token_dropout, mask_token_id) and pre-norm layers by default.
struct Esm2Options : BertOptions {
  Esm2Options() { norm_first = true; }
  static const config::Schema<Esm2Options>& schema();
};

// modelzoo's BertForPreTrainingModelConfig keys, for bert and the models built on it (esm2).
template <class O>
config::Schema<O> bert_pretraining_schema(const std::string& name, const std::string& doc) {
  auto nonlinearity = config::one_of(kActivationNames);
  return add_bert_encoder_fields(config::Schema<O>(name, doc))
      .field("pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
             config::non_negative<int64_t>())
      .field("mlm_nonlinearity", &O::mlm_nonlinearity,
             "Activation of the masked-LM head's transform (null: encoder_nonlinearity).", config::if_set(nonlinearity))
      .field("use_ffn_bias_in_mlm", &O::use_ffn_bias_in_mlm, "Bias in the masked-LM head's transform.")
      .field("use_output_bias_in_mlm", &O::use_output_bias_in_mlm, "Bias on the masked-LM logits.")
      .field("share_embedding_weights", &O::share_embedding_weights,
             "Tie the masked-LM output projection to the word embeddings.")
      .field("mlm_loss_weight", &O::mlm_loss_weight,
             "Multiplies the masked-LM loss (a sum over masked "
             "tokens / batch size).")
      .field("label_smoothing", &O::label_smoothing, "Label smoothing of the masked-LM loss in training.",
             config::in_range(0.0, 1.0, /*hi_open=*/true))
      .field("disable_nsp", &O::disable_nsp, "No next-sentence prediction: masked LM only (RoBERTa).")
      .field("num_classes", &O::num_classes, "Classes of the NSP head.", config::positive<int64_t>())
      .field("compute_eval_metrics", &O::compute_eval_metrics,
             "Eval also reports accuracy_masked_lm, mlm_perplexity and (with NSP) accuracy_cls.")
      .ignored({"nonlinearity"}, "modelzoo's bert model replaces it by encoder_nonlinearity")
      .ignored({"embedding_dropout_rate"}, "modelzoo's bert model replaces it by dropout_rate")
      .ignored({"embedding_pad_token_id"}, "modelzoo's bert model replaces it by pad_token_id")
      .ignored({"add_pooling_layer"}, "modelzoo's bert model pools exactly when NSP is on")
      .validate([](const O& o, const auto& fail) {
        check_bert_encoder(o, fail);
        if (o.pad_token_id >= o.vocab_size) fail("pad_token_id", "must be below vocab_size");
      });
}

// ESM-2's own keys on top of those.
template <class O>
config::Schema<O> add_esm2_fields(config::Schema<O> s) {
  return s
      .field("token_dropout", &O::token_dropout,
             "Embed mask tokens as 0 and scale the rest by (1 - 0.15 * 0.8) / (1 - the sample's share of "
             "mask tokens among its attention_mask tokens), as ESM's training did.")
      .field("mask_token_id", &O::mask_token_id, "The mask token's id (required with token_dropout).",
             config::if_set(config::non_negative<int64_t>()))
      .validate([](const O& o, const auto& fail) {
        if (o.token_dropout && !o.mask_token_id) fail("mask_token_id", "required with token_dropout: true");
        if (o.mask_token_id && *o.mask_token_id >= o.vocab_size) fail("mask_token_id", "must be below vocab_size");
      });
}

// What BERT pre-training reads: masked-LM features, and the NSP ones unless disable_nsp.
std::vector<std::string> bert_pretraining_features(bool disable_nsp);

template <class Options>
class BertPretrainingSpec : public TypedModelSpec<Options, BertModel> {
 public:
  BertPretrainingSpec(const YAML::Node& section, const config::Context& ctx)
      : TypedModelSpec<Options, BertModel>(section, ctx, {}) {}
  std::vector<std::string> consumes() const override { return bert_pretraining_features(this->options().disable_nsp); }
  std::vector<std::string> reads_if_present() const override { return kPackedSequenceFeatures; }
};
using BertSpec = BertPretrainingSpec<BertOptions>;
using Esm2Spec = BertPretrainingSpec<Esm2Options>;

ModelFamily bert_family();
ModelFamily esm2_family();

}  // namespace zoo::models
