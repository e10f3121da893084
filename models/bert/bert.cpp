// Implementation of models/bert/bert.h.
#include "models/bert/bert.h"

#include <cmath>

#include "models/common/ffn.h"
#include "models/bert/hf_adapter.h"
#include "models/common/lm_loss.h"

namespace zoo::models {

const config::Schema<BertOptions>& BertOptions::schema() {
  using O = BertOptions;
  using config::positive;
  using decoder_limits::kMaxLayers;
  using decoder_limits::kMaxWidth;
  using decoder_limits::size;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  auto nonlinearity = config::one_of(kActivationNames);
  static const config::Schema<O> s =
      config::Schema<O>("model (bert)",
                        "BERT pre-training (masked LM and next-sentence prediction), as modelzoo's bert model.")
          .field("vocab_size", &O::vocab_size, "Vocabulary size.", size(kMaxWidth))
          .field("hidden_size", &O::hidden_size, "Model width C.", size(kMaxWidth))
          .field("num_hidden_layers", &O::num_hidden_layers, "Number of encoder layers.", size(kMaxLayers))
          .field("num_heads", &O::num_heads, "Attention heads; must divide hidden_size.", size(kMaxWidth))
          .field("filter_size", &O::filter_size, "FFN hidden units.", size(kMaxWidth))
          .field("max_position_embeddings", &O::max_position_embeddings, "Longest sequence supported.",
                 size(kMaxWidth))
          .field("position_embedding_type", &O::position_embedding_type, "learned, fixed (sinusoidal) or rotary.",
                 config::one_of({"learned", "fixed", "rotary", "alibi", "relative"}))
          .field("rotary_dim", &O::rotary_dim, "rotary: dims per head to rotate (null: a quarter of the head size).",
                 config::if_set(positive<int64_t>()))
          .field("rope_theta", &O::rope_theta, "rotary: base of the frequencies.", positive<double>())
          .field("mask_padding_in_positional_embed", &O::mask_padding_in_positional_embed,
                 "learned: tokens take positions pad_token_id + 1, + 2, ... and padding the position pad_token_id "
                 "(RoBERTa; padding must come last).")
          .field("pad_token_id", &O::pad_token_id, "The word embedding row of this id gets no gradient.",
                 config::non_negative<int64_t>())
          .field("num_segments", &O::num_segments,
                 "Token types (segment_embeddings rows; null: 2, or none with disable_nsp).",
                 config::if_set(config::non_negative<int64_t>()))
          .field("layer_norm_epsilon", &O::layer_norm_epsilon, "LayerNorm epsilon.", positive<double>())
          .field("norm_first", &O::norm_first, "Pre-norm layers instead of BERT's post-norm.")
          .field("embedding_layer_norm", &O::embedding_layer_norm, "A norm (embed_ln_f) on the embeddings.")
          .field("use_final_layer_norm", &O::use_final_layer_norm, "A norm after the last encoder layer.")
          .field("attention_module", &O::attention_module,
                 "aiayn_attention, or multiquery_attention with extra_attention_params.num_kv_groups key/value heads.",
                 config::one_of({"aiayn_attention", "multiquery_attention"}))
          .field("extra_attention_params", &O::extra_attention_params, "Settings of the attention module.")
          .field("attention_type", &O::attention_type,
                 "scaled_dot_product divides scores by sqrt(head dim); dot_product does not.",
                 config::one_of({"scaled_dot_product", "dot_product"}))
          .field("attention_softmax_fp32", &O::attention_softmax_fp32,
                 "Compute the attention softmax in float32 under reduced precision.")
          .field("dropout_rate", &O::dropout_rate,
                 "Dropout after the embeddings, on residual branches and in the FFN.", dropout)
          .field("attention_dropout_rate", &O::attention_dropout_rate,
                 "Dropout on attention probabilities (null: dropout_rate).", config::if_set(dropout))
          .field("encoder_nonlinearity", &O::encoder_nonlinearity, "FFN activation.", nonlinearity)
          .field("pooler_nonlinearity", &O::pooler_nonlinearity,
                 "Activation of the [CLS] pooler (null: encoder_nonlinearity; BERT: tanh).", config::if_set(nonlinearity))
          .field("mlm_nonlinearity", &O::mlm_nonlinearity,
                 "Activation of the masked-LM head's transform (null: encoder_nonlinearity).",
                 config::if_set(nonlinearity))
          .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention,
                 "Bias on the q/k/v projections.")
          .field("use_ffn_bias_in_attention", &O::use_ffn_bias_in_attention, "Bias on the attention output projection.")
          .field("use_ffn_bias", &O::use_ffn_bias, "Bias in the FFN layers, the pooler and the NSP head.")
          .field("use_ffn_bias_in_mlm", &O::use_ffn_bias_in_mlm, "Bias in the masked-LM head's transform.")
          .field("use_output_bias_in_mlm", &O::use_output_bias_in_mlm, "Bias on the masked-LM logits.")
          .field("share_embedding_weights", &O::share_embedding_weights,
                 "Tie the masked-LM output projection to the word embeddings.")
          .field("initializer_range", &O::initializer_range,
                 "Std of the truncated-normal default initializer and of the heads' initializers.", positive<double>())
          .field("default_initializer", &O::default_initializer,
                 "Initializer of the encoder's layers and the pooler (null: truncated_normal std=initializer_range, "
                 "+-2 std).")
          .field("embeddings_initializer", &O::embeddings_initializer, "Word embeddings (null: default_initializer).")
          .field("position_embeddings_initializer", &O::position_embeddings_initializer,
                 "Learned position embeddings (null: default_initializer).")
          .field("segment_embeddings_initializer", &O::segment_embeddings_initializer,
                 "Segment embeddings (null: default_initializer).")
          .field("mup_base_hidden_size", &O::mup_base_hidden_size,
                 "muP: hidden_size of the base model. The attention, first FFN and pooler initializers' std scale "
                 "by sqrt(base / hidden_size), the attention output's also by 1/sqrt(2 * num_hidden_layers); the "
                 "masked-LM and NSP logits by output_logits_alpha * base / hidden_size; the learning rates of "
                 "encoder_attention, encoder_input_ffn and pooler by base / hidden_size.",
                 config::if_set(positive<double>()))
          .field("mup_base_filter_size", &O::mup_base_filter_size,
                 "muP: filter_size of the base model. The last FFN layer's initializer std scales by "
                 "sqrt(base / filter_size) / sqrt(2 * num_hidden_layers), its learning rate (encoder_output_ffn) by "
                 "base / filter_size.",
                 config::if_set(positive<double>()))
          .field("embeddings_scale", &O::embeddings_scale, "muP: multiplies the embeddings (before embed_ln_f).")
          .field("scale_qk_dot_by_d", &O::scale_qk_dot_by_d,
                 "Divide attention scores by the head size instead of its square root (null: under muP only).")
          .field("attention_logits_alpha", &O::attention_logits_alpha, "muP: multiplies the attention scores.")
          .field("output_logits_alpha", &O::output_logits_alpha, "muP: see mup_base_hidden_size.")
          .field("scale_output_logits_by_d", &O::scale_output_logits_by_d,
                 "muP: the logits scale by base / hidden_size (true) or by its square root (false).")
          .field("mlm_loss_weight", &O::mlm_loss_weight, "Multiplies the masked-LM loss (a sum over masked "
                                                          "tokens / batch size).")
          .field("label_smoothing", &O::label_smoothing, "Label smoothing of the masked-LM loss in training.",
                 config::in_range(0.0, 1.0, /*hi_open=*/true))
          .field("disable_nsp", &O::disable_nsp, "No next-sentence prediction: masked LM only (RoBERTa).")
          .field("num_classes", &O::num_classes, "Classes of the NSP head.", positive<int64_t>())
          .field("compute_eval_metrics", &O::compute_eval_metrics,
                 "Eval also reports accuracy_masked_lm, mlm_perplexity and (with NSP) accuracy_cls.")
          .ignored({"nonlinearity"}, "modelzoo's bert model replaces it by encoder_nonlinearity")
          .ignored({"embedding_dropout_rate"}, "modelzoo's bert model replaces it by dropout_rate")
          .ignored({"embedding_pad_token_id"}, "modelzoo's bert model replaces it by pad_token_id")
          .ignored({"add_pooling_layer"}, "modelzoo's bert model pools exactly when NSP is on")
          .hardware_only({"attention_kernel"}, "selects a Cerebras attention kernel; the math is the same")
          .hardware_only({"fold_rope_consts"}, "folds rotary tables into Cerebras constants; the math is the same")
          .validate([](const O& o, const auto& fail) {
            if (o.position_embedding_type == "alibi" || o.position_embedding_type == "relative")
              fail("position_embedding_type", "zoo's bert builds learned, fixed and rotary positions, not " +
                                                  o.position_embedding_type);
            if (o.mask_padding_in_positional_embed && o.position_embedding_type != "learned")
              fail("mask_padding_in_positional_embed", "applies to learned position embeddings only");
            if (o.pad_token_id >= o.vocab_size) fail("pad_token_id", "must be below vocab_size");
            DecoderLmShape shape{o.vocab_size, o.hidden_size, o.num_hidden_layers, o.num_heads, o.filter_size,
                                 o.max_position_embeddings, o.position_embedding_type,
                                 o.rotary_dim.value_or(o.hidden_size / o.num_heads / 4), o.attention_module,
                                 o.extra_attention_params.num_kv_groups, std::nullopt};
            check_decoder_lm_shape(shape, fail);
            if (o.mup_base_hidden_size.has_value() != o.mup_base_filter_size.has_value())
              fail(o.mup_base_hidden_size ? "mup_base_filter_size" : "mup_base_hidden_size",
                   "muP needs both mup_base_hidden_size and mup_base_filter_size");
            const InitializerSpec d = o.default_initializer.value_or(truncated_normal_spec(o.initializer_range));
            if (o.mup() && d.name != "normal" && d.name != "truncated_normal")
              fail("default_initializer", "muP scales normal and truncated_normal initializers only, not " + d.name);
          });
  return s;
}

