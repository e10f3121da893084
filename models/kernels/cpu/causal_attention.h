// Causal softmax attention for float32 CPU tensors, computed block by block
// (as flash attention does): the key blocks a causal (or sliding-window) mask
// hides are never multiplied, the forward keeps one log-sum-exp per row
// instead of the (T, T) probabilities, and the backward recomputes them.
// Heads are read in place from the packed q/k/v projection output, so no
// transposed copies are made, its gradient is written in one buffer, and
// grouped key/value heads are shared without repeating them. LibTorch 1.13 has no fused attention on CPU; on >= 2.1
// at::scaled_dot_product_attention serves instead.
// Defines: causal_attention_available, causal_attention.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace zoo::models {

// True when this process has a CPU GEMM for the kernel (models/kernels/cpu/cpu_gemm.h) and
// it applies to `qkv`: a float32 CPU tensor.
bool causal_attention_available(const torch::Tensor& qkv);

// qkv: (B, T, (H + 2G) D), the packed projection output: H query heads, then
// G key heads, then G value heads, G dividing H (query head h reads key/value
// head h / (H / G)); unit stride in the last dim. Position i attends to
// positions max(0, i - window + 1) .. i (window 0: 0 .. i), scores scaled by
// `scale`; `alibi_slopes` (one per query head, or none) add ALiBi's
// slope_h * (j - i) to score (i, j), the slopes taken as constants.
// sequence_start (B, T) int64, for rows that pack several sequences: query
// i also sees no key before sequence_start[b, i] (its sequence's first).
// Returns (B, T, H, D), differentiable in qkv.
torch::Tensor causal_attention(const torch::Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, double scale,
                               int64_t window, const std::vector<double>& alibi_slopes = {},
                               const torch::Tensor& sequence_start = {});

}  // namespace zoo::models
