// Implementation of models/gpt2/gpt2.h.
#include "models/gpt2/gpt2.h"

#include <cmath>

#include "models/common/ffn.h"
#include "models/gpt2/hf_adapter.h"

namespace zoo::models {

const config::Schema<ExtraAttentionParams>& ExtraAttentionParams::schema() {
  using E = ExtraAttentionParams;
  static const config::Schema<E> s =
      config::Schema<E>("extra_attention_params", "Attention-module specific settings.")
          .field("num_kv_groups", &E::num_kv_groups, "multiquery_attention: key/value heads (1: MQA, >1: GQA).",
                 config::positive<int64_t>());
  return s;
}

namespace {
// Sizes beyond these make a model no machine can hold; catching them at
// validation beats minutes of building followed by bad_alloc.
constexpr int64_t kMaxLayers = 4096;             // the deepest published decoders have ~100-1000 layers
constexpr int64_t kMaxWidth = (int64_t{1} << 31) - 1;  // tensor dims LibTorch kernels index with int32
constexpr int64_t kMaxParameters = int64_t{1} << 50;   // ~10^15, a thousand times today's largest models

config::Check<int64_t> size(int64_t limit) {
  return [limit](const int64_t& v) {
    if (v <= 0) return std::string("expected a value > 0");
    return config::at_most<int64_t>(limit, "zoo's limit")(v);
  };
}

// The parameter count from the options, with every product checked: the
// first one that overflows (or passes kMaxParameters) names its key.
void check_parameter_count(const Gpt2Options& o, const std::function<void(const std::string&, const std::string&)>& fail) {
  int64_t total = 0;
  auto add = [&](const std::vector<std::pair<int64_t, std::string>>& factors) {
    int64_t product = 1;
    for (const auto& [v, key] : factors) {
      if (__builtin_mul_overflow(product, v, &product) || product > kMaxParameters ||
          __builtin_add_overflow(total, product, &total) || total > kMaxParameters)
        fail(key, "the model would have more than 2^50 parameters (" + key + " " + std::to_string(v) +
                      "); zoo stops here rather than run out of memory building it");
    }
  };
  const int64_t C = o.hidden_size, L = o.num_hidden_layers;
  add({{o.vocab_size, "vocab_size"}, {C, "hidden_size"}});
  add({{o.max_position_embeddings, "max_position_embeddings"}, {C, "hidden_size"}});
  add({{L, "num_hidden_layers"}, {C, "hidden_size"}, {C, "hidden_size"}, {4, "hidden_size"}});  // attention
  add({{L, "num_hidden_layers"}, {o.filter_size, "filter_size"}, {C, "hidden_size"}, {3, "filter_size"}});  // FFN (GLU: 3 matrices)
}
}  // namespace

const config::Schema<Gpt2Options>& Gpt2Options::schema() {
  using O = Gpt2Options;
  using config::positive;
  auto dropout = config::in_range(0.0, 1.0, /*hi_open=*/true);
  static const config::Schema<O> s =
      config::Schema<O>("model (gpt2)", "GPT-2 / GPT-3 decoder-only transformer.")
          .field("vocab_size", &O::vocab_size, "Vocabulary size.", size(kMaxWidth))
          .field("hidden_size", &O::hidden_size, "Model width C.", size(kMaxWidth))
          .field("num_hidden_layers", &O::num_hidden_layers, "Number of decoder layers.", size(kMaxLayers))
          .field("num_heads", &O::num_heads, "Attention heads; must divide hidden_size.", size(kMaxWidth))
          .field("filter_size", &O::filter_size, "FFN hidden units.", size(kMaxWidth))
          .field("max_position_embeddings", &O::max_position_embeddings, "Longest sequence supported.",
                 size(kMaxWidth))
          .field("position_embedding_type", &O::position_embedding_type, "Position embeddings.",
                 config::one_of(kPositionEmbeddingTypes))
          .field("rotary_dim", &O::rotary_dim, "Rotary embeddings: dims per head to rotate (null: the head size).",
                 config::if_set(positive<int64_t>()))
          .field("rope_theta", &O::rope_theta, "Rotary embeddings: base of the frequencies (Code Llama: 1e6).",
                 positive<double>())
          .field("norm_type", &O::norm_type, "layernorm or rmsnorm.", config::one_of({"layernorm", "rmsnorm"}))
          .field("attention_module", &O::attention_module,
                 "aiayn_attention, or multiquery_attention with extra_attention_params.num_kv_groups key/value heads.",
                 config::one_of({"aiayn_attention", "multiquery_attention"}))
          .field("extra_attention_params", &O::extra_attention_params, "Settings of the attention module.")
          .field("attention_sliding_window_length", &O::attention_sliding_window_length,
                 "Each token attends to at most this many most recent tokens (null: all).",
                 config::if_set(positive<int64_t>()))
          .field("share_embedding_weights", &O::share_embedding_weights,
                 "Tie the output projection to the word embeddings.")
          .field("dropout_rate", &O::dropout_rate, "Dropout on residual branches and in the FFN.", dropout)
          .field("embedding_dropout_rate", &O::embedding_dropout_rate,
                 "Dropout after the embeddings (null: dropout_rate).", config::if_set(dropout))
          .field("attention_dropout_rate", &O::attention_dropout_rate,
                 "Dropout on attention probabilities (null: dropout_rate).", config::if_set(dropout))
          .field("layer_norm_epsilon", &O::layer_norm_epsilon, "LayerNorm epsilon.", positive<double>())
          .field("nonlinearity", &O::nonlinearity, "FFN activation.", config::one_of(kActivationNames))
          .field("use_projection_bias_in_attention", &O::use_projection_bias_in_attention,
                 "Bias on the q/k/v projections.")
          .field("use_ffn_bias_in_attention", &O::use_ffn_bias_in_attention,
                 "Bias on the attention output projection.")
          .field("use_ffn_bias", &O::use_ffn_bias, "Bias in the FFN layers.")
          .field("use_bias_in_output", &O::use_bias_in_output, "Bias on the LM head.")
          .field("attention_type", &O::attention_type,
                 "scaled_dot_product divides scores by sqrt(head dim); dot_product does not.",
                 config::one_of({"scaled_dot_product", "dot_product"}))
          .field("attention_softmax_fp32", &O::attention_softmax_fp32,
                 "Compute the attention softmax in float32 under reduced precision.")
          .field("initializer_range", &O::initializer_range,
                 "Std of the default truncated-normal initializers.", positive<double>())
          .field("embedding_initializer", &O::embedding_initializer,
                 "Embedding initializer (null: the `initializer`).")
          .field("initializer", &O::initializer,
                 "Weight initializer (null: truncated_normal std=initializer_range, +-2 std).")
          .field("output_layer_initializer", &O::output_layer_initializer,
                 "Initializer of the attention output and last FFN layer (null: truncated_normal "
                 "std=initializer_range/sqrt(2*num_hidden_layers)).")
          .field("loss_scaling", &O::loss_scaling,
                 "num_tokens: loss = sum / number of unmasked tokens; batch_size: sum / B * loss_weight.",
                 config::one_of({"num_tokens", "batch_size"}))
          .field("loss_weight", &O::loss_weight, "Loss multiplier for loss_scaling: batch_size.")
          .field("activation_checkpointing", &O::activation_checkpointing,
                 "zoo's own: keep only each decoder layer's input in the forward pass and recompute the layer in "
                 "the backward pass (activation memory of one layer instead of all; ~1/3 more compute).")
          .hardware_only({"boundary_casting"}, "Cerebras-only numerics")
          .hardware_only({"tf_summary"}, "a summary-only key of modelzoo's Cerebras runs; zoo writes no such summary")
          .validate([](const O& o, const auto& fail) {
            if (o.hidden_size % o.num_heads != 0)
              fail("num_heads", "num_heads (" + std::to_string(o.num_heads) + ") must divide hidden_size (" +
                                    std::to_string(o.hidden_size) + ")");
            if (o.position_embedding_type == "fixed" && o.hidden_size % 2 != 0)
              fail("hidden_size", "fixed position embeddings need an even hidden_size");
            const int64_t head = o.hidden_size / o.num_heads;
            if (o.rotary_dim && (*o.rotary_dim % 2 != 0 || *o.rotary_dim > head))
              fail("rotary_dim", "expected an even number <= the head size (" + std::to_string(head) + ")");
            if (o.attention_module == "multiquery_attention" && o.num_heads % o.extra_attention_params.num_kv_groups)
              fail("extra_attention_params", "num_kv_groups must divide num_heads (" + std::to_string(o.num_heads) + ")");
            check_parameter_count(o, fail);
          });
  return s;
}

namespace {
InitializerSpec weight_init(const Gpt2Options& o) {
  return o.initializer ? *o.initializer : truncated_normal_spec(o.initializer_range);
}
InitializerSpec output_init(const Gpt2Options& o) {
  return o.output_layer_initializer
             ? *o.output_layer_initializer
             : truncated_normal_spec(o.initializer_range / std::sqrt(2.0 * o.num_hidden_layers));
}

DecoderLayerOptions decoder_options(const Gpt2Options& o) {
  DecoderLayerOptions d;
  d.attention.hidden_size = o.hidden_size;
  d.attention.num_heads = o.num_heads;
  if (o.attention_module == "multiquery_attention") d.attention.num_kv_groups = o.extra_attention_params.num_kv_groups;
  d.attention.sliding_window = o.attention_sliding_window_length.value_or(0);
  if (o.position_embedding_type == "rotary") d.attention.rotary_dim = o.rotary_dim.value_or(o.hidden_size / o.num_heads);
  d.attention.rotary_base = o.rope_theta;
  d.attention.use_projection_bias = o.use_projection_bias_in_attention;
  d.attention.use_output_bias = o.use_ffn_bias_in_attention;
  d.attention.dropout = o.attention_dropout_rate.value_or(o.dropout_rate);
  d.attention.scale_by_sqrt_head_dim = o.attention_type == "scaled_dot_product";
  d.attention.softmax_fp32 = o.attention_softmax_fp32;
  d.attention.initializer = weight_init(o);
  d.attention.output_initializer = output_init(o);
  d.ffn.input_size = o.hidden_size;
  d.ffn.filter_size = o.filter_size;
  d.ffn.nonlinearity = o.nonlinearity;
  d.ffn.use_bias = o.use_ffn_bias;
  d.ffn.dropout = o.dropout_rate;
  d.ffn.initializer = weight_init(o);
  d.ffn.output_initializer = output_init(o);
  d.layer_norm_epsilon = o.layer_norm_epsilon;
  d.rms_norm = o.norm_type == "rmsnorm";
  d.dropout = o.dropout_rate;
  d.recompute = o.activation_checkpointing;
  return d;
}
}  // namespace

Gpt2Model::Gpt2Model(const Gpt2Options& o, const torch::TensorOptions& p) : options_(o) {
  EmbeddingOptions e;
  e.vocab_size = o.vocab_size;
  e.hidden_size = o.hidden_size;
  e.max_position_embeddings = o.max_position_embeddings;
  e.position_embedding_type = o.position_embedding_type;
  e.dropout = o.embedding_dropout_rate.value_or(o.dropout_rate);
  e.initializer = o.embedding_initializer ? *o.embedding_initializer : weight_init(o);
  embedding_layer = register_module("embedding_layer", EmbeddingLayer(e, p));
  transformer_decoder =
      register_module("transformer_decoder", TransformerDecoder(o.num_hidden_layers, decoder_options(o), p));
  lm_head = register_module(
      "lm_head", OutputHead(o.hidden_size, o.vocab_size, !o.share_embedding_weights, o.use_bias_in_output, p));
}

void Gpt2Model::reset_parameters() {
  embedding_layer->reset_parameters();
  transformer_decoder->reset_parameters();
  lm_head->reset_parameters(weight_init(options_));
}

torch::Tensor Gpt2Model::padded_logits(const torch::Tensor& input_ids) {
  torch::Tensor h = transformer_decoder(embedding_layer(input_ids));  // (B, T, C)
  return lm_head(h, embedding_layer->word_embeddings->weight);        // (B, T, >= V)
}

torch::Tensor Gpt2Model::logits(const torch::Tensor& input_ids) {
  return padded_logits(input_ids).narrow(-1, 0, options_.vocab_size);
}

torch::Tensor Gpt2Model::next_logits(const torch::Tensor& input_ids, GenerationCache& cache) {
  std::vector<LayerKV> kv(options_.num_hidden_layers);  // cache.state: k0, v0, k1, v1, ...
  for (size_t i = 0; 2 * i + 1 < cache.state.size() && i < kv.size(); ++i)
    kv[i] = {cache.state[2 * i], cache.state[2 * i + 1]};
  torch::Tensor h = transformer_decoder->forward(embedding_layer->forward(input_ids, cache.positions), &kv);
  cache.state.clear();
  for (const auto& layer : kv) cache.state.insert(cache.state.end(), {layer.keys, layer.values});
  cache.positions += input_ids.size(1);
  return lm_head(h, embedding_layer->word_embeddings->weight).narrow(-1, 0, options_.vocab_size);  // (B, T, V)
}

ModelOutput Gpt2Model::forward(const Features& batch, bool with_metrics) {
  torch::Tensor out = padded_logits(batch.at("input_ids"));  // the loss skips the padding columns
  LossScaling scaling{options_.loss_scaling, options_.loss_weight};
  return lm_loss(out, batch.at("labels"), batch.at("attention_mask"), scaling, with_metrics, options_.vocab_size);
}

// Kaplan et al. (2020): forward ~ 2 * (matmul parameters) + 2 * layers * context * width.
double Gpt2Model::forward_flops_per_token() const {
  const double C = options_.hidden_size, F = options_.filter_size, L = options_.num_hidden_layers;
  const double kv = options_.attention_module == "multiquery_attention"
                        ? C * options_.extra_attention_params.num_kv_groups / options_.num_heads
                        : C;
  const double ffn = (is_glu(options_.nonlinearity) ? 3 : 2) * C * F;
  const double matmul_params = L * (2 * C * C + 2 * C * kv + ffn) + C * options_.vocab_size;
  return 2 * matmul_params + 2 * L * options_.max_position_embeddings * C;
}

ModelFamily gpt2_family() {
  ModelFamily f = make_model_family<Gpt2Options, Gpt2Model>(
      "gpt2", {"gpt3", "llama", "mistral"},
      "Decoder-only transformer: GPT-2 / GPT-3 / Cerebras-GPT, and LLaMA-style models (rotary, rmsnorm, swiglu, "
      "multiquery_attention), as modelzoo builds them.",
      {"input_ids", "attention_mask", "labels"});
  f.hf["gpt2"] = gpt2_hf_adapter();
  f.hf["llama"] = llama_hf_adapter("llama");
  f.hf["mistral"] = llama_hf_adapter("mistral");
  return f;
}

}  // namespace zoo::models
