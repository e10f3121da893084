// BERT fine-tuned to classify tokens (modelzoo's bert/token_classifier, its
// BertForTokenClassification, e.g. NER): the BERT encoder's states, dropout,
// one linear layer per token. Parameter names are modelzoo's (bert.*,
// classifier.*). Defines: BertTokenClassifierOptions, BertTokenClassifierModel,
// bert_token_classifier_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/bert/bert_encoder.h"
#include "models/bert/finetune_model.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct BertTokenClassifierOptions : BertEncoderOptions {
  BertTokenClassifierOptions() {
    vocab_size = 30522;
    max_position_embeddings = 1024;
    dropout_rate = 0.0;
    attention_dropout_rate = 0.0;
  }
  std::optional<int64_t> num_classes;                 // required
  std::optional<double> encoder_output_dropout_rate;  // required: dropout on the encoder's states
  double loss_weight = 1.0;
  bool include_padding_in_loss = false;
  std::optional<double> embedding_dropout_rate;  // null: dropout_rate
  std::optional<std::string> label_vocab_file;   // JSON label -> class id; its B-/I- labels make the eval F1
  bool compute_eval_metrics = false;

  static const config::Schema<BertTokenClassifierOptions>& schema();
};

class BertTokenClassifierModel : public BertFinetuneModel {
 public:
  BertTokenClassifierModel(const BertTokenClassifierOptions& options, const torch::TensorOptions& param_options);
  // Cross-entropy summed over the tokens loss_mask keeps / batch size *
  // loss_weight (and / sequence length with include_padding_in_loss), as
  // modelzoo's; eval reports f1_score, the F1 macro-averaged over the classes
  // whose label starts with B or I (all classes without label_vocab_file).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& token_type_ids);  // (B, T, num_classes)
 private:
  BertTokenClassifierOptions options_;
  torch::Tensor scored_;  // (num_classes) double: 1 where the class counts in f1_score
};

ModelFamily bert_token_classifier_family();

}  // namespace zoo::models
