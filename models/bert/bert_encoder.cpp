// Implementation of models/bert/bert_encoder.h.
#include "models/bert/bert_encoder.h"

#include <cmath>
#include <limits>

#include "models/hf/block_keys.h"

namespace zoo::models {

InitializerSpec fine_tuning_head_initializer() {
  InitializerSpec head;
  head.name = "normal";
  head.std = 0.02;
  return head;
}

void check_bert_encoder(const BertEncoderOptions& o,
                        const std::function<void(const std::string&, const std::string&)>& fail) {
  if (o.position_embedding_type == "alibi" || o.position_embedding_type == "relative")
    fail("position_embedding_type",
         "zoo's BERT builds learned, fixed and rotary positions, not " + o.position_embedding_type);
  if (o.mask_padding_in_positional_embed && o.position_embedding_type != "learned")
    fail("mask_padding_in_positional_embed", "applies to learned position embeddings only");
  DecoderLmShape shape{o.vocab_size,
                       o.hidden_size,
                       o.num_hidden_layers,
                       o.num_heads,
                       o.filter_size,
                       o.max_position_embeddings,
                       o.position_embedding_type,
                       o.rotary_dim.value_or(o.hidden_size / o.num_heads / 4),
                       o.attention_module,
                       o.extra_attention_params.num_kv_groups,
                       std::nullopt};
  check_decoder_lm_shape(shape, fail);
  if (o.mup_base_hidden_size.has_value() != o.mup_base_filter_size.has_value())
    fail(o.mup_base_hidden_size ? "mup_base_filter_size" : "mup_base_hidden_size",
         "muP needs both mup_base_hidden_size and mup_base_filter_size");
  const InitializerSpec d = o.default_init();
  if (o.mup() && d.name != "normal" && d.name != "truncated_normal")
    fail("default_initializer", "muP scales normal and truncated_normal initializers only, not " + d.name);
}

std::optional<double> BertEncoderOptions::logits_scale() const {
  if (!mup_base_hidden_size) return std::nullopt;
  const double ratio = *mup_base_hidden_size / double(hidden_size);
  return output_logits_alpha * (scale_output_logits_by_d ? ratio : std::sqrt(ratio));
}

namespace {

// The encoder's initializers as modelzoo's BertModel picks them: all from
// default_initializer, scaled by muP's width (and depth for output layers).
struct EncoderInitializers {
  InitializerSpec attention, attention_output, ffn, ffn_output;
};

EncoderInitializers encoder_initializers(const BertEncoderOptions& o) {
  const InitializerSpec d = o.default_init();
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

EncoderLayerOptions layer_options(const BertEncoderOptions& o) {
  const EncoderInitializers init = encoder_initializers(o);
  EncoderLayerOptions e;
  e.attention = attention_options_from_keys(o);
  AttentionOptions& a = e.attention;
  if (o.position_embedding_type == "rotary") {
    a.rotary.dim = o.rotary_dim.value_or(o.hidden_size / o.num_heads / 4);
    a.rotary.base = o.rope_theta;
  }
  a.scale_by_head_dim = o.scale_qk_dot_by_d.value_or(o.mup());
  a.logit_multiplier = o.attention_logits_alpha;
  a.initializer = init.attention;
  a.output_initializer = init.attention_output;
  a.causal = false;
  e.ffn = ffn_options_from_keys(o, o.encoder_nonlinearity);
  e.ffn.initializer = init.ffn;
  e.ffn.output_initializer = init.ffn_output;
  e.layer_norm_epsilon = o.layer_norm_epsilon;
  e.dropout = o.dropout_rate;
  e.norm_first = o.norm_first;
  e.final_norm = o.use_final_layer_norm;
  e.recompute = o.activation_checkpointing;
  return e;
}

}  // namespace

BertEncoderImpl::BertEncoderImpl(const BertEncoderOptions& o, const BertEncoderShape& shape,
                                 const torch::TensorOptions& p)
    : options_(o), shape_(shape) {
  const InitializerSpec d = o.default_init();
  EmbeddingOptions e;
  e.vocab_size = o.vocab_size;
  e.hidden_size = o.hidden_size;
  e.max_position_embeddings = o.max_position_embeddings;
  e.position_embedding_type = o.position_embedding_type;
  e.num_heads = o.num_heads;
  e.initializer = o.embeddings_initializer.value_or(d);
  e.position_initializer = o.position_embeddings_initializer.value_or(d);
  e.segment_initializer = o.segment_embeddings_initializer.value_or(d);
  e.num_segments = shape.segments;
  e.pad_token_id = o.pad_token_id;
  e.mask_padding_positions = o.mask_padding_in_positional_embed;
  embedding_layer = register_module("embedding_layer", EmbeddingLayer(e, p));
  if (o.embedding_layer_norm)
    embed_ln_f = register_module("embed_ln_f", LayerNorm(o.hidden_size, o.layer_norm_epsilon, p));
  transformer_encoder =
      register_module("transformer_encoder", TransformerEncoder(o.num_hidden_layers, layer_options(o), p));
  if (shape.pooler) {
    pooler = Dense(o.hidden_size, o.hidden_size, o.use_ffn_bias, p);
    auto holder = register_module("pooler", std::make_shared<torch::nn::Module>());
    holder->register_module("pooler", one_layer_network(pooler.ptr()));
  }
}

void BertEncoderImpl::reset_parameters() {
  embedding_layer->reset_parameters();
  if (embed_ln_f) embed_ln_f->reset_parameters();
  transformer_encoder->reset_parameters();
  if (pooler) pooler->reset_parameters(encoder_initializers(options_).attention);  // as modelzoo's
}

torch::Tensor packed_sequence_bias(const torch::Tensor& attention_span, const torch::Tensor& position_ids) {
  const int64_t T = attention_span.size(1);
  const torch::Tensor at = torch::arange(T, attention_span.options().dtype(torch::kLong));
  const torch::Tensor ahead = at.view({T, 1}) - at.view({1, T});  // query - key
  const torch::Tensor span = attention_span.to(torch::kLong).unsqueeze(1),
                      before = position_ids.to(torch::kLong).unsqueeze(1);
  // Key k is in query q's sequence when q - k <= span[k] (q not past its end) and k - q <= position[k] (q not before
  // its start).
  const torch::Tensor same = (ahead.unsqueeze(0) <= span) & ((-ahead).unsqueeze(0) <= before);  // (B, T, T)
  return torch::zeros(same.sizes(), attention_span.options().dtype(torch::kFloat))
      .masked_fill(same.logical_not(), -std::numeric_limits<float>::infinity())
      .unsqueeze(1);
}

std::pair<torch::Tensor, torch::Tensor> BertEncoderImpl::forward(const torch::Tensor& input_ids,
                                                                 const torch::Tensor& attention_mask,
                                                                 const torch::Tensor& token_type_ids,
                                                                 const torch::Tensor& attention_bias) {
  const BertEncoderOptions& o = options_;
  if (attention_bias.defined() && o.position_embedding_type != "rotary")
    throw std::invalid_argument(
        "packed (variable-sequence-length) samples need position_embedding_type rotary in "
        "zoo; with " +
        o.position_embedding_type +
        " positions each sequence would need its "
        "own position ids");
  torch::Tensor word_scale;
  if (o.token_dropout) {  // ESM's: every training run masked 15% of tokens, 80% of those with the mask token
    const auto dtype = embedding_layer->word_embeddings->weight.scalar_type();  // modelzoo's: the embeddings'
    const torch::Tensor masked = input_ids == *o.mask_token_id;
    const torch::Tensor lengths = attention_mask.defined() ? attention_mask.to(dtype).sum(-1, true)
                                                           : torch::full({1, 1}, double(input_ids.size(1)), dtype);
    const torch::Tensor kept = 1.0 - masked.to(dtype).sum(-1, true) / lengths;
    word_scale = torch::where(masked, torch::zeros({}, dtype), (1.0 - 0.15 * 0.8) / kept);
  }
  torch::Tensor h = embedding_layer->forward(input_ids, 0, token_type_ids, word_scale);
  if (o.embeddings_scale != 1.0) h = h * o.embeddings_scale;
  if (embed_ln_f) h = embed_ln_f(h);
  if (shape_.embedding_dropout > 0) h = torch::dropout(h, shape_.embedding_dropout, is_training());
  // The packing bias hides padding too (its own sequences), as modelzoo's VSL mask does.
  const torch::Tensor key_mask =
      attention_mask.defined() && !attention_bias.defined() ? attention_mask != 0 : torch::Tensor();
  h = transformer_encoder->forward(h, key_mask, attention_bias);
  torch::Tensor pooled;
  if (pooler) pooled = activation(o.pooler_nonlinearity.value_or(o.encoder_nonlinearity), pooler(h.select(1, 0)));
  return {h, pooled};
}

std::map<std::string, LrAdjustmentGroup> BertEncoderImpl::lr_adjustment_groups() const {
  const BertEncoderOptions& o = options_;
  const double hidden = o.mup_base_hidden_size ? *o.mup_base_hidden_size / double(o.hidden_size) : 1.0;
  const double filter = o.mup_base_filter_size ? *o.mup_base_filter_size / double(o.filter_size) : 1.0;
  return {{"embedding", {{"*embedding*weight"}}},
          {"encoder_attention", {{"*transformer_encoder*attn*dense*weight"}, hidden}},
          {"encoder_input_ffn", {{"*transformer_encoder*ffn.ffn.[!1]*weight"}, hidden}},
          {"encoder_output_ffn", {{"*transformer_encoder*ffn.ffn.[1]*weight"}, filter}},
          {"pooler", {{"*pooler*weight"}, hidden}}};
}

double BertEncoderImpl::forward_flops_per_token() const {
  const double C = options_.hidden_size, F = options_.filter_size, L = options_.num_hidden_layers;
  const double kv = options_.attention_module == "multiquery_attention"
                        ? C * options_.extra_attention_params.num_kv_groups / options_.num_heads
                        : C;
  // Bidirectional attention: q.k and the weighted values, 2 T C multiply-adds per token.
  return 2 * L * (2 * C * C + 2 * C * kv + 2 * C * F) + 4 * L * options_.max_position_embeddings * C;
}

}  // namespace zoo::models
