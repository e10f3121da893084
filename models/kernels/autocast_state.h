// One device type's autocast settings, to read and put back: the runner's
// AutocastGuard and activation recomputation both need it, and LibTorch 2.4
// replaced the per-device calls with ones taking a DeviceType.
// Defines: AutocastState.
#pragma once

#include <torch/torch.h>

namespace zoo::models {

struct AutocastState {
  torch::DeviceType device = torch::kCPU;
  bool enabled = false;
  torch::ScalarType dtype = torch::kBFloat16;

  static AutocastState of(torch::DeviceType device);
  void apply() const;
};

}  // namespace zoo::models
