// Per-token cross-entropy over logits rows: zoo's CPU row kernel, the
// chunked path for other devices and types, and the host side of zoo's CUDA
// kernels (models/kernels/cuda/cross_entropy.h), with the one-pass loss that
// makes its gradient in the forward. The LM loss on top: models/common/lm_loss.h.
// Defines: PaddingColumns, token_cross_entropy, have_cuda_cross_entropy_kernels,
// CrossEntropyKernels, cross_entropy_through, weighted_cross_entropy_through,
// one_pass_cross_entropy_applies, one_pass_cross_entropy.
#pragma once

#include <torch/torch.h>

#include "models/kernels/cuda/cross_entropy.h"

namespace zoo::models {

// What a cross-entropy may assume of the logits' columns from vocab on.
enum class PaddingColumns {
  any,      // anything: they are left out (each chunk of rows is read strided)
  neg_inf,  // -inf, as OutputHead pads: a softmax over whole rows gives them 0
};

// Per-token cross-entropy -log softmax(logits[:, :vocab])[label], float32,
// of logits (N, >= vocab) in any float dtype with labels (N) < vocab.
// float32 CPU logits take one vectorized pass per row each way (exp with
// ~2e-7 relative error); the rest go through row chunks of at most ~256 MB
// in float32, each a fused log-softmax (on CUDA read straight from float16,
// bfloat16 through a float32 copy of the chunk) and, in the backward, a fused
// softmax written in the logits' dtype and scaled into the gradient; CUDA
// logits take zoo's fused kernels instead where they are built (see
// have_cuda_cross_entropy_kernels). All keep only the logits as given (never
// a float32 copy of all logits, let alone two), and give padding columns zero
// gradient.
// With PaddingColumns::neg_inf the chunks read whole rows, without the copy
// that a strided chunk costs each softmax kernel.
// chunk_rows overrides the chunk height (tests); 0: ~256 MB of float32 per chunk.
torch::Tensor token_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels, int64_t vocab,
                                  PaddingColumns padding = PaddingColumns::any, int64_t chunk_rows = 0);

// Whether token_cross_entropy runs CUDA logits through zoo's fused kernels:
// built with -DZOO_CUDA_KERNELS=ON, and the run's kernel policy
// (runconfig.cuda_kernels) has cross_entropy. (chunk_rows > 0
// always takes the chunks.)
bool have_cuda_cross_entropy_kernels();

// zoo's CUDA cross-entropy kernels as a table: cross_entropy_through runs the
// host side of them, and tests hand it the kernels compiled for the CPU
// (tests/cuda_emulation.h).
struct CrossEntropyKernels {
  decltype(&zoo::cuda::cross_entropy_forward) forward;
  decltype(&zoo::cuda::cross_entropy_backward) backward;
  decltype(&zoo::cuda::cross_entropy_forward_with_grad) forward_with_grad;
  decltype(&zoo::cuda::cross_entropy_scale_grad) scale_grad;
};

// Per-token cross-entropy over the first `columns` columns of logits (N,
// width; rows contiguous; float32, bfloat16 or float16) through `kernels` (a
// table that outlives the autograd graph), on the kernels' device: float32
// losses, NaN for a label outside [0, columns); the gradient in the logits'
// type, 0 in the columns from `columns` on.
torch::Tensor cross_entropy_through(const CrossEntropyKernels& kernels, const torch::Tensor& logits,
                                    const torch::Tensor& labels, int64_t columns);

// sum_i weights[i] * cross-entropy of row i (as cross_entropy_through), a
// float32 scalar differentiable in logits, for weights (N, float32, constants:
// a masked mean's mask / count) known before the backward: the forward makes
// the gradient too, in one kernel whose second read of each row comes from
// L2, and keeps it instead of the logits; the backward scales it by the
// loss's upstream gradient on the device (nothing to do when that is 1).
// Its backward runs once: with retain_graph, a second one is an error. The
// gradient is rounded to the logits' type before that scale: float16 would
// underflow under loss scaling (see one_pass_cross_entropy_applies).
torch::Tensor weighted_cross_entropy_through(const CrossEntropyKernels& kernels, const torch::Tensor& logits,
                                             const torch::Tensor& labels, const torch::Tensor& weights,
                                             int64_t columns);

// Whether a training loss sum_i w_i CE_i over these logits runs through
// weighted_cross_entropy_through (one_pass_cross_entropy): CUDA logits (N,
// width) of float32 or bfloat16 with contiguous rows, zoo's cross_entropy
// and cross_entropy_fused kernels on, and a gradient to make. float16 keeps
// the two passes: its gradient, rounded before a loss scale multiplies it,
// would underflow.
bool one_pass_cross_entropy_applies(const torch::Tensor& logits, const torch::Tensor& labels);

// sum_i weights[i] * CE_i over the first `columns` columns, through zoo's
// CUDA kernels (see one_pass_cross_entropy_applies, which must hold).
torch::Tensor one_pass_cross_entropy(const torch::Tensor& logits, const torch::Tensor& labels,
                                     const torch::Tensor& weights, int64_t columns);

}  // namespace zoo::models
