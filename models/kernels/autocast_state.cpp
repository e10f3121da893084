// Implementation of models/kernels/autocast_state.h.
#include "models/kernels/autocast_state.h"

#include <ATen/autocast_mode.h>

#include "models/kernels/torch_version.h"

namespace zoo::models {

#if ZOO_TORCH_AT_LEAST(2, 4)
AutocastState AutocastState::of(torch::DeviceType d) {
  return {d, at::autocast::is_autocast_enabled(d), at::autocast::get_autocast_dtype(d)};
}
void AutocastState::apply() const {
  at::autocast::set_autocast_enabled(device, enabled);
  at::autocast::set_autocast_dtype(device, dtype);
}
#else
AutocastState AutocastState::of(torch::DeviceType d) {
  if (d == torch::kCUDA) return {d, at::autocast::is_enabled(), at::autocast::get_autocast_gpu_dtype()};
  return {d, at::autocast::is_cpu_enabled(), at::autocast::get_autocast_cpu_dtype()};
}
void AutocastState::apply() const {
  if (device == torch::kCUDA) {
    at::autocast::set_enabled(enabled);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(enabled);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
}
#endif

}  // namespace zoo::models
