// The kept 16-bit weight copies (models/kernels/weight_copies.h) and the dense
// layer over weight parts that uses them (dense_through_parts, on zoo's
// CUDA kernels compiled for the CPU): a copy follows every change of its
// parameters, in one refresh for all, and never serves stale values.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "models/kernels/adam_update.h"
#include "models/kernels/dense_kernel.h"
#include "models/kernels/weight_copies.h"
#include "tests/emulated_kernels.h"

using namespace zoo::models;
using zoo::testing::kEmulatedDense;

namespace {

torch::Tensor parameter(std::vector<int64_t> shape, double scale = 1.0) {
  return (torch::randn(shape) * scale).requires_grad_();
}

bool same_values(const torch::Tensor& copy, const torch::Tensor& part) {
  return torch::equal(copy, part.detach().to(copy.scalar_type()));
}

}  // namespace

TEST(WeightCopies, StackPartsInTheTypeThenThePadding) {
  torch::manual_seed(3);
  const torch::Tensor a = parameter({2, 3}), b = parameter({1, 3});
  const torch::Tensor copy = stacked_copy({a, b}, torch::kBFloat16, 2, -std::numeric_limits<double>::infinity());
  ASSERT_EQ(copy.sizes(), (std::vector<int64_t>{5, 3}));
  ASSERT_EQ(copy.scalar_type(), torch::kBFloat16);
  EXPECT_FALSE(copy.requires_grad());
  EXPECT_TRUE(same_values(copy.narrow(0, 0, 2), a));
  EXPECT_TRUE(same_values(copy.narrow(0, 2, 1), b));
  const torch::Tensor pad = copy.narrow(0, 3, 2).to(torch::kFloat);
  EXPECT_TRUE(torch::all(torch::isinf(pad) & (pad < 0)).item<bool>());
  EXPECT_THROW(stacked_copy({a, parameter({2, 4})}, torch::kBFloat16), c10::Error) << "trailing shapes differ";
}

TEST(WeightCopies, KeptOnlyForParametersOfAnotherType) {
  const torch::Tensor w = parameter({2, 3});
  EXPECT_TRUE(weight_copy_applies({w}, torch::kBFloat16));
  EXPECT_FALSE(weight_copy_applies({w}, torch::kFloat)) << "no copy needed";
  EXPECT_FALSE(weight_copy_applies({w * 2}, torch::kBFloat16)) << "computed each step: not kept";
  EXPECT_FALSE(weight_copy_applies({w, parameter({1, 3}).to(torch::kDouble).detach()}, torch::kBFloat16));
  EXPECT_FALSE(weight_copy_applies({}, torch::kBFloat16));
}

// The same copy while nothing changes; after an in-place update of any part
// (as the optimizer's), the first lookup refreshes every stale copy at once.
TEST(WeightCopies, FollowEveryChangeInOneRefresh) {
  forget_weight_copies();
  torch::manual_seed(5);
  torch::Tensor a = parameter({4, 3}), b = parameter({2, 3}), c = parameter({3});
  const torch::Tensor ab = weight_copy({a, b}, torch::kBFloat16), cc = weight_copy({c}, torch::kBFloat16, 1, -1.0);
  const WeightCopyStats made = weight_copy_stats();
  EXPECT_EQ(made.kept, 2u);
  EXPECT_TRUE(weight_copy({a, b}, torch::kBFloat16).is_same(ab));
  EXPECT_EQ(weight_copy_stats().refreshes, made.refreshes) << "unchanged parts: nothing cast again";
  EXPECT_NE(weight_copy({b, a}, torch::kBFloat16).data_ptr(), ab.data_ptr()) << "another order is another copy";

  {
    torch::NoGradGuard no_grad;
    b.add_(1.0);
    c.mul_(-2.0);
  }
  EXPECT_TRUE(weight_copy({a, b}, torch::kBFloat16).is_same(ab));
  EXPECT_TRUE(same_values(ab.narrow(0, 4, 2), b));
  EXPECT_TRUE(same_values(ab.narrow(0, 0, 4), a));
  const WeightCopyStats after = weight_copy_stats();
  EXPECT_EQ(after.refreshes, made.refreshes + 1);
  EXPECT_EQ(after.refreshed, made.refreshed + 3) << "{a, b}, {b, a} and {c}, all stale";
  EXPECT_TRUE(weight_copy({c}, torch::kBFloat16, 1, -1.0).is_same(cc));
  EXPECT_TRUE(same_values(cc.narrow(0, 0, 3), c)) << "refreshed with the others";
  EXPECT_EQ(cc[3].item<float>(), -1.0f) << "the padding stays";
  EXPECT_EQ(weight_copy_stats().refreshes, after.refreshes);

  // New storage (a loaded checkpoint set in place of the old) counts as a change.
  {
    torch::NoGradGuard no_grad;
    a.set_(torch::ones({4, 3}));
  }
  EXPECT_TRUE(torch::all(weight_copy({a, b}, torch::kBFloat16).narrow(0, 0, 4) == 1).item<bool>());
}

