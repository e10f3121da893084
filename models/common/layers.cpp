// Implementation of models/common/layers.h.
#include "models/common/layers.h"

#include <algorithm>
#include <limits>

#include "models/kernels/autocast_state.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/dense_kernel.h"
#include "models/kernels/embedding_kernel.h"
#include "models/kernels/norm_kernel.h"
#include "models/model.h"

namespace zoo::models {
namespace {

// x's shape with its last dimension `features` wide.
std::vector<int64_t> adapter_shape(const torch::Tensor& x, int64_t features) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape.back() = features;
  return shape;
}

}  // namespace

DenseImpl::DenseImpl(int64_t in_features, int64_t out_features, bool use_bias, const torch::TensorOptions& options) {
  weight = register_parameter("weight", torch::empty({out_features, in_features}, options));
  if (use_bias) bias = register_parameter("bias", torch::zeros({out_features}, options));
}

void DenseImpl::reset_parameters(const InitializerSpec& weight_init) {
  apply_initializer(weight_init, weight);
  if (bias.defined() && !bias.is_meta()) apply_initializer(InitializerSpec{"zeros"}, bias);
}

torch::Tensor dense(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return fused_dense_available(x, weight, bias) ? fused_dense(x, weight, bias) : torch::linear(x, weight, bias);
}

torch::Tensor dense(const torch::Tensor& x, at::TensorList weights, at::TensorList biases) {
  const torch::Tensor first_bias = biases.empty() ? torch::Tensor() : biases.front();
  if (cuda_dense_available(x, weights.front(), first_bias)) return cuda_dense_parts(x, weights, biases);
  auto stacked = [](at::TensorList parts) { return parts.size() == 1 ? parts.front() : torch::cat(parts); };
  return dense(x, stacked(weights), biases.empty() ? torch::Tensor() : stacked(biases));
}

DenseHeads dense_heads(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                       const std::vector<int64_t>& splits, int64_t head_dim) {
  const torch::Tensor first_bias = biases.empty() ? torch::Tensor() : biases.front();
  if (zoo::cuda::kernel_enabled("dense_heads") && cuda_dense_available(x, weights.front(), first_bias))
    return {torch::Tensor(), cuda_dense_heads(x, weights, biases, splits, head_dim)};
  const torch::Tensor packed = dense(x, weights, biases);
  return {packed, split_heads(packed, splits, head_dim)};
}

DenseHeads dense_heads(const torch::Tensor& x, const std::vector<DenseImpl*>& layers,
                       const std::vector<int64_t>& splits, int64_t head_dim) {
  std::vector<torch::Tensor> weights, biases;
  for (DenseImpl* l : layers) {
    weights.push_back(l->weight);
    if (l->bias.defined()) biases.push_back(l->bias);
  }
  if (std::none_of(layers.begin(), layers.end(), [](DenseImpl* l) { return l->adapted(); }))
    return dense_heads(x, weights, biases, splits, head_dim);
  // The base's product as without adapters, plus each adapter's output in its layer's columns.
  const torch::Tensor base = dense(x, weights, biases);
  std::vector<torch::Tensor> adapters;
  for (DenseImpl* l : layers)
    adapters.push_back(l->adapted() ? l->adapter->output(x, l->is_training()).to(base.scalar_type())
                                    : torch::zeros({1}, base.options()).expand(adapter_shape(x, l->weight.size(0))));
  const torch::Tensor packed = base + torch::cat(adapters, -1);
  return {packed, split_heads(packed, splits, head_dim)};
}

torch::Tensor DenseImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = dense(x, weight, bias);
  return adapted() ? adapter->add_to(y, x, is_training()) : y;
}

torch::Tensor DenseImpl::forward_without_bias(const torch::Tensor& x) {
  torch::Tensor y = dense(x, weight, torch::Tensor());
  return adapted() ? adapter->add_to(y, x, is_training()) : y;
}

EmbeddingTableImpl::EmbeddingTableImpl(int64_t num_embeddings, int64_t dim, const torch::TensorOptions& options,
                                       int64_t padding_idx_)
    : padding_idx(padding_idx_) {
  weight = register_parameter("weight", torch::empty({num_embeddings, dim}, options));
}

torch::Tensor EmbeddingTableImpl::forward(const torch::Tensor& ids) {
  if (padding_idx < 0 && cuda_embedding_available(ids, weight)) return cuda_embedding(ids, weight);
  return torch::embedding(weight, ids, padding_idx);
}

LayerNormImpl::LayerNormImpl(int64_t dim, double eps_, const torch::TensorOptions& options, bool rms_, bool with_bias)
    : eps(eps_), rms(rms_) {
  weight = register_parameter("weight", torch::ones({dim}, options));
  if (!rms && with_bias) bias = register_parameter("bias", torch::zeros({dim}, options));
}

void LayerNormImpl::reset_parameters() {
  torch::NoGradGuard no_grad;
  if (weight.device().is_meta()) return;
  weight.fill_(1.0);
  if (bias.defined()) bias.zero_();
}

