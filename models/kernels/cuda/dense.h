// zoo's CUDA kernel for the elementwise half of a dense layer's backward
// (models/kernels/cuda/dense.cu, built wherever nvcc is found): the gradient
// through the layer's activation and the bias gradient, in one pass over the
// output gradient. LibTorch makes the first with its own elementwise kernel
// and the second with a reduction that reads the result again. Plain C++, so
// that callers need no CUDA headers. Defines: Activation,
// dense_grad_chunks, dense_activation_and_bias_grad, GradientPart,
// kMaxGradientParts, dense_gather_and_bias_grad.
#pragma once

#include <cstdint>

#include "models/kernels/cuda/element_type.h"

namespace zoo::cuda {

// An activation a dense layer applies to its output: GELU (exact erf form),
// GELU's tanh approximation, ReLU, or none.
enum class Activation { none, gelu, gelu_tanh, relu };

// The most chunks of rows dense_activation_and_bias_grad sums separately,
// for `rows` rows: the rows `partial` must have.
int64_t dense_grad_chunks(int64_t rows);

// Over rows x C values of `type` (float32, bfloat16, float16): with an
// activation, g = dy * act'(pre), written to dpre in that type; without one,
// g = dy (pre and dpre unused). Where `partial` is set, the column sums of g
// (as written, rounded to the type), in float32 per chunk of rows: the first
// *chunks rows of a (dense_grad_chunks(rows), C) buffer, for the caller to
// sum over chunks. Launches on `stream` (a cudaStream_t) of the current
// device; returns nullptr, or the CUDA error's message.
const char* dense_activation_and_bias_grad(ElementType type, Activation act, const void* pre, const void* dy,
                                           void* dpre, int64_t rows, int64_t C, float* partial, int64_t* chunks,
                                           void* stream);

// A part of a dense layer's output gradient read where it lies, as attention
// hands back q, k and v's: `columns` (heads x head_dim) of each row, row
// r = o * inner + i holding column h * head_dim + d at element
// o * outer_stride + i * inner_stride + h * head_stride + d of `data`.
struct GradientPart {
  const void* data = nullptr;
  int64_t columns = 0, head_dim = 1, inner = 1;
  int64_t outer_stride = 0, inner_stride = 0, head_stride = 0;
};
constexpr int kMaxGradientParts = 4;

// dense_activation_and_bias_grad without an activation, its output gradient
// given as `count` (<= kMaxGradientParts) parts side by side, their columns
// adding up to C: writes them packed to dy (rows x C, row-major, for the
// GEMMs) and, where `partial` is set, the column sums as that function does,
// from the same reads. Where autograd concatenated the parts and the bias
// gradient read the result again, one pass.
const char* dense_gather_and_bias_grad(ElementType type, const GradientPart* parts, int count, void* dy, int64_t rows,
                                       int64_t C, float* partial, int64_t* chunks, void* stream);

}  // namespace zoo::cuda
