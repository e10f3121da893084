// Implementation of models/kernels/norm_kernel.h. The CPU loops take row
// sums in double: rows are short, and one pass of them costs little next to
// the rest.
#include "models/kernels/norm_kernel.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <stdexcept>

#include "models/kernels/cpu/cpu_kernels.h"
#include "models/kernels/cpu/vector_math.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/policy.h"

namespace zoo::models {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

constexpr int64_t kRowsPerTask = 256;

// Normalizes rows [begin, end) of x (C wide) into y, keeping each row's mean
// and 1 / rms or 1 / std; with a branch, of h = x + branch (+ branch_bias,
// when not null), written to sum.
ZOO_VECTOR_CLONES void normalize_rows(const float* x, const float* branch, const float* branch_bias, float* sum,
                                      const float* w, const float* b, float* y, float* mean, float* rstd, int64_t begin,
                                      int64_t end, int64_t C, float eps, bool rms) {
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * C;
    float* yr = y + r * C;
    if (branch) {
      const float* br = branch + r * C;
      float* hr = sum + r * C;
      if (branch_bias)
        for (int64_t j = 0; j < C; ++j) hr[j] = xr[j] + br[j] + branch_bias[j];
      else
        for (int64_t j = 0; j < C; ++j) hr[j] = xr[j] + br[j];
      xr = hr;
    }
    float m = 0;
    if (!rms) {
      double s = 0;
      for (int64_t j = 0; j < C; ++j) s += xr[j];
      m = float(s / double(C));
    }
    double ss = 0;
    for (int64_t j = 0; j < C; ++j) ss += double(xr[j] - m) * double(xr[j] - m);
    const float inv = float(1.0 / std::sqrt(ss / double(C) + double(eps)));
    if (b)
      for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - m) * inv * w[j] + b[j];
    else
      for (int64_t j = 0; j < C; ++j) yr[j] = (xr[j] - m) * inv * w[j];
    mean[r] = m;
    rstd[r] = inv;
  }
}

// dx for rows [begin, end): with xhat = (x - mean) * rstd and g = dy * w,
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) (LayerNorm), or
// dx = rstd * (g - xhat * mean(g * xhat)) (RMSNorm); plus residual_grad, the
// gradient reaching x from elsewhere, when not null.
ZOO_VECTOR_CLONES void input_grad_rows(const float* x, const float* w, const float* dy, const float* residual_grad,
                                       const float* mean, const float* rstd, float* dx, int64_t begin, int64_t end,
                                       int64_t C, bool rms) {
  for (int64_t r = begin; r < end; ++r) {
    const float* xr = x + r * C;
    const float* dyr = dy + r * C;
    float* dxr = dx + r * C;
    const float m = mean[r], inv = rstd[r];
    float sum_g = 0, sum_gx = 0;
    for (int64_t j = 0; j < C; ++j) {
      const float g = dyr[j] * w[j];
      sum_g += g;
      sum_gx += g * (xr[j] - m) * inv;
    }
    const float mean_g = rms ? 0.0f : sum_g / float(C), mean_gx = sum_gx / float(C);
    for (int64_t j = 0; j < C; ++j) dxr[j] = inv * (dyr[j] * w[j] - mean_g - (xr[j] - m) * inv * mean_gx);
    if (residual_grad)
      for (int64_t j = 0; j < C; ++j) dxr[j] += residual_grad[r * C + j];
  }
}

// dw = sum over rows of dy * xhat, db = sum of dy (db may be null).
ZOO_VECTOR_CLONES void param_grads(const float* x, const float* dy, const float* mean, const float* rstd, int64_t rows,
                                   int64_t C, float* dw, float* db) {
  ColumnSums sum_w(C), sum_b(C);
  for (int64_t r = 0; r < rows; ++r) {
    float *sw = sum_w.row_sums(r), *sb = sum_b.row_sums(r);
    const float* xr = x + r * C;
    const float* dyr = dy + r * C;
    const float m = mean[r], inv = rstd[r];
    for (int64_t j = 0; j < C; ++j) {
      sw[j] += dyr[j] * (xr[j] - m) * inv;
      sb[j] += dyr[j];
    }
  }
  sum_w.write(dw);
  if (db) sum_b.write(db);
}

