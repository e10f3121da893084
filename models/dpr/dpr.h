// DPR (dense passage retrieval, Karpukhin et al. 2020) as modelzoo's dpr
// model trains it: a question encoder and a context encoder (BERT encoders;
// one shared encoder with use_biencoder: false) whose pooled embeddings score
// each question against every context of the batch, trained with a softmax
// cross-entropy that picks the question's own positive context among the
// others and their hard negatives. Defines: DprEncoderOptions, DprOptions,
// DprModel, dpr_hf_adapter, dpr_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/bert/bert_encoder.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// modelzoo's DPREncoderConfig: a BERT encoder section.
struct DprEncoderOptions : BertEncoderOptions {
  bool disable_nsp = false;        // only sizes the segment table (2 token types unless set)
  bool add_pooling_layer = false;  // overridden by pooler_type, as modelzoo's post_init does
  static const config::Schema<DprEncoderOptions>& schema();
  int64_t segments() const { return num_segments.value_or(disable_nsp ? 0 : 2); }
};

struct DprOptions {
  std::optional<DprEncoderOptions> q_encoder, ctx_encoder, encoder;
  double softmax_temperature = 1.0;
  bool mutual_information = false;  // also the context-to-question loss
  bool scale_similarity = false;    // modelzoo 2.2: scores / sqrt(hidden_size)
  bool use_biencoder = true;
  std::string pooler_type = "cls";  // mean, cls or ffn_pooler
  bool compute_eval_metrics = false;
  std::optional<std::string> selected_encoder;  // modelzoo's embedding generation only
  static const config::Schema<DprOptions>& schema();
  // The question encoder's options (q_encoder, else encoder) and the context encoder's.
  const DprEncoderOptions& question() const { return q_encoder ? *q_encoder : *encoder; }
  const DprEncoderOptions& context() const { return ctx_encoder ? *ctx_encoder : *encoder; }
};

// Batches hold questions_{input_ids, attention_mask, token_type_ids} (B, T)
// and ctx_{input_ids, attention_mask, token_type_ids} (B, N, T): context 0
// of each question is its positive, the rest hard negatives. Scores are
// dot products of pooled embeddings (cls: the [CLS] state; ffn_pooler: the
// pooler's; mean: the mean over attention_mask), q2c (B, B N); the loss is
// the cross-entropy of q2c / softmax_temperature against column i N for
// question i, and with mutual_information (1 - 1/(1+N)) of it plus 1/(1+N)
// of the positives' context-to-question cross-entropy. Eval reports
// `accuracy` (compute_eval_metrics). State dict keys are modelzoo's:
// question_encoder.*, ctx_encoder.* (bi-encoder only).
class DprModel : public Model {
 public:
  DprModel(const DprOptions& options, const torch::TensorOptions& param_options);
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  double forward_flops_per_token() const override { return question_encoder->forward_flops_per_token(); }
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return options_.question().vocab_size; }
  // A question-encoder-only checkpoint (a uni-encoder's) starts both encoders, as modelzoo's loader does.
  std::map<std::string, torch::Tensor> adapt_loaded_state(std::map<std::string, torch::Tensor> saved) const override;

  // Pooled embeddings (B, C) of sequences (B, T) through `encoder`.
  torch::Tensor embed(BertEncoder encoder, const torch::Tensor& ids, const torch::Tensor& mask,
                      const torch::Tensor& token_types);

  BertEncoder question_encoder{nullptr}, ctx_encoder{nullptr};  // ctx_encoder: bi-encoder only

 private:
  DprOptions options_;
};

using DprSpec = TypedModelSpec<DprOptions, DprModel>;

// Hugging Face's DPRQuestionEncoder and DPRContextEncoder (sub-directories
// q_encoder/ and ctx_encoder/) <-> zoo's dpr (models/dpr/hf_adapter.cpp).
HfAdapter dpr_hf_adapter();

ModelFamily dpr_family();

}  // namespace zoo::models
