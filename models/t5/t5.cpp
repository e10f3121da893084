// Implementation of models/t5/t5.h.
#include "models/t5/t5.h"

#include <cmath>
#include <limits>

#include "models/common/ffn.h"
#include "models/common/lm_loss.h"
#include "models/t5/hf_adapter.h"

namespace zoo::models {
namespace {

InitializerSpec normal_spec(double std) {
  InitializerSpec s;
  s.name = "normal";
  s.std = std;
  return s;
}

InitializerSpec variance_scaling_spec(double scale) {  // fan_avg, uniform: the Transformer's scaled Xavier
  InitializerSpec s;
  s.name = "variance_scaling";
  s.scale = scale;
  s.mode = "fan_avg";
  s.distribution = "uniform";
  return s;
}

InitializerSpec xavier_uniform_spec() {
  InitializerSpec s;
  s.name = "xavier_uniform";
  return s;
}

// modelzoo's, and zoo's geglu_tanh (Hugging Face's gated-gelu: T5 v1.1, FLAN-T5).
const std::vector<std::string> kT5Nonlinearities = {"relu", "gelu", "reglu", "geglu", "swiglu", "geglu_tanh"};

// The width multiplier d_model / mup_base_d_model (1 without muP).
double width_mult(const T5Options& o) { return o.mup() ? double(o.d_model) / double(*o.mup_base_d_model) : 1.0; }

// One stack's layers (encoder: is_decoder false) as modelzoo's
// T5ForConditionalGeneration configures them.
EncoderLayerOptions stack_options(const T5Options& o, bool is_decoder) {
  const int64_t layers = is_decoder ? o.decoder_layers() : o.encoder_num_hidden_layers;
  const int64_t inner = o.d_kv * o.num_heads;
  const double f = o.initializer_factor;
  EncoderLayerOptions s;
  AttentionOptions& a = s.attention;
  a.hidden_size = o.d_model;
  a.num_heads = o.num_heads;
  a.inner_dim = inner;
  a.use_projection_bias = o.use_projection_bias_in_attention;
  a.use_output_bias = false;
  a.dropout = o.dropout_rate;
  a.softmax_fp32 = o.attention_softmax_fp32;
  // T5 leaves its scores unscaled (the scale is folded into the query's initializer).
  a.scale_by_sqrt_head_dim = o.use_transformer_initialization || o.mup_base_d_model || o.mup_base_d_ff;
  a.scale_by_head_dim = (is_decoder ? o.scale_decoder_qk_dot_by_d : o.scale_encoder_qk_dot_by_d).value_or(false);
  a.logit_multiplier = is_decoder ? o.decoder_attention_logits_alpha : o.encoder_attention_logits_alpha;
  FeedForwardOptions& ffn = s.ffn;
  ffn.input_size = o.d_model;
  ffn.filter_size = o.d_ff;
  ffn.nonlinearity = is_decoder ? o.decoder_nonlinearity : o.encoder_nonlinearity;
  // modelzoo drops the FFN bias of any gelu stack ("Overriding use_ffn_bias to false").
  ffn.use_bias = o.use_ffn_bias && o.encoder_nonlinearity != "gelu" && o.decoder_nonlinearity != "gelu";
  ffn.dropout = o.relu_dropout_rate.value_or(o.dropout_rate);
  if (o.use_transformer_initialization) {
    a.q_initializer = variance_scaling_spec(1.0 / (double(o.d_kv) * 9.0));
    a.initializer = variance_scaling_spec(1.0 / 9.0);
    a.output_initializer = a.initializer;
    ffn.initializer = ffn.output_initializer = xavier_uniform_spec();
  } else {
    a.q_initializer = normal_spec(f * std::pow(double(o.d_model * o.d_kv), -0.5));
    a.initializer = normal_spec(f * std::pow(double(o.d_model), -0.5));
    a.output_initializer = a.initializer;
    ffn.initializer = normal_spec(f * std::pow(double(o.d_model), -0.5));
    ffn.output_initializer = normal_spec(f * std::pow(double(o.d_ff), -0.5));
  }
  // muP. modelzoo scales the output layers by depth_scale = 2 L; zoo, as its
  // gpt2 and bert families and the muP paper, by (2 L)^-1/2 (README).
  const double depth = std::pow(2.0 * double(layers), -0.5);
  if (o.mup()) {
    if (o.mup_base_d_kv) {
      a.output_initializer.std *= std::sqrt(double(o.d_model) / double(inner)) * depth;
    } else {
      // q, k, v times w^-1/2 and the output projection times w^1/2 leave
      // the same function and gradients as the scores times 1 / w.
      a.logit_multiplier /= width_mult(o);
      a.output_initializer.std *= depth;
    }
  }
  if (o.mup_base_d_ff && !o.use_transformer_initialization) ffn.output_initializer.std *= depth;
  s.layer_norm_epsilon = o.layer_norm_epsilon;
  s.rms_norm = o.norm_type == "rmsnorm";
  s.dropout = o.dropout_rate;
  s.norm_first = o.use_pre_encoder_decoder_layer_norm;
  s.final_norm = true;
  s.recompute = o.activation_checkpointing;
  return s;
}

EmbeddingOptions embedding_options(const T5Options& o, int64_t vocab, const std::optional<int64_t>& positions) {
  EmbeddingOptions e;
  e.vocab_size = vocab;
  e.hidden_size = o.d_model;
  const std::string type = o.position_embedding_type.value_or("none");
  e.position_embedding_type = type == "learned_absolute" ? "learned" : type;
  // Relative (or no) positions set no limit on the length.
  e.max_position_embeddings =
      (type == "fixed" || type == "learned_absolute") ? positions.value_or(0) : std::numeric_limits<int32_t>::max();
  if (o.use_transformer_initialization) {
    e.initializer.name = "truncated_normal";
    e.initializer.std = 1.0;
    e.initializer.a = -2.0;
    e.initializer.b = 2.0;
  } else {
    e.initializer = normal_spec(o.initializer_factor);
  }
  if (o.mup()) e.initializer.std /= std::sqrt(double(o.d_model));
  InitializerSpec learned;  // modelzoo's EmbeddingLayer default for learned positions
  learned.name = "uniform";
  learned.a = -0.05;
  learned.b = 0.05;
  e.position_initializer = learned;
  return e;
}

}  // namespace

const config::Schema<T5Options>& T5Options::schema() {
  using O = T5Options;
  auto nonlinearity = config::one_of(kT5Nonlinearities);
  static const config::Schema<O> s =
      config::Schema<O>("model (t5, transformer)",
                        "T5 and the encoder-decoder Transformer, as modelzoo's T5ForConditionalGeneration.")
          .field("src_vocab_size", &O::src_vocab_size, "Source vocabulary (before extra_ids).",
                 config::positive<int64_t>())
          .field("tgt_vocab_size", &O::tgt_vocab_size, "Target vocabulary (before extra_ids); null: src_vocab_size.",
                 config::if_set(config::positive<int64_t>()))
          .field("extra_ids", &O::extra_ids, "Sentinel ids added to the end of each vocabulary.",
                 config::non_negative<int64_t>())
          .field("d_model", &O::d_model, "Hidden size.", config::positive<int64_t>())
          .field("d_kv", &O::d_kv, "Size of each attention head's queries, keys and values.",
                 config::positive<int64_t>())
          .field("d_ff", &O::d_ff, "Hidden units of the feed-forward networks.", config::positive<int64_t>())
          .field("encoder_num_hidden_layers", &O::encoder_num_hidden_layers, "Encoder layers.",
                 config::positive<int64_t>())
          .field("decoder_num_hidden_layers", &O::decoder_num_hidden_layers,
                 "Decoder layers (null: encoder_num_hidden_layers).", config::if_set(config::positive<int64_t>()))
          .field("num_heads", &O::num_heads, "Attention heads.", config::positive<int64_t>())
          .field("relative_attention_num_buckets", &O::relative_attention_num_buckets,
                 "Buckets of the relative position bias.", config::positive<int64_t>())
          .field("norm_type", &O::norm_type, "rmsnorm (T5's) or layernorm.", config::one_of({"rmsnorm", "layernorm"}))
          .field("dropout_rate", &O::dropout_rate, "Dropout of embeddings, attention and residual branches.",
                 config::in_range(0.0, 1.0, true))
          .field("relu_dropout_rate", &O::relu_dropout_rate, "Dropout after the FFN's activation (null: dropout_rate).",
                 config::if_set(config::in_range(0.0, 1.0, true)))
          .field("layer_norm_epsilon", &O::layer_norm_epsilon, "Epsilon of the norms.", config::positive<double>())
          .field("initializer_factor", &O::initializer_factor, "Multiplies T5's initializer spreads.")
          .field("encoder_nonlinearity", &O::encoder_nonlinearity, "Activation of the encoder's FFN.", nonlinearity)
          .field("decoder_nonlinearity", &O::decoder_nonlinearity,
                 "Activation of the decoder's FFN (modelzoo uses encoder_nonlinearity there; docs/modelzoo.md).",
                 nonlinearity)
          .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention,
                 "Bias in the query, key and value projections.")
          .field("attention_softmax_fp32", &O::attention_softmax_fp32, "Softmax in float32 under reduced precision.")
          .field("position_embedding_type", &O::position_embedding_type,
                 "relative (T5's learned bias per distance bucket), fixed (sinusoids), learned_absolute, or null.",
                 config::if_set(config::one_of({"relative", "fixed", "learned_absolute"})))
          .field("src_max_position_embeddings", &O::src_max_position_embeddings,
                 "Source positions of fixed/learned_absolute embeddings (null: train_input.src_max_sequence_length).",
                 config::if_set(config::positive<int64_t>()))
          .field("tgt_max_position_embeddings", &O::tgt_max_position_embeddings,
                 "Target positions (null: train_input.tgt_max_sequence_length).",
                 config::if_set(config::positive<int64_t>()))
          .field("use_dropout_outside_residual_path", &O::use_dropout_outside_residual_path,
                 "Dropout on the encoder's and the decoder's outputs (T5: true).")
          .field("share_encoder_decoder_embedding", &O::share_encoder_decoder_embedding,
                 "The decoder reads the encoder's word embeddings.")
          .field("share_embedding_weights", &O::share_embedding_weights,
                 "Tie lm_head to the decoder's word embeddings (its input then scaled by d_model^-1/2).")
          .field("use_pre_encoder_decoder_dropout", &O::use_pre_encoder_decoder_dropout,
                 "A further dropout on the embeddings (the Transformer's).")
          .field("use_pre_encoder_decoder_layer_norm", &O::use_pre_encoder_decoder_layer_norm,
                 "Pre-norm layers (T5); false: post-norm (the Transformer).")
          .field("use_ffn_bias", &O::use_ffn_bias, "Biases in the FFN (ignored with gelu, as modelzoo).")
          .field("label_smoothing", &O::label_smoothing, "Label smoothing of the loss in training.",
                 config::in_range(0.0, 1.0, true))
          .field("use_transformer_initialization", &O::use_transformer_initialization,
                 "The Transformer's scaled Xavier initialization and scaled dot-product scores.")
          .field("lm_loss_weight", &O::lm_loss_weight, "Multiplies the loss of mlm_loss_scaling batch_size.")
          .field("mlm_loss_scaling", &O::mlm_loss_scaling,
                 "num_masked: loss / target tokens; precomputed_num_masked: the batch's loss_weight (in training "
                 "without one, loss / target tokens); batch_size: loss / batch size * lm_loss_weight.",
                 config::one_of({"num_masked", "precomputed_num_masked", "batch_size"}))
          .field("compute_eval_metrics", &O::compute_eval_metrics, "Eval also reports accuracy_lm and perplexity_lm.")
          .field("activation_checkpointing", &O::activation_checkpointing,
                 "zoo's own: recompute each encoder and decoder layer in the backward pass (less activation memory "
                 "for about a third more compute).")
          .field("mup_base_d_model", &O::mup_base_d_model, "muP: d_model of the tuned base model.",
                 config::if_set(config::positive<int64_t>()))
          .field("mup_base_d_ff", &O::mup_base_d_ff, "muP: d_ff of the tuned base model.",
                 config::if_set(config::positive<int64_t>()))
          .field("mup_base_d_kv", &O::mup_base_d_kv, "muP: d_kv of the tuned base model (q, k, v then hidden weights).",
                 config::if_set(config::positive<int64_t>()))
          .field("embeddings_alpha", &O::embeddings_alpha, "Multiplies the embeddings (muP: also by d_model^1/2).")
          .field("encoder_attention_logits_alpha", &O::encoder_attention_logits_alpha,
                 "Multiplies the encoder's attention scores.")
          .field("decoder_attention_logits_alpha", &O::decoder_attention_logits_alpha,
                 "Multiplies the decoder's attention scores.")
          .field("scale_encoder_qk_dot_by_d", &O::scale_encoder_qk_dot_by_d,
                 "Scaled scores divide by d_kv instead of its square root (encoder).")
          .field("scale_decoder_qk_dot_by_d", &O::scale_decoder_qk_dot_by_d, "The same for the decoder.")
          .field("scale_output_logits_by_d", &O::scale_output_logits_by_d,
                 "muP: logits times output_logits_alpha / w (true) or / w^1/2 (false), w = d_model / mup_base_d_model.")
          .field("output_logits_alpha", &O::output_logits_alpha, "muP: the logits' multiplier (null: 1).")
          .ignored({"attention_kernel"}, "a Cerebras kernel choice")
          .validate([](const O& o, const auto& fail) {
            if (o.src_vocab_size <= 0) fail("src_vocab_size", "required: the source vocabulary size");
            if (o.share_encoder_decoder_embedding && o.tgt_vocab_size && *o.tgt_vocab_size != o.src_vocab_size)
              fail("share_encoder_decoder_embedding",
                   "needs tgt_vocab_size equal to src_vocab_size (" + std::to_string(o.src_vocab_size) + ")");
            const std::string type = o.position_embedding_type.value_or("");
            if (type == "fixed" || type == "learned_absolute") {
              if (!o.src_max_position_embeddings)
                fail("src_max_position_embeddings",
                     "required with " + type + " position embeddings (or train_input.src_max_sequence_length)");
              if (!o.tgt_max_position_embeddings)
                fail("tgt_max_position_embeddings",
                     "required with " + type + " position embeddings (or train_input.tgt_max_sequence_length)");
            }
            if (o.mup_base_d_model.has_value() != o.mup_base_d_ff.has_value() ||
                (o.mup_base_d_kv && !o.mup_base_d_model))
              fail(o.mup_base_d_model ? "mup_base_d_ff" : "mup_base_d_model",
                   "muP needs both mup_base_d_model and mup_base_d_ff (mup_base_d_kv is optional)");
          });
  return s;
}

