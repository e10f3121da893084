// Implementation of models/bert/token_classifier.h.
#include "models/bert/token_classifier.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "models/bert/hf_adapter.h"

namespace zoo::models {

const config::Schema<BertTokenClassifierOptions>& BertTokenClassifierOptions::schema() {
  using O = BertTokenClassifierOptions;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  static const config::Schema<O> s =
      add_bert_encoder_fields(
          config::Schema<O>("model (bert/token_classifier)",
                            "BERT token classification (NER), as modelzoo's bert/token_classifier."))
          .field("num_classes", &O::num_classes, "Token classes.", config::if_set(config::positive<int64_t>()))
          .field("encoder_output_dropout_rate", &O::encoder_output_dropout_rate,
                 "Dropout on the encoder's states before the classifier.", config::if_set(dropout))
          .field("loss_weight", &O::loss_weight, "Multiplies the loss (a sum over tokens / batch size).")
          .field("include_padding_in_loss", &O::include_padding_in_loss,
                 "The loss also divides by the sequence length (the data's loss_mask then keeps padding too).")
          .field("embedding_pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
                 config::non_negative<int64_t>())
          .field("embedding_dropout_rate", &O::embedding_dropout_rate,
                 "Dropout after the embeddings (null: dropout_rate).", config::if_set(dropout))
          .field("label_vocab_file", &O::label_vocab_file,
                 "JSON mapping of label names to class ids; the classes named B... or I... make the eval F1.")
          .field("compute_eval_metrics", &O::compute_eval_metrics, "Eval also reports f1_score.")
          .ignored({"mlm_loss_weight", "mlm_nonlinearity", "share_embedding_weights"},
                   "deprecated and unused by modelzoo's bert/token_classifier model")
          .ignored({"nonlinearity"}, "modelzoo's bert/token_classifier model replaces it by encoder_nonlinearity")
          .ignored({"add_pooling_layer"}, "modelzoo's bert/token_classifier model has no pooler")
          .validate([](const O& o, const auto& fail) {
            check_bert_encoder(o, fail);
            if (!o.num_classes) fail("num_classes", "required: the number of token classes");
            if (!o.encoder_output_dropout_rate)
              fail("encoder_output_dropout_rate", "required: the dropout before the classifier");
          });
  return s;
}

BertTokenClassifierModel::BertTokenClassifierModel(const BertTokenClassifierOptions& o, const torch::TensorOptions& p)
    : BertFinetuneModel(o, {o.num_segments.value_or(2), false, o.embedding_dropout_rate.value_or(o.dropout_rate)},
                        o.num_classes.value_or(2), true, p),
      options_(o) {
  const int64_t K = o.num_classes.value_or(2);
  scored_ = torch::ones({K}, torch::kDouble);
  if (o.label_vocab_file && o.compute_eval_metrics) {  // modelzoo ignores O, [CLS], [SEP], X, ... in the F1
    std::ifstream in(*o.label_vocab_file);
    const nlohmann::json labels = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!labels.is_object())
      throw std::runtime_error(*o.label_vocab_file + ": expected a JSON object of label names to class ids");
    for (const auto& [name, id] : labels.items())
      if (id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < K && name.rfind('B', 0) != 0 &&
          name.rfind('I', 0) != 0)
        scored_[id.get<int64_t>()] = 0.0;
  }
}

torch::Tensor BertTokenClassifierModel::logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                               const torch::Tensor& token_type_ids) {
  torch::Tensor h = bert->forward(input_ids, attention_mask, token_type_ids).first;
  const double p = options_.encoder_output_dropout_rate.value_or(0.0);
  if (p > 0) h = torch::dropout(h, p, is_training());
  return classifier(h);
}

ModelOutput BertTokenClassifierModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& ids = batch.at("input_ids");
  const torch::Tensor attention = optional_feature(batch, "attention_mask");
  const int64_t B = ids.size(0), T = ids.size(1), K = options_.num_classes.value_or(2);
  const torch::Tensor out =
      logits(ids, attention, optional_feature(batch, "token_type_ids")).to(torch::kFloat).reshape({-1, K});
  const torch::Tensor labels = batch.at("labels").reshape({-1}).to(torch::kLong);
  const torch::Tensor keep =
      (batch.count("loss_mask") ? batch.at("loss_mask") : attention).reshape({-1}).to(torch::kFloat);
  const torch::Tensor per_token = torch::nn::functional::cross_entropy(
      out, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  double weight = options_.loss_weight / double(B);
  if (options_.include_padding_in_loss) weight /= double(T);
  ModelOutput result;
  result.loss = (per_token * keep).sum() * weight;
  if (with_metrics && options_.compute_eval_metrics) {
    torch::NoGradGuard no_grad;
    // Per class over the real tokens: F1 = 2 TP / (2 TP + FP + FN), as sums the runner adds up over batches.
    const torch::Tensor real =
        attention.defined() ? attention.reshape({-1}) != 0 : torch::ones_like(labels, torch::kBool);
    const torch::Tensor pred = out.argmax(-1).index({real}), gold = labels.index({real});
    const torch::Tensor classes = torch::arange(K, torch::kLong).unsqueeze(1);
    const torch::Tensor p = (pred.unsqueeze(0) == classes), g = (gold.unsqueeze(0) == classes);
    const torch::Tensor tp = (p & g).sum(1).to(torch::kDouble), fp = (p & ~g).sum(1).to(torch::kDouble),
                        fn = (~p & g).sum(1).to(torch::kDouble);
    const torch::Tensor& scored = scored_;
    result.metrics["f1_score"] = {2 * tp * scored, (2 * tp + fp + fn) * scored, MetricTerm::Reduce::macro_mean};
  }
  return result;
}

ModelFamily bert_token_classifier_family() {
  ModelFamily f = make_model_family<BertTokenClassifierOptions, BertTokenClassifierModel>(
      "bert/token_classifier", {},
      "BERT fine-tuned to classify tokens (NER): the encoder's states, dropout and a linear layer per token, as "
      "modelzoo's bert/token_classifier model.",
      {"input_ids", "attention_mask", "labels"});
  f.required_keys = {"num_classes", "encoder_output_dropout_rate"};
  f.hf["bert-token-classifier"] = bert_token_classifier_hf_adapter();
  f.input_keys_from_model = {
      {"label_vocab_file", {"label_vocab_file"}},
      {"include_padding_in_loss", {"include_padding_in_loss"}}};  // as modelzoo's data config reads them
  return f;
}

}  // namespace zoo::models
