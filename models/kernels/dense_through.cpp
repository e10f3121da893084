// Implementation of models/kernels/dense_kernel.h's layers on zoo's CUDA
// kernel: dense_through, dense_through_parts, dense_through_heads and the
// cuda_dense entry points (the CPU layer is models/kernels/dense_kernel.cpp).
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/accumulate.h>

#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "models/kernels/autocast_state.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/dense_kernel.h"
#include "models/kernels/policy.h"
#include "models/kernels/weight_copies.h"

namespace zoo::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

torch::Tensor activated(DenseActivation act, const torch::Tensor& pre) {
  switch (act) {
    case DenseActivation::gelu: return at::gelu(pre);
    case DenseActivation::gelu_tanh: return at::gelu(pre, "tanh");
    case DenseActivation::relu: return at::relu(pre);
    case DenseActivation::none: break;
  }
  return pre;
}

// LibTorch's mm.dtype (2.x, CUDA): a GEMM of bfloat16 or float16 inputs that
// writes float32 from its float32 sums; nullopt where LibTorch lacks it.
using MmToType = at::Tensor(const at::Tensor&, const at::Tensor&, at::ScalarType);
std::optional<c10::TypedOperatorHandle<MmToType>> mm_to_type() {
  const auto handle = c10::Dispatcher::singleton().findSchema({"aten::mm", "dtype"});
  if (!handle) return std::nullopt;
  try {
    return handle->typed<MmToType>();
  } catch (const c10::Error&) {  // another signature than this one
    return std::nullopt;
  }
}

// The weight gradient g^T x in `type`, the weight's. A float32 weight with
// GEMMs in a 16-bit type on CUDA gets its gradient written in float32 by the
// GEMM, where the product rounded to 16 bits and a cast kernel per weight
// made it (a launch and a pass over each weight, every step); elsewhere, or
// if LibTorch refuses the call, the rounded product is cast.
torch::Tensor weight_grad(const torch::Tensor& g, const torch::Tensor& x, torch::ScalarType type) {
  static const auto mm_to = mm_to_type();
  static std::atomic<bool> mm_to_refused{false};
  if (mm_to && type == torch::kFloat && g.is_cuda() && g.scalar_type() != torch::kFloat && !mm_to_refused) {
    try {
      return mm_to->call(g.t(), x, type);
    } catch (const c10::Error&) {
      mm_to_refused = true;
    }
  }
  return at::mm(g.t(), x).to(type);
}

// The weights (parts stacked along dim 0) in `compute`, with `padding` more
// rows of zeros: kept between steps (weight_copies.h) where they are float32
// parameters under autocast (unless the kernel policy leaves out
// weight_copies), else cast here; a part already in `compute`, alone and
// unpadded, as it is.
torch::Tensor compute_weight(at::TensorList parts, torch::ScalarType compute, int64_t padding, double padding_value) {
  if (parts.size() == 1 && padding == 0 && parts.front().scalar_type() == compute) return parts.front().contiguous();
  if (zoo::cuda::kernel_enabled("weight_copies") && weight_copy_applies(parts, compute))
    return weight_copy(parts, compute, padding, padding_value);
  return stacked_copy(parts, compute, padding, padding_value);
}

// The bias of a layer without one whose `padding` extra outputs are -inf:
// zeros, then -inf, made once per shape, type and device (and never freed:
// a static's destructor would free GPU memory after CUDA's own teardown).
torch::Tensor padding_only_bias(int64_t outputs, int64_t padding, const torch::TensorOptions& options) {
  static std::mutex mutex;
  static auto* made = new std::map<std::tuple<int64_t, int64_t, std::string, torch::ScalarType>, torch::Tensor>();
  const std::lock_guard<std::mutex> lock(mutex);
  torch::Tensor& bias = (*made)[{outputs, padding, options.device().str(), options.dtype().toScalarType()}];
  if (!bias.defined()) {
    torch::NoGradGuard no_grad;
    bias = torch::full({outputs + padding}, -std::numeric_limits<double>::infinity(), options);
    bias.narrow(0, 0, outputs).zero_();
  }
  return bias;
}

std::vector<int64_t> rows_of(at::TensorList parts) {
  std::vector<int64_t> rows;
  for (const torch::Tensor& p : parts) rows.push_back(p.size(0));
  return rows;
}

