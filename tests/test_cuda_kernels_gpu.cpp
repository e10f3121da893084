// zoo's CUDA kernels on a GPU (built with -DZOO_CUDA_KERNELS=ON, skipped
// elsewhere), each held to LibTorch's ops or to zoo's other path: the norm,
// the dense layer, and the one-pass training loss of lm_loss and BERT.
// (tests/test_cuda_kernels.cpp runs the same kernels' source on the CPU.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/common/lm_loss.h"
#include "models/kernels/adam_update.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/dense_kernel.h"
#include "models/kernels/embedding_kernel.h"
#include "models/kernels/norm_kernel.h"
#include "models/kernels/torch_version.h"
#include "models/kernels/weight_copies.h"
#include "runner/amp/autocast.h"
#include "tests/bert_fixtures.h"
#include "tests/tensor_compare.h"

using namespace zoo::models;
using zoo::testing::relative_error;

namespace {
std::string type_name(torch::ScalarType t) { return c10::toString(t); }

// Why the tests of zoo's CUDA dense layer cannot run here; nullopt when they can.
std::optional<std::string> no_cuda_dense() {
  if (!torch::cuda::is_available()) return "no CUDA device";
  const torch::Tensor probe = torch::ones({1, 1}, torch::kCUDA).requires_grad_();
  if (!cuda_dense_available(probe, probe, torch::Tensor()))
    return "built without -DZOO_CUDA_KERNELS=ON, or turned off by ZOO_CUDA_KERNELS";
  return std::nullopt;
}
}  // namespace

// The real kernels on a GPU against LibTorch's layer_norm in float32 (and
// the cast a matmul would make), in value and gradients.
TEST(FusedCuda, NormKernelsMatchLibTorch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  if (!cuda_norm_available(torch::ones({1}, cuda), torch::ones({1}, cuda), torch::Tensor()))
    GTEST_SKIP() << "built without -DZOO_CUDA_KERNELS=ON, or turned off by ZOO_CUDA_KERNELS";
  for (bool rms : {false, true})
    for (auto out : {torch::kFloat, torch::kBFloat16}) {
      SCOPED_TRACE(std::string(rms ? "RMSNorm" : "LayerNorm") + ", y in " + type_name(out));
      torch::manual_seed(24);
      torch::Tensor x = (torch::randn({4096, 768}, cuda) * 3 + 1).requires_grad_();
      torch::Tensor w = torch::randn({768}, cuda).requires_grad_();
      torch::Tensor b = rms ? torch::Tensor() : torch::randn({768}, cuda).requires_grad_();
      const torch::Tensor upstream = torch::randn({4096, 768}, cuda).to(out);
      torch::Tensor y = cuda_norm(x, torch::Tensor(), w, b, 1e-5, rms, out).normed;
      (y * upstream).sum().backward();
      torch::Tensor xr = x.detach().clone().requires_grad_(), wr = w.detach().clone().requires_grad_();
      torch::Tensor br = rms ? torch::Tensor() : b.detach().clone().requires_grad_();
      torch::Tensor ref =
          (rms ? xr * torch::rsqrt(xr.pow(2).mean(-1, true) + 1e-5) * wr : torch::layer_norm(xr, {768}, wr, br, 1e-5))
              .to(out);
      (ref * upstream).sum().backward();
      EXPECT_LT(relative_error(y.to(torch::kDouble), ref.to(torch::kDouble)), out == torch::kFloat ? 1e-5 : 1e-2);
      EXPECT_LT(relative_error(x.grad().to(torch::kDouble), xr.grad().to(torch::kDouble)), 1e-4);
      EXPECT_LT(relative_error(w.grad().to(torch::kDouble), wr.grad().to(torch::kDouble)), 1e-4);
      if (!rms) EXPECT_LT(relative_error(b.grad().to(torch::kDouble), br.grad().to(torch::kDouble)), 1e-4);
    }
}

