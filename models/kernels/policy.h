// Which of zoo's hand-written kernels a run may use. The runner sets it once
// per run, before it builds the model, from runconfig.cuda_kernels,
// runconfig.cpu_kernels and runconfig.cpu_gemm (each overridable from the
// environment: ZOO_CUDA_KERNELS, ZOO_CPU_KERNELS, ZOO_CPU_GEMM; see
// runner/params/runconfig.cpp). Code that builds models without the runner
// (tests, tools) gets every kernel.
// Defines: EmulatedCudaKernels, KernelPolicy, cuda_kernel_names, parse_cuda_kernels, set_kernel_policy, kernel_policy,
// ScopedKernelPolicy.
#pragma once

#include <cstdint>
#include <set>
#include <string>

namespace zoo::models {

struct NormKernels;
struct DenseKernels;

// zoo's CUDA kernels compiled for the CPU (tests/cuda_emulation.h). In a
// policy, they make float32 CPU tensors take the layers' CUDA path, host code
// and all, so that a test runs a whole model's CUDA path without a GPU.
struct EmulatedCudaKernels {
  const NormKernels* norm = nullptr;
  bool (*norm_sums_branch_bias_in_one_pass)(int64_t columns) = nullptr;
  const DenseKernels* dense = nullptr;
};

struct KernelPolicy {
  std::set<std::string> cuda_kernels;  // names from cuda_kernel_names() that may launch
  bool cpu_kernels = true;             // zoo's CPU kernels (dense, norm, attention, embedding); false: LibTorch's ops
  bool cpu_gemm_blas = false;          // those kernels multiply through the BLAS even where oneDNN is loaded
  const EmulatedCudaKernels* emulated_cuda = nullptr;  // tests only: CUDA's path on CPU tensors

  static KernelPolicy all();        // every kernel (the default)
  static KernelPolicy reference();  // none of them: LibTorch's ops, what the kernels are tested against
};

// adam, cross_entropy, cross_entropy_fused, dense, dense_heads, embedding, norm, weight_copies.
const std::set<std::string>& cuda_kernel_names();

// "all" (or "1", or empty), "none" (or "0"), or a comma list of names.
// Throws std::invalid_argument naming an unknown name and the known ones.
std::set<std::string> parse_cuda_kernels(const std::string& value);

void set_kernel_policy(const KernelPolicy& policy);
const KernelPolicy& kernel_policy();

// Sets a policy for its lifetime, then puts the previous one back (tests).
class ScopedKernelPolicy {
 public:
  explicit ScopedKernelPolicy(const KernelPolicy& policy) : previous_(kernel_policy()) { set_kernel_policy(policy); }
  ~ScopedKernelPolicy() { set_kernel_policy(previous_); }
  ScopedKernelPolicy(const ScopedKernelPolicy&) = delete;
  ScopedKernelPolicy& operator=(const ScopedKernelPolicy&) = delete;

 private:
  KernelPolicy previous_;
};

}  // namespace zoo::models
