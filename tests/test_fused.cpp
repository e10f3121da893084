// The fast paths against the plain ones they replace: zoo's CPU causal
// attention kernel against reference_attention (outputs and gradients), and
// on CUDA the fused kernels against their unfused forms. Each comparison
// states its tolerance.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "models/common/attention.h"
#include "models/common/embedding.h"
#include "models/common/layers.h"
#include "models/common/lm_loss.h"
#include "models/gpt2/gpt2.h"
#include "models/kernels/adam_update.h"
#include "models/kernels/cpu/causal_attention.h"
#include "models/kernels/cpu/cpu_gemm.h"
#include "models/kernels/dense_kernel.h"
#include "models/kernels/embedding_kernel.h"
#include "models/kernels/norm_kernel.h"
#include "tests/tensor_compare.h"

using namespace zoo::models;
using zoo::testing::relative_error;

namespace {

struct AttentionCase {
  int64_t B, T, H, G, D, window;
  bool alibi = false;
};

// q, k, v as the attention module makes them: (B, T, heads, D) views into one
// (B, T, (H + 2G) D) projection output.
struct Qkv {
  torch::Tensor qkv, q, k, v;
};
Qkv make_qkv(const AttentionCase& c, const torch::TensorOptions& options) {
  Qkv r;
  r.qkv = torch::randn({c.B, c.T, (c.H + 2 * c.G) * c.D}, options).requires_grad_();
  auto heads = [&](int64_t first, int64_t n) {
    return r.qkv.narrow(-1, first * c.D, n * c.D).view({c.B, c.T, n, c.D});
  };
  r.q = heads(0, c.H);
  r.k = heads(c.H, c.G);
  r.v = heads(c.H + c.G, c.G);
  return r;
}

using Leaves = std::vector<torch::Tensor>;  // inputs to differentiate; undefined ones are skipped

// Runs `fast` on float32 leaves and `reference` on float64 copies of them,
// sends the same random gradient back through both, and expects the outputs
// and every defined leaf's gradient to agree (relative to the largest
// reference value) within value_tol and grad_tol.
void expect_matches_float64(const Leaves& leaves, const std::function<torch::Tensor(const Leaves&)>& fast,
                            const std::function<torch::Tensor(const Leaves&)>& reference, double value_tol,
                            double grad_tol) {
  Leaves fast_in, ref_in;
  for (const auto& t : leaves) {
    fast_in.push_back(t.defined() ? t.detach().clone().requires_grad_() : torch::Tensor());
    ref_in.push_back(t.defined() ? t.detach().to(torch::kDouble).requires_grad_() : torch::Tensor());
  }
  torch::Tensor y = fast(fast_in), y64 = reference(ref_in);
  ASSERT_EQ(y.sizes(), y64.sizes());
  torch::Tensor upstream = torch::randn_like(y64);
  (y * upstream.to(torch::kFloat)).sum().backward();
  (y64 * upstream).sum().backward();
  EXPECT_LT(relative_error(y.to(torch::kDouble), y64.detach()), value_tol);
  for (size_t i = 0; i < leaves.size(); ++i)
    if (leaves[i].defined())
      EXPECT_LT(relative_error(fast_in[i].grad().to(torch::kDouble), ref_in[i].grad()), grad_tol) << "input " << i;
}

}  // namespace