// What both autograd functions save and read back: the normalized input (x,
// or the sum x + branch), the weight, and each row's statistics.
void save_norm(AutogradContext* ctx, const torch::Tensor& normalized, const torch::Tensor& w, const torch::Tensor& mean,
               const torch::Tensor& rstd, bool rms, bool bias, bool branch, bool branch_bias) {
  ctx->save_for_backward({normalized, w, mean, rstd});
  // An output with no gradient stays undefined (output_grads), not a tensor
  // of zeros autograd fills and the backward reads: the final norm's sum is
  // used by nothing (100 MB each way per 111M step).
  ctx->set_materialize_grads(false);
  ctx->saved_data["rms"] = rms;
  ctx->saved_data["bias"] = bias;
  ctx->saved_data["branch"] = branch;
  ctx->saved_data["branch_bias"] = branch_bias;
}

// The gradients reaching the outputs {y} or {y, sum}: dy (zeros if y went
// unused), and the sum's gradient from its other uses (undefined if none).
std::pair<torch::Tensor, torch::Tensor> output_grads(const tensor_list& grads, const torch::Tensor& normalized,
                                                     torch::ScalarType y_type) {
  torch::Tensor dy = grads[0].defined() ? grads[0].to(y_type).contiguous()
                                        : torch::zeros(normalized.sizes(), normalized.options().dtype(y_type));
  torch::Tensor residual = grads.size() > 1 && grads[1].defined() ? grads[1].contiguous() : torch::Tensor();
  return {dy, residual};
}

// zoo's CPU loops. Inputs: x, branch (empty: no residual add), the branch's
// bias (empty: none), weight, bias (empty: none); outputs {y} or, with a
// branch, {y, x + branch + its bias}.
class NormFunction : public torch::autograd::Function<NormFunction> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& branch_in,
                             const torch::Tensor& branch_bias_in, const torch::Tensor& w_in, const torch::Tensor& b_in,
                             double eps, bool rms) {
    const torch::Tensor x = x_in.contiguous(), branch = branch_in.contiguous();
    const torch::Tensor branch_bias = branch_bias_in.contiguous();
    const torch::Tensor w = w_in.contiguous(), b = b_in.contiguous();
    const bool add = branch.numel() > 0, add_bias = add && branch_bias.numel() > 0;
    const int64_t C = x.size(-1), rows = x.numel() / C;
    torch::Tensor y = torch::empty_like(x), sum = add ? torch::empty_like(x) : torch::Tensor();
    torch::Tensor mean = torch::empty({rows}, x.options()), rstd = torch::empty_like(mean);
    const float* bp = b.numel() > 0 ? b.data_ptr<float>() : nullptr;
    at::parallel_for(0, rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
      normalize_rows(x.data_ptr<float>(), add ? branch.data_ptr<float>() : nullptr,
                     add_bias ? branch_bias.data_ptr<float>() : nullptr, add ? sum.data_ptr<float>() : nullptr,
                     w.data_ptr<float>(), bp, y.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(),
                     begin, end, C, float(eps), rms);
    });
    save_norm(ctx, add ? sum : x, w, mean, rstd, rms, b.numel() > 0, add, add_bias);
    return add ? tensor_list{y, sum} : tensor_list{y};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const auto [dy, residual] = output_grads(grads, x, torch::kFloat);
    const bool rms = ctx->saved_data["rms"].toBool(), bias = ctx->saved_data["bias"].toBool();
    const bool add = ctx->saved_data["branch"].toBool();
    const bool need_dbb = ctx->saved_data["branch_bias"].toBool() && ctx->needs_input_grad(2);
    const int64_t C = x.size(-1), rows = x.numel() / C;
    torch::Tensor dx, dw, db, dbb;
    if (ctx->needs_input_grad(0) || (add && ctx->needs_input_grad(1)) || need_dbb) {
      dx = torch::empty_like(x);
      at::parallel_for(0, rows, kRowsPerTask, [&](int64_t begin, int64_t end) {
        input_grad_rows(x.data_ptr<float>(), w.data_ptr<float>(), dy.data_ptr<float>(),
                        residual.defined() ? residual.data_ptr<float>() : nullptr, mean.data_ptr<float>(),
                        rstd.data_ptr<float>(), dx.data_ptr<float>(), begin, end, C, rms);
      });
    }
    if (ctx->needs_input_grad(3) || (bias && ctx->needs_input_grad(4))) {
      dw = torch::empty_like(w);
      if (bias) db = torch::empty_like(w);
      param_grads(x.data_ptr<float>(), dy.data_ptr<float>(), mean.data_ptr<float>(), rstd.data_ptr<float>(), rows, C,
                  dw.data_ptr<float>(), bias ? db.data_ptr<float>() : nullptr);
      if (!ctx->needs_input_grad(3)) dw = torch::Tensor();
      if (!bias || !ctx->needs_input_grad(4)) db = torch::Tensor();
    }
    if (need_dbb) {  // the column sums of the sum's gradient
      dbb = torch::empty_like(w);
      column_sums(dx.data_ptr<float>(), rows, C, dbb.data_ptr<float>());
    }
    // The add's inputs get the same gradient (as torch's add does).
    return {dx, add ? dx : torch::Tensor(), dbb, dw, db, torch::Tensor(), torch::Tensor()};
  }
};

