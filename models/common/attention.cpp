// Implementation of models/common/attention.h. On LibTorch >= 2.1 the fused
// scaled_dot_product_attention kernel is used when its semantics match;
// the explicit path below is the reference and the LibTorch 1.13 path.
#include "models/common/attention.h"

#include <cmath>

namespace zoo::models {

MultiheadAttentionImpl::MultiheadAttentionImpl(const AttentionOptions& o,
                                               const torch::TensorOptions& p)
    : options_(o) {
  const int64_t C = o.hidden_size;
  proj_q_dense_layer = register_module("proj_q_dense_layer", Dense(C, C, o.use_projection_bias, p));
  proj_k_dense_layer = register_module("proj_k_dense_layer", Dense(C, C, o.use_projection_bias, p));
  proj_v_dense_layer = register_module("proj_v_dense_layer", Dense(C, C, o.use_projection_bias, p));
  proj_output_dense_layer = register_module("proj_output_dense_layer", Dense(C, C, o.use_output_bias, p));
}

void MultiheadAttentionImpl::reset_parameters() {
  proj_q_dense_layer->reset_parameters(options_.initializer);
  proj_k_dense_layer->reset_parameters(options_.initializer);
  proj_v_dense_layer->reset_parameters(options_.initializer);
  proj_output_dense_layer->reset_parameters(options_.output_initializer);
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& x, LayerKV* cache) {
  const int64_t B = x.size(0), T = x.size(1), C = x.size(2), H = options_.num_heads, D = C / H;
  // (B, T, C) -> (B, H, T, D)
  auto split = [&](const torch::Tensor& t) { return t.view({B, T, H, D}).transpose(1, 2); };
  torch::Tensor q = split(proj_q_dense_layer(x));
  torch::Tensor k = split(proj_k_dense_layer(x));
  torch::Tensor v = split(proj_v_dense_layer(x));
  int64_t past = 0;  // positions already in the cache
  if (cache) {
    if (cache->keys.defined()) {
      past = cache->keys.size(2);
      k = torch::cat({cache->keys, k}, 2);  // (B, H, past + T, D)
      v = torch::cat({cache->values, v}, 2);
    }
    cache->keys = k;
    cache->values = v;
  }
  const double scale = options_.scale_by_sqrt_head_dim ? 1.0 / std::sqrt(double(D)) : 1.0;
  const double p_drop = is_training() ? options_.dropout : 0.0;

  torch::Tensor y;
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 1)  // `scale` arrived in 2.1
  // is_causal aligns the mask top-left, right only without a cache; one new
  // token may attend to everything.
  if (past == 0 || T == 1) {
    y = at::scaled_dot_product_attention(q, k, v, /*attn_mask=*/{}, p_drop, /*is_causal=*/past == 0 && T > 1, scale);
    return proj_output_dense_layer(y.transpose(1, 2).reshape({B, T, C}));
  }
#endif
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * scale;  // (B, H, T, past + T)
  // Query i sits at position past + i and sees keys 0 .. past + i.
  torch::Tensor mask = torch::ones({T, past + T}, torch::dtype(torch::kBool).device(x.device())).triu(past + 1);
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  torch::Tensor probs = options_.softmax_fp32 ? torch::softmax(scores.to(torch::kFloat), -1).to(v.scalar_type())
                                              : torch::softmax(scores, -1);
  if (p_drop > 0) probs = torch::dropout(probs, p_drop, true);
  y = torch::matmul(probs, v);  // (B, H, T, D)
  return proj_output_dense_layer(y.transpose(1, 2).reshape({B, T, C}));
}

}  // namespace zoo::models
