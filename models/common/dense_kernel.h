// The dense (linear) layer y = x W^T + b for float32 CPU tensors as one
// autograd node on zoo's CPU GEMM (models/common/cpu_gemm.h): the bias is
// laid into the output before the GEMM adds to it, and the backward makes
// dx, dW and db in one call. LibTorch's linear on a (B, T, C) input costs a
// transpose, a matmul, views and a separate bias add, each its own node; on
// small models that overhead is a large part of a training step.
// The first layer of a feed-forward block can take its activation along
// (GELU, tanh-GELU, ReLU): one pass over the output each way instead of an
// activation node of its own.
// Defines: DenseActivation, dense_activation_of, cpu_dense_available, cpu_dense.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

namespace zoo::models {

enum class DenseActivation { none, gelu, gelu_tanh, relu };
// The fused activation for a modelzoo nonlinearity name ("gelu", "gelu_new",
// "gelu_fast", "relu"); nullopt for the rest.
std::optional<DenseActivation> dense_activation_of(const std::string& nonlinearity);

// True when cpu_dense applies: x and w float32 CPU tensors (b too, if
// defined), this process has a CPU GEMM, and CPU autocast is off.
bool cpu_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// act(x W^T + b): x (..., in), w (out, in), b (out) or undefined -> (..., out);
// differentiable in all three. GELU is the exact erf form x Phi(x), with Phi
// from a rational erfc (relative error < 1.2e-7 in exact arithmetic), so it
// matches torch.nn.GELU to float32 rounding and keeps ~5 significant digits
// far into the negative tail, where 1 + erf(x / sqrt 2) cancels; tanh-GELU
// is GPT-2's "gelu_new".
torch::Tensor cpu_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                        DenseActivation act = DenseActivation::none);

}  // namespace zoo::models
