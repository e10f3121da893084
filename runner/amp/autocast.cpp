// Implementation of runner/amp/autocast.h.
#include "runner/amp/autocast.h"

#include <ATen/autocast_mode.h>

#include <fstream>
#include <sstream>

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
  if (device.is_cpu()) {
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line;
    while (std::getline(cpuinfo, line))
      if (line.rfind("flags", 0) == 0) break;
    if (const std::string note = cpu_bfloat16_note(line); !note.empty()) log::warn(note);
  }
  return type == "float16" ? torch::kHalf : torch::kBFloat16;
}

std::string cpu_bfloat16_note(const std::string& cpu_flags) {
  std::istringstream words(cpu_flags);
  for (std::string w; words >> w;)
    if (w == "avx512_bf16" || w == "amx_bf16") return "";
  if (cpu_flags.empty()) return "";  // not Linux, or no flags line: nothing to go on
  return "a CPU run in bfloat16 (model.mixed_precision): this CPU has no bfloat16 instructions (avx512_bf16, "
         "amx_bf16), so LibTorch emulates them and training can run several times slower than in float32; set "
         "mixed_precision: false for CPU runs on this machine";
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