namespace {

// The encoder's initializers as modelzoo's bert picks them: all from
// default_initializer, scaled by muP's width (and depth for output layers).
struct EncoderInitializers {
  InitializerSpec attention, attention_output, ffn, ffn_output;
};

EncoderInitializers encoder_initializers(const BertOptions& o) {
  const InitializerSpec d = o.default_initializer.value_or(truncated_normal_spec(o.initializer_range));
  EncoderInitializers i{d, d, d, d};
  const double depth = 1.0 / std::sqrt(2.0 * o.num_hidden_layers);
  if (o.mup_base_hidden_size) {
    const double width = std::sqrt(*o.mup_base_hidden_size / double(o.hidden_size));
    i.attention = i.ffn = scaled_initializer(d, width);
    i.attention_output = scaled_initializer(d, width * depth);
  }
  if (o.mup_base_filter_size)
    i.ffn_output = scaled_initializer(d, std::sqrt(*o.mup_base_filter_size / double(o.filter_size)) * depth);
  return i;
}

EncoderLayerOptions encoder_options(const BertOptions& o) {
  const EncoderInitializers init = encoder_initializers(o);
  EncoderLayerOptions e;
  AttentionOptions& a = e.attention;
  a.hidden_size = o.hidden_size;
  a.num_heads = o.num_heads;
  if (o.attention_module == "multiquery_attention") a.num_kv_groups = o.extra_attention_params.num_kv_groups;
  if (o.position_embedding_type == "rotary") {
    a.rotary.dim = o.rotary_dim.value_or(o.hidden_size / o.num_heads / 4);
    a.rotary.base = o.rope_theta;
  }
  a.use_projection_bias = o.use_projection_bias_in_attention;
  a.use_output_bias = o.use_ffn_bias_in_attention;
  a.dropout = o.attention_dropout_rate.value_or(o.dropout_rate);
  a.scale_by_sqrt_head_dim = o.attention_type == "scaled_dot_product";
  a.scale_by_head_dim = o.scale_qk_dot_by_d.value_or(o.mup());
  a.logit_multiplier = o.attention_logits_alpha;
  a.softmax_fp32 = o.attention_softmax_fp32;
  a.initializer = init.attention;
  a.output_initializer = init.attention_output;
  a.causal = false;
  e.ffn.input_size = o.hidden_size;
  e.ffn.filter_size = o.filter_size;
  e.ffn.nonlinearity = o.encoder_nonlinearity;
  e.ffn.use_bias = o.use_ffn_bias;
  e.ffn.dropout = o.dropout_rate;
  e.ffn.initializer = init.ffn;
  e.ffn.output_initializer = init.ffn_output;
  e.layer_norm_epsilon = o.layer_norm_epsilon;
  e.dropout = o.dropout_rate;
  e.norm_first = o.norm_first;
  e.final_norm = o.use_final_layer_norm;
  return e;
}

// A container module under which children register by modelzoo's names.
std::shared_ptr<torch::nn::Module> node() { return std::make_shared<torch::nn::Module>(); }

}  // namespace

