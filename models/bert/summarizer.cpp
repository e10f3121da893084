// Implementation of models/bert/summarizer.h.
#include "models/bert/summarizer.h"

namespace zoo::models {

const config::Schema<BertSummarizerOptions>& BertSummarizerOptions::schema() {
  using O = BertSummarizerOptions;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  static const config::Schema<O> s =
      add_bert_encoder_fields(config::Schema<O>("model (bert/extractive_summarization)",
                                                "BERTSUM: BERT scoring each sentence's [CLS] state, as modelzoo's "
                                                "bert/extractive_summarization."))
          .field("num_labels", &O::num_labels, "Classes per sentence (1 or 2).",
                 config::Check<int64_t>([](const int64_t& v) {
                   return v == 1 || v == 2 ? std::string() : std::string("expected 1 or 2");
                 }))
          .field("loss_weight", &O::loss_weight, "Multiplies the loss (a sum over sentences / batch size; null: 1).")
          .field("use_cls_bias", &O::use_cls_bias, "A bias in the classifier.")
          .field("vocab_file", &O::vocab_file,
                 "The vocabulary; an input section without vocab_file takes this one, as modelzoo's.")
          .field("compute_eval_metrics", &O::compute_eval_metrics,
                 "ROUGE during eval: not supported (modelzoo raises NotImplementedError too).")
          .field("embedding_dropout_rate", &O::embedding_dropout_rate,
                 "Dropout after the embeddings (null: dropout_rate).", config::if_set(dropout))
          .field("add_pooling_layer", &O::add_pooling_layer, "Must be false: the summarizer has no pooler.")
          .field("embedding_pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
                 config::non_negative<int64_t>())
          .ignored({"mlm_loss_weight", "mlm_nonlinearity", "share_embedding_weights"},
                   "deprecated and unused by modelzoo's bert/extractive_summarization model")
          .ignored({"nonlinearity"}, "modelzoo's summarizer replaces it by encoder_nonlinearity")
          .validate([](const O& o, const auto& fail) {
            check_bert_encoder(o, fail);
            if (o.compute_eval_metrics)
              fail("compute_eval_metrics",
                   "ROUGE is not supported (modelzoo's summarizer raises "
                   "NotImplementedError for it too); set it to false");
            if (o.add_pooling_layer) fail("add_pooling_layer", "must be false: the summarizer has no pooler");
          });
  return s;
}

BertSummarizerModel::BertSummarizerModel(const BertSummarizerOptions& o, const torch::TensorOptions& p)
    : BertFinetuneModel(o, {o.num_segments.value_or(2), false, o.embedding_dropout_rate.value_or(o.dropout_rate)},
                        o.num_labels, o.use_cls_bias, p),
      options_(o) {}

torch::Tensor BertSummarizerModel::logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                          const torch::Tensor& token_type_ids, const torch::Tensor& cls_indices) {
  const torch::Tensor h = bert->forward(input_ids, attention_mask, token_type_ids).first;  // (B, T, C)
  const torch::Tensor at = cls_indices.to(torch::kLong).unsqueeze(-1).expand({-1, -1, h.size(-1)});
  return classifier(h.gather(1, at));
}

ModelOutput BertSummarizerModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& ids = batch.at("input_ids");
  const int64_t K = options_.num_labels;
  const torch::Tensor out = logits(ids, optional_feature(batch, "attention_mask"),
                                   optional_feature(batch, "token_type_ids"), batch.at("cls_indices"))
                                .to(torch::kFloat);
  const torch::Tensor labels = batch.at("labels").reshape({-1}).to(torch::kLong);
  const torch::Tensor weights = batch.at("cls_weights").reshape({-1}).to(torch::kFloat);
  const torch::Tensor per_sentence = torch::nn::functional::cross_entropy(
      out.reshape({-1, K}), labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  ModelOutput result;
  result.loss = (per_sentence * weights).sum() * (options_.loss_weight.value_or(1.0) / double(ids.size(0)));
  if (with_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor hit = (out.reshape({-1, K}).argmax(-1) == labels).to(torch::kFloat);
    result.metrics["accuracy"] = {(hit * weights).sum(), weights.sum()};
  }
  return result;
}

ModelFamily bert_summarizer_family() {
  ModelFamily f = make_model_family<BertSummarizerOptions, BertSummarizerModel>(
      "bert/extractive_summarization", {},
      "BERTSUM: BERT's states at each sentence's [CLS] token, scored by a linear layer, as modelzoo's "
      "bert/extractive_summarization model.",
      {"input_ids", "attention_mask", "token_type_ids", "labels", "cls_indices", "cls_weights"});
  f.required_keys = {"use_cls_bias"};
  f.input_keys_from_model = {{"vocab_file", {"vocab_file"}}};  // as modelzoo's data config reads it
  return f;
}

}  // namespace zoo::models
