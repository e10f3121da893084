// Implementation of models/kernels/adam_update.h. On CPU the fused loop
// replaces ~8 passes over memory and a dozen op dispatches per parameter,
// which made the optimizer a tenth of a small model's step.
#include "models/kernels/adam_update.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>

#include "models/kernels/cpu/cpu_kernels.h"
#include "models/kernels/cpu/vector_math.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/torch_version.h"

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
  if (h.grad_coefficient.defined())
    for (auto& gi : g) gi = gi * h.grad_coefficient.to(gi.device(), gi.scalar_type());
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

zoo::cuda::AdamConstants constants_of(const AdamHyper& h) {
  return {float(h.beta1),
          float(h.beta2),
          float(1 - h.beta1),
          float(1 - h.beta2),
          float(h.eps),
          float(h.lr),
          h.decoupled ? 0.0f : float(h.weight_decay),
          h.decoupled ? float(h.weight_decay) : 0.0f};
}

// Whether the slot's gradient and moments are its param's type, device and
// shape, and either laid out as the param is or contiguous.
bool alike_param(const AdamSlot& s, bool same_strides) {
  const torch::Tensor& p = s.param;
  for (const torch::Tensor* t : {&p.grad(), &s.exp_avg, &s.exp_avg_sq})
    if (t->scalar_type() != p.scalar_type() || t->device() != p.device() || t->sizes() != p.sizes() ||
        !(same_strides ? t->strides() == p.strides() : t->is_contiguous()))
      return false;
  return true;
}

// What zoo's kernel takes: float32 param, grad and moments, contiguous and
// alike in shape, on one device.
bool kernel_takes(const AdamSlot& s) {
  const torch::Tensor& p = s.param;
  return p.scalar_type() == torch::kFloat && p.layout() == torch::kStrided && p.is_contiguous() &&
         !p.grad().is_sparse() && alike_param(s, /*same_strides=*/false);
}

#if ZOO_TORCH_AT_LEAST(2, 1)
// What ATen's fused Adam kernel takes: CUDA tensors of one floating dtype
// with param, grad and moments alike in shape and layout.
bool fusable_on_cuda(const AdamSlot& s) {
  const torch::Tensor& p = s.param;
  return p.is_cuda() && c10::isFloatingType(p.scalar_type()) && p.layout() == torch::kStrided &&
         p.is_non_overlapping_and_dense() && !p.grad().is_sparse() && alike_param(s, /*same_strides=*/true);
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
// PyTorch's fused AdamW). Returns the slots it did not take.
std::vector<AdamSlot> adam_update_fused_cuda(const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  if (!(h.beta1 < 1 && h.beta2 < 1)) return slots;  // pow(1, inf) = 1 would divide by zero
  std::vector<AdamSlot> rest;
  // One kernel call per device, dtype and correction (one per group in practice).
  using Key = std::tuple<int, int, double>;
  std::map<Key, std::vector<const AdamSlot*>> calls;
  for (const AdamSlot& s : slots) {
    if (fusable_on_cuda(s) && s.correction > 0)
      calls[Key{s.param.get_device(), int(s.param.scalar_type()), s.correction}].push_back(&s);
    else rest.push_back(s);
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
    // The kernel divides each gradient by grad_scale (and stores it so).
    c10::optional<torch::Tensor> grad_scale;
    if (h.grad_coefficient.defined()) grad_scale = h.grad_coefficient.to(p[0].device(), torch::kFloat).reciprocal();
    if (h.decoupled)
      at::_fused_adamw_(p, g, m, v, {}, steps, lr, h.beta1, h.beta2, h.weight_decay / c, h.eps, /*amsgrad=*/false,
                        /*maximize=*/false, grad_scale);
    else
      at::_fused_adam_(p, g, m, v, {}, steps, lr, h.beta1, h.beta2, h.weight_decay, h.eps, /*amsgrad=*/false,
                       /*maximize=*/false, grad_scale);
  }
  return rest;
}
#endif

ZOO_VECTOR_CLONES void adam_update_cpu_pass(float* p, const float* grad, float* m, float* v, int64_t n,
                                            const zoo::cuda::AdamConstants& c, float correction, float coefficient) {
  for (int64_t i = 0; i < n; ++i) zoo::cuda::adam_element(p[i], grad[i] * coefficient, m[i], v[i], correction, c);
}

}  // namespace

