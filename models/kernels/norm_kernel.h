// LayerNorm and RMSNorm over the last dim as one autograd node with a
// row-at-a-time forward and backward: zoo's loops for float32 CPU tensors
// (LibTorch 1.13's CPU layer_norm costs several times its arithmetic on the
// short rows of small models), and zoo's CUDA kernels (models/kernels/cuda/norm.h), which
// also write the output in the type a following matmul takes under autocast.
// Either can take a residual add into the same node (x + branch, then the
// norm), as pre-norm decoder layers do between attention and FFN, and the
// bias of the layer that made the branch with it.
// Defines: SumAndNorm, residual_sum, cpu_norm_available, cpu_norm, branch_fuses, branch_bias_fuses,
// cpu_add_norm, NormKernels, norm_through, cuda_norm_available, cuda_norm,
// cuda_norm_sums_branch_bias.
#pragma once

#include <torch/torch.h>

#include "models/kernels/cuda/norm.h"

namespace zoo::models {

// A residual add and the norm after it: sum = x + branch (+ branch_bias, the
// bias of the layer that made the branch; x's type; x itself without a
// branch), normed = norm(sum).
struct SumAndNorm {
  torch::Tensor sum, normed;
};

// x + branch + branch_bias, those defined, in LibTorch's ops: the sum the
// kernels below make in their pass, where they do not apply.
torch::Tensor residual_sum(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& branch_bias);

// True when cpu_norm applies: float32 CPU x and weight (and bias, if defined).
bool cpu_norm_available(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// LayerNorm: (x - mean) / sqrt(var + eps) * weight + bias (bias may be
// undefined); rms: x / sqrt(mean(x^2) + eps) * weight. Statistics per row of
// the last dim, variance biased, as torch.nn.LayerNorm; differentiable in x,
// weight and bias.
torch::Tensor cpu_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                       bool rms);

// True when a branch can be added into x inside the norm's node: x's shape
// and device, float32 on the CPU, float32, bfloat16 or float16 on CUDA.
bool branch_fuses(const torch::Tensor& x, const torch::Tensor& branch);

// True when branch_bias (undefined: none) can be left to the norm's node:
// with a branch, float32, C values, on the weight's device.
bool branch_bias_fuses(const torch::Tensor& branch, const torch::Tensor& branch_bias, const torch::Tensor& weight);

// cpu_norm after a residual add of branch (a float32 CPU tensor, or
// undefined: none) and of branch_bias (C float32 values, or undefined: the
// bias of the layer that made the branch, left to this node so that its
// gradient comes from the sums of the gradient this pass makes), one node,
// differentiable in each.
SumAndNorm cpu_add_norm(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                        const torch::Tensor& bias, double eps, bool rms, const torch::Tensor& branch_bias = {});

// zoo's CUDA norm kernels as a table: norm_through runs the host side of
// them, and tests hand it the kernels compiled for the CPU (tests/cuda_emulation.h).
struct NormKernels {
  decltype(&zoo::cuda::norm_forward) forward;
  decltype(&zoo::cuda::norm_param_grad_chunks) param_grad_chunks;
  decltype(&zoo::cuda::norm_backward) backward;
};

// The norm (as cpu_norm) of float32 x, after adding branch when it is
// defined (branch_fuses), with float32 weight and bias, through `kernels` (a
// table that outlives the autograd graph) on the kernels' device: normed in
// out_dtype (float32, bfloat16 or float16) and its gradient read in that
// type; float32 gradients for x, weight and bias, the branch's in its type.
SumAndNorm norm_through(const NormKernels& kernels, const torch::Tensor& x, const torch::Tensor& branch,
                        const torch::Tensor& weight, const torch::Tensor& bias, double eps, bool rms,
                        torch::ScalarType out_dtype, const torch::Tensor& branch_bias = {});

// True when cuda_norm applies: float32 CUDA x, weight and bias, in a build
// with zoo's CUDA kernels (-DZOO_CUDA_KERNELS=ON) whose environment does not
// turn the norm kernel off (ZOO_CUDA_KERNELS).
bool cuda_norm_available(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);

// norm_through zoo's CUDA kernels.
SumAndNorm cuda_norm(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                     const torch::Tensor& bias, double eps, bool rms, torch::ScalarType out_dtype,
                     const torch::Tensor& branch_bias = {});

// True when cuda_norm sums a branch bias's gradient in its backward's one
// pass for rows like x's (zoo/cuda/norm.h: up to 768 wide); wider rows
// take a second pass over the sum's gradient.
bool cuda_norm_sums_branch_bias(const torch::Tensor& x);

}  // namespace zoo::models
