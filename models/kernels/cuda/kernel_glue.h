// Host-side glue between LibTorch and zoo's CUDA kernels: which kernels the
// run's kernel policy lets run, a tensor's ElementType, the device and stream a
// launch goes to, and launch errors as exceptions. Built in every build: the
// tests run the same host code over the kernels' CPU emulation.
// Defines: kernel_enabled, kernel_available, enabled_kernels, element_type_of, LaunchScope, check_launch.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/DeviceGuard.h>

#include <optional>
#include <set>
#include <string>

#include "models/kernels/cuda/element_type.h"

namespace zoo::cuda {

// Whether the run's kernel policy (models/kernels/policy.h; runconfig.cuda_kernels)
// lets `name` launch: adam (the Adam/AdamW update, models/kernels/cuda/adam.h),
// cross_entropy, cross_entropy_fused (the loss's one-pass forward with its
// gradient; needs cross_entropy too), dense, dense_heads (q, k and v's
// projection handing out its heads, their gradients packed in the bias
// gradient's pass; needs dense too), embedding (an embedding table's
// gradient), norm, weight_copies (the dense layer's kept 16-bit weights).
bool kernel_enabled(const char* name);

// kernel_enabled, and this build has the kernels (-DZOO_CUDA_KERNELS=ON):
// whether the model's CUDA path may launch `name`.
bool kernel_available(const char* name);

// The kernel names a ZOO_CUDA_KERNELS value enables (nullptr: unset, all);
// an unknown name throws, naming it and the known ones.
std::set<std::string> enabled_kernels(const char* value);

// f32, bf16 or f16; nullopt for the types the kernels do not take.
std::optional<ElementType> element_type_of(at::ScalarType type);

// Makes `on`'s device current for as long as it lives; stream() is that
// device's current CUDA stream (a cudaStream_t), where LibTorch's own ops
// run. A CPU tensor (the emulation) gets no guard and a null stream.
class LaunchScope {
 public:
  explicit LaunchScope(const at::Tensor& on);
  void* stream() const { return stream_; }

 private:
  c10::OptionalDeviceGuard guard_;
  void* stream_ = nullptr;
};

// Throws "zoo's CUDA <kernel>: <error>", and how to run without zoo's
// kernels, when a launch returned an error.
void check_launch(const char* error, const char* kernel);

}  // namespace zoo::cuda