TEST(Fused, CpuCausalAttentionMatchesTheReferenceInValueAndGradient) {
  torch::Tensor probe = torch::zeros({1, 1, 1, 1});
  if (!causal_attention_available(probe))
    GTEST_SKIP() << "this build has no CPU attention kernel (LibTorch >= 2.1 uses SDPA)";
  // Block edges (64 rows), ragged tails, one position, grouped and shared
  // key/value heads, sliding windows shorter and longer than a block; with
  // T <= 6 D the kernel keeps the probabilities, beyond it recomputes them.
  const std::vector<AttentionCase> cases = {{2, 64, 4, 4, 16, 0},
                                            {2, 200, 4, 4, 16, 0},
                                            {1, 1, 2, 2, 8, 0},
                                            {2, 130, 8, 2, 16, 0},
                                            {1, 97, 4, 1, 32, 0},
                                            {2, 150, 4, 2, 16, 5},
                                            {1, 200, 2, 2, 8, 100},
                                            {2, 90, 4, 2, 16, 7},
                                            // ALiBi with 6 heads: probabilities kept, recomputed, and windowed
                                            {2, 64, 6, 2, 16, 0, true},
                                            {2, 200, 6, 6, 16, 0, true},
                                            {1, 150, 6, 3, 16, 9, true}};
  for (const auto& c : cases) {
    SCOPED_TRACE("B=" + std::to_string(c.B) + " T=" + std::to_string(c.T) + " H=" + std::to_string(c.H) +
                 " G=" + std::to_string(c.G) + " D=" + std::to_string(c.D) + " window=" + std::to_string(c.window) +
                 (c.alibi ? " alibi" : ""));
    torch::manual_seed(c.T);
    const double scale = 1.0 / std::sqrt(double(c.D));
    Qkv fast = make_qkv(c, torch::kFloat);
    Qkv ref{fast.qkv.detach().to(torch::kDouble).requires_grad_()};
    ref.q = ref.qkv.narrow(-1, 0, c.H * c.D).view({c.B, c.T, c.H, c.D});
    ref.k = ref.qkv.narrow(-1, c.H * c.D, c.G * c.D).view({c.B, c.T, c.G, c.D});
    ref.v = ref.qkv.narrow(-1, (c.H + c.G) * c.D, c.G * c.D).view({c.B, c.T, c.G, c.D});
    const std::vector<double> slopes = c.alibi ? alibi_slopes(c.H) : std::vector<double>();
    torch::Tensor y = causal_attention(fast.qkv, c.H, c.G, scale, c.window, slopes);  // (B, T, H, D)
    ScoreOptions math;
    math.scale = scale;
    math.sliding_window = c.window;
    math.softmax_fp32 = false;
    if (c.alibi) math.alibi_slopes = torch::tensor(slopes, torch::kDouble);
    torch::Tensor y_ref =
        reference_attention(ref.q.transpose(1, 2), ref.k.transpose(1, 2), ref.v.transpose(1, 2), math).transpose(1, 2);
    torch::Tensor upstream = torch::randn_like(y_ref);
    (y * upstream.to(torch::kFloat)).sum().backward();
    (y_ref * upstream).sum().backward();
    // float32 against a float64 reference: a few float32 ulps after ~T-term sums.
    EXPECT_LT(relative_error(y.to(torch::kDouble), y_ref.detach()), 2e-6);
    EXPECT_LT(relative_error(fast.qkv.grad().to(torch::kDouble), ref.qkv.grad()), 1e-5);
  }
}

TEST(Fused, CpuCausalAttentionIsTheSameWithOneThreadOrTwo) {
  torch::Tensor probe = torch::zeros({1, 1, 1, 1});
  if (!causal_attention_available(probe)) GTEST_SKIP() << "this build has no CPU attention kernel";
  const int threads = at::get_num_threads();
  AttentionCase c{3, 100, 4, 2, 16, 0};
  torch::manual_seed(1);
  Qkv a = make_qkv(c, torch::kFloat);
  std::vector<torch::Tensor> results;
  for (int n : {1, 2}) {
    at::set_num_threads(n);
    a.qkv.mutable_grad() = torch::Tensor();
    torch::Tensor y = causal_attention(a.qkv, c.H, c.G, 0.25, 0);
    y.pow(2).sum().backward();
    results.push_back(torch::cat({y.flatten(), a.qkv.grad().flatten()}));
  }
  at::set_num_threads(threads);
  EXPECT_TRUE(torch::equal(results[0], results[1]));
}