// Under bfloat16 autocast, as in training: the CUDA dense layer against
// LibTorch's linear and activation, with GELU and without, at a 111M FFN shape.
TEST(FusedCuda, DenseKernelMatchesLibTorch) {
  if (const auto why = no_cuda_dense()) GTEST_SKIP() << *why;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  zoo::amp::AutocastGuard autocast(torch::kCUDA, torch::kBFloat16);
  for (auto act : {DenseActivation::gelu, DenseActivation::none}) {
    SCOPED_TRACE(act == DenseActivation::gelu ? "GELU" : "no activation");
    torch::manual_seed(26);
    torch::Tensor x = torch::randn({8, 512, 768}, cuda).requires_grad_();
    torch::Tensor w = (torch::randn({3072, 768}, cuda) * 0.03).requires_grad_();
    torch::Tensor b = torch::randn({3072}, cuda).requires_grad_();
    const torch::Tensor upstream = torch::randn({8, 512, 3072}, cuda).to(torch::kBFloat16);
    const torch::Tensor y = cuda_dense(x, w, b, act);
    ASSERT_EQ(y.scalar_type(), torch::kBFloat16);
    (y * upstream).sum().backward();
    torch::Tensor xr = x.detach().clone().requires_grad_(), wr = w.detach().clone().requires_grad_(),
                  br = b.detach().clone().requires_grad_();
    torch::Tensor ref = torch::linear(xr, wr, br);
    if (act == DenseActivation::gelu) ref = torch::gelu(ref);
    (ref * upstream).sum().backward();
    EXPECT_LT(relative_error(y.to(torch::kDouble), ref.to(torch::kDouble)), 1e-2);
    EXPECT_LT(relative_error(x.grad().to(torch::kDouble), xr.grad().to(torch::kDouble)), 1e-2);
    EXPECT_LT(relative_error(w.grad().to(torch::kDouble), wr.grad().to(torch::kDouble)), 1e-2);
    // zoo sums the bias gradient in float32 and keeps it there; LibTorch rounds it to bfloat16.
    EXPECT_LT(relative_error(b.grad().to(torch::kDouble), br.grad().to(torch::kDouble)), 1e-2);
  }
}

// q, k and v's heads from one node through LibTorch's attention (SDPA: its
// cuDNN or flash kernels hand the gradients back head-major), against
// LibTorch's linear, split and views: the attention's output and every
// gradient, the bias's summed by the packing pass.
TEST(FusedCuda, DenseHeadsMatchLibTorchThroughAttention) {
  if (const auto why = no_cuda_dense()) GTEST_SKIP() << *why;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
#if !ZOO_TORCH_AT_LEAST(2, 0)
  GTEST_SKIP() << "LibTorch < 2.0 has no scaled_dot_product_attention";
#else
  zoo::amp::AutocastGuard autocast(torch::kCUDA, torch::kBFloat16);
  torch::manual_seed(28);
  const int64_t B = 4, T = 512, H = 12, D = 64, C = H * D;
  torch::Tensor x = torch::randn({B, T, C}, cuda).requires_grad_();
  std::vector<torch::Tensor> w, b;
  for (int i = 0; i < 3; ++i) {
    w.push_back((torch::randn({C, C}, cuda) * 0.03).requires_grad_());
    b.push_back((torch::randn({C}, cuda) * 0.1).requires_grad_());
  }
  const torch::Tensor upstream = torch::randn({B, H, T, D}, cuda).to(torch::kBFloat16);
  auto attend = [&](const std::vector<torch::Tensor>& qkv) {
    return at::scaled_dot_product_attention(qkv[0].transpose(1, 2), qkv[1].transpose(1, 2), qkv[2].transpose(1, 2), {},
                                            0.0, /*is_causal=*/true);
  };
  const torch::Tensor y = attend(cuda_dense_heads(x, w, b, {C, C, C}, D));
  (y * upstream).sum().backward();

  torch::Tensor xr = x.detach().clone().requires_grad_();
  std::vector<torch::Tensor> wr, br;
  for (int i = 0; i < 3; ++i) {
    wr.push_back(w[i].detach().clone().requires_grad_());
    br.push_back(b[i].detach().clone().requires_grad_());
  }
  std::vector<torch::Tensor> ref_heads;
  for (const torch::Tensor& part : torch::linear(xr, torch::cat(wr), torch::cat(br)).split(C, -1))
    ref_heads.push_back(part.view({B, T, H, D}));
  const torch::Tensor ref = attend(ref_heads);
  (ref * upstream).sum().backward();

  EXPECT_LT(relative_error(y.to(torch::kDouble), ref.to(torch::kDouble)), 1e-2);
  EXPECT_LT(relative_error(x.grad().to(torch::kDouble), xr.grad().to(torch::kDouble)), 1e-2);
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("part " + std::to_string(i));
    EXPECT_LT(relative_error(w[i].grad().to(torch::kDouble), wr[i].grad().to(torch::kDouble)), 1e-2);
    EXPECT_LT(relative_error(b[i].grad().to(torch::kDouble), br[i].grad().to(torch::kDouble)), 1e-2);
  }
