// What BERT's fine-tuning models share (bert/classifier, bert/token_classifier,
// bert/extractive_summarization, bert/qa): the encoder under modelzoo's `bert.`
// and one linear layer, `classifier`, on its states, initialized as modelzoo's
// fine-tuning heads. Each model says which states it reads and its loss.
// Defines: BertFinetuneModel.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "models/bert/bert_encoder.h"
#include "models/model.h"

namespace zoo::models {

class BertFinetuneModel : public Model {
 public:
  double forward_flops_per_token() const override { return bert->forward_flops_per_token(); }
  void reset_parameters() override {
    bert->reset_parameters();
    classifier->reset_parameters(fine_tuning_head_initializer());
  }
  std::optional<int64_t> vocab_size() const override { return vocab_size_; }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override {
    return bert->lr_adjustment_groups();
  }

  BertEncoder bert{nullptr};
  Dense classifier{nullptr};

 protected:
  // The classifier has `outputs` outputs, and a bias when `bias`.
  BertFinetuneModel(const BertEncoderOptions& o, const BertEncoderShape& shape, int64_t outputs, bool bias,
                    const torch::TensorOptions& p)
      : vocab_size_(o.vocab_size) {
    bert = register_module("bert", BertEncoder(o, shape, p));
    classifier = register_module("classifier", Dense(o.hidden_size, outputs, bias, p));
  }

 private:
  int64_t vocab_size_;
};

}  // namespace zoo::models