T5Model::T5Model(const T5Options& o, const torch::TensorOptions& p) : options_(o) {
  encoder_embeddings = register_module(
      "encoder_embeddings", EmbeddingLayer(embedding_options(o, o.source_vocab(), o.src_max_position_embeddings), p));
  EmbeddingOptions target = embedding_options(o, o.target_vocab(), o.tgt_max_position_embeddings);
  if (o.share_encoder_decoder_embedding) target.vocab_size = 0;  // reads the encoder's table
  decoder_embeddings = register_module("decoder_embeddings", EmbeddingLayer(target, p));
  if (o.share_encoder_decoder_embedding) decoder_embeddings->share_word_embeddings(encoder_embeddings->word_embeddings);
  if (o.position_embedding_type.value_or("") == "relative") {  // modelzoo keeps them in the embedding layers
    const int64_t buckets = o.relative_attention_num_buckets;
    encoder_relative_bias = encoder_embeddings->register_module(
        "position_embed_helper", RelativePositionBias(o.num_heads, buckets, /*bidirectional=*/true, p));
    decoder_relative_bias = decoder_embeddings->register_module(
        "position_embed_helper", RelativePositionBias(o.num_heads, buckets, /*bidirectional=*/false, p));
  }
  encoder = register_module("encoder", TransformerEncoder(o.encoder_num_hidden_layers, stack_options(o, false), p));
  decoder = register_module("decoder", CrossDecoder(o.decoder_layers(), stack_options(o, true), p));
  lm_head = register_module("lm_head", OutputHead(o.d_model, o.target_vocab(), !o.share_embedding_weights, false, p));
}

