// BERT fine-tuned for extractive question answering (modelzoo's
// bert/fine_tuning/qa model, Hugging Face's BertForQuestionAnswering): the
// encoder's state of every token (no pooler), one linear layer to two
// scores, the start and the end of the answer span. Parameter names are
// modelzoo's (bert.*, classifier.*: HF's qa_outputs). Defines:
// BertQaOptions, BertQaModel, bert_qa_family.
#pragma once

#include <torch/torch.h>

#include <utility>

#include "models/bert/bert_encoder.h"
#include "models/bert/finetune_model.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct BertQaOptions : BertEncoderOptions {
  BertQaOptions() {
    vocab_size = 30522;
    max_position_embeddings = 512;
    dropout_rate = 0.1;
    attention_dropout_rate = 0.1;
  }
  static const config::Schema<BertQaOptions>& schema();
};

class BertQaModel : public BertFinetuneModel {
 public:
  BertQaModel(const BertQaOptions& options, const torch::TensorOptions& param_options);
  // labels (B, 2): each sample's answer start and end token (positions past
  // the sequence are clamped to it and ignored, as HF's). The loss is the mean
  // of the start's and the end's cross-entropy over the sequence, averaged
  // over the batch; eval also reports start_accuracy, end_accuracy and
  // exact_match (both right).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // (start_logits, end_logits), each (B, T).
  std::pair<torch::Tensor, torch::Tensor> span_logits(const torch::Tensor& input_ids,
                                                      const torch::Tensor& attention_mask,
                                                      const torch::Tensor& token_type_ids);
};

ModelFamily bert_qa_family();

}  // namespace zoo::models
