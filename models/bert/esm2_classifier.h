// ESM-2 fine-tuned to classify protein sequences (modelzoo 2.3's
// esm2/classification model, its ESM2ForSequenceClassificationModel): the
// ESM-2 pre-training model (models/bert/bert.h) whose encoder's first-token
// state goes through a pooler (dense + GELU), dropout and a linear layer.
// State dict keys are modelzoo's: model.bert_encoder.*, model.bert_mlm_head.*
// (kept, unused, so that pre-trained weights load and save as they came),
// classifier.bert_pooler.pooler.ffn.0.linear_layer.*, classifier.classifier.*,
// and, as modelzoo's module tree holds the encoder twice, the encoder again
// under classifier.bert_encoder.* in saved checkpoints.
// Defines: Esm2ClassifierOptions, Esm2ClassifierModel, esm2_classifier_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/bert/bert.h"

namespace zoo::models {

struct Esm2ClassifierOptions : Esm2Options {
  int64_t num_labels = 2;
  std::optional<double> classifier_dropout;  // null: none
  std::optional<std::string> problem_type;   // null: regression with 1 label, else single_label_classification
  bool freeze_pretrained_model = false;

  static const config::Schema<Esm2ClassifierOptions>& schema();
  std::string resolved_problem_type() const {
    return problem_type.value_or(num_labels == 1 ? "regression" : "single_label_classification");
  }
};

class Esm2ClassifierModel : public Model {
 public:
  Esm2ClassifierModel(const Esm2ClassifierOptions& options, const torch::TensorOptions& param_options);
  // modelzoo's BertForSequenceClassificationLoss of the logits; eval also
  // reports accuracy, and with 2 labels f1_score (modelzoo's micro-averaged
  // F1, which for one label per sequence equals accuracy).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask);  // (B, num_labels)
  double forward_flops_per_token() const override { return esm2->bert_encoder->forward_flops_per_token(); }
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return options_.vocab_size; }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override {
    return esm2->lr_adjustment_groups();
  }
  std::string checkpoint_key_prefix() const override { return ""; }
  std::vector<std::pair<std::string, std::string>> saved_aliases() const override {
    return {{"classifier.bert_encoder.", "model.bert_encoder."}};
  }
  // A plain ESM-2 pre-training checkpoint (keys bert_encoder.*, bert_mlm_head.*) loads as model.*.
  std::map<std::string, torch::Tensor> adapt_loaded_state(std::map<std::string, torch::Tensor> saved) const override;

  std::shared_ptr<BertModel> esm2;
  Dense pooler{nullptr}, classifier{nullptr};

 private:
  Esm2ClassifierOptions options_;
};

ModelFamily esm2_classifier_family();

}  // namespace zoo::models