namespace {
// The type autocast gives a matmul's input x, when it casts it.
std::optional<torch::ScalarType> autocast_matmul_type(const torch::Tensor& x) {
  if (!(x.is_cpu() || x.is_cuda()) || !x.is_floating_point() || x.scalar_type() == torch::kDouble) return std::nullopt;
  const AutocastState autocast = AutocastState::of(x.device().type());
  if (!autocast.enabled || autocast.dtype == x.scalar_type()) return std::nullopt;
  return autocast.dtype;
}
}  // namespace

torch::Tensor LayerNormImpl::forward(const torch::Tensor& x) { return add_then_forward(x, torch::Tensor()).normed; }

bool LayerNormImpl::takes_branch_bias(const torch::Tensor& x) const {
  return cpu_norm_available(x, weight, bias) || (cuda_norm_available(x, weight, bias) && cuda_norm_sums_branch_bias(x));
}

SumAndNorm LayerNormImpl::add_then_forward(const torch::Tensor& x, const torch::Tensor& branch,
                                           const torch::Tensor& branch_bias) {
  // One node, in zoo's kernels where they apply.
  if ((!branch.defined() || branch_fuses(x, branch)) && branch_bias_fuses(branch, branch_bias, weight)) {
    const std::optional<torch::ScalarType> cast = autocast_output ? autocast_matmul_type(x) : std::nullopt;
    if (cuda_norm_available(x, weight, bias))
      return cuda_norm(x, branch, weight, bias, eps, rms, cast.value_or(torch::kFloat), branch_bias);
    if (cpu_norm_available(x, weight, bias)) {
      SumAndNorm out = cpu_add_norm(x, branch, weight, bias, eps, rms, branch_bias);
      if (cast) out.normed = out.normed.to(*cast);
      return out;
    }
  }
  const torch::Tensor sum = residual_sum(x, branch, branch_bias);
  torch::Tensor y;
  if (!rms) {
    // A 16-bit input under autocast (BERT's masked-LM transform) is normed in
    // the weight's float32, as CUDA's autocast runs layer_norm; LibTorch's
    // CPU kernel refuses the mix of types.
    const bool widen = weight.defined() && sum.scalar_type() != weight.scalar_type() &&
                       (sum.scalar_type() == torch::kBFloat16 || sum.scalar_type() == torch::kHalf);
    y = torch::layer_norm(widen ? sum.to(weight.scalar_type()) : sum, {weight.size(0)}, weight, bias, eps);
  } else {  // statistics in float32 (float64 stays), as LLaMA does
    torch::Tensor x32 = sum.scalar_type() == torch::kDouble ? sum : sum.to(torch::kFloat);
    torch::Tensor normed = x32 * torch::rsqrt(x32.pow(2).mean(-1, true) + eps);
    y = weight * normed.to(sum.scalar_type());
  }
  const std::optional<torch::ScalarType> cast = autocast_output ? autocast_matmul_type(sum) : std::nullopt;
  return {sum, cast ? y.to(*cast) : y};
}

OutputHeadImpl::OutputHeadImpl(int64_t hidden, int64_t vocab_, bool own_weight, bool use_bias,
                               const torch::TensorOptions& options)
    : vocab(vocab_) {
  if (own_weight) weight = register_parameter("weight", torch::empty({vocab, hidden}, options));
  if (use_bias) bias = register_parameter("bias", torch::zeros({vocab}, options));
}

void OutputHeadImpl::reset_parameters(const InitializerSpec& weight_init) {
  if (weight.defined()) apply_initializer(weight_init, weight);
  if (bias.defined() && !bias.is_meta()) apply_initializer(InitializerSpec{"zeros"}, bias);
}

int64_t OutputHeadImpl::padded_vocab(const torch::Tensor& h) const {
  const int64_t multiple = pad_multiple.value_or(h.is_cuda() ? 64 : 1);
  return (vocab + multiple - 1) / multiple * multiple;
}

torch::Tensor OutputHeadImpl::forward(const torch::Tensor& h, const torch::Tensor& tied_weight) {
  const torch::Tensor& w = weight.defined() ? weight : tied_weight;
  const int64_t pad = padded_vocab(h) - vocab;
  if (pad == 0) return dense(h, w, bias);
  // Zero weight rows plus a -inf bias (a GEMM epilogue, no extra pass): the
  // padding columns have probability 0, so a softmax may read whole rows.
  // zoo's CUDA path pads as it casts the weight for the GEMM.
  if (cuda_dense_available(h, w, bias)) return cuda_dense(h, w, bias, DenseActivation::none, pad);
  const double neg_inf = -std::numeric_limits<double>::infinity();
  const torch::Tensor real_bias = bias.defined() ? bias : torch::zeros({vocab}, w.options().requires_grad(false));
  return dense(h, torch::constant_pad_nd(w, {0, 0, 0, pad}), torch::constant_pad_nd(real_bias, {0, pad}, neg_inf));
}

std::set<std::string> norm_parameter_names(const torch::nn::Module& model) {
  std::set<std::string> out;
  for (const auto& m : model.named_modules()) {
    if (!dynamic_cast<const LayerNormImpl*>(m.value().get())) continue;
    for (const auto& p : m.value()->named_parameters(/*recurse=*/false))
      out.insert(m.key().empty() ? p.key() : m.key() + "." + p.key());
  }
  return out;
}

}  // namespace zoo::models
