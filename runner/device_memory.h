// Peak memory on a GPU (what the caching allocator handed out) and on the
// host (resident set), for the run's report. Defines: peak_gpu_memory_gib,
// host_memory_gib, peak_host_memory_gib, reset_peak_memory.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace zoo {

// GiB allocated at the peak on `device` since the process started (or the
// last reset_peak_memory); nullopt off CUDA or in a build without LibTorch's CUDA libraries.
std::optional<double> peak_gpu_memory_gib(const torch::Device& device);
// The process's resident host memory (RSS) in GiB now, and at its peak
// since it started (or the last reset_peak_memory).
double host_memory_gib();
double peak_host_memory_gib();
// Starts both peaks afresh from what is in use now (Linux's clear_refs).
void reset_peak_memory(const torch::Device& device);

}  // namespace zoo