// The CPU GEMM zoo's kernels call, against torch::mm in float64: every
// transpose combination, leading dimensions wider than the rows, beta 0 over
// a NaN-filled C (ignored) and beta 1 (accumulated).
TEST(Fused, CpuGemmMatchesTorchInEveryLayout) {
  if (!cpu_gemm_available()) GTEST_SKIP() << "no CPU GEMM in this process";
  torch::manual_seed(11);
  // A tiny product (the BLAS's, where there is one) and a larger one (oneDNN's, where there is that).
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{37, 23, 19}, {130, 70, 90}}) {
    const int64_t pad = 5;
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (float beta : {0.0f, 1.0f}) {
          SCOPED_TRACE(std::string(cpu_gemm_backend()) + " m=" + std::to_string(m) + " ta=" + std::to_string(ta) +
                       " tb=" + std::to_string(tb) + " beta=" + std::to_string(beta));
          // Stored (rows, cols + pad); the GEMM sees the first cols of each row.
          torch::Tensor a = torch::randn({ta ? k : m, (ta ? m : k) + pad}),
                        b = torch::randn({tb ? n : k, (tb ? k : n) + pad});
          torch::Tensor c = beta == 0 ? torch::full({m, n + pad}, NAN) : torch::randn({m, n + pad});
          torch::Tensor av = a.narrow(1, 0, ta ? m : k), bv = b.narrow(1, 0, tb ? k : n);
          torch::Tensor expect =
              0.5 * torch::mm((ta ? av.t() : av).to(torch::kDouble), (tb ? bv.t() : bv).to(torch::kDouble));
          if (beta != 0) expect += c.narrow(1, 0, n).to(torch::kDouble);
          cpu_gemm(ta, tb, m, n, k, 0.5f, a.data_ptr<float>(), a.size(1), b.data_ptr<float>(), b.size(1), beta,
                   c.data_ptr<float>(), c.size(1));
          EXPECT_LT(relative_error(c.narrow(1, 0, n).to(torch::kDouble), expect), 1e-6);
          if (beta == 0) EXPECT_TRUE(torch::isnan(c.narrow(1, n, pad)).all().item<bool>()) << "C's padding untouched";
        }
      }
    }
  }
}

// zoo's CPU dense layer against torch::linear in float64, in value and in
// the gradients of input, weight and bias, with and without a bias, on a
// (B, T, C) input and a batch long enough for several column-sum blocks.
TEST(Fused, CpuDenseMatchesLinearInValueAndGradient) {
  torch::Tensor probe = torch::zeros({1, 1});
  if (!cpu_dense_available(probe, probe, torch::Tensor())) GTEST_SKIP() << "no CPU GEMM in this process";
  torch::manual_seed(12);
  for (bool with_bias : {true, false}) {
    for (auto shape : {std::vector<int64_t>{3, 7, 24}, std::vector<int64_t>{1100, 24}}) {
      SCOPED_TRACE(std::string(with_bias ? "bias" : "no bias") + " rows=" + std::to_string(shape[0]));
      expect_matches_float64(
          {torch::randn(shape), torch::randn({40, 24}) * 0.2, with_bias ? torch::randn({40}) : torch::Tensor()},
          [](const Leaves& in) { return cpu_dense(in[0], in[1], in[2]); },
          [](const Leaves& in) { return torch::linear(in[0], in[1], in[2]); }, 1e-6, 1e-6);
    }
  }
  // With the activation fused: against linear then torch's activation. The
  // inputs span the GELU tails (|x| up to ~8), where erfc's relative error matters.
  const std::vector<std::pair<DenseActivation, std::function<torch::Tensor(const torch::Tensor&)>>> acts = {
      // x Phi(x) through erfc: torch::gelu's 1 + erf(x / sqrt 2) cancels in the
      // far negative tail, even in float64 (Phi(-8) is 6e-16).
      {DenseActivation::gelu, [](const torch::Tensor& t) { return t * 0.5 * torch::erfc(-t / std::sqrt(2.0)); }},
      {DenseActivation::gelu_tanh, [](const torch::Tensor& t) { return torch::gelu(t, "tanh"); }},
      {DenseActivation::relu, [](const torch::Tensor& t) { return torch::relu(t); }}};
  for (const auto& [act, reference] : acts) {
    SCOPED_TRACE("activation " + std::to_string(static_cast<int>(act)));
    expect_matches_float64(
        {torch::randn({4, 9, 16}) * 2, torch::randn({300, 16}), torch::randn({300})},
        [act = act](const Leaves& in) { return cpu_dense(in[0], in[1], in[2], act); },
        [reference = reference](const Leaves& in) { return reference(torch::linear(in[0], in[1], in[2])); }, 1e-6,
        1e-5);
  }
  // GELU's negative tail, elementwise: through an identity weight the
  // pre-activations are exactly x. Down to x = -9.4 (Phi ~ 3e-21) the value
  // keeps ~5 digits (float32 z^2 inside the exp); float32 torch::gelu, with
  // 1 + erf, has none left past x ~ -5.5.
  {
    torch::Tensor x = torch::linspace(-9.4, 6.0, 16 * 40).reshape({40, 16});
    torch::Tensor y = cpu_dense(x, torch::eye(16), torch::zeros({16}), DenseActivation::gelu).to(torch::kDouble);
    torch::Tensor x64 = x.to(torch::kDouble), ref = x64 * 0.5 * torch::erfc(-x64 / std::sqrt(2.0));
    EXPECT_LT(((y - ref).abs() / ref.abs().clamp_min(1e-300)).max().item<double>(), 2e-5);
  }
  // Only what needs a gradient gets one: a frozen weight is left alone.
  torch::Tensor x = torch::randn({5, 8}).requires_grad_(), w = torch::randn({3, 8});
  cpu_dense(x, w, torch::Tensor()).sum().backward();
  EXPECT_TRUE(x.grad().defined());
  EXPECT_FALSE(w.grad().defined());
}

