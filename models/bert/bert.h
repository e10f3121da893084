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

// What BERT pre-training reads: masked-LM features, and the NSP ones unless disable_nsp.
std::vector<std::string> bert_pretraining_features(bool disable_nsp);

template <class Options>
class BertPretrainingSpec : public TypedModelSpec<Options, BertModel> {
 public:
  BertPretrainingSpec(const YAML::Node& section, const config::Context& ctx)
      : TypedModelSpec<Options, BertModel>(section, ctx, {}) {}
  std::vector<std::string> consumes() const override { return bert_pretraining_features(this->options().disable_nsp); }
};
using BertSpec = BertPretrainingSpec<BertOptions>;
using Esm2Spec = BertPretrainingSpec<Esm2Options>;

ModelFamily bert_family();
ModelFamily esm2_family();

}  // namespace zoo::models
