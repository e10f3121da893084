// BERT fine-tuned for extractive summarization (modelzoo's
// bert/extractive_summarization, BERTSUM): the BERT encoder's states at each
// sentence's [CLS] token (cls_indices), scored by one linear layer (keep the
// sentence or not). Parameter names are modelzoo's (bert.*, classifier.*).
// Defines: BertSummarizerOptions, BertSummarizerModel, bert_summarizer_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/bert/bert_encoder.h"
#include "models/bert/finetune_model.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct BertSummarizerOptions : BertEncoderOptions {
  BertSummarizerOptions() {
    vocab_size = 30522;
    max_position_embeddings = 1024;
    attention_dropout_rate = 0.1;
  }
  int64_t num_labels = 2;
  std::optional<double> loss_weight = 1.0;  // null: 1
  bool use_cls_bias = true;
  std::optional<std::string> vocab_file;         // the data's vocabulary, when its section names none
  bool compute_eval_metrics = false;             // ROUGE: refused, as modelzoo does
  std::optional<double> embedding_dropout_rate;  // null: dropout_rate
  bool add_pooling_layer = false;                // only false, as modelzoo's

  static const config::Schema<BertSummarizerOptions>& schema();
};

class BertSummarizerModel : public BertFinetuneModel {
 public:
  BertSummarizerModel(const BertSummarizerOptions& options, const torch::TensorOptions& param_options);
  // modelzoo's loss: cross-entropy per [CLS] position, weighted by
  // cls_weights (0 at padding), summed / batch size * loss_weight. Eval
  // also reports `accuracy` over the weighted positions.
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // (B, max_cls_tokens, num_labels): the states at cls_indices, classified.
  torch::Tensor logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                       const torch::Tensor& token_type_ids, const torch::Tensor& cls_indices);

 private:
  BertSummarizerOptions options_;
};

ModelFamily bert_summarizer_family();

}  // namespace zoo::models
