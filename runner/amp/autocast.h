// Reduced-precision execution of the forward pass through LibTorch autocast,
// on LibTorch 1.13 and 2.x alike. Defines: AutocastGuard.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace zoo::amp {

// While alive, ops on `device` run in `dtype` where autocast allows it;
// a no-op when dtype is nullopt.
class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, std::optional<torch::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  torch::DeviceType device_type_;
  bool was_enabled_ = false;
  torch::ScalarType previous_dtype_ = torch::kFloat;
};

}  // namespace zoo::amp