// Where a split output's gradient g (..., heads, head_dim) lies, for the
// gathering kernel: its leading dims folded into at most two levels of rows;
// nullopt where they do not fold so, or a head's values are not adjacent.
std::optional<zoo::cuda::GradientPart> part_in_place(const torch::Tensor& g) {
  if (g.size(-1) > 1 && g.stride(-1) != 1) return std::nullopt;
  std::vector<std::pair<int64_t, int64_t>> levels;  // (rows, stride), innermost first
  for (int64_t d = g.dim() - 3; d >= 0; --d) {
    const int64_t n = g.size(d), stride = g.stride(d);
    if (n == 1) continue;
    if (!levels.empty() && stride == levels.back().first * levels.back().second) levels.back().first *= n;
    else levels.emplace_back(n, stride);
  }
  if (levels.size() > 2) return std::nullopt;
  zoo::cuda::GradientPart part;
  part.data = g.data_ptr();
  part.columns = g.size(-2) * g.size(-1);
  part.head_dim = g.size(-1);
  part.head_stride = g.stride(-2);
  if (!levels.empty()) part.inner = levels[0].first, part.inner_stride = levels[0].second;
  if (levels.size() == 2) part.outer_stride = levels[1].second;
  return part;
}

// The output gradient the GEMMs read, (rows, sum of splits) in `type`, packed
// by the kernel from the split outputs' gradients (an undefined one: zeros)
// where they lie; with `partial` defined, the bias gradient's chunk sums too.
torch::Tensor gathered_output_grad(const DenseKernels& kernels, const tensor_list& grads, c10::IntArrayRef lead,
                                   const std::vector<int64_t>& splits, int64_t head_dim,
                                   const torch::TensorOptions& options, const torch::Tensor& partial, int64_t* chunks) {
  std::vector<torch::Tensor> kept;  // the parts read, alive until the kernel is queued
  std::vector<zoo::cuda::GradientPart> parts;
  int64_t C = 0;
  for (size_t i = 0; i < splits.size(); ++i) {
    std::vector<int64_t> shape = lead.vec();
    shape.insert(shape.end(), {splits[i] / head_dim, head_dim});
    torch::Tensor g = grads[i].defined() ? grads[i].to(options.dtype().toScalarType()) : torch::zeros(shape, options);
    std::optional<zoo::cuda::GradientPart> part = part_in_place(g);
    if (!part) part = part_in_place(g = g.contiguous());
    kept.push_back(g);
    parts.push_back(*part);
    C += splits[i];
  }
  const int64_t rows = c10::multiply_integers(lead);
  torch::Tensor dy = torch::empty({rows, C}, options);
  const zoo::cuda::LaunchScope launch(dy);
  zoo::cuda::check_launch(
      kernels.gather_and_bias_grad(*zoo::cuda::element_type_of(dy.scalar_type()), parts.data(),
                                   static_cast<int>(parts.size()), dy.data_ptr(), rows, C,
                                   partial.defined() ? partial.data_ptr<float>() : nullptr, chunks, launch.stream()),
      "dense backward");
  return dy;
}

