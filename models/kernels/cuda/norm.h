// zoo's LayerNorm / RMSNorm kernels for CUDA (models/kernels/cuda/norm.cu,
// built wherever nvcc is found) over rows of C float32 values with
// float32 weight and bias, optionally after a residual add (x + branch, the
// sum kept): the output is written in float32, bfloat16 or float16, so that
// under autocast the cast a matmul would make of it is part of the norm's
// own write, and the backward reads the gradient in that type. Plain C++, so that callers need no CUDA headers. Each
// function launches on `stream` (a cudaStream_t) of the current device and returns nullptr, or the CUDA error's
// message. Defines: norm_forward, norm_param_grad_chunks, norm_backward.
#pragma once

#include <cstdint>

#include "models/kernels/cuda/element_type.h"

namespace zoo::cuda {

// y = (h - mean) * rstd * w + b per row (b may be null); rms: mean = 0,
// rstd = 1 / sqrt(mean(h^2) + eps), else 1 / sqrt(biased variance + eps).
// h is x, or with a branch (branch_type; branch and sum both set or both
// null) x + branch, plus branch_bias (C float32 values, may be null: the
// bias of the layer that made the branch), which is also written to sum
// (float32, as x). Keeps each row's mean and rstd for the backward.
const char* norm_forward(ElementType y_type, const float* x, ElementType branch_type, const void* branch,
                         const float* branch_bias, float* sum, const float* w, const float* b, int64_t rows, int64_t C,
                         float eps, bool rms, void* y, float* mean, float* rstd, void* stream);

// The most chunks of rows norm_backward sums the weight and bias gradients
// of separately, for `rows` rows: the rows dw_partial and db_partial hold.
int64_t norm_param_grad_chunks(int64_t rows);

// The backward, in one pass over x and dy (dy in dy_type) for rows up to
// 8192 wide, a second one for the sums beyond. Where dx is set: dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
// + residual_grad, with g = dy * w and xhat = (x - mean) * rstd (rms: no
// mean(g) term; x is the normalized h; residual_grad, h's gradient from its
// other uses, may be null); branch_grad, when not null, gets dx in
// branch_type. Where dw_partial is set: per chunk of rows, the column sums
// of dy * xhat (dw) and of dy (db, when db_partial is not null): the first
// *chunks rows of each (norm_param_grad_chunks(rows), C) buffer, for the
// caller to sum over chunks. Where branch_bias_partial is set (dx must be
// too), the same for the column sums of dx: the branch bias's gradient.
const char* norm_backward(ElementType dy_type, const float* x, const float* w, const void* dy,
                          const float* residual_grad, const float* mean, const float* rstd, int64_t rows, int64_t C,
                          bool rms, float* dx, ElementType branch_type, void* branch_grad, float* dw_partial,
                          float* db_partial, float* branch_bias_partial, int64_t* chunks, void* stream);

// Whether norm_backward sums the branch bias's gradient in the same pass as
// the rest for rows C wide (aligned as tensors are): up to 768 wide, a
// multiple of 4. Wider rows take a second pass over dx.
bool norm_sums_branch_bias_in_one_pass(int64_t C);

}  // namespace zoo::cuda
