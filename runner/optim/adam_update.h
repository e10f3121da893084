// The Adam/AdamW update with modelzoo's AdamBase arithmetic:
//   g' = g + wd p (Adam, L2), m = b1 m + (1 - b1) g', v = b2 v + (1 - b2) g'^2,
//   u = m / (sqrt(v) + eps) * correction (+ wd p for AdamW), p -= lr u.
// float32 CPU tensors (dense) take a single pass over their elements; CUDA
// tensors on LibTorch >= 2.1 ATen's fused Adam(W) kernel, also one pass
// (the correction folded into its learning rate); the others the same
// arithmetic as multi-tensor (_foreach_) ops over the whole list, a few
// kernels per step instead of a dozen per parameter.
// Defines: AdamHyper, AdamSlot, adam_update.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace zoo::optim {

struct AdamHyper {
  double beta1, beta2, eps, lr, weight_decay;
  bool decoupled;  // AdamW: weight decay on the update, not the gradient
};

// One parameter (with its gradient) and its moments; correction is
// sqrt(1 - beta2^t) / (1 - beta1^t) with bias correction, else 1.
struct AdamSlot {
  torch::Tensor param, exp_avg, exp_avg_sq;
  double correction = 1.0;
};

// Updates each slot's param, exp_avg and exp_avg_sq in place from param.grad().
void adam_update(const std::vector<AdamSlot>& slots, const AdamHyper& h);

}  // namespace zoo::optim
