// Implementation of models/gpt2/gpt2.h.
#include "models/gpt2/gpt2.h"

#include <cmath>

#include "models/gpt2/hf_adapter.h"
#include "models/hf/block_keys.h"
#include "models/hf/headless.h"

namespace zoo::models {

const config::Schema<ExtraFfnParams>& ExtraFfnParams::schema() {
  using E = ExtraFfnParams;
  static const config::Schema<E> s =
      config::Schema<E>("extra_ffn_params", "Extra settings of each layer's FFN.")
          .field("static_dual_expert", &E::static_dual_expert,
                 "Multimodal decoders: image and text tokens through separate FFN weights (false only: not in zoo).")
          .validate([](const E& e, const auto& fail) {
            if (e.static_dual_expert)
              fail("static_dual_expert",
                   "modelzoo's dual-expert FFN (separate weights for image tokens) is not in zoo");
          });
  return s;
}

const config::Schema<Gpt2Options>& Gpt2Options::schema() {
  using O = Gpt2Options;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  static const config::Schema<O> s =
      add_decoder_lm_fields(config::Schema<O>("model (gpt2)", "GPT-2 / GPT-3 decoder-only transformer."))
          .field("attention_sliding_window_length", &O::attention_sliding_window_length,
                 "Each token attends to at most this many most recent tokens (null: all).",
                 config::if_set(config::positive<int64_t>()))
          .field("attention_sink_tokens", &O::attention_sink_tokens,
                 "With attention_sliding_window_length: the first this many tokens stay visible to every query "
                 "(StreamingLLM's attention sinks).",
                 config::if_set(config::positive<int64_t>()))
          .field("sliding_window_every_other_decoder_layer", &O::sliding_window_every_other_decoder_layer,
                 "Apply attention_sliding_window_length on every other layer only (Gemma 2).")
          .field("sliding_window_every_other_decoder_layer_pattern",
                 &O::sliding_window_every_other_decoder_layer_pattern,
                 "full_attention_first: layers 1, 3, ... use the window; sliding_window_first: layers 0, 2, ...",
                 config::one_of({"full_attention_first", "sliding_window_first"}))
          .field("attention_logit_softcapping", &O::attention_logit_softcapping,
                 "Attention scores become cap * tanh(scores / cap) before the mask (Gemma 2: 50).",
                 config::if_set(config::positive<double>()))
          .field("final_logit_softcapping", &O::final_logit_softcapping,
                 "Logits become cap * tanh(logits / cap) (Gemma 2: 30).", config::if_set(config::positive<double>()))
          .field("attention_qk_norm_layer", &O::attention_qk_norm_layer,
                 "Normalize each head's queries and keys (q_norm, k_norm) before the rotary: rmsnorm or layernorm "
                 "(Qwen3; null: none). modelzoo 2.10 builds these norms and never applies them; zoo applies them.",
                 config::if_set(config::one_of({"rmsnorm", "layernorm"})))
          .field("attention_qk_norm_eps", &O::attention_qk_norm_eps, "Epsilon of attention_qk_norm_layer.",
                 config::positive<double>())
          .field("norm_first_sandwich", &O::norm_first_sandwich,
                 "Also normalize the attention and FFN outputs before the residual adds (norm1_post, norm3_post: "
                 "Gemma 2).")
          .field("alibi_trainable_slopes", &O::alibi_trainable_slopes,
                 "position_embedding_type alibi: train the per-head slopes (from the embedding initializer) "
                 "instead of fixing them to the paper's.")
          .field("embedding_layer_norm", &O::embedding_layer_norm,
                 "A norm (embedding_ln_f) on the embeddings before dropout (BLOOM).")
          .field("output_logits_scale", &O::output_logits_scale, "muP: multiplies the logits (null: 1).")
          .field("attention_inner_dim", &O::attention_inner_dim,
                 "Width of the q/k/v projections, num_heads x head size (Mistral NeMo: 4096 at hidden_size 5120; "
                 "null: hidden_size).",
                 config::if_set(decoder_limits::size(decoder_limits::kMaxWidth)))
          .field("scale_qk_dot_by_layer_idx", &O::scale_qk_dot_by_layer_idx,
                 "Also divide layer i's attention scores by i + 1 (counting from 0).")
          .renamed("scale_by_layer_index", "scale_qk_dot_by_layer_idx")
          .ignored({"alibi_implementation"}, "embedding and expand compute the same ALiBi bias")
          .field("dropout_rate", &O::dropout_rate, "Dropout on residual branches and in the FFN.", dropout)
          .field("embedding_dropout_rate", &O::embedding_dropout_rate,
                 "Dropout after the embeddings (null: dropout_rate).", config::if_set(dropout))
          .renamed("embd_pdrop", "embedding_dropout_rate")  // modelzoo's own name for it (LLaVA's files use it)
          .field("attention_dropout_rate", &O::attention_dropout_rate,
                 "Dropout on attention probabilities (null: dropout_rate).", config::if_set(dropout))
          .field("extra_ffn_params", &O::extra_ffn_params, "Extra settings of each layer's FFN (static_dual_expert).")
          .field("moe", &O::moe, "Mixture of experts in place of each layer's FFN (modelzoo's mixtral model).")
          .field("output_layer_initializer", &O::output_layer_initializer,
                 "Initializer of the attention output and last FFN layer (null: `initializer`, or without one "
                 "truncated_normal std=initializer_range/sqrt(2*num_hidden_layers)).")
          .validate([](const O& o, const auto& fail) {
            check_decoder_lm_options(o, fail);
            if (o.attention_sink_tokens && !o.attention_sliding_window_length)
              fail("attention_sink_tokens", "applies to a sliding window: set attention_sliding_window_length too");
            if (o.sliding_window_every_other_decoder_layer && !o.attention_sliding_window_length)
              fail("sliding_window_every_other_decoder_layer", "needs attention_sliding_window_length");
            if (!o.sliding_window_every_other_decoder_layer &&
                o.sliding_window_every_other_decoder_layer_pattern != "full_attention_first")
              fail("sliding_window_every_other_decoder_layer_pattern",
                   "applies with sliding_window_every_other_decoder_layer: true only");
            if ((o.mup_base_hidden_size || o.mup_base_filter_size) && o.output_logits_scale)
              fail("output_logits_scale",
                   "is the muP form of modelzoo 2.2 and before; with mup_base_* the logits "
                   "scale comes from output_logits_alpha (remove one of them)");
          });
  return s;
}

namespace {

// Each layer's initializer as modelzoo's gpt2 model picks it: `initializer`
// or else truncated_normal(initializer_range) for the projections; the
// output layers get output_layer_initializer, else `initializer`, else the
// default scaled by depth; with muP, widths scale them (see the schema).
struct LayerInitializers {
  InitializerSpec embedding, attention, attention_output, ffn, ffn_output;
};

LayerInitializers layer_initializers(const Gpt2Options& o, const DecoderVariant& v) {
  const InitializerSpec fallback = truncated_normal_spec(o.initializer_range);
  const double depth = 1.0 / std::sqrt(2.0 * o.num_hidden_layers);
  const double mup_depth = v.mup_depth_scaling ? depth : 1.0;
  LayerInitializers i;
  i.embedding = o.embedding_initializer.value_or(fallback);
  i.attention = o.initializer.value_or(fallback);
  i.ffn = o.ffn_initializer.value_or(i.attention);
  std::optional<InitializerSpec> output = o.output_layer_initializer, ffn_output = o.ffn_output_layer_initializer;
  if (o.mup_base_hidden_size) {
    const double width = std::sqrt(*o.mup_base_hidden_size / double(o.hidden_size));
    i.attention = scaled_initializer(i.attention, width);
    i.ffn = scaled_initializer(i.ffn, width);
    output = scaled_initializer(output.value_or(fallback), width * mup_depth);
  }
  if (o.mup_base_filter_size)
    ffn_output = scaled_initializer(ffn_output.value_or(fallback),
                                    std::sqrt(*o.mup_base_filter_size / double(o.filter_size)) * mup_depth);
  if (!output && !o.initializer) output = scaled_initializer(fallback, depth);
  i.attention_output = output.value_or(i.attention);
  i.ffn_output = ffn_output ? *ffn_output : output.value_or(i.ffn);
  return i;
}

RotaryOptions rotary_options(const Gpt2Options& o) {
  RotaryOptions r;
  if (o.position_embedding_type != "rotary") return r;
  r.dim = o.rotary_dim.value_or(o.hidden_size / o.num_heads);
  r.base = o.rope_theta;
  r.scaling_type = o.pos_scaling_type == "YaRN" ? "yarn" : o.pos_scaling_type;
  r.scaling_factor = o.pos_scaling_factor;
  const PosScalingExtraArgs e = o.pos_scaling_extra_args.value_or(PosScalingExtraArgs{});
  r.original_max_position_embeddings = e.original_max_position_embeddings.value_or(r.original_max_position_embeddings);
  r.low_freq_factor = e.low_freq_factor.value_or(r.low_freq_factor);
  r.high_freq_factor = e.high_freq_factor.value_or(r.high_freq_factor);
  r.beta_fast = e.beta_fast.value_or(r.beta_fast);
  r.beta_slow = e.beta_slow.value_or(r.beta_slow);
  r.extrapolation_factor = e.extrapolation_factor.value_or(r.extrapolation_factor);
  r.mscale_a = e.mscale_a.value_or(r.mscale_a);
  r.mscale_b = e.mscale_b.value_or(r.mscale_b);
  r.truncate = e.truncate.value_or(r.truncate);
  return r;
}

DecoderLayerOptions decoder_options(const Gpt2Options& o, const DecoderVariant& v) {
  DecoderLayerOptions d;
  d.parallel_residual = v.parallel_residual;
  d.untied_norms = v.untied_norms;
  d.attention = attention_options_from_keys(o);
  d.attention.inner_dim = o.attention_inner_dim.value_or(0);
  d.attention.sliding_window = o.attention_sliding_window_length.value_or(0);
  d.attention.sink_tokens = o.attention_sink_tokens.value_or(0);
  d.attention.logit_softcapping = o.attention_logit_softcapping.value_or(0.0);
  d.attention.qk_norm = o.attention_qk_norm_layer.value_or("");
  d.attention.qk_norm_eps = o.attention_qk_norm_eps;
  if (o.sliding_window_every_other_decoder_layer)
    d.sliding_window_parity = o.sliding_window_every_other_decoder_layer_pattern == "sliding_window_first" ? 0 : 1;
  d.sandwich_norms = o.norm_first_sandwich;
  d.attention.rotary = rotary_options(o);
  d.attention.scale_by_head_dim = o.scale_qk_dot_by_d;
  d.scale_scores_by_layer = o.scale_qk_dot_by_layer_idx;
  const LayerInitializers init = layer_initializers(o, v);
  d.attention.initializer = init.attention;
  d.attention.output_initializer = init.attention_output;
  d.attention.logit_multiplier = o.attention_logits_alpha;
  d.ffn = ffn_options_from_keys(o, o.nonlinearity);
  d.ffn.initializer = init.ffn;
  d.ffn.output_initializer = init.ffn_output;
  d.layer_norm_epsilon = o.layer_norm_epsilon;
  d.rms_norm = o.norm_type == "rmsnorm";
  d.norm_bias = o.norm_type != "biasless-layernorm";
  d.dropout = o.dropout_rate;
  d.recompute = o.activation_checkpointing;
  d.moe = o.moe;
  // modelzoo's router initializer: `initializer` when given, else moe.gate_initializer, else the default.
  d.moe_gate_initializer =
      o.initializer.value_or(o.moe.gate_initializer.value_or(truncated_normal_spec(o.initializer_range)));
  return d;
}
}  // namespace

Gpt2Model::Gpt2Model(const Gpt2Options& o, const torch::TensorOptions& p, const DecoderVariant& v)
    : options_(o), variant_(v) {
  EmbeddingOptions e;
  e.vocab_size = o.vocab_size;
  e.hidden_size = o.hidden_size;
  e.max_position_embeddings = o.max_position_embeddings;
  e.position_embedding_type = o.position_embedding_type;
  e.num_heads = o.num_heads;
  e.alibi_trainable_slopes = o.alibi_trainable_slopes;
  e.alibi_scaling_factor = o.pos_scaling_factor;
  // With a norm after the embeddings, dropout follows the norm (below).
  e.dropout = o.embedding_layer_norm ? 0.0 : o.embedding_dropout_rate.value_or(o.dropout_rate);
  e.initializer = layer_initializers(o, v).embedding;
  embedding_layer = register_module("embedding_layer", EmbeddingLayer(e, p));
  if (o.embedding_layer_norm)
    embedding_ln_f =
        register_module("embedding_ln_f", LayerNorm(o.hidden_size, o.layer_norm_epsilon, p, o.norm_type == "rmsnorm",
                                                    o.norm_type != "biasless-layernorm"));
  transformer_decoder =
      register_module("transformer_decoder", TransformerDecoder(o.num_hidden_layers, decoder_options(o, v), p));
  lm_head = register_module(
      "lm_head", OutputHead(o.hidden_size, o.vocab_size, !o.share_embedding_weights, o.use_bias_in_output, p));
}

void Gpt2Model::reset_parameters() {
  embedding_layer->reset_parameters();
  if (embedding_ln_f) embedding_ln_f->reset_parameters();
  transformer_decoder->reset_parameters();
  // An untied head starts from normal(0, initializer_range) whatever `initializer` says, as modelzoo's.
  InitializerSpec head;
  head.name = "normal";
  head.std = options_.initializer_range;
  lm_head->reset_parameters(head);
}

torch::Tensor Gpt2Model::embed(const torch::Tensor& input_ids, int64_t first_position,
                               const torch::Tensor& position_ids) {
  // Embeddings, embedding_ln_f, embeddings_scale, dropout (inside
  // embedding_layer unless there is a norm: it commutes with the scale).
  torch::Tensor h = embedding_layer->forward(input_ids, first_position, {}, {}, position_ids);  // (B, T, C)
  if (embedding_ln_f) h = embedding_ln_f(h);
  if (options_.embeddings_scale != 1.0) h = h * options_.embeddings_scale;
  const double p = options_.embedding_dropout_rate.value_or(options_.dropout_rate);
  return embedding_ln_f && p > 0 ? torch::dropout(h, p, is_training()) : h;
}

namespace {
// The factor on the logits: muP's from the base width, or output_logits_scale (modelzoo <= 2.2).
std::optional<double> logits_scale(const Gpt2Options& o) {
  if (!o.mup_base_hidden_size) return o.output_logits_scale;
  const double ratio = *o.mup_base_hidden_size / double(o.hidden_size);
  return o.output_logits_alpha.value_or(1.0) * (o.scale_output_logits_by_d ? ratio : std::sqrt(ratio));
}
}  // namespace

torch::Tensor Gpt2Model::head(const torch::Tensor& h) {
  torch::Tensor out = lm_head(h, embedding_layer->word_embeddings->weight);  // (B, T, >= V)
  const std::optional<double> scale = logits_scale(options_);
  if (scale) out = out * *scale;
  if (const auto cap = options_.final_logit_softcapping) out = torch::tanh(out / *cap) * *cap;
  return out;
}

torch::Tensor Gpt2Model::padded_logits(const torch::Tensor& input_ids, MoeContext& moe,
                                       const torch::Tensor& position_ids) {
  moe.input_ids = input_ids;
  MoeContext* routing = options_.moe.enabled() ? &moe : nullptr;
  return head(transformer_decoder->forward(embed(input_ids, 0, position_ids), nullptr, embedding_layer->alibi(),
                                           routing, {}, position_ids));
}

torch::Tensor Gpt2Model::padded_logits_from_embeddings(const torch::Tensor& embeddings, const torch::Tensor& key_mask) {
  if (options_.moe.enabled())
    throw std::invalid_argument("a mixture-of-experts decoder routes by token ids: it cannot run on input embeddings");
  return head(transformer_decoder->forward(embeddings, nullptr, embedding_layer->alibi(), nullptr, key_mask));
}

torch::Tensor Gpt2Model::padded_logits(const torch::Tensor& input_ids, const torch::Tensor& position_ids) {
  MoeContext moe;
  return padded_logits(input_ids, moe, position_ids);
}

torch::Tensor Gpt2Model::hidden_states(const torch::Tensor& input_ids) {
  MoeContext moe;
  moe.input_ids = input_ids;
  return transformer_decoder->forward(embed(input_ids), nullptr, embedding_layer->alibi(),
                                      options_.moe.enabled() ? &moe : nullptr);
}

torch::Tensor Gpt2Model::logits(const torch::Tensor& input_ids) {
  return padded_logits(input_ids).narrow(-1, 0, options_.vocab_size);
}

torch::Tensor Gpt2Model::next_logits(const torch::Tensor& input_ids, GenerationCache& cache) {
  std::vector<LayerKV> kv(options_.num_hidden_layers);  // cache.state: k0, v0, k1, v1, ...
  for (size_t i = 0; 2 * i + 1 < cache.state.size() && i < kv.size(); ++i)
    kv[i] = {cache.state[2 * i], cache.state[2 * i + 1]};
  MoeContext moe;
  moe.input_ids = input_ids;
  moe.first_position = cache.positions;
  torch::Tensor h = transformer_decoder->forward(embed(input_ids, cache.positions), &kv, embedding_layer->alibi(),
                                                 options_.moe.enabled() ? &moe : nullptr);
  cache.state.clear();
  for (const auto& layer : kv) cache.state.insert(cache.state.end(), {layer.keys, layer.values});
  cache.positions += input_ids.size(1);
  return head(h).narrow(-1, 0, options_.vocab_size);  // (B, T, V)
}

// modelzoo's named groups for optimizer.adjust_learning_rate, with muP's scales.
std::map<std::string, LrAdjustmentGroup> Gpt2Model::lr_adjustment_groups() const {
  const Gpt2Options& o = options_;
  const double hidden = o.mup_base_hidden_size ? *o.mup_base_hidden_size / double(o.hidden_size) : 1.0;
  const double filter = o.mup_base_filter_size ? *o.mup_base_filter_size / double(o.filter_size) : 1.0;
  return {{"embedding", {{"*embedding*weight"}}},
          {"decoder_kernel", {{"*decoder*dense*weight", "*decoder*linear*weight"}}},
          {"decoder_attention", {{"*decoder*attn*dense*weight"}, hidden}},
          {"decoder_input_ffn",
           {{"*decoder*ffn.ffn.[!1]*weight", "*decoder*ffn.experts.experts.*.ffn.[!1]*weight"}, hidden}},
          {"decoder_output_ffn",
           {{"*decoder*ffn.ffn.[1]*weight", "*decoder*ffn.experts.experts.*.ffn.[1]*weight"}, filter}}};
}

ModelOutput Gpt2Model::forward(const Features& batch, bool with_metrics) {
  const torch::Tensor& ids = batch.at("input_ids");
  const torch::Tensor& mask = batch.at("attention_mask");
  MoeContext moe;
  // Training with a load-balancing loss: the MoE layers record router statistics over the loss mask's tokens.
  if (options_.moe.enabled() && is_training() && options_.moe.load_balancing_loss_coef > 0) {
    torch::Tensor m = mask.to(torch::kFloat);
    moe.token_weights = m / m.sum(1, true).clamp_min(1.0);
  }
  // Rows packing several sequences (modelzoo's VSL data) number each from 0;
  // the loader has checked them against attention_span.
  torch::Tensor out = padded_logits(ids, moe, optional_feature(batch, "position_ids"));
  LossScaling scaling{options_.loss_scaling, options_.loss_weight};
  // The loss skips the padding columns.
  ModelOutput result = lm_loss(out, batch.at("labels"), mask, scaling, with_metrics, options_.vocab_size);
  if (moe.layers > 0)
    result.loss =
        result.loss + options_.moe.load_balancing_loss_coef * load_balancing_loss(moe, options_.moe.num_experts);
  return result;
}

torch::Tensor Gpt2Model::label_log_likelihood(const Features& batch, bool average) {
  const torch::Tensor& ids = batch.at("input_ids");
  const torch::Tensor mask = batch.at("attention_mask").to(torch::kFloat);
  const torch::Tensor logits = padded_logits(ids, optional_feature(batch, "position_ids"));
  const torch::Tensor nll = token_cross_entropy(logits.flatten(0, 1), batch.at("labels").flatten(), options_.vocab_size,
                                                PaddingColumns::neg_inf)
                                .view_as(mask);
  torch::Tensor sum = -(nll * mask).sum(-1);
  // A sample without a counted token scores 0 (modelzoo's average divides by 0 there: nan).
  return average ? sum / mask.sum(-1).clamp_min(1.0) : sum;
}

// Kaplan et al. (2020): forward ~ 2 * (matmul parameters) + 2 * layers * context * width.
double Gpt2Model::forward_flops_per_token() const {
  const double C = options_.hidden_size, F = options_.filter_size, L = options_.num_hidden_layers;
  const double inner = options_.attention_inner_dim.value_or(options_.hidden_size);
  const double kv = options_.attention_module == "multiquery_attention"
                        ? inner * options_.extra_attention_params.num_kv_groups / options_.num_heads
                        : inner;
  // An MoE token runs through top_k routed experts and the shared ones, after the router.
  const MoeOptions& moe = options_.moe;
  const double experts_per_token = moe.enabled() ? double(moe.top_k + moe.shared_experts()) : 1.0;
  const double ffn =
      (is_glu(options_.nonlinearity) ? 3 : 2) * C * F * experts_per_token + (moe.enabled() ? C * moe.num_experts : 0.0);
  const double matmul_params = L * (2 * C * inner + 2 * C * kv + ffn) + C * options_.vocab_size;
  return 2 * matmul_params + 2 * L * options_.max_position_embeddings * inner;
}

ModelFamily gpt2_family() {
  ModelFamily f = make_model_family<Gpt2Options, Gpt2Model>(
      // modelzoo's bloom, btlm, jais, mixtral, santacoder, starcoder and gemma2 models are its gpt2 model under
      // another name.
      "gpt2",
      {"gpt3", "llama", "mistral", "mixtral", "bloom", "btlm", "jais", "santacoder", "starcoder", "mpt", "LlamaModel",
       "gemma2"},
      "Decoder-only transformer: GPT-2 / GPT-3 / Cerebras-GPT, and LLaMA-style models (rotary, rmsnorm, swiglu, "
      "multiquery_attention), as modelzoo builds them.",
      {"input_ids", "attention_mask", "labels"}, kPackedSequenceFeatures);
  f.hf["gpt2"] = gpt2_hf_adapter();
  f.hf["llama"] = llama_hf_adapter("llama");
  f.hf["mistral"] = llama_hf_adapter("mistral");
  f.hf["mixtral"] = llama_hf_adapter("mixtral");
  f.hf["btlm"] = btlm_hf_adapter("btlm");
  f.hf["jais"] = btlm_hf_adapter("jais");
  f.hf["bloom"] = bloom_hf_adapter();
  f.hf["mpt"] = mpt_hf_adapter();
  f.hf["santacoder"] = santacoder_hf_adapter();
  f.hf["starcoder"] = starcoder_hf_adapter();
  f.hf["gemma"] = gemma_hf_adapter("gemma");
  f.hf["gemma2"] = gemma_hf_adapter("gemma2");
  f.hf["qwen2"] = llama_hf_adapter("qwen2");
  f.hf["qwen3"] = llama_hf_adapter("qwen3");
  add_headless_converters(f,
                          {"gpt2", "llama", "mistral", "mixtral", "btlm", "jais", "bloom", "mpt", "santacoder",
                           "starcoder", "gemma", "gemma2", "qwen2", "qwen3"},
                          decoder_lm_head_parts([](const ModelSpec& m) -> const DecoderLmOptions& {
                            return spec_options<Gpt2Spec>(m, "a headless gpt2-family converter takes a gpt2 model");
                          }));
  return f;
}

}  // namespace zoo::models
