// Implementation of models/common/decoder_lm_fields.h.
#include "models/common/decoder_lm_fields.h"

namespace zoo::models {

const config::Schema<ExtraAttentionParams>& ExtraAttentionParams::schema() {
  using E = ExtraAttentionParams;
  static const config::Schema<E> s =
      config::Schema<E>("extra_attention_params", "Attention-module specific settings.")
          .field("num_kv_groups", &E::num_kv_groups, "multiquery_attention: key/value heads (1: MQA, >1: GQA).",
                 config::positive<int64_t>());
  return s;
}

const config::Schema<PosScalingExtraArgs>& PosScalingExtraArgs::schema() {
  using E = PosScalingExtraArgs;
  static const config::Schema<E> s =
      config::Schema<E>("pos_scaling_extra_args", "Arguments of the position scaling type.")
          .field("original_max_position_embeddings", &E::original_max_position_embeddings,
                 "llama3, yarn: the context the model was pre-trained with.",
                 config::if_set(config::positive<int64_t>()))
          .field("low_freq_factor", &E::low_freq_factor, "llama3: wavelengths beyond original / this are scaled.",
                 config::if_set(config::positive<double>()))
          .field("high_freq_factor", &E::high_freq_factor, "llama3: wavelengths below original / this are kept.",
                 config::if_set(config::positive<double>()))
          .field("beta_fast", &E::beta_fast, "yarn: rotations bounding the kept (extrapolated) frequencies.",
                 config::if_set(config::positive<double>()))
          .field("beta_slow", &E::beta_slow, "yarn: rotations bounding the interpolated frequencies.",
                 config::if_set(config::positive<double>()))
          .field("extrapolation_factor", &E::extrapolation_factor, "yarn: weight of the extrapolated frequencies.")
          .field("mscale_a", &E::mscale_a, "yarn: cos/sin are scaled by mscale_a * ln(factor) + mscale_b.")
          .field("mscale_b", &E::mscale_b, "yarn: see mscale_a.")
          .field("truncate", &E::truncate, "yarn: round the blended band's bounds to whole dims.");
  return s;
}

void check_position_scaling(const DecoderLmOptions& o,
                            const std::function<void(const std::string&, const std::string&)>& fail) {
  const std::string& type = o.pos_scaling_type;
  const bool yarn = type == "yarn" || type == "YaRN";
  if (type == "longrope") fail("pos_scaling_type", "longrope is not supported by zoo (linear, llama3 and yarn are)");
  const bool rotary = o.position_embedding_type == "rotary", alibi = o.position_embedding_type == "alibi";
  if (o.pos_scaling_factor != 1.0 && !rotary && !alibi)
    fail("pos_scaling_factor",
         "applies to rotary and alibi position embeddings only (this model's are " + o.position_embedding_type + ")");
  if (type != "linear" && !rotary)
    fail("pos_scaling_type",
         type + " scales rotary position embeddings; with " + o.position_embedding_type + " use linear");
  if (!o.pos_scaling_extra_args) {
    if (yarn) fail("pos_scaling_extra_args", "yarn needs original_max_position_embeddings, the pre-trained context");
    return;
  }
  const PosScalingExtraArgs& e = *o.pos_scaling_extra_args;
  const std::vector<std::pair<std::string, bool>> llama3_only = {{"low_freq_factor", e.low_freq_factor.has_value()},
                                                                 {"high_freq_factor", e.high_freq_factor.has_value()}};
  const std::vector<std::pair<std::string, bool>> yarn_only = {
      {"beta_fast", e.beta_fast.has_value()},
      {"beta_slow", e.beta_slow.has_value()},
      {"extrapolation_factor", e.extrapolation_factor.has_value()},
      {"mscale_a", e.mscale_a.has_value()},
      {"mscale_b", e.mscale_b.has_value()},
      {"truncate", e.truncate.has_value()}};
  auto refuse = [&](const std::vector<std::pair<std::string, bool>>& keys, const std::string& owner) {
    for (const auto& [key, given] : keys)
      if (given) fail("pos_scaling_extra_args", key + " belongs to pos_scaling_type " + owner + ", not " + type);
  };
  if (type != "llama3") refuse(llama3_only, "llama3");
  if (!yarn) refuse(yarn_only, "yarn");
  if (type == "linear" && e.original_max_position_embeddings)
    fail("pos_scaling_extra_args", "original_max_position_embeddings belongs to llama3 and yarn, not linear");
  if (yarn && !e.original_max_position_embeddings)
    fail("pos_scaling_extra_args", "yarn needs original_max_position_embeddings, the pre-trained context");
  if (type == "llama3" && e.high_freq_factor.value_or(4.0) <= e.low_freq_factor.value_or(1.0))
    fail("pos_scaling_extra_args", "high_freq_factor must be greater than low_freq_factor");
}

void check_mup(const DecoderLmOptions& o, const std::function<void(const std::string&, const std::string&)>& fail) {
  if (!o.mup_base_hidden_size && !o.mup_base_filter_size) return;
  if (!o.mup_base_hidden_size || !o.mup_base_filter_size)
    fail(o.mup_base_hidden_size ? "mup_base_filter_size" : "mup_base_hidden_size",
         "muP needs both mup_base_hidden_size and mup_base_filter_size");
  const std::vector<std::pair<std::string, std::optional<InitializerSpec>>> scaled = {
      {"initializer", o.initializer},
      {"output_layer_initializer", o.output_layer_initializer},
      {"ffn_initializer", o.ffn_initializer},
      {"ffn_output_layer_initializer", o.ffn_output_layer_initializer}};
  for (const auto& [key, spec] : scaled)
    if (spec && spec->name != "normal" && spec->name != "truncated_normal")
      fail(key, "muP scales normal and truncated_normal initializers only, not " + spec->name);
}

namespace {
// The parameter count, with every product checked: the first one that
// overflows (or passes kMaxParameters) names its key.
void check_parameter_count(const DecoderLmShape& o,
                           const std::function<void(const std::string&, const std::string&)>& fail) {
  using decoder_limits::kMaxParameters;
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
  add({{L, "num_hidden_layers"},
       {o.filter_size, "filter_size"},
       {C, "hidden_size"},
       {3, "filter_size"}});  // FFN (GLU: 3 matrices)
}
}  // namespace

void check_decoder_lm_shape(const DecoderLmShape& o,
                            const std::function<void(const std::string&, const std::string&)>& fail) {
  if (o.hidden_size % o.num_heads != 0)
    fail("num_heads", "num_heads (" + std::to_string(o.num_heads) + ") must divide hidden_size (" +
                          std::to_string(o.hidden_size) + ")");
  if (o.position_embedding_type == "fixed" && o.hidden_size % 2 != 0)
    fail("hidden_size", "fixed position embeddings need an even hidden_size");
  const int64_t inner = o.attention_inner_dim.value_or(o.hidden_size);
  if (inner % o.num_heads != 0)
    fail("attention_inner_dim", "num_heads (" + std::to_string(o.num_heads) + ") must divide attention_inner_dim (" +
                                    std::to_string(inner) + ")");
  const int64_t head = inner / o.num_heads;
  if (o.rotary_dim && (*o.rotary_dim % 2 != 0 || *o.rotary_dim > head))
    fail("rotary_dim", "expected an even number <= the head size (" + std::to_string(head) + ")");
  if (o.position_embedding_type == "rotary" && !o.rotary_dim && o.hidden_size / o.num_heads > head)
    fail("rotary_dim", "required with attention_inner_dim: its default, hidden_size / num_heads (" +
                           std::to_string(o.hidden_size / o.num_heads) + "), exceeds the head size (" +
                           std::to_string(head) + ")");
  if (o.attention_module == "multiquery_attention" && o.num_heads % o.num_kv_groups)
    fail("extra_attention_params", "num_kv_groups must divide num_heads (" + std::to_string(o.num_heads) + ")");
  check_parameter_count(o, fail);
}

}  // namespace zoo::models