BertModel::BertModel(const BertOptions& o, const torch::TensorOptions& p) : options_(o) {
  const InitializerSpec d = o.default_initializer.value_or(truncated_normal_spec(o.initializer_range));
  EmbeddingOptions e;
  e.vocab_size = o.vocab_size;
  e.hidden_size = o.hidden_size;
  e.max_position_embeddings = o.max_position_embeddings;
  e.position_embedding_type = o.position_embedding_type;
  e.num_heads = o.num_heads;
  e.initializer = o.embeddings_initializer.value_or(d);
  e.position_initializer = o.position_embeddings_initializer.value_or(d);
  e.segment_initializer = o.segment_embeddings_initializer.value_or(d);
  e.num_segments = o.segments();
  e.pad_token_id = o.pad_token_id;
  e.mask_padding_positions = o.mask_padding_in_positional_embed;

  bert_encoder = register_module("bert_encoder", node());
  embedding_layer = bert_encoder->register_module("embedding_layer", EmbeddingLayer(e, p));
  if (o.embedding_layer_norm)
    embed_ln_f = bert_encoder->register_module("embed_ln_f", LayerNorm(o.hidden_size, o.layer_norm_epsilon, p));
  transformer_encoder = bert_encoder->register_module(
      "transformer_encoder", TransformerEncoder(o.num_hidden_layers, encoder_options(o), p));
  if (!o.disable_nsp) {
    pooler = Dense(o.hidden_size, o.hidden_size, o.use_ffn_bias, p);
    bert_encoder->register_module("pooler", node())->register_module("pooler", one_layer_network(pooler.ptr()));
    bert_cls_head = register_module("bert_cls_head", node());
    nsp_classifier = Dense(o.hidden_size, o.num_classes, o.use_ffn_bias, p);
    bert_cls_head->register_module("classifier", one_layer_network(nsp_classifier.ptr()));
  }
  bert_mlm_head = register_module("bert_mlm_head", node());
  auto transform = bert_mlm_head->register_module("mlm_transform", node());
  mlm_transform = Dense(o.hidden_size, o.hidden_size, o.use_ffn_bias_in_mlm, p);
  transform->register_module("ffn", one_layer_network(mlm_transform.ptr()));
  mlm_ln = transform->register_module("ln", LayerNorm(o.hidden_size, o.layer_norm_epsilon, p));
  mlm_classifier =
      OutputHead(o.hidden_size, o.vocab_size, !o.share_embedding_weights, o.use_output_bias_in_mlm, p);
  bert_mlm_head->register_module("classifier", one_layer_network(mlm_classifier.ptr()));
}