void T5Model::reset_parameters() {
  encoder_embeddings->reset_parameters();
  decoder_embeddings->reset_parameters();
  InitializerSpec xavier = xavier_uniform_spec();  // modelzoo's RelativePositionEmbeddingLayer default
  if (encoder_relative_bias) encoder_relative_bias->reset_parameters(xavier);
  if (decoder_relative_bias) decoder_relative_bias->reset_parameters(xavier);
  encoder->reset_parameters();
  decoder->reset_parameters();
  const double std = options_.initializer_factor / (options_.mup() ? std::sqrt(double(options_.d_model)) : 1.0);
  if (!options_.share_embedding_weights) lm_head->reset_parameters(normal_spec(std));
}

torch::Tensor T5Model::embed(EmbeddingLayer& embeddings, const torch::Tensor& ids) {
  const T5Options& o = options_;
  torch::Tensor h = embeddings(ids);
  const double scale = o.embeddings_alpha * (o.mup() ? std::sqrt(double(o.d_model)) : 1.0);
  if (scale != 1.0) h = h * scale;
  auto drop = [&](const torch::Tensor& t) { return torch::dropout(t, o.dropout_rate, is_training()); };
  if (o.use_pre_encoder_decoder_dropout) h = drop(h);  // the Transformer's, on top of the one below
  return drop(h);
}

