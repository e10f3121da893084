// Reduced-precision execution of the forward pass through LibTorch autocast,
// on LibTorch 1.13 and 2.x alike. Defines: autocast_dtype, cpu_bfloat16_note, AutocastGuard.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "models/kernels/autocast_state.h"

namespace zoo::amp {

// model.mixed_precision / fp16_type as an autocast dtype for `device`
// (nullopt when off; float16 falls back to bfloat16 on CPU with a warning).
std::optional<torch::ScalarType> autocast_dtype(bool mixed_precision, const std::string& fp16_type,
                                                const torch::Device& device);

// What a CPU run in bfloat16 should know, from /proc/cpuinfo's flags: a
// CPU without bfloat16 instructions (avx512_bf16, amx_bf16) has LibTorch
// emulate them, and 16-bit training can run several times slower than
// float32; "" when the CPU has them.
std::string cpu_bfloat16_note(const std::string& cpu_flags);

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
  models::AutocastState previous_;
};

}  // namespace zoo::amp
