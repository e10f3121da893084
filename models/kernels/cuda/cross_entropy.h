// zoo's fused cross-entropy kernels for CUDA (models/kernels/cuda/cross_entropy.cu,
// built with -DZOO_CUDA_KERNELS=ON): one read of each row of logits forward,
// one read and one write backward, in float32 arithmetic from float32,
// bfloat16 or float16 logits. Plain C++ here, so that callers need no CUDA
// headers. Defines: cross_entropy_forward, cross_entropy_backward,
// cross_entropy_forward_with_grad, cross_entropy_scale_grad.
#pragma once

#include <cstdint>

#include "models/kernels/cuda/element_type.h"

namespace zoo::cuda {

// Rows [0, n) of `logits` (row i starts at logits + i * ld elements; columns
// contiguous): lse[i] = log sum_{j < columns} exp(x_ij) and loss[i] = lse[i] -
// x[i, labels[i]], NaN where a label is outside [0, columns) or the row holds
// a NaN. Rows starting on 16 bytes are read in 16-byte packs. Launched on
// `stream` (a cudaStream_t) of the current device. Returns nullptr, or the
// CUDA error's message.
const char* cross_entropy_forward(ElementType type, const void* logits, int64_t ld, const int64_t* labels, int64_t n,
                                  int64_t columns, float* lse, float* loss, void* stream);

// dlogits (n rows of `width`, contiguous, the logits' type):
// grad[i] * (exp(x_ij - lse[i]) - [j == labels[i]]) for j < columns, 0 beyond
// (where rows of both start on 16 bytes, in packs that may read, never use,
// the logits' columns [columns, width)).
const char* cross_entropy_backward(ElementType type, const void* logits, int64_t ld, const int64_t* labels,
                                   const float* lse, const float* grad, int64_t n, int64_t columns, int64_t width,
                                   void* dlogits, void* stream);

// The forward and the backward in one kernel, for a loss sum_i weights[i] *
// loss[i] whose weights are known before the backward (a masked mean): loss
// as cross_entropy_forward (no lse kept), and dlogits as
// cross_entropy_backward with grad = weights. Each row's second read comes
// from L2, so the logits cross memory once instead of twice; the caller
// scales dlogits by the loss's own upstream gradient later
// (cross_entropy_scale_grad) and need not keep the logits.
const char* cross_entropy_forward_with_grad(ElementType type, const void* logits, int64_t ld, const int64_t* labels,
                                            const float* weights, int64_t n, int64_t columns, int64_t width,
                                            float* loss, void* dlogits, void* stream);

// dlogits (count contiguous values of `type`, starting on 16 bytes) *=
// *scale, a float32 on the device, read there: when it is exactly 1 (a
// plain backward of the loss) nothing is read or written, with no host sync.
const char* cross_entropy_scale_grad(ElementType type, void* dlogits, int64_t count, const float* scale, void* stream);

}  // namespace zoo::cuda