#endif
}

// Kept bfloat16 weight copies on a GPU, refreshed by one multi-tensor cast:
// after zoo's AdamW (zoo's kernel, or LibTorch's fused one with it off; each
// moves the parameters' version counters) every copy holds the new weights,
// and q, k and v's parts make the layer the concatenated weight does.
TEST(FusedCuda, KeptWeightCopiesFollowTheOptimizer) {
  if (const auto why = no_cuda_dense()) GTEST_SKIP() << *why;
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  zoo::amp::AutocastGuard autocast(torch::kCUDA, torch::kBFloat16);
  torch::manual_seed(27);
  std::vector<torch::Tensor> w, b;
  for (int64_t rows : {768, 768, 765}) {  // 765 x 768 + 765: sizes off the kernels' vector width
    w.push_back((torch::randn({rows, 768}, cuda) * 0.03).requires_grad_());
    b.push_back(torch::randn({rows}, cuda).requires_grad_());
  }
  const torch::Tensor x = torch::randn({4, 256, 768}, cuda);
  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const torch::Tensor y = cuda_dense_parts(x, w, b);
    const torch::Tensor ref = torch::linear(x, torch::cat(w).detach(), torch::cat(b).detach());
    EXPECT_LT(relative_error(y.to(torch::kDouble), ref.to(torch::kDouble)), 1e-2);
    y.to(torch::kFloat).square().mean().backward();
    std::vector<zoo::optim::AdamSlot> slots;
    for (const auto& p : w) slots.push_back({p, torch::zeros_like(p), torch::zeros_like(p)});
    for (const auto& p : b) slots.push_back({p, torch::zeros_like(p), torch::zeros_like(p)});
    zoo::optim::adam_update(slots, {0.9, 0.999, 1e-8, 1e-2, 0.01, true});
    for (auto& p : w) p.mutable_grad() = torch::Tensor();
    for (auto& p : b) p.mutable_grad() = torch::Tensor();
    const torch::Tensor copy = weight_copy(w, torch::kBFloat16);
    EXPECT_TRUE(torch::equal(copy, torch::cat(w).detach().to(torch::kBFloat16))) << "refreshed after the update";
  }
}

// The embedding table's gradient from zoo's kernels at the 111M shape, with
// ids as skewed as text (a few ids thousands of times): LibTorch's within
// float32 rounding, and the same bits on a second run.
TEST(FusedCuda, EmbeddingGradientMatchesLibTorchAndRepeats) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const torch::Tensor probe = torch::ones({1, 1}, cuda).requires_grad_();
  if (!cuda_embedding_available(torch::zeros({1}, cuda.dtype(torch::kLong)), probe))
    GTEST_SKIP() << "built without -DZOO_CUDA_KERNELS=ON, or turned off by ZOO_CUDA_KERNELS";
  torch::manual_seed(28);
  const int64_t V = 50257, C = 768;
  // Zipf-like: id = floor(V ^ u) - 1 for uniform u, so id 0 is ~7% of the ids.
  const torch::Tensor u = torch::rand({16, 2048}, cuda.dtype(torch::kDouble));
  const torch::Tensor ids = (torch::pow(double(V), u).floor() - 1).clamp(0, V - 1).to(torch::kLong);
  const torch::Tensor upstream = torch::randn({16, 2048, C}, cuda);
  std::vector<torch::Tensor> grads;
  for (int run = 0; run < 2; ++run) {
    torch::Tensor words = torch::randn({V, C}, cuda).requires_grad_();
    (cuda_embedding(ids, words) * upstream).sum().backward();
    grads.push_back(words.grad());
  }
  torch::Tensor reference_words = torch::zeros({V, C}, cuda).requires_grad_();
  (torch::embedding(reference_words, ids) * upstream).sum().backward();
  EXPECT_LT(relative_error(grads[0].to(torch::kDouble), reference_words.grad().to(torch::kDouble)), 1e-5);
  EXPECT_TRUE(torch::equal(grads[0], grads[1])) << "the same sums in the same order";
}

