// Tensor comparisons shared by the kernel tests (test_fused, test_cuda_kernels).
// Defines: zoo::testing::relative_error.
#pragma once

#include <torch/torch.h>

#include <algorithm>

namespace zoo::testing {

// Max |a - b| relative to max |b|.
inline double relative_error(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).abs().max().item<double>() / std::max(b.abs().max().item<double>(), 1e-30);
}

}  // namespace zoo::testing