// zoo's CPU LayerNorm and RMSNorm against the float64 math (torch's
// layer_norm; RMSNorm written out), in value and all gradients; rows
// spanning several thread tasks, with one thread and with two; and after a
// residual add in the same node (both the sum and the norm as outputs).
TEST(Fused, CpuNormMatchesTheReferenceInValueAndGradient) {
  const int threads = at::get_num_threads();
  for (int n : {1, 2}) {
    at::set_num_threads(n);
    for (bool rms : {false, true}) {
      for (bool with_bias : {true, false}) {
        for (bool add : {false, true}) {
          if (rms && with_bias) continue;
          SCOPED_TRACE(std::string(rms ? "RMSNorm" : "LayerNorm") + (with_bias ? " with bias" : "") +
                       (add ? " after a residual add with the branch's bias" : "") + ", threads " + std::to_string(n));
          torch::manual_seed(13);
          auto norm = [rms = rms](const torch::Tensor& x, const Leaves& in) {
            return rms ? x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5) * in[1]
                       : torch::layer_norm(x, {72}, in[1], in[2], 1e-5);
          };
          expect_matches_float64(
              {torch::randn({3, 300, 72}) * 3 + 1, torch::randn({72}), with_bias ? torch::randn({72}) : torch::Tensor(),
               add ? torch::randn({3, 300, 72}) : torch::Tensor(), add ? torch::randn({72}) : torch::Tensor()},
              [rms = rms, add = add](const Leaves& in) {  // in[4]: the branch's projection bias
                if (!add) return cpu_norm(in[0], in[1], in[2], 1e-5, rms);
                const SumAndNorm out = cpu_add_norm(in[0], in[3], in[1], in[2], 1e-5, rms, in[4]);
                return torch::cat({out.sum, out.normed});
              },
              [&norm, add = add](const Leaves& in) {
                if (!add) return norm(in[0], in);
                const torch::Tensor sum = in[0] + in[3] + in[4];
                return torch::cat({sum, norm(sum, in)});
              },
              1e-6, 1e-5);
        }
      }
    }
  }
  at::set_num_threads(threads);
}

