// BERT fine-tuned to classify sequences (modelzoo's bert/classifier model,
// its BertForSequenceClassification): the BERT encoder's pooled [CLS] state,
// dropout, one linear layer. Parameter names are modelzoo's (bert.*,
// classifier.*). Defines: BertClassifierOptions, BertClassifierModel,
// bert_classifier_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/bert/bert_encoder.h"
#include "models/bert/finetune_model.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct BertClassifierOptions : BertEncoderOptions {
  BertClassifierOptions() {
    vocab_size = 30522;
    max_position_embeddings = 1024;
  }
  std::optional<int64_t> num_labels;  // required
  std::optional<std::string>
      problem_type;                    // required: single_label_classification, multi_label_classification, regression
  std::optional<double> task_dropout;  // required: dropout on the pooled state
  std::optional<double> embedding_dropout_rate;  // null: dropout_rate
  bool compute_eval_metrics = false;

  static const config::Schema<BertClassifierOptions>& schema();
};

class BertClassifierModel : public BertFinetuneModel {
 public:
  BertClassifierModel(const BertClassifierOptions& options, const torch::TensorOptions& param_options);
  // Cross-entropy (single label), binary cross-entropy per label (multi
  // label) or mean squared error (regression) of the logits; eval also
  // reports accuracy, with two labels f1_score (add_classification_metrics),
  // and accuracy_matched / accuracy_mismatched when the batch has
  // is_matched / is_mismatched (MNLI's two dev sets).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& token_type_ids);  // (B, num_labels)
 private:
  BertClassifierOptions options_;
};

// The problem_type values modelzoo's sequence classifiers take.
extern const std::vector<std::string> kProblemTypes;

// modelzoo's BertForSequenceClassificationLoss of float logits (B,
// num_labels): mean squared error (regression), binary cross-entropy per
// label (multi_label_classification) or cross-entropy (single_label_classification).
torch::Tensor sequence_classification_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                           const std::string& problem_type);

// modelzoo's eval metrics of a single-label classifier, as sums the runner
// adds up over batches: accuracy, and with two labels f1_score. modelzoo's
// F1 there is micro-averaged over both classes and counts the labels in
// [0, num_labels): each such row is a true positive, or a false positive and
// a false negative, so it equals the accuracy over those rows (not the F1 of
// class 1 that GLUE reports). Returns each row's correctness (1 or 0,
// float), for metrics over subsets of the rows.
torch::Tensor add_classification_metrics(ModelOutput& result, const torch::Tensor& logits, const torch::Tensor& labels,
                                         int64_t num_labels);

ModelFamily bert_classifier_family();

}  // namespace zoo::models
