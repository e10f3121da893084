// Implementation of models/bert/bert.h.
#include "models/bert/bert.h"

#include <cmath>

#include "models/bert/hf_adapter.h"
#include "models/common/ffn.h"
#include "models/common/lm_loss.h"
#include "models/hf/headless.h"

namespace zoo::models {

const config::Schema<BertOptions>& BertOptions::schema() {
  static const config::Schema<BertOptions> s = bert_pretraining_schema<BertOptions>(
      "model (bert)", "BERT pre-training (masked LM and next-sentence prediction), as modelzoo's bert model.");
  return s;
}

const config::Schema<Esm2Options>& Esm2Options::schema() {
  static const config::Schema<Esm2Options> s = add_esm2_fields(bert_pretraining_schema<Esm2Options>(
      "model (esm2)",
      "ESM-2 protein language model: BERT pre-training with token dropout, pre-norm layers by default, as "
      "modelzoo's esm2 model."));
  return s;
}

BertModel::BertModel(const BertOptions& o, const torch::TensorOptions& p) : options_(o) {
  bert_encoder = register_module("bert_encoder",
                                 BertEncoder(o, BertEncoderShape{o.segments(), !o.disable_nsp, o.dropout_rate}, p));
  auto node = [] { return std::make_shared<torch::nn::Module>(); };  // holds children under modelzoo's names
  if (!o.disable_nsp) {
    bert_cls_head = register_module("bert_cls_head", node());
    nsp_classifier = Dense(o.hidden_size, o.num_classes, o.use_ffn_bias, p);
    bert_cls_head->register_module("classifier", one_layer_network(nsp_classifier.ptr()));
  }
  bert_mlm_head = register_module("bert_mlm_head", node());
  auto transform = bert_mlm_head->register_module("mlm_transform", node());
  mlm_transform = Dense(o.hidden_size, o.hidden_size, o.use_ffn_bias_in_mlm, p);
  transform->register_module("ffn", one_layer_network(mlm_transform.ptr()));
  mlm_ln = transform->register_module("ln", LayerNorm(o.hidden_size, o.layer_norm_epsilon, p));
  mlm_classifier = OutputHead(o.hidden_size, o.vocab_size, !o.share_embedding_weights, o.use_output_bias_in_mlm, p);
  bert_mlm_head->register_module("classifier", one_layer_network(mlm_classifier.ptr()));
}

void BertModel::reset_parameters() {
  bert_encoder->reset_parameters();
  // The heads start from truncated_normal(initializer_range) whatever default_initializer says.
  const InitializerSpec heads = truncated_normal_spec(options_.initializer_range);
  if (nsp_classifier) nsp_classifier->reset_parameters(heads);
  mlm_transform->reset_parameters(heads);
  mlm_ln->reset_parameters();
  mlm_classifier->reset_parameters(heads);
}

BertModel::Outputs BertModel::run(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                  const torch::Tensor& token_type_ids, const torch::Tensor& masked_lm_positions,
                                  const torch::Tensor& attention_bias) {
  const BertOptions& o = options_;
  Outputs out;
  torch::Tensor pooled;
  std::tie(out.hidden, pooled) = bert_encoder->forward(input_ids, attention_mask, token_type_ids, attention_bias);
  torch::Tensor at = out.hidden;
  if (masked_lm_positions.defined())  // (B, P, C): the states at the masked positions only
    at = out.hidden.gather(1, masked_lm_positions.to(torch::kLong).unsqueeze(-1).expand({-1, -1, o.hidden_size}));
  torch::Tensor m = mlm_ln(activation(o.mlm_nonlinearity.value_or(o.encoder_nonlinearity), mlm_transform(at)));
  out.mlm_logits = mlm_classifier(m, bert_encoder->embedding_layer->word_embeddings->weight);  // (B, P, >= V)
  const std::optional<double> scale = o.logits_scale();
  if (scale) out.mlm_logits = out.mlm_logits * *scale;
  if (nsp_classifier) {
    out.nsp_logits = nsp_classifier(pooled);
    if (scale) out.nsp_logits = out.nsp_logits * *scale;
  }
  return out;
}

ModelOutput BertModel::forward(const Features& batch, bool with_metrics) {
  const BertOptions& o = options_;
  const torch::Tensor& labels = batch.at("labels");
  // Labels of every position (modelzoo's gather_mlm_labels: false) need no gathering.
  const bool gathered = labels.size(1) != batch.at("input_ids").size(1);
  if (gathered && !batch.count("masked_lm_positions"))
    throw std::invalid_argument("bert: labels have " + std::to_string(labels.size(1)) +
                                " columns, not one per token (" + std::to_string(batch.at("input_ids").size(1)) +
                                "), and the batch has no masked_lm_positions saying where they belong");
  const torch::Tensor span = optional_feature(batch, "attention_span");
  const torch::Tensor packing = span.defined() ? packed_sequence_bias(span, batch.at("position_ids")) : torch::Tensor();
  Outputs out =
      run(batch.at("input_ids"), optional_feature(batch, "attention_mask"), optional_feature(batch, "token_type_ids"),
          gathered ? batch.at("masked_lm_positions") : torch::Tensor(), packing);
  const int64_t B = labels.size(0), V = o.vocab_size;
  const torch::Tensor logits = out.mlm_logits.reshape({-1, out.mlm_logits.size(-1)});
  const torch::Tensor flat_labels = labels.reshape({-1}).to(torch::kLong);
  const torch::Tensor weights = batch.at("masked_lm_mask").reshape({-1}).to(torch::kFloat);
  ModelOutput result;
  torch::Tensor mlm_sum;  // for the metrics
  if (!with_metrics && !(o.label_smoothing > 0 && is_training()) &&
      one_pass_cross_entropy_applies(logits, flat_labels)) {  // the same loss, its weights up front
    result.loss =
        one_pass_cross_entropy(logits, flat_labels, weights * (o.mlm_loss_weight / double(B)), logits.size(1));
  } else {
    torch::Tensor per_token = token_cross_entropy(logits, flat_labels, V, PaddingColumns::neg_inf);
    mlm_sum = (per_token * weights).sum();
    if (o.label_smoothing > 0 && is_training())
      per_token = smooth_cross_entropy(per_token, logits, V, o.label_smoothing);
    result.loss = (per_token * weights).sum() / double(B) * o.mlm_loss_weight;
  }
  torch::Tensor nsp_labels;
  if (!o.disable_nsp) {
    if (!batch.count("next_sentence_label"))
      throw std::invalid_argument(
          "bert: the batch has no next_sentence_label for the next-sentence head; "
          "masked-LM-only data wants disable_nsp: true in model and in the input section");
    nsp_labels = batch.at("next_sentence_label").reshape({-1}).to(torch::kLong);
    result.loss = result.loss + torch::cross_entropy_loss(out.nsp_logits.to(torch::kFloat), nsp_labels);
  }
  if (with_metrics && o.compute_eval_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor masked = weights.sum();
    const torch::Tensor correct = (logits.narrow(1, 0, V).argmax(-1) == flat_labels).to(torch::kFloat) * weights;
    result.metrics["accuracy_masked_lm"] = {correct.sum(), masked, MetricTerm::Reduce::mean};
    result.metrics["mlm_perplexity"] = {mlm_sum.detach(), masked, MetricTerm::Reduce::exp_mean};
    if (!o.disable_nsp)
      result.metrics["accuracy_cls"] = {(out.nsp_logits.argmax(-1) == nsp_labels).to(torch::kFloat).sum(),
                                        torch::tensor(double(B)), MetricTerm::Reduce::mean};
  }
  return result;
}

std::vector<std::string> bert_pretraining_features(bool disable_nsp) {
  std::vector<std::string> c = {"input_ids", "attention_mask", "labels", "masked_lm_mask"};
  if (!disable_nsp) c.insert(c.end(), {"token_type_ids", "next_sentence_label"});
  return c;
}

ModelFamily bert_family() {
  ModelFamily f = make_model_family<BertOptions, BertModel>(
      "bert", {"roberta"},
      "BERT pre-training: a bidirectional encoder with a masked-LM head and (unless disable_nsp) a next-sentence "
      "head, as modelzoo's bert model builds it; RoBERTa is the same model with disable_nsp.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions", "token_type_ids",
       "next_sentence_label"});
  f.parse = [](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const BertSpec>(section, ctx);
  };
  f.reads_if_present = kPackedSequenceFeatures;
  // As modelzoo's bert set_defaults: the data yields segments and NSP labels
  // only when the model has the head (vocab_size and mixed_precision, which it
  // also passes, no zoo processor reads).
  f.input_keys_from_model = {{"disable_nsp", {"disable_nsp"}, /*must_agree=*/true}};
  f.hf["bert"] = bert_hf_adapter();
  f.hf["roberta"] = roberta_hf_adapter();
  // HF's BertModel: no heads; its pooler (which BertForMaskedLM lacks) keeps zoo's next-sentence head.
  HeadlessParts heads = built_head_parts({"bert_mlm_head.", "bert_cls_head."});
  heads.config_from_weights = [](YAML::Node& model, const StateDict& hf) {
    const bool pooler = hf.count("pooler.dense.weight") > 0;
    model["disable_nsp"] = !pooler;
    if (!pooler) model.remove("pooler_nonlinearity");
  };
  f.hf["bert-headless"] = headless_adapter(f.hf["bert"], heads);
  return f;
}

ModelFamily esm2_family() {
  ModelFamily f = make_model_family<Esm2Options, BertModel>(
      "esm2", {},
      "ESM-2: a protein language model, BERT's masked-LM pre-training with token dropout and pre-norm layers "
      "(usually rotary positions, no NSP), as modelzoo's esm2 model builds it.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions"});
  f.parse = [](const YAML::Node& section, const config::Context& ctx) {
    return std::make_shared<const Esm2Spec>(section, ctx);
  };
  f.reads_if_present = kPackedSequenceFeatures;
  f.required_keys = {"token_dropout"};  // what marks a legacy ESM-2 file
  f.hf["esm"] = esm_hf_adapter();
  return f;
}

}  // namespace zoo::models
