// Implementation of models/common/dense_kernel.h.
#include "models/common/dense_kernel.h"

#include <ATen/Parallel.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "models/common/autocast_state.h"
#include "models/common/cpu_gemm.h"
#include "models/common/cpu_kernels.h"
#include "models/common/cuda/kernel_glue.h"
#include "models/common/vector_math.h"
#include "models/common/weight_copies.h"

namespace zoo::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

// Phi(x), the standard normal CDF, from erfc(|x| / sqrt 2) by the
// Chebyshev-fitted form in Numerical Recipes (erfcc; relative error < 1.2e-7
// everywhere), so the far negative tail keeps its relative accuracy.
inline float normal_cdf(float x) {
  const float z = (x < 0 ? -x : x) * 0.70710678f, t = 1.0f / (1.0f + 0.5f * z);
  float p = 0.17087277f;
  p = p * t - 0.82215223f;
  p = p * t + 1.48851587f;
  p = p * t - 1.13520398f;
  p = p * t + 0.27886807f;
  p = p * t - 0.18628806f;
  p = p * t + 0.09678418f;
  p = p * t + 0.37409196f;
  p = p * t + 1.00002368f;
  p = p * t - 1.26551223f;
  const float arg = p - z * z;  // <= ~3e-8
  const float half_erfc = 0.5f * t * exp_nonpositive(arg < 0 ? arg : 0.0f);
  return x < 0 ? half_erfc : 1.0f - half_erfc;
}

// tanh(u) from one exp of a non-positive argument.
inline float tanh_of(float u) {
  const float e = exp_nonpositive(-2.0f * (u < 0 ? -u : u)), th = (1.0f - e) / (1.0f + e);
  return u < 0 ? -th : th;
}

constexpr float kGeluTanhC = 0.7978845608f;             // sqrt(2 / pi)
constexpr int64_t kElementsPerTask = int64_t{1} << 16;  // activation elements per thread task

// y = act(pre), n elements. Clones for wider vectors: GELU's erfc is ~20
// flops an element, and 4-wide SSE made the fused layer slower than
// LibTorch's separate AVX-512 GELU.
ZOO_VECTOR_CLONES void activate(DenseActivation act, const float* pre, float* y, int64_t n) {
  switch (act) {
    case DenseActivation::gelu:
      for (int64_t i = 0; i < n; ++i) y[i] = pre[i] * normal_cdf(pre[i]);
      break;
    case DenseActivation::gelu_tanh:
      for (int64_t i = 0; i < n; ++i) {
        const float x = pre[i];
        y[i] = 0.5f * x * (1.0f + tanh_of(kGeluTanhC * (x + 0.044715f * x * x * x)));
      }
      break;
    case DenseActivation::relu:
      for (int64_t i = 0; i < n; ++i) y[i] = pre[i] > 0 ? pre[i] : 0.0f;
      break;
    case DenseActivation::none:
      break;
  }
}

// dpre = dy * act'(pre), n elements.
ZOO_VECTOR_CLONES void activation_grad(DenseActivation act, const float* pre, const float* dy, float* dpre, int64_t n) {
  switch (act) {
    case DenseActivation::gelu:  // Phi(x) + x phi(x)
      for (int64_t i = 0; i < n; ++i) {
        const float x = pre[i], pdf = 0.39894228f * exp_nonpositive(-0.5f * x * x);
        dpre[i] = dy[i] * (normal_cdf(x) + x * pdf);
      }
      break;
    case DenseActivation::gelu_tanh:
      for (int64_t i = 0; i < n; ++i) {
        const float x = pre[i], th = tanh_of(kGeluTanhC * (x + 0.044715f * x * x * x));
        const float du = kGeluTanhC * (1.0f + 3.0f * 0.044715f * x * x);
        dpre[i] = dy[i] * (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du);
      }
      break;
    case DenseActivation::relu:
      for (int64_t i = 0; i < n; ++i) dpre[i] = pre[i] > 0 ? dy[i] : 0.0f;
      break;
    case DenseActivation::none:
      break;
  }
}

