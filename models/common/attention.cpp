// Implementation of models/common/attention.h. Which kernel computes the
// scores and their softmax is the layer's plan (models/fusion.h);
// reference_attention is the explicit math the fused kernels are tested
// against, and serves what they do not (dropout with zoo's CPU kernel,
// decoding with a cache and a mask, ALiBi's trained slopes, T5's bias).
#include "models/common/attention.h"

#include <cmath>
#include <limits>

#include "models/kernels/cpu/causal_attention.h"
#include "models/kernels/torch_version.h"

namespace zoo::models {
namespace {
// Grouped-query attention: each of the G key/value heads (dim 1) serves H / G query heads.
torch::Tensor repeat_kv_heads(const torch::Tensor& t, int64_t H) {
  return t.size(1) == H ? t : t.repeat_interleave(H / t.size(1), 1);
}
// softmax_fp32's widening: half precision to float32; float64 stays.
torch::Tensor at_least_float(const torch::Tensor& t) {
  return t.scalar_type() == torch::kDouble ? t : t.to(torch::kFloat);
}
#if ZOO_TORCH_AT_LEAST(2, 1)
// SDPA's optional mask: no mask is nullopt, not an undefined tensor (which
// LibTorch 2.11 refuses for its missing dtype).
c10::optional<torch::Tensor> sdpa_mask(const torch::Tensor& mask) {
  return mask.defined() ? c10::optional<torch::Tensor>(mask) : c10::nullopt;
}
#endif
// (B, T, T) bool: query i sees key j when starts[i] <= j <= i (its own sequence, causal).
torch::Tensor packed_visibility(const torch::Tensor& starts) {
  const int64_t T = starts.size(1);
  const torch::Tensor keys = torch::arange(T, starts.options()).view({1, 1, T});
  return (keys >= starts.unsqueeze(-1)) & (keys <= torch::arange(T, starts.options()).view({1, T, 1}));
}
}  // namespace

torch::Tensor sequence_starts(const torch::Tensor& packed_positions) {
  const torch::Tensor at = packed_positions.to(torch::kLong);
  return torch::arange(at.size(1), at.options()).unsqueeze(0) - at;
}

MultiheadAttentionImpl::MultiheadAttentionImpl(const AttentionOptions& o, const torch::TensorOptions& p) : options_(o) {
  const int64_t C = o.hidden_size, inner = inner_dim(), KV = kv_heads() * (inner / o.num_heads);
  proj_q_dense_layer = register_module("proj_q_dense_layer", Dense(C, inner, o.use_projection_bias, p));
  proj_k_dense_layer = register_module("proj_k_dense_layer", Dense(C, KV, o.use_projection_bias, p));
  proj_v_dense_layer = register_module("proj_v_dense_layer", Dense(C, KV, o.use_projection_bias, p));
  proj_output_dense_layer = register_module("proj_output_dense_layer", Dense(inner, C, o.use_output_bias, p));
  if (!o.qk_norm.empty()) {
    const bool rms = o.qk_norm == "rmsnorm";
    q_norm = register_module("q_norm", LayerNorm(inner / o.num_heads, o.qk_norm_eps, p, rms));
    k_norm = register_module("k_norm", LayerNorm(inner / o.num_heads, o.qk_norm_eps, p, rms));
  }
}

void MultiheadAttentionImpl::reset_parameters() {
  proj_q_dense_layer->reset_parameters(options_.q_initializer.value_or(options_.initializer));
  proj_k_dense_layer->reset_parameters(options_.initializer);
  proj_v_dense_layer->reset_parameters(options_.initializer);
  proj_output_dense_layer->reset_parameters(options_.output_initializer);
  if (q_norm) q_norm->reset_parameters(), k_norm->reset_parameters();
}

double MultiheadAttentionImpl::score_scale(int64_t D) const {
  const double by_dim = options_.scale_by_head_dim ? 1.0 / double(D) : 1.0 / std::sqrt(double(D));
  return (options_.scale_by_sqrt_head_dim ? by_dim : 1.0) * options_.logit_multiplier;
}

torch::Tensor MultiheadAttentionImpl::attend_to(const torch::Tensor& x, const torch::Tensor& memory,
                                                const torch::Tensor& memory_mask) {
  const int64_t B = x.size(0), T = x.size(1), S = memory.size(1), H = options_.num_heads, inner = inner_dim(),
                D = inner / H, G = kv_heads();
  // (B, heads, length, D)
  torch::Tensor q = proj_q_dense_layer(x).view({B, T, H, D}).transpose(1, 2);
  torch::Tensor k = proj_k_dense_layer(memory).view({B, S, G, D}).transpose(1, 2);
  if (q_norm) q = q_norm(q), k = k_norm(k);
  const torch::Tensor v = proj_v_dense_layer(memory).view({B, S, G, D}).transpose(1, 2);
  const double p_drop = is_training() ? options_.dropout : 0.0;
  const torch::Tensor key_mask = memory_mask.defined() ? memory_mask.to(torch::kBool) : memory_mask;
  torch::Tensor y;
#if ZOO_TORCH_AT_LEAST(2, 1)
  if (plan.cross_sdpa) {
    y = at::scaled_dot_product_attention(q, repeat_kv_heads(k, H), repeat_kv_heads(v, H),
                                         sdpa_mask(key_mask.defined() ? key_mask.view({B, 1, 1, S}) : key_mask), p_drop,
                                         /*is_causal=*/false, score_scale(D));
  }
#endif
  if (!y.defined()) {
    ScoreOptions scores;
    scores.scale = score_scale(D);
    scores.causal = false;
    scores.key_mask = key_mask;
    scores.logit_softcapping = options_.logit_softcapping;
    scores.softmax_fp32 = options_.softmax_fp32;
    scores.dropout = p_drop;
    y = reference_attention(q, k, v, scores);
  }
  return proj_output_dense_layer(y.transpose(1, 2).reshape({B, T, inner}));
}

torch::Tensor MultiheadAttentionImpl::forward(const torch::Tensor& x, LayerKV* cache, const torch::Tensor& alibi_slopes,
                                              const torch::Tensor& key_mask, const torch::Tensor& position_bias,
                                              bool without_output_bias, const torch::Tensor& packed_positions) {
  auto project_output = [&](const torch::Tensor& heads) {  // (B, T, inner) -> (B, T, C)
    return without_output_bias ? proj_output_dense_layer->forward_without_bias(heads) : proj_output_dense_layer(heads);
  };
  const int64_t B = x.size(0), T = x.size(1), H = options_.num_heads, inner = inner_dim(), D = inner / H,
                G = kv_heads();
  // q, k and v from one GEMM over the stacked weights (one pass over x; the
  // parameters and their checkpoint keys stay separate).
  const std::vector<DenseImpl*> projections = {proj_q_dense_layer.get(), proj_k_dense_layer.get(),
                                               proj_v_dense_layer.get()};
  int64_t past = cache && cache->keys.defined() ? cache->keys.size(1) : 0;  // positions already cached
  const bool packed = packed_positions.defined();
  TORCH_CHECK(!packed || (!cache && options_.causal && options_.sink_tokens == 0),
              "packed sequences are for causal attention without a cache or sink tokens");
  const torch::Tensor starts = packed ? sequence_starts(packed_positions) : torch::Tensor();
  // q, k and v (B, T, heads, D) are views of the projection's one output. On
  // zoo's CUDA path its node packs their gradients back in the pass that sums
  // the bias gradient (qkv is undefined there); elsewhere they are split off
  // qkv, whose backward is one cat, where narrows would each zero-fill a copy
  // of qkv's whole gradient and add them up.
  torch::Tensor q, k, v, rotated_qk, qkv;
  if (q_norm || options_.rotary.dim > 0) {  // q and k normalized per head, then rotated alike: one call for both
    DenseHeads qk_v = dense_heads(x, projections, {(H + G) * D, G * D}, D);
    qkv = qk_v.packed;
    torch::Tensor qk = qk_v.heads[0];
    if (q_norm) {
      const std::vector<torch::Tensor> q_k = qk.split_with_sizes({H, G}, 2);
      qk = torch::cat({q_norm(q_k[0]), k_norm(q_k[1])}, 2);
    }
    if (options_.rotary.dim > 0)
      qk = packed ? apply_rotary(qk, options_.rotary, packed_positions) : apply_rotary(qk, options_.rotary, past);
    const std::vector<torch::Tensor> q_k = qk.split_with_sizes({H, G}, 2);
    q = q_k[0], k = q_k[1], v = qk_v.heads[1];
    rotated_qk = qk;
  } else {
    DenseHeads parts = dense_heads(x, projections, {H * D, G * D, G * D}, D);
    qkv = parts.packed;
    q = parts.heads[0], k = parts.heads[1], v = parts.heads[2];
  }
  if (cache) {
    if (past > 0) {
      k = torch::cat({cache->keys, k}, 1);  // (B, past + T, G, D)
      v = torch::cat({cache->values, v}, 1);
    }
    cache->keys = k;
    cache->values = v;
  }
  const double scale = score_scale(D);
  const double p_drop = is_training() ? options_.dropout : 0.0;
  auto merge_heads = [&](const torch::Tensor& y) {  // (B, H, T, D) -> (B, T, C)
    return project_output(y.transpose(1, 2).reshape({B, T, inner}));
  };
  AttentionCall call;
  call.past = past;
  call.positions = T;
  call.key_mask = key_mask.defined();
  call.dropout = p_drop > 0;
  call.position_bias = position_bias.defined();
  call.alibi = alibi_slopes.defined();
  call.trained_alibi = alibi_slopes.defined() && alibi_slopes.requires_grad();
  call.packed = packed;
  call.packed_qkv = qkv;
  switch (plan.kernel_for(call)) {
    case AttentionKernel::sdpa: {
#if ZOO_TORCH_AT_LEAST(2, 1)
      // is_causal aligns the mask top-left, right only without a cache; one new
      // token may attend to everything.
      // Packed rows: each query's own sequence up to itself, as a mask.
      const bool causal = options_.causal && past == 0 && T > 1 && !packed;
      torch::Tensor kh = repeat_kv_heads(k.transpose(1, 2), H), vh = repeat_kv_heads(v.transpose(1, 2), H);
      const torch::Tensor mask = packed               ? packed_visibility(starts).unsqueeze(1)
                                 : key_mask.defined() ? key_mask.to(torch::kBool).view({B, 1, 1, -1})
                                                      : key_mask;
      return merge_heads(at::scaled_dot_product_attention(q.transpose(1, 2), kh, vh, sdpa_mask(mask), p_drop,
                                                          /*is_causal=*/causal, scale));
#else
      break;  // never planned without SDPA
#endif
    }
    case AttentionKernel::cpu_causal: {
      std::vector<double> slopes;
      if (alibi_slopes.defined()) {
        const torch::Tensor s = alibi_slopes.detach().to(torch::kDouble).contiguous();
        slopes.assign(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
      }
      // The CPU kernel reads q, k and v side by side in one tensor.
      const torch::Tensor fused = rotated_qk.defined() ? torch::cat({rotated_qk.flatten(2), v.flatten(2)}, -1) : qkv;
      return project_output(
          causal_attention(fused, H, G, scale, options_.sliding_window, slopes, starts).view({B, T, inner}));
    }
    case AttentionKernel::reference: break;
  }
  ScoreOptions scores;
  scores.scale = scale;
  scores.causal = options_.causal;
  scores.sliding_window = options_.sliding_window;
  scores.sink_tokens = options_.sink_tokens;
  scores.alibi_slopes = alibi_slopes;
  scores.key_mask = key_mask.defined() ? key_mask.to(torch::kBool) : key_mask;
  scores.logit_softcapping = options_.logit_softcapping;
  scores.bias = position_bias;
  scores.sequence_start = starts;
  scores.softmax_fp32 = options_.softmax_fp32;
  scores.dropout = p_drop;
  return merge_heads(reference_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), scores));
}

