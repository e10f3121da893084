// Implementation of runner/optim/adam_update.h. On CPU the fused loop
// replaces ~8 passes over memory and a dozen op dispatches per parameter,
// which made the optimizer a tenth of a small model's step.
#include "runner/optim/adam_update.h"

#include <ATen/Parallel.h>

#include <cmath>

#include "models/common/cpu_kernels.h"
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

ZOO_VECTOR_CLONES void adam_update_fused(float* p, const float* grad, float* m, float* v, int64_t n, const AdamHyper& h,
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
      adam_update_fused(p + b, g + b, m + b, v + b, e - b, h, float(s.correction));
    });
  }
  adam_update_foreach(rest, h);
}

}  // namespace zoo::optim
