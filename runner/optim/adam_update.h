// One Adam/AdamW update of one parameter with modelzoo's AdamBase arithmetic:
//   g' = g + wd p (Adam, L2), m = b1 m + (1 - b1) g', v = b2 v + (1 - b2) g'^2,
//   u = m / (sqrt(v) + eps) * correction (+ wd p for AdamW), p -= lr u.
// float32 CPU tensors (dense) take a single pass over the elements; others
// the same arithmetic op by op. Defines: AdamUpdate, adam_update.
#pragma once

#include <torch/torch.h>

namespace zoo::optim {

struct AdamUpdate {
  double beta1, beta2, eps, lr, weight_decay;
  double correction;  // sqrt(1 - beta2^t) / (1 - beta1^t) with bias correction, else 1
  bool decoupled;     // AdamW: weight decay on the update, not the gradient
};

// Updates p, m (exp_avg) and v (exp_avg_sq) in place from p.grad().
void adam_update(torch::Tensor& p, torch::Tensor& m, torch::Tensor& v, const AdamUpdate& u);

}  // namespace zoo::optim