// x and the weight and bias parts (biases empty: none) in their own types;
// the GEMMs in `compute` on the parts stacked (q, k and v's weights: one
// GEMM); the output `padding` columns wider than the weights' rows, one
// tensor, or with `splits` (no activation, no padding) one per split, each
// (..., columns / head_dim, head_dim). The backward gives each part its rows
// of the stacked gradient (views).
class KernelDenseFunction : public torch::autograd::Function<KernelDenseFunction> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x, at::TensorList weights,
                             at::TensorList biases, int64_t act_code, torch::ScalarType compute,
                             const DenseKernels* kernels, int64_t padding, std::vector<int64_t> splits,
                             int64_t head_dim) {
    const auto act = static_cast<DenseActivation>(act_code);
    const torch::Tensor xc = x.to(compute).contiguous();
    const torch::Tensor wc = compute_weight(weights, compute, padding, 0.0);
    const int64_t outputs = wc.size(0) - padding;
    const torch::Tensor bc = !biases.empty()
                                 ? compute_weight(biases, compute, padding, -std::numeric_limits<double>::infinity())
                             : padding > 0 ? padding_only_bias(outputs, padding, wc.options())
                                           : torch::Tensor();
    const torch::Tensor rows_in = xc.view({-1, wc.size(1)});
    // addmm with a vector bias: cuBLASLt adds it in the GEMM's epilogue.
    const torch::Tensor pre = bc.defined() ? at::addmm(bc, rows_in, wc.t()) : at::mm(rows_in, wc.t());
    if (act == DenseActivation::none) ctx->save_for_backward({xc, wc});
    else ctx->save_for_backward({xc, wc, pre});
    ctx->saved_data["act"] = act_code;
    ctx->saved_data["weight_rows"] = rows_of(weights);
    ctx->saved_data["bias_rows"] = rows_of(biases);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weights.front().scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(biases.empty() ? compute : biases.front().scalar_type());
    // A static table (see DenseKernels), so its address outlives the graph.
    ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(kernels);
    ctx->saved_data["splits"] = splits;
    ctx->saved_data["head_dim"] = head_dim;
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = wc.size(0);
    const torch::Tensor y = activated(act, pre).view(shape);
    if (splits.empty()) return {y};
    return split_heads(y, splits, head_dim);
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &xc = saved[0], &wc = saved[1];
    const auto act = static_cast<DenseActivation>(ctx->saved_data["act"].toInt());
    const auto* kernels = reinterpret_cast<const DenseKernels*>(ctx->saved_data["kernels"].toInt());
    auto dtype = [&](const char* key) { return static_cast<torch::ScalarType>(ctx->saved_data[key].toInt()); };
    const std::vector<int64_t> weight_rows = ctx->saved_data["weight_rows"].toIntVector();
    const std::vector<int64_t> bias_rows = ctx->saved_data["bias_rows"].toIntVector();
    // Input slots: x, each weight part, each bias part, then the options.
    const size_t first_weight = 1, first_bias = first_weight + weight_rows.size();
    auto needs_any = [&](size_t first, size_t count) {
      for (size_t i = first; i < first + count; ++i)
        if (ctx->needs_input_grad(i)) return true;
      return false;
    };
    const int64_t out_features = wc.size(0);
    const std::vector<int64_t> splits = ctx->saved_data["splits"].toIntVector();
    const c10::IntArrayRef lead = xc.sizes().slice(0, xc.dim() - 1);
    const int64_t rows = c10::multiply_integers(lead);
    const bool need_db = needs_any(first_bias, bias_rows.size());
    torch::Tensor g, partial;  // g: the gradient of the GEMM's output
    int64_t chunks = 0;
    if (need_db) partial = torch::empty({kernels->grad_chunks(rows), out_features}, xc.options().dtype(torch::kFloat));
    if (!splits.empty()) {  // packed and the bias gradient summed in one pass
      g = gathered_output_grad(*kernels, grads, lead, splits, ctx->saved_data["head_dim"].toInt(), wc.options(),
                               partial, &chunks);
    } else {
      const torch::Tensor dy = grads[0].to(wc.scalar_type()).contiguous().view({-1, out_features});
      g = dy;
      if (act != DenseActivation::none || need_db) {
        const torch::Tensor pre = act != DenseActivation::none ? saved[2] : torch::Tensor();
        if (pre.defined()) g = torch::empty_like(pre);
        const zoo::cuda::LaunchScope launch(dy);
        zoo::cuda::check_launch(
            kernels->activation_and_bias_grad(*zoo::cuda::element_type_of(dy.scalar_type()), act,
                                              pre.defined() ? pre.data_ptr() : nullptr, dy.data_ptr(),
                                              pre.defined() ? g.data_ptr() : nullptr, rows, out_features,
                                              need_db ? partial.data_ptr<float>() : nullptr, &chunks, launch.stream()),
            "dense backward");
      }
    }
    // The padding's zero weight rows add nothing to dx; its rows of dW and db
    // are dropped. dW is made whole, then each part gets a view of its rows:
    // over the padded width (a multiple of 64) cuBLAS picks faster kernels
    // than over the real vocabulary's ragged one.
    tensor_list out(first_bias + bias_rows.size() + 6);  // + the six options
    if (ctx->needs_input_grad(0)) out[0] = at::mm(g, wc).view(xc.sizes()).to(dtype("x_dtype"));
    auto hand_out = [&](const torch::Tensor& whole, size_t first, const std::vector<int64_t>& part_rows) {
      int64_t row = 0;
      for (size_t i = 0; i < part_rows.size(); row += part_rows[i], ++i)
        if (ctx->needs_input_grad(first + i)) out[first + i] = whole.narrow(0, row, part_rows[i]);
    };
    if (needs_any(first_weight, weight_rows.size()))
      hand_out(weight_grad(g, xc.view({-1, wc.size(1)}), dtype("w_dtype")), first_weight, weight_rows);
    if (need_db) hand_out(partial.narrow(0, 0, chunks).sum(0).to(dtype("b_dtype")), first_bias, bias_rows);
    return out;
  }
};