torch::Tensor T5Model::logits(const torch::Tensor& input_ids, const torch::Tensor& attention_mask,
                              const torch::Tensor& decoder_input_ids) {
  const T5Options& o = options_;
  auto drop_outside = [&](const torch::Tensor& t) {
    return o.use_dropout_outside_residual_path ? torch::dropout(t, o.dropout_rate, is_training()) : t;
  };
  const torch::Tensor key_mask = attention_mask.defined() ? attention_mask.to(torch::kBool) : torch::Tensor();
  const int64_t S = input_ids.size(1), T = decoder_input_ids.size(1);
  torch::Tensor source = embed(encoder_embeddings, input_ids);
  const torch::Tensor encoder_bias = encoder_relative_bias ? encoder_relative_bias(S, S) : torch::Tensor();
  const torch::Tensor memory = drop_outside(encoder->forward(source, key_mask, encoder_bias));
  torch::Tensor target = embed(decoder_embeddings, decoder_input_ids);
  const torch::Tensor decoder_bias = decoder_relative_bias ? decoder_relative_bias(T, T) : torch::Tensor();
  torch::Tensor h = drop_outside(decoder->forward(target, memory, key_mask, decoder_bias));
  std::optional<double> output_scale;
  if (o.mup()) {
    const double w = width_mult(o);
    output_scale = o.output_logits_alpha.value_or(1.0) / (o.scale_output_logits_by_d ? w : std::sqrt(w));
  }
  if (o.share_embedding_weights && !output_scale) h = h * std::pow(double(o.d_model), -0.5);
  torch::Tensor out = lm_head(h, decoder_embeddings->word_embeddings->weight);
  return output_scale ? out * *output_scale : out;
}

