// Implementation of runner/amp/autocast.h.
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

AutocastGuard::AutocastGuard(const torch::Device& device, std::optional<torch::ScalarType> dtype)
    : device_type_(device.type()) {
  if (!dtype) return;
  active_ = true;
  previous_ = models::AutocastState::of(device_type_);
  models::AutocastState{device_type_, true, *dtype}.apply();
  at::autocast::increment_nesting();
}

AutocastGuard::~AutocastGuard() {
  if (!active_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  previous_.apply();
}

}  // namespace zoo::amp
