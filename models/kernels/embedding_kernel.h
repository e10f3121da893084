// Token plus learned-position embedding lookup, W[ids] + P[first + t], for
// float32 CPU tables as one autograd node: one pass each way instead of two
// lookups, an add, and two embedding backwards (each a sort by index in
// LibTorch 1.13).
// On CUDA, a table lookup whose backward sums the gradient rows per id with
// zoo's kernel (models/kernels/cuda/embedding.h) instead of LibTorch's.
// Defines: cpu_embedding_available, cpu_embedding_sum, EmbeddingKernels,
// embedding_through, cuda_embedding_available, cuda_embedding.
#pragma once

#include <torch/torch.h>

#include "models/kernels/cuda/embedding.h"

namespace zoo::models {

// True when cpu_embedding_sum applies: float32 CPU tables, int64 CPU ids.
bool cpu_embedding_available(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions);

// ids (B, T) int64 < V, words (V, C), positions (P, C) with first + T <= P
// -> (B, T, C) = words[ids[b, t]] + positions[first + t]; differentiable in
// both tables. An id outside [0, V) is an error naming it.
torch::Tensor cpu_embedding_sum(const torch::Tensor& ids, const torch::Tensor& words, const torch::Tensor& positions,
                                int64_t first);

// zoo's CUDA embedding gradient as a table: embedding_through runs the host
// side of it, and tests hand it the kernels compiled for the CPU
// (tests/cuda_emulation.h).
struct EmbeddingKernels {
  decltype(&zoo::cuda::embedding_grad_tasks) grad_tasks;
  decltype(&zoo::cuda::embedding_grad) grad;
};

// words[ids] (ids int64 of any shape, each in [0, V); words (V, C) float32)
// as LibTorch's embedding computes it; words' gradient from `kernels` (a
// table that outlives the autograd graph): the ids sorted (stably), then
// each id's gradient rows summed in that order, the same on every run.
torch::Tensor embedding_through(const EmbeddingKernels& kernels, const torch::Tensor& ids, const torch::Tensor& words);

// True when cuda_embedding applies: a build with zoo's CUDA kernels whose
// environment does not turn this one off (ZOO_CUDA_KERNELS), CUDA int64 ids,
// a float32 CUDA table that needs its gradient.
bool cuda_embedding_available(const torch::Tensor& ids, const torch::Tensor& words);

// embedding_through zoo's CUDA kernels.
torch::Tensor cuda_embedding(const torch::Tensor& ids, const torch::Tensor& words);

}  // namespace zoo::models
