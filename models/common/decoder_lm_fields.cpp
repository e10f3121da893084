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

namespace {
// The parameter count, with every product checked: the first one that
// overflows (or passes kMaxParameters) names its key.
void check_parameter_count(const DecoderLmShape& o, const std::function<void(const std::string&, const std::string&)>& fail) {
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
  add({{L, "num_hidden_layers"}, {o.filter_size, "filter_size"}, {C, "hidden_size"}, {3, "filter_size"}});  // FFN (GLU: 3 matrices)
}
}  // namespace

void check_decoder_lm_shape(const DecoderLmShape& o,
                            const std::function<void(const std::string&, const std::string&)>& fail) {
  if (o.hidden_size % o.num_heads != 0)
    fail("num_heads", "num_heads (" + std::to_string(o.num_heads) + ") must divide hidden_size (" +
                          std::to_string(o.hidden_size) + ")");
  if (o.position_embedding_type == "fixed" && o.hidden_size % 2 != 0)
    fail("hidden_size", "fixed position embeddings need an even hidden_size");
  const int64_t head = o.hidden_size / o.num_heads;
  if (o.rotary_dim && (*o.rotary_dim % 2 != 0 || *o.rotary_dim > head))
    fail("rotary_dim", "expected an even number <= the head size (" + std::to_string(head) + ")");
  if (o.attention_module == "multiquery_attention" && o.num_heads % o.num_kv_groups)
    fail("extra_attention_params", "num_kv_groups must divide num_heads (" + std::to_string(o.num_heads) + ")");
  check_parameter_count(o, fail);
}

}  // namespace zoo::models
