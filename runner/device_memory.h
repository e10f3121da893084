// Peak memory the caching allocator handed out on a GPU, for the end-of-run
// report. Defines: peak_gpu_memory_gib.
#pragma once

#include <torch/torch.h>

#include <optional>

namespace zoo {

// GiB allocated at the peak on `device` since the process started; nullopt
// off CUDA or in a build without LibTorch's CUDA libraries.
std::optional<double> peak_gpu_memory_gib(const torch::Device& device);

}  // namespace zoo
