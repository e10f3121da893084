// The dense (linear) layer y = x W^T + b for float32 CPU tensors as one
// autograd node on zoo's CPU GEMM (models/kernels/cpu/cpu_gemm.h): the bias is
// laid into the output before the GEMM adds to it, and the backward makes
// dx, dW and db in one call. LibTorch's linear on a (B, T, C) input costs a
// transpose, a matmul, views and a separate bias add, each its own node; on
// small models that overhead is a large part of a training step.
// The first layer of a feed-forward block can take its activation along
// (GELU, tanh-GELU, ReLU): one pass over the output each way instead of an
// activation node of its own.
// On CUDA, the layer is one node too: LibTorch's GEMMs in the
// type autocast gives them, and zoo's kernel (models/kernels/cuda/dense.h)
// for the gradient through the activation and the bias gradient in one pass.
// fused_dense picks whichever applies. The CPU layer is in dense_kernel.cpp,
// the one on the CUDA kernel in dense_through.cpp.
// Defines: DenseActivation, dense_activation_of, check_dense_shapes,
// split_heads, cpu_dense_available, cpu_dense, DenseKernels, dense_through,
// dense_through_parts, dense_through_heads, cuda_dense_available, cuda_dense,
// cuda_dense_parts, cuda_dense_heads, fused_dense_available, fused_dense.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/kernels/cuda/dense.h"

namespace zoo::models {

using DenseActivation = zoo::cuda::Activation;  // none, gelu, gelu_tanh, relu
// The fused activation for a modelzoo nonlinearity name ("gelu", "gelu_new",
// "gelu_fast", "relu"); nullopt for the rest.
std::optional<DenseActivation> dense_activation_of(const std::string& nonlinearity);

// Throws, naming `what`, unless x is (..., in), w (out, in) and b (out) or undefined.
void check_dense_shapes(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const char* what);

// y (..., out) split into `splits` columns, each viewed (..., columns /
// head_dim, head_dim): the heads dense_through_heads and dense_heads hand out.
std::vector<torch::Tensor> split_heads(const torch::Tensor& y, const std::vector<int64_t>& splits, int64_t head_dim);

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

// zoo's CUDA dense kernel as a table: dense_through runs the host side of
// it, and tests hand it the kernel compiled for the CPU (tests/cuda_emulation.h).
struct DenseKernels {
  decltype(&zoo::cuda::dense_grad_chunks) grad_chunks;
  decltype(&zoo::cuda::dense_activation_and_bias_grad) activation_and_bias_grad;
  decltype(&zoo::cuda::dense_gather_and_bias_grad) gather_and_bias_grad;
};

// act(x W^T + b) with x, w and b cast to `compute` (float32, bfloat16 or
// float16) for LibTorch's GEMMs (b may be undefined), the output in that
// type; the backward's gradient through act and b's gradient (summed in
// float32, not rounded to `compute`) through `kernels` (a table that
// outlives the autograd graph), on the kernels' device. Gradients come back
// in each input's own type, as autocast's casts give them. padding > 0 adds
// that many outputs after w's, each -inf (a vocabulary padded to a multiple,
// so that kernels may read whole rows: probability 0 under a softmax); their
// gradient is dropped. float32 parameters cast to 16 bits are kept cast
// between calls (models/kernels/weight_copies.h).
torch::Tensor dense_through(const DenseKernels& kernels, const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& b, DenseActivation act, torch::ScalarType compute,
                            int64_t padding = 0);
// dense_through with w the weight parts (each (rows_i, in)) stacked along
// dim 0 and b the bias parts (empty: none) stacked to as many values, as
// q, k and v's projections make one GEMM; each part gets its own gradient
// (a view of the stacked one's rows), and no stacked float32 copy is made.
torch::Tensor dense_through_parts(const DenseKernels& kernels, const torch::Tensor& x, at::TensorList weights,
                                  at::TensorList biases, DenseActivation act, torch::ScalarType compute,
                                  int64_t padding = 0);
// dense_through_parts without an activation or padding, its output handed out
// in `splits` (column counts adding up to the output's width, each a whole
// number of heads), each viewed (..., columns / head_dim, head_dim): q, k and
// v's heads from one GEMM. Their gradients are read where attention leaves
// them and packed for the GEMMs by the kernel pass that sums the bias
// gradient (zoo::cuda::dense_gather_and_bias_grad), where autograd's split
// and views copied them into one tensor and the bias gradient read that again.
std::vector<torch::Tensor> dense_through_heads(const DenseKernels& kernels, const torch::Tensor& x,
                                               at::TensorList weights, at::TensorList biases, torch::ScalarType compute,
                                               const std::vector<int64_t>& splits, int64_t head_dim);

// True when cuda_dense applies: a build with zoo's CUDA kernels whose
// environment does not turn the dense kernel off (ZOO_CUDA_KERNELS), CUDA
// x, w and b (if defined), a gradient to compute, and one type for the GEMM
// (autocast's, or the one x, w and b share).
bool cuda_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);

// dense_through (dense_through_parts, dense_through_heads) on zoo's CUDA
// kernel, in autocast's type when it is on.
torch::Tensor cuda_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                         DenseActivation act = DenseActivation::none, int64_t padding = 0);
torch::Tensor cuda_dense_parts(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                               DenseActivation act = DenseActivation::none, int64_t padding = 0);
std::vector<torch::Tensor> cuda_dense_heads(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                                            const std::vector<int64_t>& splits, int64_t head_dim);

// cpu_dense or cuda_dense, whichever applies.
bool fused_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b);
torch::Tensor fused_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b,
                          DenseActivation act = DenseActivation::none);

}  // namespace zoo::models