TEST(WeightCopies, CopiesOfGoneParametersAreForgotten) {
  forget_weight_copies();
  const torch::Tensor kept = parameter({2, 2});
  {
    const torch::Tensor gone = parameter({2, 2});
    weight_copy({gone}, torch::kBFloat16);
  }
  weight_copy({kept}, torch::kBFloat16);
  EXPECT_EQ(weight_copy_stats().kept, 1u);
}

// zoo's CPU Adam writes through raw pointers; the version counter must still
// move, or a kept copy would go on serving the old weights.
TEST(WeightCopies, FollowZoosCpuAdamUpdate) {
  forget_weight_copies();
  torch::Tensor w = parameter({8, 4});
  const torch::Tensor copy = weight_copy({w}, torch::kBFloat16);
  w.mutable_grad() = torch::ones_like(w);
  zoo::optim::AdamSlot slot{w, torch::zeros_like(w), torch::zeros_like(w)};
  zoo::optim::adam_update({slot}, {0.9, 0.999, 1e-8, 0.5, 0.0, true});
  EXPECT_TRUE(weight_copy({w}, torch::kBFloat16).is_same(copy));
  EXPECT_TRUE(same_values(copy, w));
}

// q, k and v's projections as parts of one layer: the output and every
// part's gradient as the layer over the concatenated weights gives them,
// a frozen part without one.
TEST(DenseParts, MatchTheLayerOverStackedWeights) {
  forget_weight_copies();
  torch::manual_seed(8);
  const int64_t in = 16, rows = 40;
  std::vector<torch::Tensor> w = {parameter({8, in}, 0.3), parameter({4, in}, 0.3), parameter({4, in}, 0.3)};
  std::vector<torch::Tensor> b = {parameter({8}), parameter({4}), parameter({4})};
  w[1].requires_grad_(false);
  const torch::Tensor x = torch::randn({rows, 1, in}).requires_grad_();
  const torch::Tensor upstream = torch::randn({rows, 1, 16});
  for (const auto compute : {torch::kBFloat16, torch::kFloat}) {
    SCOPED_TRACE(c10::toString(compute));
    for (auto* t : {&w[0], &w[2], &b[0], &b[1], &b[2]}) t->mutable_grad() = torch::Tensor();
    const torch::Tensor y = dense_through_parts(kEmulatedDense, x, w, b, DenseActivation::gelu, compute);
    y.to(torch::kFloat).backward(upstream);
    const std::vector<torch::Tensor> part_grads = {w[0].grad(), w[2].grad(), b[0].grad(), b[1].grad(), b[2].grad()};
    EXPECT_FALSE(w[1].grad().defined()) << "frozen";

    const torch::Tensor ws = torch::cat(w).detach().requires_grad_(), bs = torch::cat(b).detach().requires_grad_();
    const torch::Tensor x2 = x.detach().requires_grad_();
    const torch::Tensor y2 = dense_through(kEmulatedDense, x2, ws, bs, DenseActivation::gelu, compute);
    y2.to(torch::kFloat).backward(upstream);
    EXPECT_TRUE(torch::equal(y, y2));
    EXPECT_TRUE(torch::equal(part_grads[0], ws.grad().narrow(0, 0, 8)));
    EXPECT_TRUE(torch::equal(part_grads[1], ws.grad().narrow(0, 12, 4)));
    EXPECT_TRUE(torch::equal(torch::cat({part_grads[2], part_grads[3], part_grads[4]}), bs.grad()));
    EXPECT_EQ(part_grads[0].scalar_type(), torch::kFloat);
    x.mutable_grad() = torch::Tensor();
  }
}

// A graph that saved a kept copy, then saw the weights change before its
// backward, fails loudly rather than differentiating through the new values.
TEST(DenseParts, ABackwardAfterTheWeightsChangedFails) {
  forget_weight_copies();
  const torch::Tensor w = parameter({4, 8}), b = parameter({4});
  const torch::Tensor x = torch::randn({3, 8}).requires_grad_();
  const torch::Tensor y = dense_through(kEmulatedDense, x, w, b, DenseActivation::none, torch::kBFloat16);
  {
    torch::NoGradGuard no_grad;
    w.add_(1.0);
  }
  dense_through(kEmulatedDense, x, w, b, DenseActivation::none, torch::kBFloat16);  // refreshes the copy
  try {
    y.to(torch::kFloat).sum().backward();
    FAIL() << "backward through a refreshed copy ran";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("modified by an inplace operation"), std::string::npos) << e.what();
  }
}