namespace {
torch::Scalar lowest_finite(torch::ScalarType t) {
  switch (t) {
    case torch::kDouble: return std::numeric_limits<double>::lowest();
    case torch::kHalf: return std::numeric_limits<c10::Half>::lowest();
    case torch::kBFloat16: return std::numeric_limits<c10::BFloat16>::lowest();
    default: return std::numeric_limits<float>::lowest();
  }
}
}  // namespace

torch::Tensor reference_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v, const ScoreOptions& o) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), past = k.size(2) - T;
  k = repeat_kv_heads(k, H);
  v = repeat_kv_heads(v, H);
  torch::Tensor scores = torch::matmul(q, k.transpose(-2, -1)) * o.scale;  // (B, H, T, past + T)
  if (o.logit_softcapping > 0) scores = torch::tanh(scores / o.logit_softcapping) * o.logit_softcapping;
  if (o.alibi_slopes.defined()) {  // in float32 with softmax_fp32: the bias reaches slope * context length
    if (o.softmax_fp32) scores = at_least_float(scores);
    scores = scores + o.alibi_slopes.view({1, H, 1, 1}).to(scores.scalar_type()) *
                          torch::arange(past + T, scores.options()).view({1, 1, 1, past + T});
  }
  if (o.bias.defined()) {  // in float32 with softmax_fp32, as the ALiBi bias
    if (o.softmax_fp32) scores = at_least_float(scores);
    scores = scores + o.bias.to(scores.scalar_type());
  }
  // Query i sits at position past + i and, causal, sees keys 0 .. past + i
  // (the last sliding_window of them when set, and the first sink_tokens).
  auto bools = torch::dtype(torch::kBool).device(q.device());
  torch::Tensor mask = torch::zeros({T, past + T}, bools);
  if (o.causal) {
    const torch::Tensor future = torch::ones({T, past + T}, bools).triu(past + 1);
    mask = future;
    if (o.sliding_window > 0) {
      mask = future | torch::ones({T, past + T}, bools).tril(past - o.sliding_window);
      const int64_t sinks = std::min(o.sink_tokens, past + T);
      if (sinks > 0) mask.narrow(1, 0, sinks).copy_(future.narrow(1, 0, sinks));
    }
  }
  // Padding takes the dtype's lowest finite score, as modelzoo's additive
  // finfo.min masks do, and the causal/window mask -inf: a query whose visible
  // keys are all padding (LLaVA's absent image in front of the text) averages
  // their values, as modelzoo's, instead of turning into NaN; any other row is
  // unchanged, its hidden keys' exp() being exactly 0 either way.
  if (o.key_mask.defined())
    scores =
        scores.masked_fill(o.key_mask.logical_not().view({B, 1, 1, past + T}), lowest_finite(scores.scalar_type()));
  if (o.sequence_start.defined()) {  // packed rows: no key before the query's own sequence
    TORCH_CHECK(past == 0, "packed sequences take no cache");
    mask = mask.unsqueeze(0) | packed_visibility(o.sequence_start).logical_not();
    mask = mask.unsqueeze(1);  // (B, 1, T, T)
  }
  scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
  torch::Tensor probs =
      o.softmax_fp32 ? torch::softmax(at_least_float(scores), -1).to(v.scalar_type()) : torch::softmax(scores, -1);
  if (o.dropout > 0) probs = torch::dropout(probs, o.dropout, true);
  return torch::matmul(probs, v);  // (B, H, T, D)
}

}  // namespace zoo::models
