// Implementation of models/bert/qa.h.
#include "models/bert/qa.h"

#include "models/bert/hf_adapter.h"

namespace zoo::models {

const config::Schema<BertQaOptions>& BertQaOptions::schema() {
  using O = BertQaOptions;
  static const config::Schema<O> s =
      add_bert_encoder_fields(
          config::Schema<O>("model (bert/qa)",
                            "BERT extractive question answering (SQuAD), as modelzoo's bert fine_tuning/qa: "
                            "start and end scores for every token."))
          .field("embedding_pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
                 config::non_negative<int64_t>())
          .ignored({"mlm_loss_weight", "mlm_nonlinearity", "share_embedding_weights", "disable_nsp"},
                   "unused by modelzoo's bert qa model")
          .ignored({"add_pooling_layer"}, "the qa model has no pooler")
          .validate([](const O& o, const auto& fail) { check_bert_encoder(o, fail); });
  return s;
}

BertQaModel::BertQaModel(const BertQaOptions& o, const torch::TensorOptions& p)
    : BertFinetuneModel(o, {o.num_segments.value_or(2), false, o.dropout_rate}, 2, true, p) {}

std::pair<torch::Tensor, torch::Tensor> BertQaModel::span_logits(const torch::Tensor& input_ids,
                                                                 const torch::Tensor& attention_mask,
                                                                 const torch::Tensor& token_type_ids) {
  const torch::Tensor scores = classifier(bert->forward(input_ids, attention_mask, token_type_ids).first);
  return {scores.select(-1, 0), scores.select(-1, 1)};
}

ModelOutput BertQaModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& ids = batch.at("input_ids");
  auto [start, end] =
      span_logits(ids, optional_feature(batch, "attention_mask"), optional_feature(batch, "token_type_ids"));
  start = start.to(torch::kFloat);
  end = end.to(torch::kFloat);
  const int64_t T = ids.size(1);
  const torch::Tensor labels = batch.at("labels").to(torch::kLong).clamp(0, T);  // T: out of the sequence, ignored
  namespace F = torch::nn::functional;
  const auto ce = F::CrossEntropyFuncOptions().ignore_index(T);
  ModelOutput out;
  out.loss = (F::cross_entropy(start, labels.select(1, 0), ce) + F::cross_entropy(end, labels.select(1, 1), ce)) / 2;
  if (with_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor start_ok = (start.argmax(-1) == labels.select(1, 0)).to(torch::kDouble),
                        end_ok = (end.argmax(-1) == labels.select(1, 1)).to(torch::kDouble);
    const torch::Tensor n = torch::full({}, double(ids.size(0)), torch::kDouble);
    out.metrics["start_accuracy"] = {start_ok.sum(), n};
    out.metrics["end_accuracy"] = {end_ok.sum(), n};
    out.metrics["exact_match"] = {(start_ok * end_ok).sum(), n};
  }
  return out;
}

ModelFamily bert_qa_family() {
  ModelFamily f = make_model_family<BertQaOptions, BertQaModel>(
      "bert/qa", {"bert/fine_tuning/qa"},
      "BERT extractive question answering: the encoder's states and a linear layer giving every token a start and "
      "an end score, as modelzoo's bert fine_tuning/qa model and Hugging Face's BertForQuestionAnswering.",
      {"input_ids", "attention_mask", "labels"}, {"token_type_ids"});
  // Its keys are BERT's encoder's alone, so a legacy section without `name` (modelzoo picks the model by its
  // run.py) is never taken for it: only `name: bert/qa` (as zoo convert writes it) builds it.
  f.required_keys = {"name"};
  f.hf["bert-qa"] = bert_qa_hf_adapter();
  return f;
}

}  // namespace zoo::models
