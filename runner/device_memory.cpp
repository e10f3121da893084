// Implementation of runner/device_memory.h. ZOO_WITH_CUDA is set by CMake
// when LibTorch brings c10_cuda (the header alone ships with CPU builds too).
#include "runner/device_memory.h"

#ifdef ZOO_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <sys/resource.h>

namespace zoo {

double peak_host_memory_gib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_maxrss) / double(1 << 20);  // ru_maxrss is in KiB on Linux
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
