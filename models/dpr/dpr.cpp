// Implementation of models/dpr/dpr.h.
#include "models/dpr/dpr.h"

#include <algorithm>
#include <cmath>

namespace zoo::models {

const config::Schema<DprEncoderOptions>& DprEncoderOptions::schema() {
  using O = DprEncoderOptions;
  static const config::Schema<O> s =
      add_bert_encoder_fields(
          config::Schema<O>("model.q_encoder/ctx_encoder/encoder (dpr)", "A DPR encoder: modelzoo's BertModel keys."))
          .field("pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
                 config::non_negative<int64_t>())
          .field("disable_nsp", &O::disable_nsp, "Only sizes the token-type table: none unless num_segments.")
          .field("add_pooling_layer", &O::add_pooling_layer,
                 "Replaced by the dpr model's pooler_type (ffn_pooler adds the pooler), as in modelzoo.")
          .ignored({"mlm_loss_weight", "mlm_nonlinearity", "share_embedding_weights"},
                   "deprecated and unused in modelzoo's DPR encoders")
          .ignored({"mixed_precision", "fp16_type"},
                   "zoo reads mixed precision from the model section (or the Trainer format's precision), not from "
                   "an encoder's, where modelzoo 2.2-2.3 DPR files put it")
          .validate([](const O& o, const auto& fail) {
            check_bert_encoder(o, fail);
            if (o.pad_token_id >= o.vocab_size) fail("pad_token_id", "must be below vocab_size");
          });
  return s;
}

const config::Schema<DprOptions>& DprOptions::schema() {
  using O = DprOptions;
  static const config::Schema<O> s =
      config::Schema<O>("model (dpr)", "DPR: question and context encoders trained contrastively.")
          .field("q_encoder", &O::q_encoder, "The question encoder (with ctx_encoder; or give encoder).")
          .field("ctx_encoder", &O::ctx_encoder, "The context encoder (with q_encoder).")
          .field("encoder", &O::encoder,
                 "One encoder section for both (two encoders alike unless use_biencoder: false).")
          .field("softmax_temperature", &O::softmax_temperature, "Scores are divided by it before the softmax.",
                 config::positive<double>())
          .field("mutual_information", &O::mutual_information,
                 "Add the context-to-question loss (weight 1 / (1 + contexts per question)).")
          .field("scale_similarity", &O::scale_similarity,
                 "modelzoo 2.2's: scores are divided by sqrt(the question encoder's hidden_size).")
          .field("use_biencoder", &O::use_biencoder, "Two encoders; false: one encoder for questions and contexts.")
          .field("pooler_type", &O::pooler_type,
                 "Sequence embedding: cls (the [CLS] state), ffn_pooler (the encoder's pooler on it) or mean "
                 "(the mean over attention_mask).",
                 config::one_of({"mean", "cls", "ffn_pooler"}))
          .field("compute_eval_metrics", &O::compute_eval_metrics,
                 "Eval also reports accuracy (the positive context scores highest).")
          .field("selected_encoder", &O::selected_encoder,
                 "modelzoo's embedding generation: which encoder to run (accepted; zoo trains and evaluates).",
                 config::if_set(config::one_of({"q_encoder", "ctx_encoder", "encoder"})))
          .validate([](const O& o, const auto& fail) {
            const bool bi = o.q_encoder && o.ctx_encoder && !o.encoder,
                       uni = !o.q_encoder && !o.ctx_encoder && o.encoder;
            if (!bi && !uni)
              fail(o.encoder ? "encoder" : "q_encoder", "give q_encoder and ctx_encoder, or encoder alone");
            if (!o.use_biencoder && !uni)
              fail("use_biencoder", "false needs encoder alone (no q_encoder, ctx_encoder)");
          });
  return s;
}

namespace {

BertEncoder make_encoder(const DprEncoderOptions& o, const std::string& pooler_type, const torch::TensorOptions& p) {
  return BertEncoder(o, BertEncoderShape{o.segments(), pooler_type == "ffn_pooler", o.dropout_rate}, p);
}

}  // namespace

DprModel::DprModel(const DprOptions& o, const torch::TensorOptions& p) : options_(o) {
  question_encoder = register_module("question_encoder", make_encoder(o.question(), o.pooler_type, p));
  if (o.use_biencoder) ctx_encoder = register_module("ctx_encoder", make_encoder(o.context(), o.pooler_type, p));
}

void DprModel::reset_parameters() {
  question_encoder->reset_parameters();
  if (ctx_encoder) ctx_encoder->reset_parameters();
}

torch::Tensor DprModel::embed(BertEncoder encoder, const torch::Tensor& ids, const torch::Tensor& mask,
                              const torch::Tensor& token_types) {
  auto [hidden, pooled] = encoder->forward(ids, mask, token_types);
  if (options_.pooler_type == "ffn_pooler") return pooled;
  if (options_.pooler_type == "cls") return hidden.select(1, 0);
  const torch::Tensor m = mask.to(hidden.scalar_type()).unsqueeze(-1);  // mean over the attended tokens
  return (hidden * m).sum(1) / m.sum(1).clamp_min(1e-9);
}

ModelOutput DprModel::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& ctx_ids = batch.at("ctx_input_ids");
  const int64_t B = ctx_ids.size(0), N = ctx_ids.size(1), T = ctx_ids.size(2);
  auto flat = [&](const char* name) { return batch.at(name).reshape({B * N, T}); };
  const torch::Tensor q = embed(question_encoder, batch.at("questions_input_ids"), batch.at("questions_attention_mask"),
                                batch.at("questions_token_type_ids"));
  const torch::Tensor c = embed(ctx_encoder ? ctx_encoder : question_encoder, flat("ctx_input_ids"),
                                flat("ctx_attention_mask"), flat("ctx_token_type_ids"));
  torch::Tensor q2c = q.matmul(c.t()).to(torch::kFloat);  // (B, B N): question i's positive is column i N
  if (options_.scale_similarity) q2c = q2c / std::sqrt(double(options_.question().hidden_size));
  const torch::Tensor labels = torch::arange(B, q2c.options().dtype(torch::kLong)) * N;
  const double t = options_.softmax_temperature;
  ModelOutput out;
  out.loss = torch::cross_entropy_loss(q2c / t, labels);
  if (options_.mutual_information) {
    torch::Tensor c2q = c.view({B, N, -1}).select(1, 0).matmul(q.t()).to(torch::kFloat);  // (B, B)
    if (options_.scale_similarity) c2q = c2q / std::sqrt(double(options_.question().hidden_size));
    const double w = 1.0 / (1 + N);
    out.loss = (1 - w) * out.loss + w * torch::cross_entropy_loss(c2q / t, torch::arange(B, labels.options()));
  }
  if (with_metrics && options_.compute_eval_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor correct = (q2c.argmax(-1) == labels).to(torch::kFloat).sum();
    out.metrics["accuracy"] = {correct, torch::full({}, double(B), correct.options()), MetricTerm::Reduce::mean};
  }
  return out;
}