// lm_loss trains through the cross-entropy that makes its gradient in the
// forward: the same loss and logits gradient as the per-token kernels'
// masked mean (num_tokens) or per-sample sum (batch_size), under a plain
// backward and a halved one (gradient accumulation over two micro-batches).
TEST(FusedCuda, LmLossWithItsGradientInTheForwardMatchesThePerTokenKernels) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!have_cuda_cross_entropy_kernels() || !zoo::cuda::kernel_enabled("cross_entropy_fused"))
    GTEST_SKIP() << "built without -DZOO_CUDA_KERNELS=ON, or turned off by ZOO_CUDA_KERNELS";
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  const int64_t B = 4, T = 512, V = 50257, width = 50304;
  for (const std::string mode : {"num_tokens", "batch_size"})
    for (double upstream : {1.0, 0.5}) {
      SCOPED_TRACE(mode + ", upstream gradient " + std::to_string(upstream));
      torch::manual_seed(28);
      torch::Tensor values = torch::randn({B, T, width}, cuda) * 3;
      values.narrow(2, V, width - V).fill_(-std::numeric_limits<float>::infinity());
      torch::Tensor logits = values.to(torch::kBFloat16).requires_grad_();
      const torch::Tensor labels = torch::randint(0, V, {B, T}, cuda.dtype(torch::kLong));
      const torch::Tensor mask = (torch::rand({B, T}, cuda) > 0.2).to(torch::kFloat);
      const LossScaling scaling{mode, 0.7};
      const torch::Tensor loss = lm_loss(logits, labels, mask, scaling, /*with_metrics=*/false, V).loss;
      (loss * upstream).backward();

      torch::Tensor ref_logits = logits.detach().clone().requires_grad_();
      const torch::Tensor per_token =
          token_cross_entropy(ref_logits.view({B * T, width}), labels.flatten(), V, PaddingColumns::neg_inf);
      const torch::Tensor masked_sum = (per_token * mask.flatten()).sum();
      const torch::Tensor ref = mode == "batch_size" ? masked_sum / double(B) * 0.7 : masked_sum / mask.sum();
      (ref * upstream).backward();
      EXPECT_LT(std::abs(loss.item<double>() - ref.item<double>()), 1e-5 * std::abs(ref.item<double>()));
      EXPECT_LT(relative_error(logits.grad().to(torch::kDouble), ref_logits.grad().to(torch::kDouble)), 1e-2);
    }
}

// BERT's masked-LM loss takes the one-pass cross-entropy while training
// (forward without metrics) and the per-token kernels with metrics: the same
// loss and gradients for every parameter, on the GPU in float32.
TEST(FusedCuda, BertMaskedLmLossInOnePassMatchesThePerTokenKernels) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const auto cuda = torch::TensorOptions().device(torch::kCUDA);
  if (!one_pass_cross_entropy_applies(torch::ones({2, 8}, cuda).requires_grad_(),
                                      torch::zeros({2}, cuda.dtype(torch::kLong))))
    GTEST_SKIP() << "built without -DZOO_CUDA_KERNELS=ON, or turned off by ZOO_CUDA_KERNELS";
  torch::manual_seed(5);
  BertModel model(zoo::testing::tiny_bert(), cuda.dtype(torch::kFloat));
  model.reset_parameters();
  model.train();
  const auto ids = cuda.dtype(torch::kLong);
  const Features batch{{"input_ids", torch::randint(1, 50, {2, 12}, ids)},
                       {"attention_mask", torch::ones({2, 12}, ids)},
                       {"token_type_ids", torch::zeros({2, 12}, ids)},
                       {"labels", torch::randint(1, 50, {2, 12}, ids)},
                       {"masked_lm_mask", (torch::rand({2, 12}, cuda) < 0.3).to(torch::kLong)},
                       {"next_sentence_label", torch::tensor({0, 1}, ids)}};
  auto step = [&](bool with_metrics) {
    model.zero_grad();
    const torch::Tensor loss = model.forward(batch, with_metrics).loss;
    loss.backward();
    std::map<std::string, torch::Tensor> grads;
    for (const auto& p : model.named_parameters()) grads[p.key()] = p.value().grad().clone();
    return std::make_pair(loss.item<double>(), grads);
  };
  const auto [one_pass_loss, one_pass] = step(false);
  const auto [per_token_loss, per_token] = step(true);
  EXPECT_NEAR(one_pass_loss, per_token_loss, 1e-5 * std::abs(per_token_loss));
  for (const auto& [name, g] : per_token) EXPECT_TRUE(torch::allclose(one_pass.at(name), g, 1e-4, 1e-6)) << name;
}