// The one-node token + position lookup against two torch::embedding lookups
// and an add, in value and in both tables' gradients (repeated ids add up;
// positions start past 0 as when decoding), and a bad id is named.
TEST(Fused, CpuEmbeddingSumMatchesTwoLookups) {
  torch::manual_seed(14);
  torch::Tensor ids = torch::randint(0, 7, {3, 5}, torch::kLong);  // 15 ids over 7 rows: repeats
  torch::Tensor words = torch::randn({7, 6}).requires_grad_(), positions = torch::randn({9, 6}).requires_grad_();
  torch::Tensor w2 = words.detach().clone().requires_grad_(), p2 = positions.detach().clone().requires_grad_();
  torch::Tensor y = cpu_embedding_sum(ids, words, positions, 2);
  torch::Tensor ref = torch::embedding(w2, ids) + torch::embedding(p2, torch::arange(2, 7, torch::kLong));
  torch::Tensor upstream = torch::randn_like(ref);
  (y * upstream).sum().backward();
  (ref * upstream).sum().backward();
  EXPECT_TRUE(torch::allclose(y, ref, 0, 0)) << "the same two float32 numbers added";
  EXPECT_TRUE(torch::allclose(words.grad(), w2.grad(), 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(positions.grad(), p2.grad(), 1e-6, 1e-6));
  ids[1][2] = 7;
  try {
    cpu_embedding_sum(ids, words, positions, 0);
    ADD_FAILURE() << "id 7 of a 7-row table was accepted";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 7 is outside the vocabulary [0, 7)"), std::string::npos) << e.what();
  }
}

// The single-pass float32 CPU update against the multi-tensor path in float64
// (the one GPU tensors take), over steps with bias correction, for AdamW
// (decoupled decay) and Adam (L2 decay).
TEST(Fused, CpuAdamUpdateMatchesTheMultiTensorPath) {
  for (bool decoupled : {true, false}) {
    SCOPED_TRACE(decoupled ? "AdamW" : "Adam");
    torch::manual_seed(3);
    torch::Tensor p32 = torch::randn({1000, 37}), p64 = p32.to(torch::kDouble);
    torch::Tensor m32 = torch::zeros_like(p32), v32 = torch::zeros_like(p32);
    torch::Tensor m64 = torch::zeros_like(p64), v64 = torch::zeros_like(p64);
    double b1p = 1, b2p = 1;
    for (int step = 1; step <= 20; ++step) {
      torch::Tensor g = torch::randn({1000, 37}) * (step % 3 + 1);
      p32.mutable_grad() = g;
      p64.mutable_grad() = g.to(torch::kDouble);
      b1p *= 0.9;
      b2p *= 0.999;
      const double correction = std::sqrt(1 - b2p) / (1 - b1p);
      const zoo::optim::AdamHyper h{0.9, 0.999, 1e-6, 1e-2, 0.1, decoupled};
      zoo::optim::adam_update({{p32, m32, v32, correction}}, h);
      zoo::optim::adam_update({{p64, m64, v64, correction}}, h);
    }
    // float32 rounding over 20 steps, relative to the parameters' scale.
    EXPECT_LT(relative_error(p32.to(torch::kDouble), p64), 1e-6);
    EXPECT_LT(relative_error(v32.to(torch::kDouble), v64), 1e-6);
  }
}

// On a GPU (zoo's kernel, models/kernels/cuda/adam.cu; or, with it off or not
// built, LibTorch >= 2.1: ATen's fused Adam kernel, modelzoo's correction
// folded into its learning rate) against the CPU's float64 multi-tensor
// path, with and without bias correction and the clipping coefficient.
TEST(FusedCuda, AdamUpdateOnTheGpuMatchesTheCpuPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const bool zoo_kernel = zoo::optim::cuda_adam_kernel_available();
  for (bool decoupled : {true, false}) {
    for (bool correct_bias : {true, false}) {
      for (bool clipped : {false, true}) {
        SCOPED_TRACE(std::string(decoupled ? "AdamW" : "Adam") + (correct_bias ? "" : ", no bias correction") +
                     (clipped ? ", clipping coefficient" : "") + (zoo_kernel ? ", zoo's kernel" : ", ATen's kernel"));
        torch::manual_seed(5);
        // Two parameters of different shapes, so one kernel call covers a list.
        std::vector<torch::Tensor> cpu = {torch::randn({300, 37}, torch::kDouble), torch::randn({41}, torch::kDouble)};
        std::vector<torch::Tensor> gpu, cpu_m, cpu_v, gpu_m, gpu_v;
        for (const torch::Tensor& p : cpu) {
          gpu.push_back(p.to(torch::kCUDA, torch::kFloat));
          cpu_m.push_back(torch::zeros_like(p)), cpu_v.push_back(torch::zeros_like(p));
          gpu_m.push_back(torch::zeros_like(gpu.back())), gpu_v.push_back(torch::zeros_like(gpu.back()));
        }
        double b1p = 1, b2p = 1;
        for (int step = 1; step <= 20; ++step) {
          b1p *= 0.9;
          b2p *= 0.999;
          const double correction = correct_bias ? std::sqrt(1 - b2p) / (1 - b1p) : 1.0;
          std::vector<zoo::optim::AdamSlot> cpu_slots, gpu_slots;
          for (size_t i = 0; i < cpu.size(); ++i) {
            torch::Tensor g = torch::randn(cpu[i].sizes(), torch::kDouble) * (step % 3 + 1);
            cpu[i].mutable_grad() = g;
            gpu[i].mutable_grad() = g.to(torch::kCUDA, torch::kFloat);
            cpu_slots.push_back({cpu[i], cpu_m[i], cpu_v[i], correction});
            gpu_slots.push_back({gpu[i], gpu_m[i], gpu_v[i], correction});
          }
          zoo::optim::AdamHyper h{0.9, 0.999, 1e-6, 1e-2, 0.1, decoupled};
          // ATen's kernel takes 1 - beta of beta rounded to float32 (0.999 -> 1 - 1.29e-5
          // relative in v's new term, as PyTorch's fused AdamW); its reference does too.
          zoo::optim::AdamHyper reference = h;
          if (!zoo_kernel) reference.beta1 = double(float(0.9)), reference.beta2 = double(float(0.999));
          if (clipped) {
            h.grad_coefficient = torch::full({}, 0.4f, torch::kCUDA);
            reference.grad_coefficient = torch::full({}, 0.4f);
          }
          zoo::optim::adam_update(cpu_slots, reference);
          zoo::optim::adam_update(gpu_slots, h);
        }
        for (size_t i = 0; i < cpu.size(); ++i) {
          EXPECT_LT(relative_error(gpu[i].cpu().to(torch::kDouble), cpu[i]), 1e-6) << "parameter " << i;
          EXPECT_LT(relative_error(gpu_v[i].cpu().to(torch::kDouble), cpu_v[i]), 1e-6) << "parameter " << i;
        }
      }
    }
  }
}

// Both cross-entropy paths against torch's, in value and gradient: the CPU
// kernel (float32) and the chunked one (several chunks with a ragged last
// one; float32 and bfloat16 logits), with padding columns that must not
// count and get zero gradient.
TEST(Fused, CrossEntropyPathsMatchTorchAndIgnorePadding) {
  torch::manual_seed(4);
  const int64_t N = 37, V = 50, padded = 64;
  torch::Tensor labels = torch::randint(0, V, {N}, torch::kLong);
  for (auto [dtype, chunk_rows] : {std::pair{torch::kFloat, 0}, {torch::kFloat, 8}, {torch::kBFloat16, 8}})
    for (PaddingColumns padding : {PaddingColumns::any, PaddingColumns::neg_inf}) {
      const bool neg_inf = padding == PaddingColumns::neg_inf;
      SCOPED_TRACE(std::string(chunk_rows ? "chunked" : "CPU kernel") + (neg_inf ? ", -inf padding" : ""));
      torch::Tensor values = torch::randn({N, padded}) * 3;
      if (neg_inf) values.narrow(1, V, padded - V).fill_(-std::numeric_limits<float>::infinity());
      torch::Tensor wide = values.to(dtype).requires_grad_();
      torch::Tensor ref_in = wide.detach().narrow(1, 0, V).to(torch::kDouble).requires_grad_();
      torch::Tensor upstream = torch::rand({N}, torch::kDouble);
      torch::Tensor loss = token_cross_entropy(wide, labels, V, padding, chunk_rows);
      torch::Tensor ref = torch::nn::functional::cross_entropy(
          ref_in, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      (loss * upstream.to(torch::kFloat)).sum().backward();
      (ref * upstream).sum().backward();
      const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;  // bfloat16 gradients carry 8 bits
      EXPECT_LT(relative_error(loss.to(torch::kDouble), ref.detach()), 1e-6) << "loss is float32 in both";
      EXPECT_LT(relative_error(wide.grad().narrow(1, 0, V).to(torch::kDouble), ref_in.grad()), tol);
      EXPECT_EQ(wide.grad().narrow(1, V, padded - V).abs().max().item<double>(), 0.0);
    }
}

namespace {
// Losses of a few AdamW steps of a small GPT on `device` whose output head
// pads the vocabulary (50) to `pad_multiple` (unset: the device's default).
std::vector<double> short_run_losses(std::optional<int64_t> pad_multiple, torch::Device device = torch::kCPU) {
  torch::manual_seed(7);
  Gpt2Options o;
  o.vocab_size = 50;
  o.hidden_size = 32;
  o.num_hidden_layers = 2;
  o.num_heads = 4;
  o.filter_size = 64;
  o.max_position_embeddings = 24;
  o.dropout_rate = 0.0;
  Gpt2Model m(o, torch::TensorOptions());
  m.reset_parameters();
  m.to(device);
  m.lm_head->pad_multiple = pad_multiple;
  torch::optim::AdamW opt(m.parameters(), torch::optim::AdamWOptions(1e-2));
  std::vector<double> losses;
  for (int step = 0; step < 6; ++step) {
    torch::Tensor ids = torch::randint(0, 50, {4, 24}, torch::kLong).to(device);
    Features batch{{"input_ids", ids},
                   {"labels", ids.roll(-1, 1)},
                   {"attention_mask", torch::ones({4, 24}, torch::TensorOptions().device(device))}};
    ModelOutput out = m.forward(batch, false);
    opt.zero_grad();
    out.loss.backward();
    opt.step();
    losses.push_back(out.loss.item<double>());
  }
  EXPECT_EQ(m.logits(torch::zeros({1, 3}, torch::kLong).to(device)).size(-1), 50) << "logits keep the real vocabulary";
  return losses;
}
}  // namespace

// zoo's fused CUDA kernels (-DZOO_CUDA_KERNELS=ON) against the chunked
// path, in float32, bfloat16 and float16, with either padding, confident
// rows included; an out-of-range label gives a NaN loss, not a wild read.
TEST(FusedCuda, CrossEntropyKernelsMatchTheChunkedPath) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!have_cuda_cross_entropy_kernels()) GTEST_SKIP() << "built without -DZOO_CUDA_KERNELS=ON";
  const int64_t N = 300, V = 50257;
  // Rows of 50304 start on 16 bytes and are read in packs; rows of 50257 column by column.
  for (int64_t width : {int64_t{50304}, V})
    for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
      for (PaddingColumns padding : {PaddingColumns::any, PaddingColumns::neg_inf}) {
        SCOPED_TRACE(std::string(c10::toString(dtype)) + (padding == PaddingColumns::neg_inf ? ", -inf padding" : "") +
                     ", width " + std::to_string(width));
        torch::manual_seed(4);
        const auto cuda = torch::TensorOptions().device(torch::kCUDA);
        const torch::Tensor labels = torch::randint(0, V, {N}, cuda.dtype(torch::kLong));
        torch::Tensor values = torch::randn({N, width}, cuda) * 2;
        if (padding == PaddingColumns::neg_inf)
          values.narrow(1, V, width - V).fill_(-std::numeric_limits<float>::infinity());
        values.narrow(0, 0, 20).scatter_(1, labels.narrow(0, 0, 20).unsqueeze(1), 20.0);
        const torch::Tensor upstream = torch::rand({N}, cuda);
        auto run = [&](int64_t chunk_rows) {
          // A copy: in float32 `to` would return `values` itself, and the second run's gradient would add to the
          // first's.
          torch::Tensor logits = values.to(dtype, /*non_blocking=*/false, /*copy=*/true).requires_grad_();
          torch::Tensor loss = token_cross_entropy(logits, labels, V, padding, chunk_rows);
          (loss * upstream).sum().backward();
          return std::pair{loss.detach().to(torch::kDouble), logits.grad().to(torch::kDouble)};
        };
        auto [kernel_loss, kernel_grad] = run(0);
        auto [chunk_loss, chunk_grad] = run(64);
        EXPECT_LT(relative_error(kernel_loss, chunk_loss), 1e-6) << "float32 losses";
        // Both round each gradient to the logits' type once (the chunks twice in bfloat16/float16).
        EXPECT_LT(relative_error(kernel_grad, chunk_grad), dtype == torch::kFloat ? 1e-5 : 1e-2);
        if (width > V) EXPECT_EQ(kernel_grad.narrow(1, V, width - V).abs().max().item<double>(), 0.0);
      }
  torch::Tensor logits = torch::randn({4, 64}, torch::kCUDA);
  torch::Tensor labels = torch::tensor({1, 2, 70, -1}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
  const torch::Tensor loss = token_cross_entropy(logits, labels, 64).cpu();
  EXPECT_TRUE(std::isfinite(loss[0].item<double>()) && std::isfinite(loss[1].item<double>()));
  EXPECT_TRUE(std::isnan(loss[2].item<double>()) && std::isnan(loss[3].item<double>()));
}

// OutputHead's padding columns are -inf, from a -inf bias on zero weight
// rows; the real columns and, through the whole-row chunked loss, the head's
// gradients are those of the unpadded head.
TEST(Fused, PaddedHeadColumnsAreMinusInfinityAndChangeNoGradient) {
  for (bool with_bias : {false, true}) {
    SCOPED_TRACE(with_bias ? "with bias" : "without bias");
    torch::manual_seed(6);
    OutputHead head(16, 50, /*own_weight=*/true, with_bias, torch::TensorOptions());
    {
      torch::NoGradGuard no_grad;
      head->weight.normal_();
      if (with_bias) head->bias.uniform_(-1, 1);
    }
    const torch::Tensor h = torch::randn({3, 5, 16}), labels = torch::randint(0, 50, {15}, torch::kLong);
    auto run = [&](int64_t pad_multiple, PaddingColumns padding) {
      head->pad_multiple = pad_multiple;
      head->zero_grad();
      const torch::Tensor logits = head->forward(h, torch::Tensor());
      token_cross_entropy(logits.flatten(0, 1), labels, 50, padding, /*chunk_rows=*/4).sum().backward();
      std::vector<torch::Tensor> grads = {head->weight.grad().clone()};
      if (with_bias) grads.push_back(head->bias.grad().clone());
      return std::pair{logits.detach(), grads};
    };
    auto [plain, plain_grads] = run(1, PaddingColumns::any);
    auto [padded, padded_grads] = run(64, PaddingColumns::neg_inf);
    ASSERT_EQ(padded.size(-1), 64);
    EXPECT_TRUE(torch::allclose(padded.narrow(-1, 0, 50), plain, 1e-5, 1e-5));
    EXPECT_TRUE(torch::all(padded.narrow(-1, 50, 14) == -std::numeric_limits<float>::infinity()).item<bool>());
    for (size_t i = 0; i < plain_grads.size(); ++i) {
      EXPECT_EQ(padded_grads[i].size(0), 50) << "parameters keep the real vocabulary";
      EXPECT_TRUE(torch::allclose(padded_grads[i], plain_grads[i], 1e-5, 1e-6)) << "gradient " << i;
    }
  }
}

// Padding the vocabulary is internal: the same losses step for step.
TEST(Fused, PaddedVocabularyTrainsToTheSameLosses) {
  std::vector<double> plain = short_run_losses(1), padded = short_run_losses(64);
  EXPECT_NE(plain, std::vector<double>(plain.size(), plain[0])) << "the losses move";
  for (size_t i = 0; i < plain.size(); ++i) EXPECT_NEAR(padded[i], plain[i], 1e-5) << "step " << i;
}

// On a GPU: the default path (vocabulary padded to 64, chunked loss, SDPA on
// LibTorch >= 2.1) trains to the CPU's unpadded losses; fp32 on both, so
// only summation order differs.
TEST(FusedCuda, PaddedVocabularyOnTheGpuTrainsToTheCpuLosses) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  std::vector<double> cpu = short_run_losses(1), gpu = short_run_losses(std::nullopt, torch::kCUDA);
  for (size_t i = 0; i < cpu.size(); ++i) EXPECT_NEAR(gpu[i], cpu[i], 1e-4) << "step " << i;
}

