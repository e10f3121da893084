// Basic parameter-holding layers built on explicit tensors, so a model can be
// constructed on any device, including torch::kMeta to count parameters of a
// 13B model without allocating it. Parameter names match torch.nn's
// (weight, bias) so state dicts line up with PyTorch and modelzoo.
// Defines: dense, DenseHeads, dense_heads, DenseAdapter, Dense (Linear),
// EmbeddingTable, LayerNorm, OutputHead.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <vector>

#include "models/common/initializers.h"
#include "models/kernels/norm_kernel.h"

namespace zoo::models {

// x W^T + b (b may be undefined): torch::linear, or zoo's CPU kernel
// (models/kernels/dense_kernel.h) where it applies.
torch::Tensor dense(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias);
// The same with the weight and the bias in parts stacked along dim 0 (q, k
// and v's projections as one GEMM): on zoo's CUDA path no stacked float32
// copy is made; biases empty: none.
torch::Tensor dense(const torch::Tensor& x, at::TensorList weights, at::TensorList biases);
// That output split into `splits` columns (whole heads), each viewed
// (..., columns / head_dim, head_dim): attention's q, k and v. `packed` is
// the unsplit output, which the heads are views of; on zoo's CUDA path it is
// undefined, the heads coming from one node whose backward packs their
// gradients itself (models/kernels/dense_kernel.h, dense_through_heads).
struct DenseHeads {
  torch::Tensor packed;
  std::vector<torch::Tensor> heads;
};
DenseHeads dense_heads(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                       const std::vector<int64_t>& splits, int64_t head_dim);

class DenseImpl;
// dense_heads for layers that may carry adapters: the stacked GEMM when
// none does, else that GEMM plus each adapter's output in its layer's columns.
DenseHeads dense_heads(const torch::Tensor& x, const std::vector<DenseImpl*>& layers,
                       const std::vector<int64_t>& splits, int64_t head_dim);

// Something added to a dense layer from outside the model, which adds its
// output to the layer's own: LoRA's LoraDense (models/common/lora.h). The
// layer knows only this.
class DenseAdapter {
 public:
  virtual ~DenseAdapter() = default;
  // False while it is folded into the layer's weight.
  virtual bool active() const = 0;
  // y + its output for x, where y is the layer's own product of x.
  virtual torch::Tensor add_to(const torch::Tensor& y, const torch::Tensor& x, bool training) = 0;
  // Its output for x alone.
  virtual torch::Tensor output(const torch::Tensor& x, bool training) = 0;
};

class DenseImpl : public torch::nn::Module {
 public:
  DenseImpl(int64_t in_features, int64_t out_features, bool bias, const torch::TensorOptions& options);
  torch::Tensor forward(const torch::Tensor& x);  // (..., in) -> (..., out)
  // x W^T alone, on the path forward takes, for a caller that adds the bias
  // later (a norm after a residual add: LayerNormImpl::add_then_forward).
  torch::Tensor forward_without_bias(const torch::Tensor& x);
  void reset_parameters(const InitializerSpec& weight_init);  // bias = 0
  torch::Tensor weight;                                       // (out, in), as torch.nn.Linear
  torch::Tensor bias;                                         // (out) or undefined

  // Set from outside the model (models/common/lora.h); null: none.
  std::shared_ptr<DenseAdapter> adapter;
  // Whether forward adds an adapter's output (one is set and not folded in).
  bool adapted() const { return adapter && adapter->active(); }
};
TORCH_MODULE(Dense);

class EmbeddingTableImpl : public torch::nn::Module {
 public:
  // padding_idx >= 0: that row gets no gradient (torch.nn.Embedding's padding_idx).
  EmbeddingTableImpl(int64_t num_embeddings, int64_t dim, const torch::TensorOptions& options,
                     int64_t padding_idx = -1);
  torch::Tensor forward(const torch::Tensor& ids);  // (B, T) int64 -> (B, T, dim)
  int64_t padding_idx;
  void reset_parameters(const InitializerSpec& init) { apply_initializer(init, weight); }
  torch::Tensor weight;  // (num_embeddings, dim)
};
TORCH_MODULE(EmbeddingTable);

// LayerNorm, or RMSNorm (rms = true: x / rms(x) * weight, no bias, no
// centering); with_bias = false drops LayerNorm's bias (MPT's biasless-layernorm).
class LayerNormImpl : public torch::nn::Module {
 public:
  LayerNormImpl(int64_t dim, double eps, const torch::TensorOptions& options, bool rms = false, bool with_bias = true);
  torch::Tensor forward(const torch::Tensor& x);
  // The residual add before a pre-norm and the norm: {x + branch, forward(x
  // + branch)}, as one node (one pass over the rows) where zoo's kernels
  // take them (see models/kernels/norm_kernel.h); branch may be undefined.
  // branch_bias (undefined: none) is the bias of the layer that made the
  // branch, added with it (Dense::forward_without_bias).
  SumAndNorm add_then_forward(const torch::Tensor& x, const torch::Tensor& branch,
                              const torch::Tensor& branch_bias = {});
  // Whether a branch bias handed to add_then_forward with x's rows saves a
  // pass: its gradient then comes from the sums of this node's own pass
  // (zoo's CPU loops; the CUDA kernels for rows up to 768 wide), not from a
  // pass of the projection's backward over the branch's gradient.
  bool takes_branch_bias(const torch::Tensor& x) const;
  void reset_parameters();  // weight = 1, bias = 0
  torch::Tensor weight;
  torch::Tensor bias;  // undefined for RMSNorm and without bias
  double eps;
  bool rms;
  // For a norm whose output only feeds matmuls: under autocast, forward
  // returns the type those would cast it to (the same values; zoo's CUDA
  // kernel writes it so in the norm's own pass, and reads its gradient so).
  bool autocast_output = false;
};
TORCH_MODULE(LayerNorm);

// The LM output projection (modelzoo's lm_head). With tied embeddings it owns
// no weight and multiplies by the word-embedding table passed to forward().
class OutputHeadImpl : public torch::nn::Module {
 public:
  OutputHeadImpl(int64_t hidden, int64_t vocab, bool own_weight, bool bias, const torch::TensorOptions& options);
  // h: (B, T, C) -> logits (B, T, padded_vocab(h)); tied_weight used when there
  // is no own weight. Columns from V on are -inf, from zero rows added to the
  // weight and a -inf bias for this product only (GEMMs of a multiple of 64
  // run much faster on GPUs than GPT-2's 50257): narrow them away, or hand
  // them to lm_loss / token_cross_entropy (PaddingColumns::neg_inf).
  // Parameters and checkpoints keep the real V.
  torch::Tensor forward(const torch::Tensor& h, const torch::Tensor& tied_weight);
  // The width forward produces: V rounded up to pad_multiple (default: 64 on CUDA, V elsewhere).
  int64_t padded_vocab(const torch::Tensor& h) const;
  void reset_parameters(const InitializerSpec& weight_init);
  torch::Tensor weight;  // (V, C) or undefined when tied
  torch::Tensor bias;    // (V) or undefined
  int64_t vocab;
  std::optional<int64_t> pad_multiple;  // unset: 64 on CUDA, 1 elsewhere
};
TORCH_MODULE(OutputHead);

}  // namespace zoo::models
