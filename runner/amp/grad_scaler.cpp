// Implementation of runner/amp/grad_scaler.h.
#include "runner/amp/grad_scaler.h"

#include <algorithm>
#include <cmath>

namespace zoo::amp {

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