std::map<std::string, torch::Tensor> DprModel::adapt_loaded_state(std::map<std::string, torch::Tensor> saved) const {
  if (!ctx_encoder) return saved;
  const bool has_ctx =
      std::any_of(saved.begin(), saved.end(), [](const auto& kv) { return kv.first.rfind("ctx_encoder.", 0) == 0; });
  if (has_ctx) return saved;
  std::map<std::string, torch::Tensor> both = saved;
  const std::string from = "question_encoder.";
  for (const auto& [key, tensor] : saved)
    if (key.rfind(from, 0) == 0) both["ctx_encoder." + key.substr(from.size())] = tensor;
  return both;
}

ModelFamily dpr_family() {
  ModelFamily f = make_model_family<DprOptions, DprModel>(
      "dpr", {},
      "DPR: question and context BERT encoders (or one shared encoder) trained so that each question's pooled "
      "embedding scores its positive context above the batch's other contexts and hard negatives, as modelzoo's "
      "dpr model; data: DPRHDF5DataProcessor.",
      {"questions_input_ids", "questions_attention_mask", "questions_token_type_ids", "ctx_input_ids",
       "ctx_attention_mask", "ctx_token_type_ids"});
  f.required_keys = {"q_encoder"};  // a legacy DPR file (modelzoo's legacy files give the encoders)
  f.hf["dpr"] = dpr_hf_adapter();
  return f;
}

}  // namespace zoo::models