ModelOutput T5Model::forward(const Features& batch, bool with_metrics) {
  const T5Options& o = options_;
  const torch::Tensor out = logits(batch.at("input_ids"), batch.at("attention_mask"), batch.at("decoder_input_ids"));
  const torch::Tensor labels = batch.at("labels").reshape({-1}).to(torch::kLong);
  const int64_t B = batch.at("labels").size(0), V = o.target_vocab();
  const torch::Tensor flat = out.reshape({-1, out.size(-1)});
  torch::Tensor mask = batch.at("decoder_attention_mask").to(torch::kFloat);
  torch::Tensor per_token = token_cross_entropy(flat, labels, V, PaddingColumns::neg_inf);
  const torch::Tensor cross_entropy = (per_token * mask.reshape({-1})).sum();
  if (o.label_smoothing > 0 && is_training()) per_token = smooth_cross_entropy(per_token, flat, V, o.label_smoothing);
  std::string scaling = o.mlm_loss_scaling;
  if (scaling == "precomputed_num_masked") {
    if (const torch::Tensor weight = optional_feature(batch, "loss_weight"); weight.defined()) {
      mask = mask * weight.to(torch::kFloat).reshape({B, -1});
    } else if (is_training()) {  // what modelzoo's dynamic_loss_weight (on in training) computes
      mask = mask * (double(B) / mask.sum().clamp_min(1.0));
    } else {
      scaling = "batch_size";  // modelzoo's fallback in eval
    }
  }
  const torch::Tensor weighted = (per_token * mask.reshape({-1})).sum();
  ModelOutput result;
  if (scaling == "num_masked") result.loss = weighted / mask.sum().clamp_min(1.0);
  else if (scaling == "precomputed_num_masked") result.loss = weighted / double(B);
  else result.loss = weighted / double(B) * o.lm_loss_weight;
  if (with_metrics && o.compute_eval_metrics) {
    torch::NoGradGuard no_grad;
    const torch::Tensor targets = batch.at("decoder_attention_mask").reshape({-1}).to(torch::kFloat);
    const torch::Tensor correct = (flat.narrow(1, 0, V).argmax(-1) == labels).to(torch::kFloat) * targets;
    result.metrics["accuracy_lm"] = {correct.sum(), targets.sum(), MetricTerm::Reduce::mean};
    result.metrics["perplexity_lm"] = {cross_entropy.detach(), targets.sum(), MetricTerm::Reduce::exp_mean};
  }
  return result;
}

