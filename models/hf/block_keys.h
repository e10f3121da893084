// The attention and FFN keys that modelzoo's transformer families (the GPT-2
// decoders, BERT, ViT, DiT) spell alike, turned into the shared layers'
// options in one place. Each family then sets what is its own: initializers,
// rotary, muP's scales, causality.
// Defines: attention_options_from_keys, bidirectional_attention_options, ffn_options_from_keys.
#pragma once

#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "models/common/attention.h"
#include "models/common/ffn.h"

namespace zoo::models {

namespace block_keys_detail {
// attention_dropout_rate is a number in some families and nullable
// (null: dropout_rate) in others.
inline double rate_or(double rate, double) { return rate; }
inline double rate_or(const std::optional<double>& rate, double fallback) { return rate.value_or(fallback); }

template <class Keys, class = void>
struct has_attention_module : std::false_type {};
template <class Keys>
struct has_attention_module<Keys, std::void_t<decltype(std::declval<const Keys&>().attention_module)>>
    : std::true_type {};
}  // namespace block_keys_detail

// hidden_size, num_heads, attention_module with
// extra_attention_params.num_kv_groups (where the family has them),
// use_projection_bias_in_attention, use_ffn_bias_in_attention (the output
// projection's bias), attention_dropout_rate (null: dropout_rate),
// attention_type and attention_softmax_fp32.
template <class Keys>
AttentionOptions attention_options_from_keys(const Keys& o) {
  AttentionOptions a;
  a.hidden_size = o.hidden_size;
  a.num_heads = o.num_heads;
  if constexpr (block_keys_detail::has_attention_module<Keys>::value) {
    if (o.attention_module == "multiquery_attention") a.num_kv_groups = o.extra_attention_params.num_kv_groups;
  }
  a.use_projection_bias = o.use_projection_bias_in_attention;
  a.use_output_bias = o.use_ffn_bias_in_attention;
  a.dropout = block_keys_detail::rate_or(o.attention_dropout_rate, o.dropout_rate);
  a.scale_by_sqrt_head_dim = o.attention_type == "scaled_dot_product";
  a.softmax_fp32 = o.attention_softmax_fp32;
  return a;
}

// An encoder's attention (every query sees every key) from the same keys,
// `init` initializing every projection (the vision families: ViT, DiT).
template <class Keys>
AttentionOptions bidirectional_attention_options(const Keys& o, const InitializerSpec& init) {
  AttentionOptions a = attention_options_from_keys(o);
  a.initializer = a.output_initializer = init;
  a.causal = false;
  return a;
}

// A feed-forward network over hidden_size with filter_size units, bias per
// use_ffn_bias and dropout_rate after the activation (a family's key names
// the activation: nonlinearity, encoder_nonlinearity, ...).
template <class Keys>
FeedForwardOptions ffn_options_from_keys(const Keys& o, const std::string& nonlinearity) {
  FeedForwardOptions f;
  f.input_size = o.hidden_size;
  f.filter_size = o.filter_size;
  f.nonlinearity = nonlinearity;
  f.use_bias = o.use_ffn_bias;
  f.dropout = o.dropout_rate;
  return f;
}

}  // namespace zoo::models