// b is empty for "no bias" (absent_as_empty).
class DenseFunction : public torch::autograd::Function<DenseFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& w_in,
                               const torch::Tensor& b, int64_t act_code) {
    const auto act = static_cast<DenseActivation>(act_code);
    const torch::Tensor x = x_in.contiguous(), w = w_in.contiguous();
    const int64_t in = w.size(1), out_features = w.size(0), rows = x.numel() / in;
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = out_features;
    torch::Tensor y = torch::empty(shape, x.options());
    float* yp = y.data_ptr<float>();
    const bool bias = b.numel() > 0;
    if (bias) {  // each row starts as b; the GEMM adds x W^T to it
      const torch::Tensor bc = b.contiguous();
      const float* bp = bc.data_ptr<float>();
      for (int64_t r = 0; r < rows; ++r) std::copy_n(bp, out_features, yp + r * out_features);
    }
    cpu_gemm(false, true, rows, out_features, in, 1.0f, x.data_ptr<float>(), in, w.data_ptr<float>(), in,
             bias ? 1.0f : 0.0f, yp, out_features);
    ctx->saved_data["bias"] = bias;
    ctx->saved_data["act"] = act_code;
    if (act == DenseActivation::none) {
      ctx->save_for_backward({x, w});
      return y;
    }
    torch::Tensor activated = torch::empty_like(y);  // y stays as the pre-activation for the backward
    float* ap = activated.data_ptr<float>();
    at::parallel_for(0, y.numel(), kElementsPerTask,
                     [&](int64_t begin, int64_t end) { activate(act, yp + begin, ap + begin, end - begin); });
    ctx->save_for_backward({x, w, y});
    return activated;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1];
    torch::Tensor dy = grads[0].contiguous();
    const auto act = static_cast<DenseActivation>(ctx->saved_data["act"].toInt());
    if (act != DenseActivation::none) {  // through the activation first
      const torch::Tensor& pre = saved[2];
      torch::Tensor dpre = torch::empty_like(pre);
      const float *pp = pre.data_ptr<float>(), *gp = dy.data_ptr<float>();
      float* dp = dpre.data_ptr<float>();
      at::parallel_for(0, pre.numel(), kElementsPerTask, [&](int64_t begin, int64_t end) {
        activation_grad(act, pp + begin, gp + begin, dp + begin, end - begin);
      });
      dy = dpre;
    }
    const int64_t in = w.size(1), out_features = w.size(0), rows = x.numel() / in;
    const float* dyp = dy.data_ptr<float>();
    torch::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {  // dx = dy W
      dx = torch::empty_like(x);
      cpu_gemm(false, false, rows, in, out_features, 1.0f, dyp, out_features, w.data_ptr<float>(), in, 0.0f,
               dx.data_ptr<float>(), in);
    }
    if (ctx->needs_input_grad(1)) {  // dW = dy^T x
      dw = torch::empty_like(w);
      cpu_gemm(true, false, out_features, in, rows, 1.0f, dyp, out_features, x.data_ptr<float>(), in, 0.0f,
               dw.data_ptr<float>(), in);
    }
    if (ctx->saved_data["bias"].toBool() && ctx->needs_input_grad(2)) {
      db = torch::empty({out_features}, dy.options());
      column_sums(dyp, rows, out_features, db.data_ptr<float>());
    }
    return {dx, dw, db, torch::Tensor()};
  }
};

}  // namespace

namespace {
void check_dense_shapes(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const char* what) {
  TORCH_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) && (!b.defined() || b.numel() == w.size(0)), what,
              ": expected x (..., in), w (out, in), b (out); got x ", x.sizes(), ", w ", w.sizes());
}
}  // namespace

bool cpu_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  // Under CPU autocast, linear runs in bfloat16: leave it to LibTorch.
  return is_cpu_float32(x) && is_cpu_float32(w) && (!b.defined() || is_cpu_float32(b)) && cpu_gemm_available() &&
         !AutocastState::of(torch::kCPU).enabled;
}

