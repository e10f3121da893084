// zoo's CUDA Adam kernel (models/kernels/cuda/adam.cu) on the CPU through
// tests/cuda_emulation.h, behind the same host code (adam_update_with):
// against LibTorch's float64 multi-tensor path and zoo's float32 CPU pass,
// for Adam and AdamW, with and without the clipping coefficient; tensors
// read 16 bytes at a time with a ragged end, spanning several blocks, too
// short for a 16-byte group, empty, and not on 16 bytes; more tensors than
// one launch takes. (On a GPU, tests/test_fused.cpp's
// FusedCuda.AdamUpdateOnTheGpuMatchesTheCpuPath runs the real kernel.)
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "models/kernels/adam_update.h"
#include "tests/tensor_compare.h"

// The kernel's source for the CPU, in namespace zoo_emulated::cuda (as in
// tests/test_cuda_kernels.cpp); its header came in above.
#include "tests/cuda_emulation.h"
namespace zoo_emulated::cuda {
using ::zoo::cuda::adam_element;
using ::zoo::cuda::AdamConstants;
using ::zoo::cuda::AdamTensor;
}  // namespace zoo_emulated::cuda
#define zoo zoo_emulated
#include "models/kernels/cuda/adam.cu"
#undef zoo

using zoo::optim::AdamHyper;
using zoo::optim::AdamSlot;
using zoo::testing::relative_error;

namespace {

// One parameter in three copies: float32 for the kernel, float32 for the CPU
// pass, float64 for the multi-tensor reference; each with its moments.
struct Copies {
  torch::Tensor kernel, cpu, reference;
  torch::Tensor kernel_m, kernel_v, cpu_m, cpu_v, reference_m, reference_v;
};

Copies copies_of(const torch::Tensor& p32) {
  Copies c{p32, p32.clone(), p32.to(torch::kDouble)};
  c.kernel_m = torch::zeros_like(p32), c.kernel_v = torch::zeros_like(p32);
  c.cpu_m = torch::zeros_like(p32), c.cpu_v = torch::zeros_like(p32);
  c.reference_m = torch::zeros_like(c.reference), c.reference_v = torch::zeros_like(c.reference);
  return c;
}

// Sizes the kernel treats apart (blocks of 8192 elements, 16-byte groups).
std::vector<torch::Tensor> parameters() {
  std::vector<torch::Tensor> ps = {
      torch::randn({2, 8192 + 37}),                 // three blocks, the last ragged
      torch::randn({41}),                           // ten groups and one element
      torch::randn({3}),                            // no whole group
      torch::randn({0}),                            // nothing to do
      torch::randn({1 + 1000}).narrow(0, 1, 1000),  // 4 bytes past 16: one element at a time
  };
  for (int i = 0; i < 33; ++i) ps.push_back(torch::randn({i + 1}));  // two launches of at most 32 tensors
  return ps;
}

}  // namespace

TEST(AdamKernelEmulated, MatchesFloat64AndTheCpuPass) {
  for (const bool decoupled : {true, false}) {
    for (const bool clipped : {false, true}) {
      SCOPED_TRACE(std::string(decoupled ? "AdamW" : "Adam") + (clipped ? ", clipping coefficient" : ""));
      torch::manual_seed(7);
      std::vector<Copies> params;
      for (const torch::Tensor& p : parameters()) params.push_back(copies_of(p));
      ASSERT_NE(reinterpret_cast<uintptr_t>(params[4].kernel.data_ptr()) % 16, 0u) << "meant to be off 16 bytes";
      double b1p = 1, b2p = 1;
      for (int step = 1; step <= 12; ++step) {
        b1p *= 0.9, b2p *= 0.999;
        const double correction = std::sqrt(1 - b2p) / (1 - b1p);
        std::vector<AdamSlot> kernel, cpu, reference;
        std::vector<torch::Tensor> grads;
        for (Copies& c : params) {
          const torch::Tensor g = torch::randn(c.kernel.sizes()) * (step % 3 + 1);
          c.kernel.mutable_grad() = g.clone(), c.cpu.mutable_grad() = g.clone();
          c.reference.mutable_grad() = g.to(torch::kDouble);
          grads.push_back(g);
          kernel.push_back({c.kernel, c.kernel_m, c.kernel_v, correction});
          cpu.push_back({c.cpu, c.cpu_m, c.cpu_v, correction});
          reference.push_back({c.reference, c.reference_m, c.reference_v, correction});
        }
        AdamHyper h{0.9, 0.999, 1e-6, 1e-2, 0.1, decoupled};
        if (clipped) h.grad_coefficient = torch::full({}, 0.3f);
        const int64_t version = params[0].kernel._version();
        EXPECT_TRUE(zoo::optim::adam_update_with(zoo_emulated::cuda::adam_update, kernel, h).empty());
        EXPECT_GT(params[0].kernel._version(), version) << "written through pointers: the version must move";
        zoo::optim::adam_update(cpu, h);
        zoo::optim::adam_update(reference, h);  // float64: the multi-tensor path
        for (size_t i = 0; i < params.size(); ++i)
          ASSERT_TRUE(torch::equal(params[i].kernel.grad(), grads[i])) << "the kernel wrote gradient " << i;
      }
      for (size_t i = 0; i < params.size(); ++i) {
        const Copies& c = params[i];
        if (c.kernel.numel() == 0) continue;
        SCOPED_TRACE("parameter " + std::to_string(i) + " of " + std::to_string(c.kernel.numel()));
        // float32 rounding over 12 steps, relative to the parameters' scale.
        EXPECT_LT(relative_error(c.kernel.to(torch::kDouble), c.reference), 1e-6);
        EXPECT_LT(relative_error(c.kernel_v.to(torch::kDouble), c.reference_v), 1e-6);
        EXPECT_LT(relative_error(c.kernel, c.cpu), 1e-6) << "the CPU pass runs the same arithmetic";
        EXPECT_LT(relative_error(c.kernel_m, c.cpu_m), 1e-6);
      }
    }
  }
}

// What the kernel does not take stays with the caller, untouched.
TEST(AdamKernelEmulated, LeavesOtherTensorsToTheOtherPaths) {
  torch::Tensor f64 = torch::randn({8}, torch::kDouble), strided = torch::randn({4, 6}).t();
  f64.mutable_grad() = torch::randn({8}, torch::kDouble);
  strided.mutable_grad() = torch::randn({6, 4});
  const torch::Tensor f64_before = f64.clone(), strided_before = strided.clone();
  const std::vector<AdamSlot> slots = {{f64, torch::zeros_like(f64), torch::zeros_like(f64)},
                                       {strided, torch::zeros_like(strided), torch::zeros_like(strided)}};
  const std::vector<AdamSlot> rest =
      zoo::optim::adam_update_with(zoo_emulated::cuda::adam_update, slots, {0.9, 0.999, 1e-8, 1e-3, 0.0, true});
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_TRUE(torch::equal(f64, f64_before));
  EXPECT_TRUE(torch::equal(strided, strided_before));
}
