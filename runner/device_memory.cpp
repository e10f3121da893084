// Implementation of runner/device_memory.h. ZOO_WITH_CUDA is set by CMake
// when LibTorch brings c10_cuda (the header alone ships with CPU builds too).
#include "runner/device_memory.h"

#ifdef ZOO_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <sys/resource.h>

#include <fstream>
#include <string>

namespace zoo {

namespace {

// A "<key>: <n> kB" line of /proc/self/status in GiB; nullopt when absent.
std::optional<double> status_gib(const std::string& key) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / double(1 << 20);
  return std::nullopt;
}

}  // namespace

double host_memory_gib() { return status_gib("VmRSS").value_or(0.0); }

double peak_host_memory_gib() {
  if (const auto hwm = status_gib("VmHWM")) return *hwm;
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / double(1 << 20);  // ru_maxrss is in KiB on Linux
}

void reset_peak_memory(const torch::Device& device) {
  std::ofstream("/proc/self/clear_refs") << "5";  // VmHWM back to VmRSS; a no-op where not allowed
#ifdef ZOO_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.has_index() ? device.index() : 0);
#endif
  (void)device;
}

std::optional<double> peak_gpu_memory_gib(const torch::Device& device) {
#ifdef ZOO_WITH_CUDA
  if (device.is_cuda()) {
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.has_index() ? device.index() : 0);
    return double(stats.allocated_bytes[0].peak) / double(int64_t{1} << 30);  // [0]: all pools
  }
#endif
  (void)device;
  return std::nullopt;
}

}  // namespace zoo