std::optional<DenseActivation> dense_activation_of(const std::string& name) {
  if (name == "gelu") return DenseActivation::gelu;
  if (name == "gelu_new" || name == "gelu_fast") return DenseActivation::gelu_tanh;
  if (name == "relu") return DenseActivation::relu;
  return std::nullopt;
}

torch::Tensor cpu_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, DenseActivation act) {
  check_dense_shapes(x, w, b, "cpu_dense");
  return DenseFunction::apply(x, w, absent_as_empty(b, w.options()), static_cast<int64_t>(act));
}

namespace {

torch::Tensor activated(DenseActivation act, const torch::Tensor& pre) {
  switch (act) {
    case DenseActivation::gelu:
      return at::gelu(pre);
    case DenseActivation::gelu_tanh:
      return at::gelu(pre, "tanh");
    case DenseActivation::relu:
      return at::relu(pre);
    case DenseActivation::none:
      break;
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
// made it (~0.5 ms of the 111M step); elsewhere, or if LibTorch refuses the
// call, the rounded product is cast.
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
// parameters under autocast (unless ZOO_CUDA_KERNELS leaves out
// weight_copies), else cast here; a part already in `compute`, alone and
// unpadded, as it is.
torch::Tensor compute_weight(at::TensorList parts, torch::ScalarType compute, int64_t padding, double padding_value) {
  if (parts.size() == 1 && padding == 0 && parts.front().scalar_type() == compute) return parts.front().contiguous();
  static const bool keep = zoo::cuda::kernel_enabled("weight_copies");
  if (keep && weight_copy_applies(parts, compute)) return weight_copy(parts, compute, padding, padding_value);
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

// x and the weight and bias parts (biases empty: none) in their own types;
// the GEMMs in `compute` on the parts stacked (q, k and v's weights: one
// GEMM); the output `padding` columns wider than the weights' rows. The
// backward gives each part its rows of the stacked gradient (views).
class KernelDenseFunction : public torch::autograd::Function<KernelDenseFunction> {
 public:
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, at::TensorList weights,
                               at::TensorList biases, int64_t act_code, torch::ScalarType compute,
                               const DenseKernels* kernels, int64_t padding) {
    const auto act = static_cast<DenseActivation>(act_code);
    const torch::Tensor xc = x.to(compute).contiguous();
    const torch::Tensor wc = compute_weight(weights, compute, padding, 0.0);
    const int64_t outputs = wc.size(0) - padding;
    const torch::Tensor bc =
        !biases.empty() ? compute_weight(biases, compute, padding, -std::numeric_limits<double>::infinity())
        : padding > 0   ? padding_only_bias(outputs, padding, wc.options())
                        : torch::Tensor();
    const torch::Tensor rows_in = xc.view({-1, wc.size(1)});
    // addmm with a vector bias: cuBLASLt adds it in the GEMM's epilogue.
    const torch::Tensor pre = bc.defined() ? at::addmm(bc, rows_in, wc.t()) : at::mm(rows_in, wc.t());
    if (act == DenseActivation::none)
      ctx->save_for_backward({xc, wc});
    else
      ctx->save_for_backward({xc, wc, pre});
    ctx->saved_data["act"] = act_code;
    ctx->saved_data["weight_rows"] = rows_of(weights);
    ctx->saved_data["bias_rows"] = rows_of(biases);
    ctx->saved_data["x_dtype"] = static_cast<int64_t>(x.scalar_type());
    ctx->saved_data["w_dtype"] = static_cast<int64_t>(weights.front().scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(biases.empty() ? compute : biases.front().scalar_type());
    // A static table (see DenseKernels), so its address outlives the graph.
    ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(kernels);
    std::vector<int64_t> shape = x.sizes().vec();
    shape.back() = wc.size(0);
    return activated(act, pre).view(shape);
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
    const torch::Tensor dy = grads[0].to(wc.scalar_type()).contiguous().view({-1, out_features});
    const int64_t rows = dy.size(0);
    const bool need_db = needs_any(first_bias, bias_rows.size());
    torch::Tensor g = dy, partial;  // g: the gradient of the GEMM's output
    int64_t chunks = 0;
    if (act != DenseActivation::none || need_db) {
      const torch::Tensor pre = act != DenseActivation::none ? saved[2] : torch::Tensor();
      if (pre.defined()) g = torch::empty_like(pre);
      if (need_db)
        partial = torch::empty({kernels->grad_chunks(rows), out_features}, dy.options().dtype(torch::kFloat));
      const zoo::cuda::LaunchScope launch(dy);
      zoo::cuda::check_launch(
          kernels->activation_and_bias_grad(*zoo::cuda::element_type_of(dy.scalar_type()), act,
                                            pre.defined() ? pre.data_ptr() : nullptr, dy.data_ptr(),
                                            pre.defined() ? g.data_ptr() : nullptr, rows, out_features,
                                            need_db ? partial.data_ptr<float>() : nullptr, &chunks, launch.stream()),
          "dense backward");
    }
    // The padding's zero weight rows add nothing to dx; its rows of dW and db
    // are dropped. dW is made whole, then each part gets a view of its rows:
    // for the 111M head, dW of the 50257 columns of g alone took cuBLAS 5.0 ms
    // a step in an sm80 kernel where the 50304 padded ones take 3.1.
    tensor_list out(first_bias + bias_rows.size() + 4);
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

}  // namespace

torch::Tensor dense_through_parts(const DenseKernels& kernels, const torch::Tensor& x, at::TensorList weights,
                                  at::TensorList biases, DenseActivation act, torch::ScalarType compute,
                                  int64_t padding) {
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
  return KernelDenseFunction::apply(x, weights, biases, static_cast<int64_t>(act), compute, &kernels, padding);
}

torch::Tensor dense_through(const DenseKernels& kernels, const torch::Tensor& x, const torch::Tensor& w,
                            const torch::Tensor& b, DenseActivation act, torch::ScalarType compute, int64_t padding) {
  return dense_through_parts(kernels, x, {w}, b.defined() ? at::TensorList(b) : at::TensorList(), act, compute,
                             padding);
}

bool cuda_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  const bool wants_grad = x.requires_grad() || w.requires_grad() || (b.defined() && b.requires_grad());
  return x.is_cuda() && w.device() == x.device() && (!b.defined() || b.device() == x.device()) &&
         torch::GradMode::is_enabled() && wants_grad && dense_compute_type(x, w, b).has_value() &&
         zoo::cuda::kernel_available("dense");
}

torch::Tensor cuda_dense_parts(const torch::Tensor& x, at::TensorList weights, at::TensorList biases,
                               DenseActivation act, int64_t padding) {
#ifdef ZOO_CUDA_KERNELS
  static const DenseKernels kernels = {zoo::cuda::dense_grad_chunks, zoo::cuda::dense_activation_and_bias_grad};
  TORCH_CHECK(!weights.empty(), "cuda_dense: no weight");
  const std::optional<torch::ScalarType> compute =
      dense_compute_type(x, weights.front(), biases.empty() ? torch::Tensor() : biases.front());
  TORCH_CHECK(compute, "cuda_dense: x ", x.scalar_type(), ", w ", weights.front().scalar_type(),
              " without autocast: one type of float32, bfloat16 or float16 expected");
  return dense_through_parts(kernels, x, weights, biases, act, *compute, padding);
#else
  (void)x, (void)weights, (void)biases, (void)act, (void)padding;
  throw std::logic_error("cuda_dense: zoo was built without its CUDA kernels (-DZOO_CUDA_KERNELS=ON)");
#endif
}

torch::Tensor cuda_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, DenseActivation act,
                         int64_t padding) {
  return cuda_dense_parts(x, {w}, b.defined() ? at::TensorList(b) : at::TensorList(), act, padding);
}

bool fused_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  return cpu_dense_available(x, w, b) || cuda_dense_available(x, w, b);
}

torch::Tensor fused_dense(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, DenseActivation act) {
  return x.is_cuda() ? cuda_dense(x, w, b, act) : cpu_dense(x, w, b, act);
}

}  // namespace zoo::models
