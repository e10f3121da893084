// zoo's LayerNorm / RMSNorm kernels for CUDA (models/common/cuda/norm.cu,
// built with -DZOO_CUDA_KERNELS=ON) over rows of C float32 values with
// float32 weight and bias: the output is written in float32, bfloat16 or
// float16, so that under autocast the cast a matmul would make of it is
// part of the norm's own write, and the backward reads the gradient in that
// type. Plain C++, so that callers need no CUDA headers. Each function
// launches on `stream` (a cudaStream_t) of the current device and returns
// nullptr, or the CUDA error's message.
// Defines: norm_forward, norm_input_grad, norm_param_grad_chunks, norm_param_grads.
#pragma once

#include <cstdint>

#include "models/common/cuda/element_type.h"

namespace zoo::cuda {

// y = (x - mean) * rstd * w + b per row (b may be null); rms: mean = 0,
// rstd = 1 / sqrt(mean(x^2) + eps), else 1 / sqrt(biased variance + eps).
// Keeps each row's mean and rstd for the backward.
const char* norm_forward(ElementType y_type, const float* x, const float* w, const float* b, int64_t rows, int64_t C,
                         float eps, bool rms, void* y, float* mean, float* rstd, void* stream);

// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), with g = dy * w and
// xhat = (x - mean) * rstd (rms: no mean(g) term); dy in dy_type.
const char* norm_input_grad(ElementType dy_type, const float* x, const float* w, const void* dy, const float* mean,
                            const float* rstd, int64_t rows, int64_t C, bool rms, float* dx, void* stream);

// How many row chunks norm_param_grads sums separately for `rows` rows.
int64_t norm_param_grad_chunks(int64_t rows);

// Per chunk of rows, the column sums of dy * xhat (dw) and of dy (db, when
// dw_partial's companion db_partial is not null): (chunks, C) each, for the
// caller to sum over chunks.
const char* norm_param_grads(ElementType dy_type, const float* x, const void* dy, const float* mean, const float* rstd,
                             int64_t rows, int64_t C, float* dw_partial, float* db_partial, void* stream);

}  // namespace zoo::cuda