// The type a CUDA dense layer multiplies in: autocast's when it is on, else
// the one x, w and b share; nullopt when they do not or the kernel does not take it.
std::optional<torch::ScalarType> dense_compute_type(const torch::Tensor& x, const torch::Tensor& w,
                                                    const torch::Tensor& b) {
  const AutocastState autocast = AutocastState::of(x.device().type());
  const torch::ScalarType compute = autocast.enabled ? autocast.dtype : x.scalar_type();
  if (!autocast.enabled && (w.scalar_type() != compute || (b.defined() && b.scalar_type() != compute)))
    return std::nullopt;
  if (!zoo::cuda::element_type_of(compute)) return std::nullopt;
  return compute;
}

// dense_through_parts' checks, then KernelDenseFunction.
tensor_list kernel_dense(const DenseKernels& kernels, const torch::Tensor& x, at::TensorList weights,
                         at::TensorList biases, DenseActivation act, torch::ScalarType compute, int64_t padding,
                         const std::vector<int64_t>& splits, int64_t head_dim) {
  TORCH_CHECK(!weights.empty(), "dense_through: no weight");
  int64_t weight_rows = 0, bias_values = 0;
  for (const torch::Tensor& w : weights) {
    check_dense_shapes(x, w, torch::Tensor(), "dense_through");
    TORCH_CHECK(w.scalar_type() == weights.front().scalar_type() && w.device() == x.device(),
                "dense_through: weight parts of one type, on x's device, expected");
    weight_rows += w.size(0);
  }
  for (const torch::Tensor& b : biases) {
    TORCH_CHECK(b.dim() == 1 && b.scalar_type() == biases.front().scalar_type() && b.device() == x.device(),
                "dense_through: bias parts (n) of one type, on x's device, expected; got ", b.sizes());
    bias_values += b.size(0);
  }
  TORCH_CHECK(biases.empty() || bias_values == weight_rows, "dense_through: ", bias_values, " bias values for ",
              weight_rows, " weight rows");
  TORCH_CHECK(zoo::cuda::element_type_of(compute), "dense_through: compute type ", compute,
              " is not float32, bfloat16 or float16");
  TORCH_CHECK(padding >= 0, "dense_through: padding ", padding, " < 0");
  if (!splits.empty()) {
    TORCH_CHECK(splits.size() <= static_cast<size_t>(zoo::cuda::kMaxGradientParts), "dense_through_heads: at most ",
                zoo::cuda::kMaxGradientParts, " splits, not ", splits.size());
    int64_t columns = 0;
    for (int64_t split : splits) {
      TORCH_CHECK(head_dim > 0 && split >= 0 && split % head_dim == 0, "dense_through_heads: split ", split,
                  " is not a whole number of heads of ", head_dim);
      columns += split;
    }
    TORCH_CHECK(columns == weight_rows, "dense_through_heads: splits of ", columns, " columns for ", weight_rows,
                " weight rows");
    TORCH_CHECK(act == DenseActivation::none && padding == 0,
                "dense_through_heads: split outputs take no activation or padding");
  }
  return KernelDenseFunction::apply(x, weights, biases, static_cast<int64_t>(act), compute, &kernels, padding, splits,
                                    head_dim);
}

}  // namespace

