// LayerNorm and RMSNorm over the last dim for float32 CPU tensors, as one
// autograd node with a row-at-a-time forward and backward. LibTorch 1.13's
// CPU layer_norm spends ~50 us each way on a (512, 64) input, several times
// the arithmetic; on small models that was ~7% of a training step.
// Defines: cpu_norm_available, cpu_norm.
#pragma once

#include <torch/torch.h>

namespace zoo::models {

// True when cpu_norm applies: float32 CPU x and weight (and bias, if defined).
bool cpu_norm_available(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias (bias may be
// undefined); rms: x / sqrt(mean(x^2) + eps) * weight. Statistics per row of
// the last dim, variance biased, as torch.nn.LayerNorm; differentiable in x,
// weight and bias.
torch::Tensor cpu_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                       bool rms);

}  // namespace zoo::models