void BertModel::reset_parameters() {
  embedding_layer->reset_parameters();
  if (embed_ln_f) embed_ln_f->reset_parameters();
  transformer_encoder->reset_parameters();
  // The heads start from truncated_normal(initializer_range) whatever
  // default_initializer says; the pooler from the attention's initializer.
  const InitializerSpec heads = truncated_normal_spec(options_.initializer_range);
  if (pooler) pooler->reset_parameters(encoder_initializers(options_).attention);
  if (nsp_classifier) nsp_classifier->reset_parameters(heads);
  mlm_transform->reset_parameters(heads);
  mlm_ln->reset_parameters();
  mlm_classifier->reset_parameters(heads);
}

std::optional<double> BertModel::logits_scale() const {
  if (!options_.mup_base_hidden_size) return std::nullopt;
  const double ratio = *options_.mup_base_hidden_size / double(options_.hidden_size);
  return options_.output_logits_alpha * (options_.scale_output_logits_by_d ? ratio : std::sqrt(ratio));
}

BertModel::Outputs BertModel::run(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                                  const torch::Tensor& token_type_ids, const torch::Tensor& masked_lm_positions) {
  const BertOptions& o = options_;
  torch::Tensor h = embedding_layer->forward(input_ids, 0, token_type_ids);
  if (o.embeddings_scale != 1.0) h = h * o.embeddings_scale;
  if (embed_ln_f) h = embed_ln_f(h);
  if (o.dropout_rate > 0) h = torch::dropout(h, o.dropout_rate, is_training());
  const torch::Tensor key_mask = attention_mask.defined() ? attention_mask != 0 : torch::Tensor();
  Outputs out;
  out.hidden = transformer_encoder->forward(h, key_mask);
  torch::Tensor at = out.hidden;
  if (masked_lm_positions.defined())  // (B, P, C): the states at the masked positions only
    at = out.hidden.gather(1, masked_lm_positions.to(torch::kLong).unsqueeze(-1).expand({-1, -1, o.hidden_size}));
  torch::Tensor m = mlm_ln(activation(o.mlm_nonlinearity.value_or(o.encoder_nonlinearity), mlm_transform(at)));
  out.mlm_logits = mlm_classifier(m, embedding_layer->word_embeddings->weight);  // (B, P, >= V)
  const std::optional<double> scale = logits_scale();
  if (scale) out.mlm_logits = out.mlm_logits * *scale;
  if (!o.disable_nsp) {
    const torch::Tensor cls = out.hidden.select(1, 0);
    const torch::Tensor pooled = activation(o.pooler_nonlinearity.value_or(o.encoder_nonlinearity), pooler(cls));
    out.nsp_logits = nsp_classifier(pooled);
    if (scale) out.nsp_logits = out.nsp_logits * *scale;
  }
  return out;
}