torch::Tensor dense_through_parts(const DenseKernels& kernels, const torch::Tensor& x, at::TensorList weights,
                                  at::TensorList biases, DenseActivation act, torch::ScalarType compute,
                                  int64_t padding) {
  return kernel_dense(kernels, x, weights, biases, act, compute, padding, {}, 1).front();
}

std::vector<torch::Tensor> dense_through_heads(const DenseKernels& kernels, const torch::Tensor& x,
                                               at::TensorList weights, at::TensorList biases, torch::ScalarType compute,
                                               const std::vector<int64_t>& splits, int64_t head_dim) {
  TORCH_CHECK(!splits.empty(), "dense_through_heads: no splits");
  return kernel_dense(kernels, x, weights, biases, DenseActivation::none, compute, 0, splits, head_dim);
}

torch::Tensor dense_through(const DenseKernels& kernels, const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& b, DenseActivation act, torch::ScalarType compute, int64_t padding) {
  return dense_through_parts(kernels, x, {w}, b.defined() ? at::TensorList(b) : at::TensorList(), act, compute,
                             padding);
}

namespace {
// The emulated CUDA kernels that take x's CPU tensors in this run (tests), or null.
const DenseKernels* emulated_dense_for(const torch::Tensor& x) {
  const EmulatedCudaKernels* e = kernel_policy().emulated_cuda;
  return x.is_cpu() && e ? e->dense : nullptr;
}
}  // namespace

bool cuda_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  const bool wants_grad = x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad());
  const bool kernels = emulated_dense_for(x) || (x.is_cuda() && zoo::cuda::kernel_available("dense"));
  return kernels && w.device() == x.device() && (!b.defined() || b.device() == x.device()) &&
         torch::GradMode::is_enabled() && wants_grad && dense_compute_type(x, w, b).has_value();
}

namespace {

// zoo's CUDA kernel as a table (x's: emulated ones for CPU tensors in tests);
// throws where zoo was built without it.
const DenseKernels& cuda_dense_kernels(const torch::Tensor& x) {
  if (const DenseKernels* emulated = emulated_dense_for(x)) return *emulated;
#ifdef ZOO_CUDA_KERNELS
  static const DenseKernels kernels = {zoo::cuda::dense_grad_chunks, zoo::cuda::dense_activation_and_bias_grad,
                                       zoo::cuda::dense_gather_and_bias_grad};
  return kernels;
#else
  throw std::logic_error("cuda_dense: zoo was built without its CUDA kernels (-DZOO_CUDA_KERNELS=ON)");
#endif
}

// The GEMMs' type for cuda_dense_parts and cuda_dense_heads.
torch::ScalarType cuda_compute_type(const torch::Tensor& x, at::TensorList weights, at::TensorList biases) {
  TORCH_CHECK(!weights.empty(), "cuda_dense: no weight");
  const std::optional<torch::ScalarType> compute =
      dense_compute_type(x, weights.front(), biases.empty() ? torch::Tensor() : biases.front());
  TORCH_CHECK(compute, "cuda_dense: x ", x.scalar_type(), ", w ", weights.front().scalar_type(),
              " without autocast: one type of float32, bfloat16 or float16 expected");
  return *compute;
}

}  // namespace

torch::Tensor cuda_dense_parts(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                               DenseActivation act, int64_t padding) {
  const DenseKernels& kernels = cuda_dense_kernels(x);
  return dense_through_parts(kernels, x, weights, biases, act, cuda_compute_type(x, weights, biases), padding);
}

std::vector<torch::Tensor> cuda_dense_heads(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                                            const std::vector<int64_t>& splits, int64_t head_dim) {
  const DenseKernels& kernels = cuda_dense_kernels(x);
  return dense_through_heads(kernels, x, weights, biases, cuda_compute_type(x, weights, biases), splits, head_dim);
}

torch::Tensor cuda_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, DenseActivation act,
                         int64_t padding) {
  return cuda_dense_parts(x, {w}, b.defined() ? at::TensorList(b) : at::TensorList(), act, padding);
}

bool fused_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return cpu_dense_available(x, w, b) || cuda_dense_available(x, w, b);
}

torch::Tensor fused_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, DenseActivation act) {
  return cpu_dense_available(x, w, b) ? cpu_dense(x, w, b, act) : cuda_dense(x, w, b, act);
}

}  // namespace zoo::models