std::vector<AdamSlot> adam_update_with(AdamKernel kernel, const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  std::vector<AdamSlot> rest;
  std::vector<std::pair<c10::Device, std::vector<const AdamSlot*>>> by_device;
  for (const AdamSlot& s : slots) {
    if (!kernel_takes(s)) {
      rest.push_back(s);
      continue;
    }
    auto it =
        std::find_if(by_device.begin(), by_device.end(), [&](const auto& d) { return d.first == s.param.device(); });
    if (it == by_device.end()) it = by_device.insert(by_device.end(), {s.param.device(), {}});
    it->second.push_back(&s);
  }
  const zoo::cuda::AdamConstants constants = constants_of(h);
  for (const auto& [device, group] : by_device) {
    std::vector<zoo::cuda::AdamTensor> tensors;
    for (const AdamSlot* s : group)
      tensors.push_back({s->param.data_ptr<float>(), s->param.grad().data_ptr<float>(), s->exp_avg.data_ptr<float>(),
                         s->exp_avg_sq.data_ptr<float>(), s->param.numel(), float(s->correction)});
    // Lives until the launches are queued; the allocator reuses its memory only behind them on this stream.
    const torch::Tensor coefficient =
        h.grad_coefficient.defined() ? h.grad_coefficient.to(device, torch::kFloat).contiguous() : torch::Tensor();
    const zoo::cuda::LaunchScope launch(group.front()->param);
    zoo::cuda::check_launch(kernel(tensors.data(), int64_t(tensors.size()), constants,
                                   coefficient.defined() ? coefficient.data_ptr<float>() : nullptr, launch.stream()),
                            "Adam update");
    // Written through raw pointers: move the version counters, as in-place ops do.
    for (const AdamSlot* s : group) torch::autograd::impl::bump_version(s->param);
  }
  return rest;
}

bool cuda_adam_kernel_available() { return zoo::cuda::kernel_available("adam"); }

void adam_update(const std::vector<AdamSlot>& slots, const AdamHyper& h) {
  torch::NoGradGuard no_grad;
  const zoo::cuda::AdamConstants constants = constants_of(h);
  const bool cpu_coefficient = !h.grad_coefficient.defined() || h.grad_coefficient.is_cpu();
  const float coefficient = h.grad_coefficient.defined() && cpu_coefficient ? h.grad_coefficient.item<float>() : 1.0f;
  std::vector<AdamSlot> rest, on_cuda;
  for (const auto& s : slots) {
    const torch::Tensor& grad = s.param.grad();
    if (!(cpu_coefficient && dense_float_cpu(s.param) && dense_float_cpu(grad) && dense_float_cpu(s.exp_avg) &&
          dense_float_cpu(s.exp_avg_sq))) {
      (s.param.is_cuda() ? on_cuda : rest).push_back(s);
      continue;
    }
    float* p = s.param.data_ptr<float>();
    const float* g = grad.data_ptr<float>();
    float *m = s.exp_avg.data_ptr<float>(), *v = s.exp_avg_sq.data_ptr<float>();
    // ~256K elements per thread task: smaller parameters are not worth waking the threads for.
    at::parallel_for(0, s.param.numel(), 1 << 18, [&](int64_t b, int64_t e) {
      adam_update_cpu_pass(p + b, g + b, m + b, v + b, e - b, constants, float(s.correction), coefficient);
    });
    // Written through raw pointers: the version counter still has to move, as
    // any in-place op's does (kept weight copies and autograd's checks read it).
    torch::autograd::impl::bump_version(s.param);
  }
#ifdef ZOO_CUDA_KERNELS
  if (cuda_adam_kernel_available()) on_cuda = adam_update_with(zoo::cuda::adam_update, on_cuda, h);
#endif
#if ZOO_TORCH_AT_LEAST(2, 1)
  on_cuda = adam_update_fused_cuda(on_cuda, h);
#endif
  rest.insert(rest.end(), on_cuda.begin(), on_cuda.end());
  adam_update_foreach(rest, h);
}

}  // namespace zoo::optim