// Through a NormKernels table; inputs and outputs as NormFunction's, the
// branch in any type the kernels take, y in out_dtype.
class KernelNormFunction : public torch::autograd::Function<KernelNormFunction> {
 public:
  static tensor_list forward(AutogradContext* ctx, const torch::Tensor& x_in, const torch::Tensor& branch_in,
                             const torch::Tensor& branch_bias_in, const torch::Tensor& w_in, const torch::Tensor& b_in,
                             double eps, bool rms, torch::ScalarType out_dtype, const NormKernels* kernels) {
    const torch::Tensor x = x_in.contiguous(), branch = branch_in.contiguous();
    const torch::Tensor branch_bias = branch_bias_in.contiguous();
    const torch::Tensor w = w_in.contiguous(), b = b_in.contiguous();
    const bool add = branch.numel() > 0, add_bias = add && branch_bias.numel() > 0;
    const int64_t C = x.size(-1), rows = x.numel() / C;
    torch::Tensor y = torch::empty(x.sizes(), x.options().dtype(out_dtype));
    torch::Tensor sum = add ? torch::empty_like(x) : torch::Tensor();
    torch::Tensor mean = torch::empty({rows}, x.options()), rstd = torch::empty_like(mean);
    const zoo::cuda::LaunchScope launch(x);
    zoo::cuda::check_launch(
        kernels->forward(*zoo::cuda::element_type_of(out_dtype), x.data_ptr<float>(),
                         *zoo::cuda::element_type_of(branch.scalar_type()), add ? branch.data_ptr() : nullptr,
                         add_bias ? branch_bias.data_ptr<float>() : nullptr, add ? sum.data_ptr<float>() : nullptr,
                         w.data_ptr<float>(), b.numel() > 0 ? b.data_ptr<float>() : nullptr, rows, C, float(eps), rms,
                         y.data_ptr(), mean.data_ptr<float>(), rstd.data_ptr<float>(), launch.stream()),
        "norm forward");
    save_norm(ctx, add ? sum : x, w, mean, rstd, rms, b.numel() > 0, add, add_bias);
    ctx->saved_data["out_dtype"] = static_cast<int64_t>(out_dtype);
    ctx->saved_data["branch_dtype"] = static_cast<int64_t>(branch.scalar_type());
    // A static table (see NormKernels), so its address outlives the graph.
    ctx->saved_data["kernels"] = reinterpret_cast<int64_t>(kernels);
    return add ? tensor_list{y, sum} : tensor_list{y};
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const bool rms = ctx->saved_data["rms"].toBool(), bias = ctx->saved_data["bias"].toBool();
    const bool add = ctx->saved_data["branch"].toBool();
    const auto out_dtype = static_cast<torch::ScalarType>(ctx->saved_data["out_dtype"].toInt());
    const auto branch_dtype = static_cast<torch::ScalarType>(ctx->saved_data["branch_dtype"].toInt());
    const auto* kernels = reinterpret_cast<const NormKernels*>(ctx->saved_data["kernels"].toInt());
    const auto [dy, residual] = output_grads(grads, x, out_dtype);
    const zoo::cuda::ElementType dy_type = *zoo::cuda::element_type_of(out_dtype);
    const int64_t C = x.size(-1), rows = x.numel() / C;
    const zoo::cuda::LaunchScope launch(x);
    const bool need_dbb = ctx->saved_data["branch_bias"].toBool() && ctx->needs_input_grad(2);
    torch::Tensor dx, dbranch, dw_partial, db_partial, dbb_partial;
    bool own_copy = false;
    if (ctx->needs_input_grad(0) || (add && ctx->needs_input_grad(1)) || need_dbb) {
      dx = torch::empty_like(x);
      // A float32 branch shares dx; another type gets its copy from the same pass.
      own_copy = add && branch_dtype != torch::kFloat && ctx->needs_input_grad(1);
      dbranch = own_copy ? torch::empty(x.sizes(), x.options().dtype(branch_dtype)) : add ? dx : torch::Tensor();
    }
    const bool need_dw = ctx->needs_input_grad(3), need_db = bias && ctx->needs_input_grad(4);
    // (planes, chunks, C): dw's, db's and the branch bias's sums per chunk of
    // rows, added up here in one launch.
    const int64_t planes = (need_dw || need_db ? 1 : 0) + (need_db ? 1 : 0) + (need_dbb ? 1 : 0);
    torch::Tensor partials;
    int64_t plane = 0;
    if (planes > 0) partials = torch::empty({planes, kernels->param_grad_chunks(rows), C}, x.options());
    if (need_dw || need_db) dw_partial = partials[plane++];
    if (need_db) db_partial = partials[plane++];
    if (need_dbb) dbb_partial = partials[plane++];
    int64_t chunks = 0;
    if (dx.defined() || dw_partial.defined()) {
      zoo::cuda::check_launch(
          kernels->backward(dy_type, x.data_ptr<float>(), w.data_ptr<float>(), dy.data_ptr(),
                            residual.defined() ? residual.data_ptr<float>() : nullptr, mean.data_ptr<float>(),
                            rstd.data_ptr<float>(), rows, C, rms, dx.defined() ? dx.data_ptr<float>() : nullptr,
                            *zoo::cuda::element_type_of(branch_dtype), own_copy ? dbranch.data_ptr() : nullptr,
                            dw_partial.defined() ? dw_partial.data_ptr<float>() : nullptr,
                            db_partial.defined() ? db_partial.data_ptr<float>() : nullptr,
                            dbb_partial.defined() ? dbb_partial.data_ptr<float>() : nullptr, &chunks, launch.stream()),
          "norm backward");
    }
    const torch::Tensor sums = partials.defined() ? partials.narrow(1, 0, chunks).sum(1) : torch::Tensor();
    const torch::Tensor dw = need_dw ? sums[0] : torch::Tensor();
    const torch::Tensor db = need_db ? sums[1] : torch::Tensor();
    const torch::Tensor dbb = need_dbb ? sums[planes - 1] : torch::Tensor();
    return {dx, dbranch, dbb, dw, db, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

bool is_float32(const torch::Tensor& t) { return t.scalar_type() == torch::kFloat; }

// float32 x, weight and (when defined) bias: what every norm kernel computes on.
bool float32_inputs(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return is_float32(x) && is_float32(weight) && (!bias.defined() || is_float32(bias));
}

// A branch the kernels can add into x: x's shape and device, a type they read.
bool kernel_branch_fits(const torch::Tensor& x, const torch::Tensor& branch) {
  return branch.sizes() == x.sizes() && branch.device() == x.device() &&
         zoo::cuda::element_type_of(branch.scalar_type()).has_value();
}

void check_norm_shapes(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                       const char* what) {
  TORCH_CHECK(x.dim() >= 1 && weight.dim() == 1 && x.size(-1) == weight.size(0) &&
                  (!bias.defined() || bias.sizes() == weight.sizes()),
              what, ": expected x (..., C), weight (C), bias (C); got x ", x.sizes(), ", weight ", weight.sizes());
}

void check_branch_bias(const torch::Tensor& branch, const torch::Tensor& branch_bias, const torch::Tensor& weight,
                       const char* what) {
  TORCH_CHECK(branch_bias_fuses(branch, branch_bias, weight), what,
              ": a branch bias needs a branch and float32 (C) values on the weight's device; got ",
              branch_bias.defined() ? branch_bias.sizes() : weight.sizes());
}

// The emulated CUDA kernels that take x's CPU tensors in this run (tests), or null.
const EmulatedCudaKernels* emulated_cuda_for(const torch::Tensor& x) {
  const EmulatedCudaKernels* e = kernel_policy().emulated_cuda;
  return x.is_cpu() && e && e->norm ? e : nullptr;
}

}  // namespace

bool cuda_norm_sums_branch_bias(const torch::Tensor& x) {
  if (const EmulatedCudaKernels* e = emulated_cuda_for(x)) return e->norm_sums_branch_bias_in_one_pass(x.size(-1));
#ifdef ZOO_CUDA_KERNELS
  return zoo::cuda::norm_sums_branch_bias_in_one_pass(x.size(-1));
#else
  (void)x;
  return false;
#endif
}

torch::Tensor residual_sum(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& branch_bias) {
  const torch::Tensor sum = branch.defined() ? x + branch : x;
  return branch_bias.defined() ? sum + branch_bias : sum;
}

bool cpu_norm_available(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  return kernel_policy().cpu_kernels && x.is_cpu() && weight.is_cpu() && (!bias.defined() || bias.is_cpu()) &&
         float32_inputs(x, weight, bias);
}

bool branch_bias_fuses(const torch::Tensor& branch, const torch::Tensor& branch_bias, const torch::Tensor& weight) {
  return !branch_bias.defined() || (branch.defined() && branch_bias.sizes() == weight.sizes() &&
                                    is_float32(branch_bias) && branch_bias.device() == weight.device());
}

bool branch_fuses(const torch::Tensor& x, const torch::Tensor& branch) {
  return kernel_branch_fits(x, branch) && (x.is_cuda() || (x.is_cpu() && is_float32(branch)));  // CPU loops: float32
}

torch::Tensor cpu_norm(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias, double eps,
                       bool rms) {
  return cpu_add_norm(x, torch::Tensor(), weight, bias, eps, rms).normed;
}

SumAndNorm cpu_add_norm(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                        const torch::Tensor& bias, double eps, bool rms, const torch::Tensor& branch_bias) {
  check_norm_shapes(x, weight, bias, "cpu_norm");
  TORCH_CHECK(!branch.defined() || branch_fuses(x, branch), "cpu_add_norm: a float32 CPU branch of x's shape ",
              x.sizes(), " expected");
  check_branch_bias(branch, branch_bias, weight, "cpu_add_norm");
  const tensor_list out =
      NormFunction::apply(x, absent_as_empty(branch, x.options()), absent_as_empty(branch_bias, weight.options()),
                          weight, absent_as_empty(bias, weight.options()), eps, rms);
  return {branch.defined() ? out[1] : x, out[0]};
}

SumAndNorm norm_through(const NormKernels& kernels, const torch::Tensor& x, const torch::Tensor& branch,
                        const torch::Tensor& weight, const torch::Tensor& bias, double eps, bool rms,
                        torch::ScalarType out_dtype, const torch::Tensor& branch_bias) {
  check_norm_shapes(x, weight, bias, "norm_through");
  TORCH_CHECK(float32_inputs(x, weight, bias), "norm_through: float32 x, weight and bias expected");
  TORCH_CHECK(!branch.defined() || kernel_branch_fits(x, branch), "norm_through: a branch of x's shape ", x.sizes(),
              " and device in float32, bfloat16 or float16 expected");
  TORCH_CHECK(zoo::cuda::element_type_of(out_dtype), "norm_through: output type ", out_dtype,
              " is not float32, bfloat16 or float16");
  check_branch_bias(branch, branch_bias, weight, "norm_through");
  const tensor_list out =
      KernelNormFunction::apply(x, absent_as_empty(branch, x.options()), absent_as_empty(branch_bias, weight.options()),
                                weight, absent_as_empty(bias, weight.options()), eps, rms, out_dtype, &kernels);
  return {branch.defined() ? out[1] : x, out[0]};
}

bool cuda_norm_available(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias) {
  if (emulated_cuda_for(x)) return float32_inputs(x, weight, bias) && weight.is_cpu();
  return x.is_cuda() && float32_inputs(x, weight, bias) && zoo::cuda::kernel_available("norm");
}

SumAndNorm cuda_norm(const torch::Tensor& x, const torch::Tensor& branch, const torch::Tensor& weight,
                     const torch::Tensor& bias, double eps, bool rms, torch::ScalarType out_dtype,
                     const torch::Tensor& branch_bias) {
  if (const EmulatedCudaKernels* e = emulated_cuda_for(x))
    return norm_through(*e->norm, x, branch, weight, bias, eps, rms, out_dtype, branch_bias);
#ifdef ZOO_CUDA_KERNELS
  static const NormKernels kernels = {zoo::cuda::norm_forward, zoo::cuda::norm_param_grad_chunks,
                                      zoo::cuda::norm_backward};
  return norm_through(kernels, x, branch, weight, bias, eps, rms, out_dtype, branch_bias);
#else
  (void)x, (void)branch, (void)weight, (void)bias, (void)eps, (void)rms, (void)out_dtype, (void)branch_bias;
  throw std::logic_error("cuda_norm: zoo was built without its CUDA kernels (-DZOO_CUDA_KERNELS=ON)");
#endif
}

}  // namespace zoo::models