TEST(FusedCuda, ChunkedCrossEntropyOnTheGpuMatchesTorch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  for (PaddingColumns padding : {PaddingColumns::any, PaddingColumns::neg_inf}) {
    SCOPED_TRACE(padding == PaddingColumns::neg_inf ? "-inf padding, whole rows" : "any padding");
    torch::manual_seed(4);
    torch::Tensor labels =
        torch::randint(0, 50257, {300}, torch::TensorOptions().dtype(torch::kLong).device(torch::kCUDA));
    torch::Tensor logits = torch::randn({300, 50304}, torch::kCUDA);
    if (padding == PaddingColumns::neg_inf) logits.narrow(1, 50257, 47).fill_(-std::numeric_limits<float>::infinity());
    // The first 20 rows predict their label with probability ~1 - 2e-4, which
    // rounds to 1 in bfloat16: its gradient p - 1 must not round to 0.
    logits.narrow(0, 0, 20).scatter_(1, labels.narrow(0, 0, 20).unsqueeze(1), 20.0);
    logits = logits.to(torch::kBFloat16).requires_grad_();
    torch::Tensor ref_in = logits.detach().narrow(1, 0, 50257).to(torch::kFloat).requires_grad_();
    torch::Tensor loss = token_cross_entropy(logits, labels, 50257, padding, /*chunk_rows=*/64);
    torch::Tensor ref = torch::nn::functional::cross_entropy(
        ref_in, labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
    loss.sum().backward();
    ref.sum().backward();
    EXPECT_LT(relative_error(loss.to(torch::kDouble), ref.detach().to(torch::kDouble)), 1e-6) << "float32 losses";
    EXPECT_LT(relative_error(logits.grad().narrow(1, 0, 50257).to(torch::kDouble), ref_in.grad().to(torch::kDouble)),
              1e-2);  // bfloat16 gradients
    EXPECT_EQ(logits.grad().narrow(1, 50257, 47).abs().max().item<double>(), 0.0);
    const torch::Tensor confident = labels.narrow(0, 0, 20).unsqueeze(1);
    EXPECT_LT(relative_error(logits.grad().narrow(0, 0, 20).gather(1, confident).to(torch::kDouble),
                             ref_in.grad().narrow(0, 0, 20).gather(1, confident).to(torch::kDouble)),
              1e-2)
        << "the label's gradient of a confident prediction";
  }
}
