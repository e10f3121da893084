// Implementation of runner/optim/adam_update.h. On CPU the fused loop
// replaces ~8 passes over memory and a dozen op dispatches per parameter,
// which made the optimizer a tenth of a small model's step.
#include "runner/optim/adam_update.h"

#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "models/common/cpu_kernels.h"
#include "models/common/torch_version.h"
#include "models/common/vector_math.h"

namespace zoo::optim {
namespace {

bool dense_float_cpu(const torch::Tensor& t) { return models::is_cpu_float32(t) && t.is_contiguous(); }

// The slots' update as _foreach_ ops: on CUDA each is one fused kernel
// (multi-tensor apply) over the whole list.
void adam_update_foreach(const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  if (slots.empty()) return;
  std::vector<torch::Tensor> p, g, m, v;
  std::vector<at::Scalar> correction;
  for (const auto& s : slots) {
    p.push_back(s.param);
    g.push_back(s.param.grad());
    m.push_back(s.exp_avg);
    v.push_back(s.exp_avg_sq);
    correction.emplace_back(s.correction);
  }
  if (!h.decoupled && h.weight_decay > 0) g = at::_foreach_add(g, p, h.weight_decay);
  at::_foreach_mul_(m, h.beta1);
  at::_foreach_add_(m, g, 1 - h.beta1);
  at::_foreach_mul_(v, h.beta2);
  at::_foreach_addcmul_(v, g, g, 1 - h.beta2);
  std::vector<torch::Tensor> update = at::_foreach_sqrt(v);
  at::_foreach_add_(update, h.eps);
  update = at::_foreach_div(m, update);
  at::_foreach_mul_(update, correction);
  if (h.decoupled && h.weight_decay > 0) at::_foreach_add_(update, p, h.weight_decay);
  at::_foreach_add_(p, update, -h.lr);
}

#if ZOO_TORCH_AT_LEAST(2, 1)
// What ATen's fused Adam kernel takes: CUDA tensors of one floating dtype
// with param, grad and moments alike in shape and layout.
bool fusable_on_cuda(const AdamSlot& s) {
  const torch::Tensor& p = s.param;
  const torch::Tensor& g = p.grad();
  if (!p.is_cuda() || !c10::isFloatingType(p.scalar_type()) || p.layout() != torch::kStrided ||
      !p.is_non_overlapping_and_dense() || g.is_sparse())
    return false;
  for (const torch::Tensor* t : {&g, &s.exp_avg, &s.exp_avg_sq})
    if (t->scalar_type() != p.scalar_type() || t->device() != p.device() || t->sizes() != p.sizes() ||
        t->strides() != p.strides())
      return false;
  return true;
}

// The slots' update in ATen's fused Adam(W) kernel: one pass over each
// tensor instead of the ~10 multi-tensor passes (and two temporaries the size
// of the parameters) of adam_update_foreach. The kernel's own bias correction
// divides eps by sqrt(1 - b2^t), modelzoo's does not; so the kernel is given
// step = +inf (its corrections become 1) and modelzoo's correction goes into
// the learning rate, with the decoupled decay divided by it to keep lr * wd:
//   p -= lr c wd p;  p -= lr c m / (sqrt(v) + eps)   (Adam: g += wd p first)
// which is adam_update's arithmetic, up to float rounding. One rounding is
// systematic: the kernel takes 1 - beta of beta in float32, so with beta2 =
// 0.999 each g^2 enters v 1.3e-5 (relative) lighter than in float64 (as in
// PyTorch's fused AdamW; measured on an H100). Returns the slots it did not take.
std::vector<AdamSlot> adam_update_fused_cuda(const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  if (!(h.beta1 < 1 && h.beta2 < 1)) return slots;  // pow(1, inf) = 1 would divide by zero
  std::vector<AdamSlot> rest;
  // One kernel call per device, dtype and correction (one per group in practice).
  using Key = std::tuple<int, int, double>;
  std::map<Key, std::vector<const AdamSlot*>> calls;
  for (const AdamSlot& s : slots) {
    if (fusable_on_cuda(s) && s.correction > 0)
      calls[Key{s.param.get_device(), int(s.param.scalar_type()), s.correction}].push_back(&s);
    else
      rest.push_back(s);
  }
  for (const auto& [key, group] : calls) {
    std::vector<torch::Tensor> p, g, m, v;
    for (const AdamSlot* s : group) {
      p.push_back(s->param);
      g.push_back(s->param.grad());
      m.push_back(s->exp_avg);
      v.push_back(s->exp_avg_sq);
    }
    const torch::Tensor inf_step = torch::full({}, std::numeric_limits<float>::infinity(),
                                               torch::TensorOptions().dtype(torch::kFloat).device(p[0].device()));
    const std::vector<torch::Tensor> steps(p.size(), inf_step);  // read, never written, by the kernel
    const double c = std::get<2>(key), lr = h.lr * c;
    if (h.decoupled)
      at::_fused_adamw_(p, g, m, v, {}, steps, lr, h.beta1, h.beta2, h.weight_decay / c, h.eps, /*amsgrad=*/false,
                        /*maximize=*/false);
    else
      at::_fused_adam_(p, g, m, v, {}, steps, lr, h.beta1, h.beta2, h.weight_decay, h.eps, /*amsgrad=*/false,
                       /*maximize=*/false);
  }
  return rest;
}
#endif

ZOO_VECTOR_CLONES void adam_update_cpu_pass(float* p, const float* grad, float* m, float* v, int64_t n, const AdamHyper& h,
                                         float correction) {
  const float b1 = float(h.beta1), b2 = float(h.beta2), one_b1 = float(1 - h.beta1), one_b2 = float(1 - h.beta2);
  const float eps = float(h.eps), lr = float(h.lr);
  const float l2 = h.decoupled ? 0.0f : float(h.weight_decay), decoupled = h.decoupled ? float(h.weight_decay) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grad[i] + l2 * p[i];
    const float mi = m[i] * b1 + one_b1 * g;
    const float vi = v[i] * b2 + one_b2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float update = mi / (std::sqrt(vi) + eps) * correction + decoupled * p[i];
    p[i] = p[i] - lr * update;
  }
}

}  // namespace

void adam_update(const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  torch::NoGradGuard no_grad;
  std::vector<AdamSlot> rest;
  for (const auto& s : slots) {
    const torch::Tensor& grad = s.param.grad();
    if (!(dense_float_cpu(s.param) && dense_float_cpu(grad) && dense_float_cpu(s.exp_avg) &&
          dense_float_cpu(s.exp_avg_sq))) {
      rest.push_back(s);
      continue;
    }
    float* p = s.param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float *m = s.exp_avg.data_ptr<float>(), *v = s.exp_avg_sq.data_ptr<float>();
    // ~256K elements per thread task: smaller parameters are not worth waking the threads for.
    at::parallel_for(0, s.param.numel(), 1 << 18, [&](int64_t b, int64_t e) {
      adam_update_cpu_pass(p + b, g + b, m + b, v + b, e - b, h, float(s.correction));
    });
    // Written through raw pointers: the version counter still has to move, as
    // any in-place op's does (kept weight copies and autograd's checks read it).
    torch::autograd::impl::bump_version(s.param);
  }
#if ZOO_TORCH_AT_LEAST(2, 1)
  rest = adam_update_fused_cuda(rest, h);
#endif
  adam_update_foreach(rest, h);
}

}  // namespace zoo::optim