ModelOutput BertModel::forward(const Features& batch, bool with_metrics) {
  const BertOptions& o = options_;
  auto optional = [&](const char* name) { return batch.count(name) ? batch.at(name) : torch::Tensor(); };
  const torch::Tensor& labels = batch.at("labels");
  // Labels of every position (modelzoo's gather_mlm_labels: false) need no gathering.
  const bool gathered = labels.size(1) != batch.at("input_ids").size(1);
  if (gathered && !batch.count("masked_lm_positions"))
    throw std::invalid_argument("bert: labels have " + std::to_string(labels.size(1)) + " columns, not one per token (" +
                                std::to_string(batch.at("input_ids").size(1)) +
                                "), and the batch has no masked_lm_positions saying where they belong");
  Outputs out = run(batch.at("input_ids"), optional("attention_mask"), optional("token_type_ids"),
                    gathered ? batch.at("masked_lm_positions") : torch::Tensor());
  const int64_t B = labels.size(0), V = o.vocab_size;
  const torch::Tensor logits = out.mlm_logits.reshape({-1, out.mlm_logits.size(-1)});
  const torch::Tensor flat_labels = labels.reshape({-1}).to(torch::kLong);
  const torch::Tensor weights = batch.at("masked_lm_mask").reshape({-1}).to(torch::kFloat);
  torch::Tensor per_token = token_cross_entropy(logits, flat_labels, V);
  const torch::Tensor mlm_sum = (per_token * weights).sum();
  if (o.label_smoothing > 0 && is_training()) {  // (1 - s) CE + s * mean over classes of -log p
    const torch::Tensor uniform = -torch::log_softmax(logits.narrow(1, 0, V).to(torch::kFloat), -1).mean(-1);
    per_token = (1 - o.label_smoothing) * per_token + o.label_smoothing * uniform;
  }
  ModelOutput result;
  result.loss = (per_token * weights).sum() / double(B) * o.mlm_loss_weight;
  torch::Tensor nsp_labels;
  if (!o.disable_nsp) {
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

// modelzoo's named groups for optimizer.adjust_learning_rate, with muP's scales.
std::map<std::string, LrAdjustmentGroup> BertModel::lr_adjustment_groups() const {
  const BertOptions& o = options_;
  const double hidden = o.mup_base_hidden_size ? *o.mup_base_hidden_size / double(o.hidden_size) : 1.0;
  const double filter = o.mup_base_filter_size ? *o.mup_base_filter_size / double(o.filter_size) : 1.0;
  return {{"embedding", {{"*embedding*weight"}}},
          {"encoder_attention", {{"*transformer_encoder*attn*dense*weight"}, hidden}},
          {"encoder_input_ffn", {{"*transformer_encoder*ffn.ffn.[!1]*weight"}, hidden}},
          {"encoder_output_ffn", {{"*transformer_encoder*ffn.ffn.[1]*weight"}, filter}},
          {"pooler", {{"*pooler*weight"}, hidden}}};
}

// The encoder's matmuls and attention (Kaplan et al., 2020); the masked-LM
// head runs on the ~15% masked positions only and is left out.
double BertModel::forward_flops_per_token() const {
  const double C = options_.hidden_size, F = options_.filter_size, L = options_.num_hidden_layers;
  const double kv = options_.attention_module == "multiquery_attention"
                        ? C * options_.extra_attention_params.num_kv_groups / options_.num_heads
                        : C;
  return 2 * L * (2 * C * C + 2 * C * kv + 2 * C * F) + 2 * L * options_.max_position_embeddings * C;
}

std::vector<std::string> BertSpec::consumes() const {
  std::vector<std::string> c = {"input_ids", "attention_mask", "labels", "masked_lm_mask"};
  if (!options().disable_nsp) c.insert(c.end(), {"token_type_ids", "next_sentence_label"});
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
  f.hf["bert"] = bert_hf_adapter();
  return f;
}

}  // namespace zoo::models
