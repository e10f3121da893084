// Implementation of models/bert/classifier.h.
#include "models/bert/classifier.h"

#include "models/bert/hf_adapter.h"

namespace zoo::models {

const std::vector<std::string> kProblemTypes = {"single_label_classification", "multi_label_classification",
                                                "regression"};

const config::Schema<BertClassifierOptions>& BertClassifierOptions::schema() {
  using O = BertClassifierOptions;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  static const config::Schema<O> s =
      add_bert_encoder_fields(config::Schema<O>("model (bert/classifier)",
                                                "BERT sequence classification, as modelzoo's bert/classifier model."))
          .field("num_labels", &O::num_labels, "Classes (1: regression).", config::if_set(config::positive<int64_t>()))
          .field("problem_type", &O::problem_type,
                 "single_label_classification, multi_label_classification or regression.",
                 config::if_set(config::one_of(kProblemTypes)))
          .field("task_dropout", &O::task_dropout, "Dropout on the pooled [CLS] state.", config::if_set(dropout))
          .field("embedding_pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
                 config::non_negative<int64_t>())
          .field("embedding_dropout_rate", &O::embedding_dropout_rate,
                 "Dropout after the embeddings (null: dropout_rate).", config::if_set(dropout))
          .field("compute_eval_metrics", &O::compute_eval_metrics,
                 "Eval also reports accuracy, with two labels f1_score (modelzoo's micro-averaged F1), and "
                 "MNLI's accuracy_matched / accuracy_mismatched.")
          .ignored({"mlm_loss_weight", "mlm_nonlinearity", "share_embedding_weights"},
                   "deprecated and unused by modelzoo's bert/classifier model")
          .ignored({"nonlinearity"}, "modelzoo's bert/classifier model replaces it by encoder_nonlinearity")
          .validate([](const O& o, const auto& fail) {
            check_bert_encoder(o, fail);
            if (!o.num_labels) fail("num_labels", "required: the number of classes");
            if (!o.problem_type)
              fail("problem_type",
                   "required: single_label_classification, "
                   "multi_label_classification or regression");
            if (!o.task_dropout) fail("task_dropout", "required: the dropout on the pooled state");
            if (o.pad_token_id >= o.vocab_size) fail("embedding_pad_token_id", "must be below vocab_size");
          });
  return s;
}

torch::Tensor add_classification_metrics(ModelOutput& result, const torch::Tensor& logits, const torch::Tensor& labels,
                                         int64_t num_labels) {
  torch::NoGradGuard no_grad;
  const torch::Tensor label = labels.reshape({-1}).to(torch::kLong);
  const torch::Tensor correct = (logits.argmax(-1) == label).to(torch::kFloat);
  result.metrics["accuracy"] = {correct.sum(), torch::tensor(double(correct.numel())), MetricTerm::Reduce::mean};
  if (num_labels == 2) {
    const torch::Tensor counted = ((label >= 0) & (label < num_labels)).to(torch::kFloat);
    result.metrics["f1_score"] = {(correct * counted).sum(), counted.sum(), MetricTerm::Reduce::mean};
  }
  return correct;
}

BertClassifierModel::BertClassifierModel(const BertClassifierOptions& o, const torch::TensorOptions& p)
    : BertFinetuneModel(o, {o.num_segments.value_or(2), true, o.embedding_dropout_rate.value_or(o.dropout_rate)},
                        o.num_labels.value_or(2), true, p),
      options_(o) {}

torch::Tensor BertClassifierModel::logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                          const torch::Tensor& token_type_ids) {
  torch::Tensor pooled = bert->forward(input_ids, attention_mask, token_type_ids).second;
  const double p = options_.task_dropout.value_or(0.0);
  if (p > 0) pooled = torch::dropout(pooled, p, is_training());
  return classifier(pooled);
}

ModelOutput BertClassifierModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor out = logits(batch.at("input_ids"), optional_feature(batch, "attention_mask"),
                                   optional_feature(batch, "token_type_ids"))
                                .to(torch::kFloat);
  const torch::Tensor& labels = batch.at("labels");
  const std::string& type = *options_.problem_type;
  ModelOutput result;
  result.loss = sequence_classification_loss(out, labels, type);
  if (with_metrics && options_.compute_eval_metrics && type == "single_label_classification") {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct = add_classification_metrics(result, out, labels, options_.num_labels.value_or(2));
    for (const auto& [feature, metric] : {std::pair<const char*, const char*>{"is_matched", "accuracy_matched"},
                                          {"is_mismatched", "accuracy_mismatched"}})
      if (batch.count(feature)) {
        const torch::Tensor w = batch.at(feature).reshape({-1}).to(torch::kFloat);
        result.metrics[metric] = {(correct * w).sum(), w.sum(), MetricTerm::Reduce::mean};
      }
  }
  return result;
}

torch::Tensor sequence_classification_loss(const torch::Tensor& logits, const torch::Tensor& labels,
                                           const std::string& problem_type) {
  if (problem_type == "regression") return torch::mse_loss(logits.squeeze(-1), labels.to(torch::kFloat).reshape({-1}));
  if (problem_type == "multi_label_classification")
    return torch::binary_cross_entropy_with_logits(logits, labels.to(torch::kFloat).reshape(logits.sizes()));
  return torch::cross_entropy_loss(logits, labels.reshape({-1}).to(torch::kLong));
}

ModelFamily bert_classifier_family() {
  ModelFamily f = make_model_family<BertClassifierOptions, BertClassifierModel>(
      "bert/classifier", {},
      "BERT fine-tuned to classify sequences (SST-2, MNLI): the pooled [CLS] state, dropout and a linear layer, "
      "as modelzoo's bert/classifier model.",
      {"input_ids", "attention_mask", "token_type_ids", "labels"});
  f.required_keys = {"num_labels", "problem_type", "task_dropout"};
  f.hf["bert-sequence-classifier"] = bert_sequence_classifier_hf_adapter();
  return f;
}

}  // namespace zoo::models
