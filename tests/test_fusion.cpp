// The fused paths against the reference path, whole models at a time: each
// model built twice with the same weights, one planned by apply_fusion under
// every kernel (zoo's CPU kernels, the deferred output biases, the fused
// attention), the other under KernelPolicy::reference() (LibTorch's ops, op by
// op), must give the same logits, loss and gradients. Then the same for the
// CUDA path: the layers' CUDA host code on zoo's CUDA kernels compiled for
// the CPU (tests/cuda_emulation.h). Also that the plans are what
// models/fusion.cpp says, so each comparison compares two paths.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "models/common/attention.h"
#include "models/common/transformer_decoder.h"
#include "models/fusion.h"
#include "models/kernels/policy.h"
#include "models/kernels/torch_version.h"
#include "models/model.h"
#include "models/registry.h"
#include "test_util.h"
#include "tests/decoder_cases.h"
#include "tests/emulated_kernels.h"
#include "tests/tensor_compare.h"

using namespace zoo;
using zoo::models::KernelPolicy;
using zoo::models::ScopedKernelPolicy;
using zoo::testing::relative_error;

namespace {

constexpr int64_t kVocab = 61, kLength = 12, kBatch = 3;

struct Plans {
  int fused_attention = 0;  // attention modules with a fused kernel planned
  int biases_in_norms = 0;  // decoder layers handing their output biases to the norms
};

Plans plans_of(torch::nn::Module& model) {
  Plans p;
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* a = dynamic_cast<models::MultiheadAttentionImpl*>(m.get()))
      p.fused_attention += a->plan.sdpa || a->plan.cpu_causal;
    if (auto* l = dynamic_cast<models::TransformerDecoderLayerImpl*>(m.get()))
      p.biases_in_norms += l->fusion.output_biases_in_norms;
  }
  return p;
}

struct Outcome {
  torch::Tensor logits, loss;
  std::map<std::string, torch::Tensor> grads;
};

// Logits of the whole sequence, then the training loss and its gradients,
// all under `policy` (which the kernels read when they run).
Outcome run(models::Model& model, const KernelPolicy& policy, const models::Features& batch) {
  ScopedKernelPolicy scoped(policy);
  Outcome out;
  {
    torch::NoGradGuard no_grad;
    models::GenerationCache cache;
    out.logits = model.next_logits(batch.at("input_ids"), cache);
  }
  model.zero_grad();
  out.loss = model.forward(batch, false).loss;
  out.loss.backward();
  for (const auto& p : model.named_parameters())
    if (p.value().grad().defined()) out.grads[p.key()] = p.value().grad().clone();
  return out;
}

using Case = zoo::testing::DecoderCase;
const auto& kCases = zoo::testing::kDecoderCases;

}  // namespace

namespace {

// `c`'s model planned and run under `fused` against the reference; the fused
// one has `attention` attention modules and `biases` layers handing their
// biases to the norms.
void expect_same_as_reference(const Case& c, const KernelPolicy& fused_policy, int attention, int biases) {
  SCOPED_TRACE(c.name);
  const Params params = zoo::testing::decoder_params(c.model);
  torch::manual_seed(5);
  std::shared_ptr<models::Model> fused, reference;
  {
    ScopedKernelPolicy scoped(fused_policy);
    fused = params.model->build(torch::TensorOptions());
    models::apply_fusion(*fused);
  }
  {
    ScopedKernelPolicy none(KernelPolicy::reference());
    reference = params.model->build(torch::TensorOptions());
    models::apply_fusion(*reference);
  }
  {
    torch::NoGradGuard no_grad;
    const auto from = fused->named_parameters();
    for (auto& p : reference->named_parameters()) p.value().copy_(from[p.key()]);
  }
  const Plans planned = plans_of(*fused), unplanned = plans_of(*reference);
  EXPECT_EQ(planned.fused_attention, attention);
  EXPECT_EQ(planned.biases_in_norms, biases);
  EXPECT_EQ(unplanned.fused_attention + unplanned.biases_in_norms, 0) << "the reference plans nothing";

  const torch::Tensor ids = torch::randint(0, kVocab, {kBatch, kLength}, torch::kLong);
  const models::Features batch{
      {"input_ids", ids}, {"labels", ids.roll(-1, 1)}, {"attention_mask", torch::ones({kBatch, kLength})}};
  const Outcome a = run(*fused, fused_policy, batch);
  const Outcome b = run(*reference, KernelPolicy::reference(), batch);
  EXPECT_LT(relative_error(a.logits, b.logits), 1e-5);
  EXPECT_NEAR(a.loss.item<double>(), b.loss.item<double>(), 1e-5);
  ASSERT_EQ(a.grads.size(), b.grads.size());
  // Relative to the largest gradient of the model, so that those that are 0
  // up to rounding (a key bias's: softmax ignores it) compare as 0.
  double largest = 0;
  for (const auto& [name, g] : b.grads) largest = std::max(largest, g.abs().max().item<double>());
  for (const auto& [name, g] : b.grads)
    EXPECT_LT((a.grads.at(name) - g).abs().max().item<double>(), 1e-5 * largest) << name;
}

}  // namespace

TEST(Fusion, FusedAndReferencePathsGiveTheSameLogitsLossAndGradients) {
  // Both layers' attention on a fused kernel: SDPA on LibTorch >= 2.1 where it computes the same scores, else zoo's CPU
  // one.
  for (const Case& c : kCases) expect_same_as_reference(c, KernelPolicy::all(), 2, c.biases ? 2 : 0);
}

// The CUDA path: dense layers and norms through zoo's CUDA kernels' host code
// on the emulated kernels, the output biases handed to the norms (rows of 32
// are within what the norm kernel sums in one pass), attention on SDPA where
// LibTorch has it.
TEST(Fusion, TheCudaPathThroughTheEmulatedKernelsGivesTheSameLogitsLossAndGradients) {
  KernelPolicy emulated = KernelPolicy::all();
  emulated.cpu_kernels = false;
  emulated.emulated_cuda = &zoo::testing::kEmulatedCuda;
  const int sdpa = ZOO_TORCH_AT_LEAST(2, 1) ? 2 : 0;
  expect_same_as_reference(kCases[0], emulated, sdpa, 2);
  expect_same_as_reference(kCases[1], emulated, 0, 0);  // the sliding window: the reference attention
}

// A layer nobody planned (a model built outside the runner) computes its math
// op by op; the runner plans every model it builds (runner/model_guards.cpp).
TEST(Fusion, AModelNobodyPlannedTakesTheReferencePath) {
  const Params params = zoo::testing::decoder_params(kCases[0].model);
  const std::shared_ptr<models::Model> model = params.model->build(torch::TensorOptions());
  const Plans p = plans_of(*model);
  EXPECT_EQ(p.fused_attention + p.biases_in_norms, 0);
}
