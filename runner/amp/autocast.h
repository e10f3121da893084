// Reduced-precision execution of the forward pass through LibTorch autocast,
// on LibTorch 1.13 and 2.x alike. Defines: autocast_dtype, AutocastGuard.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/common/autocast_state.h"

namespace zoo::amp {

// While alive, ops on `device` run in `dtype` where autocast allows it;
// a no-op when dtype is nullopt.
// model.mixed_precision / fp16_type as an autocast dtype for `device`
// (nullopt when off; float16 falls back to bfloat16 on CPU with a warning).
std::optional<torch::ScalarType> autocast_dtype(bool mixed_precision, const std::string& fp16_type,
                                                const torch::Device& device);

class AutocastGuard {
 public:
  AutocastGuard(const torch::Device& device, std::optional<torch::ScalarType> dtype);
  ~AutocastGuard();
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool active_ = false;
  torch::DeviceType device_type_;
  models::AutocastState previous_;
};

}  // namespace zoo::amp
