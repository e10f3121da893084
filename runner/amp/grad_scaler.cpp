// Implementation of runner/amp/grad_scaler.h.
#include "runner/amp/grad_scaler.h"

#include <algorithm>
#include <cmath>

#include "runner/log.h"

namespace zoo::amp {

std::unique_ptr<GradScaler> make_grad_scaler(const OptimizerConfig& o, std::optional<torch::ScalarType> dtype) {
  const bool dynamic = o.loss_scaling_factor == "dynamic";
  const double factor = dynamic ? 0.0 : std::stod(o.loss_scaling_factor);
  if (!dynamic && factor == 1.0) return nullptr;
  if (dtype == torch::kBFloat16) {
    log::info("optimizer.loss_scaling_factor: not used with bfloat16 (no loss scaling needed)");
    return nullptr;
  }
  GradScalerOptions s;
  s.dynamic = dynamic;
  s.initial_scale = dynamic ? o.initial_loss_scale.value_or(s.initial_scale) : factor;
  s.steps_per_increase = o.steps_per_increase;
  s.min_scale = o.min_loss_scale.value_or(dynamic ? s.min_scale : factor);
  s.max_scale = o.max_loss_scale.value_or(dynamic ? s.max_scale : factor);
  return std::make_unique<GradScaler>(s);
}

GradScaler::GradScaler(const GradScalerOptions& o) : options_(o), scale_(o.initial_scale) {}

bool GradScaler::unscale(const std::vector<torch::Tensor>& params) const {
  torch::NoGradGuard no_grad;
  double sum_sq = 0;
  for (const auto& p : params) {
    if (!p.grad().defined()) continue;
    torch::Tensor g = p.mutable_grad();
    g.mul_(1.0 / scale_);
    sum_sq += g.to(torch::kDouble).pow(2).sum().item<double>();
  }
  return std::isfinite(sum_sq);
}

void GradScaler::update(bool finite) {
  if (!options_.dynamic) return;
  ++steps_;
  if (!finite) ++overflows_;
  if (overflows_ > 0) {
    scale_ /= 2;
    steps_ = overflows_ = 0;
  }
  if (steps_ > options_.steps_per_increase) {
    scale_ *= 2;
    steps_ = overflows_ = 0;
  }
  scale_ = std::clamp(scale_, options_.min_scale, options_.max_scale);
}

c10::impl::GenericDict GradScaler::state_dict() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("loss_scale", scale_);
  d.insert("steps_since_rescale", steps_);
  d.insert("overflows_since_rescale", overflows_);
  return d;
}

void GradScaler::load_state_dict(const c10::impl::GenericDict& d) {
  scale_ = d.at("loss_scale").toDouble();
  steps_ = d.at("steps_since_rescale").toInt();
  overflows_ = d.at("overflows_since_rescale").toInt();
}

}  // namespace zoo::amp
