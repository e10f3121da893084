// Token plus learned-position embedding lookup, W[ids] + P[first + t], for
// float32 CPU tables as one autograd node: one pass each way instead of two
// lookups, an add, and two embedding backwards (each a sort by index in
// LibTorch 1.13). ~3% of a small model's CPU training step.
// Defines: cpu_embedding_available, cpu_embedding_sum.
#pragma once

#include <torch/torch.h>

namespace zoo::models {

// True when cpu_embedding_sum applies: float32 CPU tables, int64 CPU ids.
bool cpu_embedding_available(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions);

// ids (B, T) int64 < V, words (V, C), positions (P, C) with first + T <= P
// -> (B, T, C) = words[ids[b, t]] + positions[first + t]; differentiable in
// both tables. An id outside [0, V) is an error naming it.
torch::Tensor cpu_embedding_sum(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions,
                                int64_t first);

}  // namespace zoo::models
