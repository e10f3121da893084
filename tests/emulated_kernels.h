// zoo's CUDA kernels compiled for the CPU (tests/cuda_emulation.h) by
// tests/test_cuda_kernels.cpp, for the other tests that run host code on them.
// Defines: zoo::testing::kEmulatedDense, kEmulatedNorm, kEmulatedCuda.
#pragma once

#include "models/kernels/dense_kernel.h"
#include "models/kernels/norm_kernel.h"
#include "models/kernels/policy.h"

namespace zoo::testing {

extern const zoo::models::DenseKernels kEmulatedDense;
extern const zoo::models::NormKernels kEmulatedNorm;
// The two in a kernel policy's emulated_cuda: a model's CUDA path on the CPU.
extern const zoo::models::EmulatedCudaKernels kEmulatedCuda;

}  // namespace zoo::testing
