// Peak memory on a GPU (what the caching allocator handed out) and on the
// host (resident set), for the end-of-run report. Defines:
// peak_gpu_memory_gib, peak_host_memory_gib.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace zoo {

// GiB allocated at the peak on `device` since the process started; nullopt
// off CUDA or in a build without LibTorch's CUDA libraries.
std::optional<double> peak_gpu_memory_gib(const torch::Device& device);
// The process's peak resident host memory (RSS) in GiB since it started.
double peak_host_memory_gib();

}  // namespace zoo
