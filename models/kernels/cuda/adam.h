// zoo's CUDA Adam/AdamW update (models/kernels/cuda/adam.cu): one pass over
// each parameter, its gradient and its moments, the gradient multiplied on
// its way in by a coefficient read on the device (gradient clipping's), so
// that clipping needs no pass over the gradients of its own (~0.9 GB read and
// written a 111M step). adam_element is the arithmetic, which zoo's CPU pass
// (models/kernels/adam_update.cpp) runs too. Plain C++, so that callers need no
// CUDA headers. Defines: AdamConstants, adam_element, AdamTensor, adam_update.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define ZOO_HOST_DEVICE __host__ __device__
#else
#define ZOO_HOST_DEVICE
#endif

namespace zoo::cuda {

// modelzoo's AdamBase update in float32 (models/kernels/adam_update.h); the
// 1 - beta terms are rounded from double, not computed from beta rounded
// (as PyTorch's fused kernel does: 1.3e-5 lighter squared gradients at 0.999).
struct AdamConstants {
  float beta1, beta2, one_minus_beta1, one_minus_beta2, eps, lr;
  float l2;         // Adam: weight decay added to the gradient (0 for AdamW)
  float decoupled;  // AdamW: weight decay added to the update (0 for Adam)
};

// One element of the update; g is the gradient as the update takes it
// (after any coefficient), correction sqrt(1 - beta2^t) / (1 - beta1^t) or 1.
ZOO_HOST_DEVICE inline void adam_element(float& p, float g, float& m, float& v, float correction,
                                         const AdamConstants& c) {
  g = g + c.l2 * p;
  m = m * c.beta1 + c.one_minus_beta1 * g;
  v = v * c.beta2 + c.one_minus_beta2 * (g * g);
  const float update = m / (sqrtf(v) + c.eps) * correction + c.decoupled * p;
  p = p - c.lr * update;
}

// One parameter: contiguous float32 arrays of numel elements on one device.
struct AdamTensor {
  float* param;
  const float* grad;
  float* exp_avg;
  float* exp_avg_sq;
  int64_t numel;
  float correction;
};

// Updates `count` tensors in place, each gradient element multiplied by
// *grad_coefficient first (a float on the device; nullptr: by 1); the
// gradients are read, not written. A few launches on `stream` (a
// cudaStream_t) of the current device; returns nullptr, or the CUDA error's
// message.
const char* adam_update(const AdamTensor* tensors, int64_t count, const AdamConstants& c, const float* grad_coefficient,
                        void* stream);

}  // namespace zoo::cuda
