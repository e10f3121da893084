// zoo's CUDA kernels compiled for the CPU (tests/cuda_emulation.h) by
// tests/test_cuda_kernels.cpp, for the other tests that run host code on them.
// Defines: zoo::testing::kEmulatedDense.
#pragma once

#include "models/common/dense_kernel.h"

namespace zoo::testing {

extern const zoo::models::DenseKernels kEmulatedDense;

}  // namespace zoo::testing
