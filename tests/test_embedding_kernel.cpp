// zoo's CUDA embedding-gradient kernels (models/kernels/cuda/embedding.cu) on
// the CPU through tests/cuda_emulation.h, behind the same host code
// (embedding_through), against float64: runs of one id shorter than a task,
// exactly one or two tasks long, and hundreds of rows long from the middle of
// a task; widths read in 16-byte groups, over several column slabs, and one
// column at a time. (On a GPU, tests/test_cuda_kernels_gpu.cpp holds the
// real kernels to LibTorch's embedding backward.)
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "models/kernels/embedding_kernel.h"
#include "tests/tensor_compare.h"

// The kernels' source for the CPU, in namespace zoo_emulated::cuda (as in
// tests/test_cuda_kernels.cpp); their header came in above.
#include "tests/cuda_emulation.h"
namespace zoo_emulated::cuda {
using ::zoo::cuda::kEmbeddingTaskRows;
}
#define zoo zoo_emulated
#include "models/kernels/cuda/embedding.cu"
#undef zoo

using namespace zoo::models;
using zoo::testing::relative_error;

namespace {

const EmbeddingKernels kEmulatedEmbedding = {zoo_emulated::cuda::embedding_grad_tasks,
                                             zoo_emulated::cuda::embedding_grad};

// Ids whose sorted order has the runs the kernels treat apart (tasks of 32):
// id 1 x32 (one whole task), id 7 x64 (two whole tasks, the second ending the
// run), id 8 x5, id 9 x300 (from the middle of a task across nine more),
// then single ids, the last one V - 1; shuffled.
torch::Tensor runs_of_ids(int64_t V) {
  std::vector<int64_t> ids;
  auto repeat = [&](int64_t id, int times) { ids.insert(ids.end(), times, id); };
  repeat(1, 32), repeat(7, 64), repeat(8, 5), repeat(9, 300);
  for (int64_t id = 10; id < 55; ++id) repeat(id, 1);
  repeat(V - 1, 1);  // 447 ids
  const torch::Tensor t = torch::tensor(ids, torch::kLong);
  return t.index_select(0, torch::randperm(t.numel(), torch::kLong)).view({3, 149});
}

}  // namespace

TEST(EmbeddingKernelEmulated, GradientMatchesFloat64) {
  for (const int64_t C : {64, 200, 37}) {
    SCOPED_TRACE("C = " + std::to_string(C));
    torch::manual_seed(31);
    const int64_t V = 60;
    const torch::Tensor ids = runs_of_ids(V);
    const torch::Tensor words = torch::randn({V, C}).requires_grad_();
    const torch::Tensor y = embedding_through(kEmulatedEmbedding, ids, words);
    EXPECT_TRUE(torch::equal(y, torch::embedding(words.detach(), ids))) << "the forward is LibTorch's lookup";
    const torch::Tensor upstream = torch::randn({3, 149, C});
    (y * upstream).sum().backward();

    const torch::Tensor rows64 = upstream.reshape({-1, C}).to(torch::kDouble);
    const torch::Tensor expected = torch::zeros({V, C}, torch::kDouble).index_add_(0, ids.reshape({-1}), rows64);
    ASSERT_EQ(words.grad().scalar_type(), torch::kFloat);
    EXPECT_LT(relative_error(words.grad().to(torch::kDouble), expected), 1e-6);
    // Rows no id points at stay exactly zero.
    EXPECT_EQ(words.grad().narrow(0, 2, 5).abs().sum().item<float>(), 0.0f);
  }
}

TEST(EmbeddingKernelEmulated, FrozenTableGetsNoGradientAndBadInputIsRefused) {
  const torch::Tensor words = torch::randn({10, 8});
  const torch::Tensor y = embedding_through(kEmulatedEmbedding, torch::tensor({1, 2, 3}, torch::kLong), words);
  EXPECT_FALSE(y.requires_grad());
  EXPECT_FALSE(cuda_embedding_available(torch::tensor({1}, torch::kLong), words.clone().requires_grad_()))
      << "a CPU table never takes the CUDA path";
  EXPECT_THROW(embedding_through(kEmulatedEmbedding, torch::tensor({1, 2}, torch::kInt), words), c10::Error);
  EXPECT_THROW(embedding_through(kEmulatedEmbedding, torch::tensor({1, 2}, torch::kLong), words.to(torch::kDouble)),
               c10::Error);
}