double T5Model::forward_flops_per_token() const {
  // 2 FLOPs per weight a token passes through (source tokens the encoder's,
  // target tokens the decoder's and the head's), counted per target token
  // with as many source tokens; attention scores excluded.
  double weights = 0;
  for (const auto& p : encoder->parameters()) weights += double(p.numel());
  for (const auto& p : decoder->parameters()) weights += double(p.numel());
  return 2.0 * (weights + double(options_.d_model) * double(options_.target_vocab()));
}

std::map<std::string, LrAdjustmentGroup> T5Model::lr_adjustment_groups() const {
  const T5Options& o = options_;
  const double w = width_mult(o);
  const double model_scale = o.mup() ? 1.0 / std::sqrt(w) : 1.0, input_ffn = o.mup() ? 1.0 / w : 1.0;
  double qkv = model_scale, output = model_scale;
  if (o.mup() && o.mup_base_d_kv) qkv = 1.0 / w, output = double(*o.mup_base_d_kv) / double(o.d_kv);
  const double output_ffn =
      o.mup_base_d_ff && !o.use_transformer_initialization ? double(*o.mup_base_d_ff) / double(o.d_ff) : 1.0;
  std::map<std::string, LrAdjustmentGroup> groups = {{"embedding", {{"*embedding*weight"}, model_scale}},
                                                     {"lm_head", {{"*lm_head*weight"}, model_scale}}};
  for (const std::string stack : {"encoder", "decoder"}) {
    const std::string at = "*" + stack + "*";
    groups[stack + "_qkv_projection"] = {
        {at + "attn.proj_q*dense*weight", at + "attn.proj_k*dense*weight", at + "attn.proj_v*dense*weight"}, qkv};
    groups[stack + "_output_projection"] = {{at + "attn.proj_output*dense*weight"}, output};
    groups[stack + "_input_ffn"] = {{at + "ffn.ffn.[!1]*weight"}, input_ffn};
    groups[stack + "_output_ffn"] = {{at + "ffn.ffn.[1]*weight"}, output_ffn};
  }
  return groups;
}

ModelFamily t5_family() {
  ModelFamily f = make_model_family<T5Options, T5Model>(
      "t5", {"transformer", "T5ForConditionalGeneration"},
      "T5 and the encoder-decoder Transformer: an encoder, a decoder attending to it and an LM head, as modelzoo's "
      "T5ForConditionalGeneration builds them (its transformer model is the same with other keys).",
      {"input_ids", "attention_mask", "decoder_input_ids", "decoder_attention_mask", "labels"});
  f.required_keys = {"d_kv"};
  f.model_keys_from_input = {{"src_max_position_embeddings", "src_max_sequence_length"},
                             {"tgt_max_position_embeddings", "tgt_max_sequence_length"}};
  f.hf["t5"] = t5_hf_adapter();
  return f;
}

}  // namespace zoo::models
