// Implementation of models/common/attention.h. On LibTorch >= 2.1 the fused
// scaled_dot_product_attention kernel is used when its semantics match;
// the explicit path below is the reference and the LibTorch 1.13 path.
#include "models/common/attention.h"

#include <cmath>

namespace zoo::models {

MultiheadAttentionImpl::MultiheadAttentionImpl(const AttentionOptions& o,
                                               const torch::TensorOptions& p)
    : options_(o) {
  const int64_t C = o.hidden_size, KV = kv_heads() * (C / o.num_heads);
  proj_q_dense_layer = register_module("proj_q_dense_layer", Dense(C, C, o.use_projection_bias, p));
  proj_k_dense_layer = register_module("proj_k_dense_layer", Dense(C, KV, o.use_projection_bias, p));
  proj_v_dense_layer = register_module("proj_v_dense_layer", Dense(C, KV, o.use_projection_bias, p));
  proj_output_dense_layer = register_module("proj_output_dense_layer", Dense(C, C, o.use_output_bias, p));
}

void MultiheadAttentionImpl::reset_parameters() {
  proj_q_dense_layer->reset_parameters(options_.initializer);
  proj_k_dense_layer->reset_parameters(options_.initializer);
  proj_v_dense_layer->reset_parameters(options_.initializer);
  proj_output_dense_layer->reset_parameters(options_.output_initializer);
}

torch::Tensor apply_rotary(const torch::Tensor& x, int64_t rotary_dim, double base, int64_t first_position) {
  const int64_t T = x.size(2);
  auto f = torch::TensorOptions().dtype(torch::kFloat).device(x.device());
  torch::Tensor inv_freq = torch::pow(base, -torch::arange(0, rotary_dim, 2, f) / double(rotary_dim));  // (R/2)
  torch::Tensor angle = torch::arange(first_position, first_position + T, f).unsqueeze(1) * inv_freq;  // (T, R/2)
  torch::Tensor cos = angle.cos(), sin = angle.sin();
  torch::Tensor rot = x.narrow(-1, 0, rotary_dim).to(torch::kFloat);
  torch::Tensor pairs = rot.view({x.size(0), x.size(1), T, rotary_dim / 2, 2});
  torch::Tensor even = pairs.select(-1, 0), odd = pairs.select(-1, 1);
  torch::Tensor out = torch::stack({even * cos - odd * sin, even * sin + odd * cos}, -1).flatten(-2);
  out = out.to(x.scalar_type());
  if (rotary_dim == x.size(-1)) return out;
  return torch::cat({out, x.narrow(-1, rotary_dim, x.size(-1) - rotary_dim)}, -1);
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& x, LayerKV* cache) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = options_.num_heads, D = C / H, G = kv_heads();
  // (B, T, heads * D) -> (B, heads, T, D)
  auto split = [&](const torch::Tensor& t, int64_t heads) { return t.view({B, T, heads, D}).transpose(1, 2); };
  torch::Tensor q = split(proj_q_dense_layer(x), H);
  torch::Tensor k = split(proj_k_dense_layer(x), G);
  torch::Tensor v = split(proj_v_dense_layer(x), G);
  int64_t past = cache && cache->keys.defined() ? cache->keys.size(2) : 0;  // positions already cached
  if (options_.rotary_dim > 0) {
    q = apply_rotary(q, options_.rotary_dim, options_.rotary_base, past);
    k = apply_rotary(k, options_.rotary_dim, options_.rotary_base, past);
  }
  if (cache) {
    if (past > 0) {
      k = torch::cat({cache->keys, k}, 2);  // (B, G, past + T, D)
      v = torch::cat({cache->values, v}, 2);
    }
    cache->keys = k;
    cache->values = v;
  }
  if (G != H) {  // grouped-query attention: each key/value head serves H / G query heads
    k = k.repeat_interleave(H / G, 1);
    v = v.repeat_interleave(H / G, 1);
  }
  const double scale = options_.scale_by_sqrt_head_dim ? 1.0 / std::sqrt(double(D)) : 1.0;
  const double p_drop = is_training() ? options_.dropout : 0.0;

  torch::Tensor y;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)  // `scale` arrived in 2.1
  // is_causal aligns the mask top-left, right only without a cache; one new
  // token may attend to everything.
  if ((past == 0 || T == 1) && options_.sliding_window == 0) {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p_drop, /*is_causal=*/past == 0 && T > 1, scale);
    return proj_output_dense_layer(y.transpose(1, 2).reshape({B, T, C}));
  }
#endif
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;  // (B, H, T, past + T)
  // Query i sits at position past + i and sees keys 0 .. past + i (the last
  // sliding_window of them when set).
  torch::Tensor mask = torch::ones({T, past + T}, torch::dtype(torch::kBool).device(x.device())).triu(past + 1);
  if (options_.sliding_window > 0)
    mask = mask | torch::ones({T, past + T}, torch::dtype(torch::kBool).device(x.device()))
                      .tril(past - options_.sliding_window);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  torch::Tensor probs = options_.softmax_fp32 ? torch::softmax(scores.to(torch::kFloat), -1).to(v.scalar_type())
                                              : torch::softmax(scores, -1);
  if (p_drop > 0) probs = torch::dropout(probs, p_drop, true);
  y = torch::matmul(probs, v);  // (B, H, T, D)
  return proj_output_dense_layer(y.transpose(1, 2).reshape({B, T, C}));
}

}  // namespace zoo::models
