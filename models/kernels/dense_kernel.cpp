// Implementation of models/kernels/dense_kernel.h's CPU layer (cpu_dense)
// and shared checks; the layer on zoo's CUDA kernel is
// models/kernels/dense_through.cpp.
#include "models/kernels/dense_kernel.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "models/kernels/autocast_state.h"
#include "models/kernels/cpu/cpu_gemm.h"
#include "models/kernels/cpu/cpu_kernels.h"
#include "models/kernels/cpu/vector_math.h"
#include "models/kernels/policy.h"

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
    case DenseActivation::none: break;
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
    case DenseActivation::none: break;
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

void check_dense_shapes(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, const char* what) {
  TORCH_CHECK(w.dim() == 2 && x.dim() >= 1 && x.size(-1) == w.size(1) && (!b.defined() || b.numel() == w.size(0)), what,
              ": expected x (..., in), w (out, in), b (out); got x ", x.sizes(), ", w ", w.sizes());
}

std::vector<torch::Tensor> split_heads(const torch::Tensor& y, const std::vector<int64_t>& splits, int64_t head_dim) {
  std::vector<torch::Tensor> heads;
  for (const torch::Tensor& part : y.split_with_sizes(splits, -1)) {
    std::vector<int64_t> shape = part.sizes().vec();
    shape.back() = part.size(-1) / head_dim;
    shape.push_back(head_dim);
    heads.push_back(part.view(shape));
  }
  return heads;
}

bool cpu_dense_available(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b) {
  // Under CPU autocast, linear runs in bfloat16: leave it to LibTorch.
  return kernel_policy().cpu_kernels && is_cpu_float32(x) && is_cpu_float32(w) && (!b.defined() || is_cpu_float32(b)) &&
         cpu_gemm_available() && !AutocastState::of(torch::kCPU).enabled;
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

}  // namespace zoo::models
