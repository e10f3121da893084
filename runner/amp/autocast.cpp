// Implementation of runner/amp/autocast.h. LibTorch 2.4 replaced the
// per-device setters (set_cpu_enabled, set_autocast_gpu_dtype, ...) with
// ones taking a DeviceType.
#include "runner/amp/autocast.h"

#include <ATen/autocast_mode.h>

#include "runner/log.h"

namespace zoo::amp {

std::optional<torch::ScalarType> autocast_dtype(bool mixed_precision, const std::string& fp16_type,
                                                const torch::Device& device) {
  if (!mixed_precision) return std::nullopt;
  std::string type = fp16_type;
  if (type == "cbfloat16") {
    log::warn("model.fp16_type: cbfloat16 is a Cerebras-only format; using bfloat16");
    type = "bfloat16";
  }
  if (type == "float16" && device.is_cpu()) {
    log::warn("model.fp16_type: float16 autocast needs a GPU; using bfloat16 on CPU");
    type = "bfloat16";
  }
  return type == "float16" ? torch::kHalf : torch::kBFloat16;
}

#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
static bool is_enabled(torch::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
static void set_enabled(torch::DeviceType d, bool on) { at::autocast::set_autocast_enabled(d, on); }
static torch::ScalarType get_dtype(torch::DeviceType d) { return at::autocast::get_autocast_dtype(d); }
static void set_dtype(torch::DeviceType d, torch::ScalarType t) { at::autocast::set_autocast_dtype(d, t); }
#else
static bool is_enabled(torch::DeviceType d) {
  return d == torch::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
}
static void set_enabled(torch::DeviceType d, bool on) {
  d == torch::kCUDA ? at::autocast::set_enabled(on) : at::autocast::set_cpu_enabled(on);
}
static torch::ScalarType get_dtype(torch::DeviceType d) {
  return d == torch::kCUDA ? at::autocast::get_autocast_gpu_dtype() : at::autocast::get_autocast_cpu_dtype();
}
static void set_dtype(torch::DeviceType d, torch::ScalarType t) {
  d == torch::kCUDA ? at::autocast::set_autocast_gpu_dtype(t) : at::autocast::set_autocast_cpu_dtype(t);
}
#endif

AutocastGuard::AutocastGuard(const torch::Device& device, std::optional<torch::ScalarType> dtype)
    : device_type_(device.type()) {
  if (!dtype) return;
  active_ = true;
  was_enabled_ = is_enabled(device_type_);
  previous_dtype_ = get_dtype(device_type_);
  set_enabled(device_type_, true);
  set_dtype(device_type_, *dtype);
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  set_enabled(device_type_, was_enabled_);
  set_dtype(device_type_, previous_dtype_);
}

}  // namespace zoo::amp
