// The Adam/AdamW update with modelzoo's AdamBase arithmetic:
//   g' = g + wd p (Adam, L2), m = b1 m + (1 - b1) g', v = b2 v + (1 - b2) g'^2,
//   u = m / (sqrt(v) + eps) * correction (+ wd p for AdamW), p -= lr u.
// float32 CPU tensors (dense) take a single pass over their elements, as
// float32 CUDA tensors do in zoo's kernel (models/kernels/cuda/adam.h; same
// arithmetic, zoo::cuda::adam_element); other CUDA tensors on LibTorch >= 2.1
// ATen's fused Adam(W) kernel, also one pass (the correction folded into its
// learning rate); the rest the same arithmetic as multi-tensor (_foreach_)
// ops over the whole list, a few kernels per step instead of a dozen per
// parameter.
// Defines: AdamHyper, AdamSlot, adam_update, AdamKernel, adam_update_with,
// cuda_adam_kernel_available.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/kernels/cuda/adam.h"

namespace zoo::optim {

struct AdamHyper {
  double beta1, beta2, eps, lr, weight_decay;
  bool decoupled;  // AdamW: weight decay on the update, not the gradient
  // Undefined, or a float32 scalar on the gradients' device that every
  // gradient is multiplied by before the update (gradient clipping's). The
  // single-pass paths read it into the pass and leave the gradients as they
  // are; ATen's fused kernel leaves them multiplied.
  torch::Tensor grad_coefficient = {};
};

// One parameter (with its gradient) and its moments; correction is
// sqrt(1 - beta2^t) / (1 - beta1^t) with bias correction, else 1.
struct AdamSlot {
  torch::Tensor param, exp_avg, exp_avg_sq;
  double correction = 1.0;
};

// Updates each slot's param, exp_avg and exp_avg_sq in place from param.grad().
void adam_update(const std::vector<AdamSlot>& slots, const AdamHyper& h);

// zoo's CUDA kernel as a value: tests hand adam_update_with its CPU
// emulation (tests/cuda_emulation.h).
using AdamKernel = decltype(&zoo::cuda::adam_update);

// The update of the slots `kernel` takes (float32 param, grad and moments,
// contiguous, alike in shape, on the param's device), one call per device;
// returns the others, untouched.
std::vector<AdamSlot> adam_update_with(AdamKernel kernel, const std::vector<AdamSlot>& slots, const AdamHyper& h);

// True in a build with zoo's CUDA kernels whose environment does not turn
// this one off (ZOO_CUDA_KERNELS): adam_update gives it the CUDA slots it takes.
bool cuda_adam_kernel_available();

}  // namespace zoo::optim
