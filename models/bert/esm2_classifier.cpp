// Implementation of models/bert/esm2_classifier.h.
#include "models/bert/esm2_classifier.h"

#include "models/bert/classifier.h"
#include "models/common/ffn.h"

namespace zoo::models {

const config::Schema<Esm2ClassifierOptions>& Esm2ClassifierOptions::schema() {
  using O = Esm2ClassifierOptions;
  static const config::Schema<O> s =
      add_esm2_fields(
          bert_pretraining_schema<O>("model (esm2/classification)",
                                     "ESM-2 sequence classification, as modelzoo 2.3's esm2/classification model."))
          .field("num_labels", &O::num_labels, "Classes (1: regression).", config::positive<int64_t>())
          .field("classifier_dropout", &O::classifier_dropout, "Dropout on the pooled state (null: none).",
                 config::if_set(config::in_range(0.0, 1.0, /*hi_open=*/true)))
          .field("problem_type", &O::problem_type,
                 "single_label_classification, multi_label_classification or regression (null: regression with "
                 "one label, else single_label_classification).",
                 config::if_set(config::one_of(kProblemTypes)))
          .field("freeze_pretrained_model", &O::freeze_pretrained_model,
                 "Train the pooler and the classifier only: the ESM-2 encoder's weights stay as loaded.");
  return s;
}

Esm2ClassifierModel::Esm2ClassifierModel(const Esm2ClassifierOptions& o, const torch::TensorOptions& p) : options_(o) {
  esm2 = register_module("model", std::make_shared<BertModel>(o, p));
  auto node = [] { return std::make_shared<torch::nn::Module>(); };  // holds children under modelzoo's names
  auto head = register_module("classifier", node());
  pooler = Dense(o.hidden_size, o.hidden_size, /*use_bias=*/true, p);
  head->register_module("bert_pooler", node())->register_module("pooler", one_layer_network(pooler.ptr()));
  classifier = head->register_module("classifier", Dense(o.hidden_size, o.num_labels, /*use_bias=*/true, p));
  if (o.freeze_pretrained_model)
    for (auto& t : esm2->bert_encoder->parameters()) t.set_requires_grad(false);
}

void Esm2ClassifierModel::reset_parameters() {
  esm2->reset_parameters();
  InitializerSpec xavier;  // modelzoo's BertPooler default
  xavier.name = "xavier_uniform";
  pooler->reset_parameters(xavier);
  classifier->reset_parameters(fine_tuning_head_initializer());
}

torch::Tensor Esm2ClassifierModel::logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask) {
  const torch::Tensor hidden = esm2->bert_encoder->forward(input_ids, attention_mask, torch::Tensor()).first;
  torch::Tensor pooled = activation("gelu", pooler(hidden.select(1, 0)));  // the first (<cls>) token
  if (options_.classifier_dropout) pooled = torch::dropout(pooled, *options_.classifier_dropout, is_training());
  return classifier(pooled);
}

ModelOutput Esm2ClassifierModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor out = logits(batch.at("input_ids"), optional_feature(batch, "attention_mask")).to(torch::kFloat);
  const torch::Tensor& labels = batch.at("labels");
  const std::string type = options_.resolved_problem_type();
  ModelOutput result;
  result.loss = sequence_classification_loss(out, labels, type);
  if (with_metrics && options_.compute_eval_metrics && type == "single_label_classification")
    add_classification_metrics(result, out, labels, options_.num_labels);
  return result;
}

std::map<std::string, torch::Tensor> Esm2ClassifierModel::adapt_loaded_state(
    std::map<std::string, torch::Tensor> saved) const {
  const bool classifier_layout = std::any_of(saved.begin(), saved.end(), [](const auto& kv) {
    return kv.first.rfind("model.", 0) == 0 || kv.first.rfind("classifier.", 0) == 0;
  });
  if (classifier_layout) return saved;
  std::map<std::string, torch::Tensor> under_model;
  for (auto& [key, tensor] : saved) under_model["model." + key] = tensor;
  return under_model;
}

ModelFamily esm2_classifier_family() {
  ModelFamily f = make_model_family<Esm2ClassifierOptions, Esm2ClassifierModel>(
      "esm2/classification", {},
      "ESM-2 fine-tuned to classify protein sequences: the encoder's first-token state through a GELU pooler, "
      "dropout and a linear layer, as modelzoo 2.3's esm2/classification model; data: BertCSVDataProcessor rows "
      "of input_ids, attention_mask and a label.",
      {"input_ids", "attention_mask", "labels"});
  f.required_keys = {"token_dropout", "num_labels"};  // what marks a legacy ESM-2 classifier file
  return f;
}

}  // namespace zoo::models
