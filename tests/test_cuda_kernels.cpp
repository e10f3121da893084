// zoo's CUDA kernels (models/kernels/cuda/) on the CPU, in every build: their
// own source run through tests/cuda_emulation.h behind the same host code
// (norm_through, cross_entropy_through, dense_through) against float64
// references (on a GPU, tests/test_cuda_kernels_gpu.cpp holds the real
// kernels to LibTorch's ops). Also what the kernel policy (runconfig.cuda_kernels) selects, and that a
// norm handing its matmuls the autocast type leaves a training step as it was.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "models/common/layers.h"
#include "models/common/lm_loss.h"
#include "models/gpt2/gpt2.h"
#include "models/kernels/cuda/kernel_glue.h"
#include "models/kernels/dense_kernel.h"
#include "models/kernels/norm_kernel.h"
#include "models/kernels/policy.h"
#include "runner/amp/autocast.h"
#include "tests/emulated_kernels.h"
#include "tests/tensor_compare.h"

// The kernels' source, compiled here for the CPU. Their headers came in
// above (norm_kernel.h, lm_loss.h), so the .cu files' own includes of them
// are skipped and the definitions below, in namespace zoo_emulated::cuda,
// take zoo::cuda's ElementType: the emulated functions have the real ones'
// types, and never clash with them in a build that also links those.
#include "tests/cuda_emulation.h"
namespace zoo_emulated::cuda {
using ::zoo::cuda::Activation;
using ::zoo::cuda::ElementType;
using ::zoo::cuda::GradientPart;
using ::zoo::cuda::kMaxGradientParts;
}  // namespace zoo_emulated::cuda
#define zoo zoo_emulated
#include "models/kernels/cuda/cross_entropy.cu"
#include "models/kernels/cuda/dense.cu"
#include "models/kernels/cuda/norm.cu"
#undef zoo

// Shared with tests/test_weight_copies.cpp (tests/emulated_kernels.h).
const zoo::models::DenseKernels zoo::testing::kEmulatedDense = {zoo_emulated::cuda::dense_grad_chunks,
                                                                zoo_emulated::cuda::dense_activation_and_bias_grad,
                                                                zoo_emulated::cuda::dense_gather_and_bias_grad};
const zoo::models::NormKernels zoo::testing::kEmulatedNorm = {
    zoo_emulated::cuda::norm_forward, zoo_emulated::cuda::norm_param_grad_chunks, zoo_emulated::cuda::norm_backward};
const zoo::models::EmulatedCudaKernels zoo::testing::kEmulatedCuda = {
    &zoo::testing::kEmulatedNorm, zoo_emulated::cuda::norm_sums_branch_bias_in_one_pass, &zoo::testing::kEmulatedDense};

using namespace zoo::models;
using zoo::testing::kEmulatedDense;
using zoo::testing::kEmulatedNorm;
using zoo::testing::relative_error;

namespace {

const CrossEntropyKernels kEmulatedCrossEntropy = {
    zoo_emulated::cuda::cross_entropy_forward, zoo_emulated::cuda::cross_entropy_backward,
    zoo_emulated::cuda::cross_entropy_forward_with_grad, zoo_emulated::cuda::cross_entropy_scale_grad};

std::string type_name(torch::ScalarType t) { return c10::toString(t); }

// float64 -log softmax(logits[:, :columns])[label] of the logits as given (already rounded to their type).
torch::Tensor reference_cross_entropy(const torch::Tensor& logits64, const torch::Tensor& labels, int64_t columns) {
  return torch::nn::functional::cross_entropy(logits64.narrow(1, 0, columns), labels,
                                              torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
}

// The norm in float64: LayerNorm (biased variance) or RMSNorm, times weight, plus bias.
torch::Tensor reference_norm(const torch::Tensor& x, const torch::Tensor& w, const torch::Tensor& b, bool rms) {
  if (rms) return x * torch::rsqrt(x.pow(2).mean(-1, true) + 1e-5) * w;
  return torch::layer_norm(x, {x.size(-1)}, w, b, 1e-5);
}

// The LayerNorms of `m`.
std::vector<LayerNormImpl*> norms_of(torch::nn::Module& m) {
  std::vector<LayerNormImpl*> norms;
  for (const auto& child : m.modules(/*include_self=*/false))
    if (auto* norm = dynamic_cast<LayerNormImpl*>(child.get())) norms.push_back(norm);
  return norms;
}

}  // namespace

// Rows that start on 16 bytes (read in packs: two per thread and a tail
// pack, then single columns) and rows that do not (read column by column:
// four per thread and a tail); columns past `columns` left out (garbage)
// or -inf; confident rows; float32, bfloat16 and float16.
TEST(CudaKernelsEmulated, CrossEntropyMatchesFloat64InLossAndGradient) {
  const int64_t N = 5, width = 8712, vocab = 8705;
  for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf})
    for (bool neg_inf : {false, true})
      for (int64_t stride : {width + 8, width + 1}) {  // every row on 16 bytes; every other row off them
        const int64_t columns = neg_inf ? width : vocab;
        SCOPED_TRACE(type_name(dtype) + (neg_inf ? ", -inf padding" : ", garbage padding") + ", row stride " +
                     std::to_string(stride));
        torch::manual_seed(21);
        torch::Tensor labels = torch::randint(0, vocab, {N}, torch::kLong);
        torch::Tensor values = torch::randn({N, stride}) * 2;
        if (neg_inf) values.narrow(1, vocab, stride - vocab).fill_(-std::numeric_limits<float>::infinity());
        values.narrow(0, 0, 2).scatter_(1, labels.narrow(0, 0, 2).unsqueeze(1), 20.0);  // p of the label ~1
        const torch::Tensor storage = values.to(dtype);
        torch::Tensor logits = storage.narrow(1, 0, width).detach().requires_grad_();
        ASSERT_EQ(logits.stride(0), stride);
        const torch::Tensor upstream = torch::rand({N}, torch::kDouble);

        torch::Tensor loss = cross_entropy_through(kEmulatedCrossEntropy, logits, labels, columns);
        (loss * upstream.to(torch::kFloat)).sum().backward();
        torch::Tensor ref_in = logits.detach().to(torch::kDouble).requires_grad_();
        torch::Tensor ref = reference_cross_entropy(ref_in, labels, vocab);
        (ref * upstream).sum().backward();

        EXPECT_LT(relative_error(loss.to(torch::kDouble), ref.detach()), 1e-6) << "float32 losses";
        const torch::Tensor grad = logits.grad().to(torch::kDouble);
        // One rounding of each gradient to the logits' type (float16 keeps 11 bits, bfloat16 8).
        EXPECT_LT(relative_error(grad, ref_in.grad()), dtype == torch::kFloat ? 1e-5 : 1e-2);
        EXPECT_EQ(grad.narrow(1, vocab, width - vocab).abs().max().item<double>(), 0.0) << "padding gets no gradient";
      }
  torch::Tensor logits = torch::randn({3, 64});
  const torch::Tensor loss = cross_entropy_through(kEmulatedCrossEntropy, logits, torch::tensor({1, 64, -1}), 64);
  EXPECT_TRUE(std::isfinite(loss[0].item<double>()));
  EXPECT_TRUE(std::isnan(loss[1].item<double>()) && std::isnan(loss[2].item<double>())) << "labels outside [0, 64)";
}

// The loss whose forward makes its gradient: sum_i w_i CE_i against float64,
// with weights that include 0 (masked rows), rows read in packs and column by
// column, 7 rows over the emulation's 4 blocks (some take two), and a
// backward scaled by 1 (the kernel leaves the gradient as it is) or not, over
// a gradient of whole packs or with a tail (width 8709, no padding, so the
// tail holds real columns). A second backward (retain_graph) is refused.
TEST(CudaKernelsEmulated, CrossEntropyWithItsGradientInTheForwardMatchesFloat64) {
  const int64_t N = 7;
  for (auto dtype : {torch::kFloat, torch::kBFloat16})
    for (int64_t width : {8712, 8709})
      for (int64_t stride : {width + 8, width + 1})
        for (double upstream : {1.0, 0.37}) {
          const int64_t vocab = width == 8712 ? 8705 : width;
          SCOPED_TRACE(type_name(dtype) + ", width " + std::to_string(width) + ", row stride " +
                       std::to_string(stride) + ", upstream gradient " + std::to_string(upstream));
          torch::manual_seed(27);
          const torch::Tensor labels = torch::randint(0, vocab, {N}, torch::kLong);
          torch::Tensor values = torch::randn({N, stride}) * 2;
          values.narrow(1, vocab, stride - vocab).fill_(-std::numeric_limits<float>::infinity());
          const torch::Tensor storage = values.to(dtype);
          torch::Tensor logits = storage.narrow(1, 0, width).detach().requires_grad_();
          const torch::Tensor weights = torch::tensor({0.1, 0.0, 0.3, 0.2, 0.0, 0.25, 0.15}, torch::kFloat);

          const torch::Tensor loss =
              weighted_cross_entropy_through(kEmulatedCrossEntropy, logits, labels, weights, width);
          ASSERT_EQ(loss.dim(), 0);
          (loss * upstream).backward({}, /*retain_graph=*/true);
          torch::Tensor ref_in = logits.detach().to(torch::kDouble).requires_grad_();
          const torch::Tensor ref = (reference_cross_entropy(ref_in, labels, vocab) * weights.to(torch::kDouble)).sum();
          (ref * upstream).backward();

          EXPECT_LT(std::abs(loss.item<double>() - ref.item<double>()), 1e-6 * std::abs(ref.item<double>()));
          const torch::Tensor grad = logits.grad().to(torch::kDouble);
          EXPECT_LT(relative_error(grad, ref_in.grad()), dtype == torch::kFloat ? 1e-5 : 1e-2);
          if (vocab < width)
            EXPECT_EQ(grad.narrow(1, vocab, width - vocab).abs().max().item<double>(), 0.0) << "padding";
          EXPECT_EQ(grad[1].abs().max().item<double>(), 0.0) << "a row of weight 0";
          EXPECT_THROW(loss.backward(), c10::Error) << "a second backward would scale the gradient again";
        }
}

// A NaN logit makes its row's loss NaN (a diverged step is not hidden),
// wherever it sits: among finite values, among -inf before any finite one
// (where the running max is still -inf), or in a row of -inf; read in packs
// and column by column.
TEST(CudaKernelsEmulated, CrossEntropyCarriesNaNLogitsIntoTheLoss) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (int64_t offset : {0, 1}) {  // rows on 16 bytes; rows one column off
    SCOPED_TRACE("first column at " + std::to_string(offset));
    torch::Tensor storage = torch::randn({4, 64 + 8});
    torch::Tensor logits = storage.narrow(1, offset, 64);
    logits[0][3] = nan;
    logits[1].narrow(0, 0, 8).fill_(-inf);
    logits[1][2] = nan;
    logits[3].fill_(-inf);
    logits[3][40] = nan;
    const torch::Tensor loss = cross_entropy_through(kEmulatedCrossEntropy, logits, torch::tensor({5, 9, 9, 9}), 64);
    EXPECT_TRUE(std::isnan(loss[0].item<double>())) << "among finite logits";
    EXPECT_TRUE(std::isnan(loss[1].item<double>())) << "after -inf only";
    EXPECT_TRUE(std::isfinite(loss[2].item<double>()));
    EXPECT_TRUE(std::isnan(loss[3].item<double>())) << "in a row of -inf";
  }
}

// LayerNorm with and without bias and RMSNorm; y in float32, bfloat16 and
// float16; rows of 300 (past one stride of the block; forward, a warp per
// row, as every width that is a multiple of 4 up to 4096), of 302 (forward,
// a block per row) and of 40 (a partial 32-column tile); 150 rows make the
// weight gradients two row chunks; with a
// residual add of a float32 or bfloat16 branch before the norm, whose sum
// also feeds the loss (the gradient the backward adds in).
TEST(CudaKernelsEmulated, NormMatchesFloat64InValueAndGradients) {
  struct Case {
    bool rms, bias;
    int64_t rows, C;
    torch::ScalarType out;
    std::optional<torch::ScalarType> branch;
    bool x_grad = true, weight_grad = true;  // false: frozen, no gradient computed
    bool sum_used = true;                    // false: only y feeds the loss (a decoder's final norm)
    bool branch_bias = false;                // the branch's projection bias added in the node
  };
  const std::vector<Case> cases = {
      {false, true, 9, 300, torch::kFloat},
      // Not a multiple of 4: the forward's block-per-row kernel instead of its warp-per-row one.
      {false, true, 9, 302, torch::kBFloat16, torch::kBFloat16},
      {false, false, 9, 300, torch::kFloat},
      {true, false, 9, 300, torch::kFloat},
      {false, true, 9, 300, torch::kBFloat16},
      {true, false, 9, 300, torch::kHalf},
      {false, true, 150, 40, torch::kFloat},
      {false, true, 9, 300, torch::kBFloat16, torch::kBFloat16},
      {true, false, 9, 300, torch::kFloat, torch::kFloat},
      // Two chunks of rows (32 and 8), each thread summing 20 columns of the weight gradients.
      {false, true, 40, 5000, torch::kBFloat16, torch::kBFloat16},
      // Wider than the sums kept in registers: a second pass sums them.
      {true, false, 3, 8300, torch::kFloat},
      {false, true, 70, 300, torch::kFloat, std::nullopt, /*x_grad=*/false},
      {false, true, 70, 300, torch::kBFloat16, torch::kBFloat16, true, /*weight_grad=*/false},
      {false, true, 9, 300, torch::kBFloat16, torch::kBFloat16, true, true, /*sum_used=*/false},
      // With the branch's bias: its gradient summed in the backward's one pass (300 wide), by a
      // second pass over dx beside the warp kernel (1500), the block kernel (5000) and the
      // block-per-row forward (302).
      {false, true, 70, 300, torch::kBFloat16, torch::kBFloat16, true, true, true, /*branch_bias=*/true},
      {false, true, 70, 1500, torch::kBFloat16, torch::kBFloat16, true, true, true, /*branch_bias=*/true},
      {false, true, 40, 5000, torch::kFloat, torch::kFloat, true, true, true, /*branch_bias=*/true},
      {true, false, 9, 302, torch::kFloat, torch::kBFloat16, /*x_grad=*/false, true, true, /*branch_bias=*/true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.rms ? "RMSNorm" : "LayerNorm") + (c.bias ? " with bias" : "") + ", " +
                 std::to_string(c.rows) + " x " + std::to_string(c.C) + ", y in " + type_name(c.out) +
                 (c.branch ? ", after adding a " + type_name(*c.branch) + " branch" : "") +
                 (c.x_grad ? "" : ", x frozen") + (c.weight_grad ? "" : ", weight frozen") +
                 (c.sum_used ? "" : ", sum unused") + (c.branch_bias ? ", with the branch's bias" : ""));
    torch::manual_seed(22);
    torch::Tensor x = (torch::randn({c.rows, c.C}) * 3 + 1).requires_grad_(c.x_grad);
    torch::Tensor w = torch::randn({c.C}).requires_grad_(c.weight_grad);
    torch::Tensor b = c.bias ? torch::randn({c.C}).requires_grad_() : torch::Tensor();
    torch::Tensor branch = c.branch ? torch::randn({c.rows, c.C}).to(*c.branch).requires_grad_() : torch::Tensor();
    torch::Tensor branch_bias = c.branch_bias ? torch::randn({c.C}).requires_grad_() : torch::Tensor();
    // Upstream values the output type holds exactly, so both sides start from the same gradient.
    const torch::Tensor upstream = torch::randn({c.rows, c.C}).to(c.out).to(torch::kDouble);
    const torch::Tensor sum_upstream = torch::randn({c.rows, c.C}, torch::kDouble);

    const SumAndNorm out =
        norm_through(kEmulatedNorm, x.view({c.rows, 1, c.C}),
                     c.branch ? branch.view({c.rows, 1, c.C}) : torch::Tensor(), w, b, 1e-5, c.rms, c.out, branch_bias);
    const torch::Tensor y = out.normed.view({c.rows, c.C});
    ASSERT_EQ(y.scalar_type(), c.out);
    torch::Tensor loss = (y.to(torch::kDouble) * upstream).sum();
    if (c.branch && c.sum_used) loss = loss + (out.sum.view({c.rows, c.C}).to(torch::kDouble) * sum_upstream).sum();
    loss.backward();

    torch::Tensor x64 = x.detach().to(torch::kDouble).requires_grad_(),
                  w64 = w.detach().to(torch::kDouble).requires_grad_();
    torch::Tensor b64 = c.bias ? b.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    torch::Tensor branch64 = c.branch ? branch.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    torch::Tensor branch_bias64 =
        c.branch_bias ? branch_bias.detach().to(torch::kDouble).requires_grad_() : torch::Tensor();
    torch::Tensor sum64 = c.branch ? x64 + branch64 : x64;
    if (c.branch_bias) sum64 = sum64 + branch_bias64;
    torch::Tensor ref_loss = (reference_norm(sum64, w64, b64, c.rms) * upstream).sum();
    if (c.branch && c.sum_used) ref_loss = ref_loss + (sum64 * sum_upstream).sum();
    ref_loss.backward();

    // float32 arithmetic, then one rounding to the output type.
    EXPECT_LT(relative_error(y.to(torch::kDouble), reference_norm(sum64, w64, b64, c.rms).detach()),
              c.out == torch::kFloat ? 1e-5 : 1e-2);
    if (c.x_grad) {
      EXPECT_LT(relative_error(x.grad().to(torch::kDouble), x64.grad()), 1e-4);
    } else {
      EXPECT_FALSE(x.grad().defined());
    }
    if (c.weight_grad) {
      EXPECT_LT(relative_error(w.grad().to(torch::kDouble), w64.grad()), 1e-5);
    } else {
      EXPECT_FALSE(w.grad().defined());
    }
    if (c.bias) EXPECT_LT(relative_error(b.grad().to(torch::kDouble), b64.grad()), 1e-5);
    if (c.branch) {
      EXPECT_LT(relative_error(out.sum.view({c.rows, c.C}).to(torch::kDouble), sum64.detach()), 1e-6);
      ASSERT_EQ(branch.grad().scalar_type(), *c.branch);
      EXPECT_LT(relative_error(branch.grad().to(torch::kDouble), branch64.grad()),
                *c.branch == torch::kFloat ? 1e-4 : 1e-2);
    }
    if (c.branch_bias) EXPECT_LT(relative_error(branch_bias.grad().to(torch::kDouble), branch_bias64.grad()), 1e-4);
  }
}

namespace {
// The activation in float64, as zoo's kernel differentiates it.
torch::Tensor reference_activation(DenseActivation act, const torch::Tensor& x) {
  switch (act) {
    case DenseActivation::gelu: return x * 0.5 * torch::erfc(-x / std::sqrt(2.0));
    case DenseActivation::gelu_tanh:
      return 0.5 * x * (1 + torch::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x.pow(3))));
    case DenseActivation::relu: return torch::relu(x);
    case DenseActivation::none: break;
  }
  return x;
}
}  // namespace

// The dense layer with each activation, with and without a bias, in float32
// and bfloat16 (LibTorch 1.13 has no float16 GEMM on the CPU), from float32 inputs (as under autocast) and from
// inputs already in that type; widths read in 16-byte groups (48: one
// tile; 2504: ten, the last part empty) and column by column (37: two); 1500 rows: several row chunks,
// each thread walking several rounds of rows. Against float64 on the same
// rounded x, w and b: the output, and every gradient.
TEST(CudaKernelsEmulated, DenseMatchesFloat64InValueAndGradients) {
  struct Case {
    DenseActivation act;
    bool bias;
    int64_t rows, out;
    torch::ScalarType compute;
    bool inputs_in_compute_type = false, weight_grad = true;
    int64_t padding = 0;
  };
  const std::vector<Case> cases = {
      {DenseActivation::gelu, true, 1500, 48, torch::kBFloat16},
      {DenseActivation::none, true, 1500, 48, torch::kBFloat16},
      {DenseActivation::gelu_tanh, true, 9, 37, torch::kFloat},
      {DenseActivation::relu, true, 150, 48, torch::kBFloat16},
      {DenseActivation::gelu, false, 150, 48, torch::kFloat},
      {DenseActivation::gelu, true, 9, 2504, torch::kBFloat16, /*inputs_in_compute_type=*/true},
      {DenseActivation::none, true, 9, 37, torch::kFloat, true},
      {DenseActivation::gelu, true, 150, 48, torch::kBFloat16, false, /*weight_grad=*/false},
      {DenseActivation::none, true, 150, 37, torch::kBFloat16, false, true, /*padding=*/11},
      {DenseActivation::none, false, 9, 40, torch::kFloat, false, true, /*padding=*/8},
  };
  const char* names[] = {"no activation", "GELU", "tanh-GELU", "ReLU"};
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(names[int(c.act)]) + (c.bias ? " with bias, " : ", ") + std::to_string(c.rows) + " x " +
                 std::to_string(c.out) + " in " + type_name(c.compute) +
                 (c.inputs_in_compute_type ? " (inputs in that type)" : " (float32 inputs)") +
                 (c.weight_grad ? "" : ", weight frozen") + ", padding " + std::to_string(c.padding));
    torch::manual_seed(25);
    const int64_t in = 24;
    const torch::ScalarType input_type = c.inputs_in_compute_type ? c.compute : torch::kFloat;
    torch::Tensor x = torch::randn({c.rows, in}).to(input_type).requires_grad_();
    torch::Tensor w = (torch::randn({c.out, in}) * 0.3).to(input_type).requires_grad_(c.weight_grad);
    torch::Tensor b = c.bias ? torch::randn({c.out}).to(input_type).requires_grad_() : torch::Tensor();
    // Over the padding too: its gradient must be dropped.
    const torch::Tensor upstream_all = torch::randn({c.rows, 1, c.out + c.padding}).to(c.compute).to(torch::kDouble);
    const torch::Tensor upstream = upstream_all.narrow(2, 0, c.out);

    const torch::Tensor y_all =
        dense_through(kEmulatedDense, x.view({c.rows, 1, in}), w, b, c.act, c.compute, c.padding);
    ASSERT_EQ(y_all.scalar_type(), c.compute);
    ASSERT_EQ(y_all.sizes(), (std::vector<int64_t>{c.rows, 1, c.out + c.padding}));
    y_all.to(torch::kDouble).backward(upstream_all);
    const torch::Tensor y = y_all.narrow(2, 0, c.out);
    if (c.padding > 0) {
      const torch::Tensor pad = y_all.narrow(2, c.out, c.padding).to(torch::kDouble);
      EXPECT_TRUE(torch::all(torch::isinf(pad) & (pad < 0)).item<bool>()) << "padding outputs are -inf";
    }

    auto rounded64 = [&](const torch::Tensor& t) {
      return t.detach().to(c.compute).to(torch::kDouble).requires_grad_(t.requires_grad());
    };
    torch::Tensor x64 = rounded64(x), w64 = rounded64(w), b64 = c.bias ? rounded64(b) : torch::Tensor();
    torch::Tensor pre64 = torch::matmul(x64, w64.t());
    if (c.bias) pre64 = pre64 + b64;
    const torch::Tensor ref = reference_activation(c.act, pre64).view({c.rows, 1, c.out});
    (ref * upstream).sum().backward();

    // The product rounded to the type, then the activation of that, rounded again.
    const double tolerance = c.compute == torch::kFloat ? 1e-5 : 2e-2;
    EXPECT_LT(relative_error(y.to(torch::kDouble), ref.detach()), tolerance);
    ASSERT_EQ(x.grad().scalar_type(), input_type);
    EXPECT_LT(relative_error(x.grad().to(torch::kDouble), x64.grad()), tolerance);
    if (c.weight_grad) {
      ASSERT_EQ(w.grad().scalar_type(), input_type);
      EXPECT_LT(relative_error(w.grad().to(torch::kDouble), w64.grad()), tolerance);
    } else {
      EXPECT_FALSE(w.grad().defined());
    }
    if (c.bias) {
      ASSERT_EQ(b.grad().scalar_type(), input_type);
      EXPECT_LT(relative_error(b.grad().to(torch::kDouble), b64.grad()), tolerance);
    }
  }
}

// q, k and v's heads from one node (dense_through_heads). Their gradients
// come back in whatever layout the consumer leaves them: head-major, as
// attention's kernels give them (a transpose of the heads' view), plain,
// leading dims permuted so that they fold into two levels of rows, or into
// three (copied first), or not at all (v unused: zeros); the kernel packs
// them for the GEMMs and sums the bias gradient from the same reads. Against
// float64: the heads and every gradient. 16-byte groups (head_dim 8 in
// bfloat16, 4 in float32) and single columns (head_dim 5); grouped kv heads;
// 600 rows: several chunks, several rounds of rows per thread.
TEST(CudaKernelsEmulated, DenseHeadsPackTheirGradientsWhereverTheyLie) {
  struct Case {
    std::vector<int64_t> lead;
    int64_t heads, kv_heads, head_dim;
    bool bias;
    torch::ScalarType compute;
    std::vector<int64_t> consumer_order;  // the permutation the heads are consumed in
    bool v_used = true;
  };
  const std::vector<Case> cases = {
      {{3, 200}, 4, 2, 8, true, torch::kBFloat16, {0, 2, 1, 3}},
      {{2, 40}, 3, 3, 5, true, torch::kFloat, {0, 2, 1, 3}},
      {{2, 40}, 2, 1, 4, false, torch::kFloat, {0, 1, 2, 3}},
      {{2, 30}, 2, 2, 8, true, torch::kBFloat16, {0, 2, 1, 3}, /*v_used=*/false},
      {{2, 3, 10}, 2, 1, 8, true, torch::kBFloat16, {2, 0, 1, 3, 4}},
      {{2, 3, 10}, 2, 1, 4, true, torch::kFloat, {1, 0, 2, 3, 4}},
  };
  for (const Case& c : cases) {
    const int64_t H = c.heads, G = c.kv_heads, D = c.head_dim, in = 16;
    std::string order;
    for (int64_t d : c.consumer_order) order += std::to_string(d);
    SCOPED_TRACE(std::to_string(H) + " heads, " + std::to_string(G) + " kv heads of " + std::to_string(D) + " in " +
                 type_name(c.compute) + (c.bias ? " with bias" : "") + ", consumed in order " + order +
                 (c.v_used ? "" : ", v unused"));
    torch::manual_seed(31);
    std::vector<int64_t> x_shape = c.lead;
    x_shape.push_back(in);
    torch::Tensor x = torch::randn(x_shape).requires_grad_();
    const std::vector<int64_t> splits = {H * D, G * D, G * D};
    std::vector<torch::Tensor> w, b;
    for (int64_t rows : splits) {
      w.push_back((torch::randn({rows, in}) * 0.3).requires_grad_());
      if (c.bias) b.push_back(torch::randn({rows}).requires_grad_());
    }
    const std::vector<torch::Tensor> heads = dense_through_heads(kEmulatedDense, x, w, b, c.compute, splits, D);
    ASSERT_EQ(heads.size(), 3u);

    // The same math in float64 on the rounded inputs.
    auto rounded64 = [&](const torch::Tensor& t) {
      return t.detach().to(c.compute).to(torch::kDouble).requires_grad_();
    };
    torch::Tensor x64 = rounded64(x);
    std::vector<torch::Tensor> w64, b64;
    for (const torch::Tensor& t : w) w64.push_back(rounded64(t));
    for (const torch::Tensor& t : b) b64.push_back(rounded64(t));
    torch::Tensor pre64 = torch::matmul(x64, torch::cat(w64).t());
    if (c.bias) pre64 = pre64 + torch::cat(b64);
    const std::vector<torch::Tensor> parts64 = pre64.split_with_sizes(splits, -1);

    torch::Tensor loss, loss64;
    for (size_t i = 0; i < heads.size(); ++i) {
      std::vector<int64_t> shape = c.lead;
      shape.insert(shape.end(), {splits[i] / D, D});
      ASSERT_EQ(heads[i].sizes(), shape) << "head " << i;
      ASSERT_EQ(heads[i].scalar_type(), c.compute);
      const torch::Tensor ref = parts64[i].view(shape);
      EXPECT_LT(relative_error(heads[i].to(torch::kDouble), ref.detach()), c.compute == torch::kFloat ? 1e-5 : 1e-2)
          << "head " << i;
      if (i == 2 && !c.v_used) continue;
      const torch::Tensor consumed = heads[i].permute(c.consumer_order);
      const torch::Tensor upstream = torch::randn(consumed.sizes()).to(c.compute);  // contiguous in that order
      const torch::Tensor term = (consumed * upstream).to(torch::kDouble).sum();
      const torch::Tensor term64 = (ref.permute(c.consumer_order) * upstream.to(torch::kDouble)).sum();
      loss = loss.defined() ? loss + term : term;
      loss64 = loss64.defined() ? loss64 + term64 : term64;
    }
    loss.backward();
    loss64.backward();
    const double tolerance = c.compute == torch::kFloat ? 1e-5 : 2e-2;
    EXPECT_LT(relative_error(x.grad().to(torch::kDouble), x64.grad()), tolerance);
    for (size_t i = 0; i < w.size(); ++i) {
      SCOPED_TRACE("part " + std::to_string(i));
      if (i == 2 && !c.v_used) {  // zeros, not garbage
        EXPECT_EQ(w[i].grad().abs().max().item<float>(), 0.0f);
        if (c.bias) EXPECT_EQ(b[i].grad().abs().max().item<float>(), 0.0f);
        continue;
      }
      EXPECT_LT(relative_error(w[i].grad().to(torch::kDouble), w64[i].grad()), tolerance);
      if (c.bias) {
        ASSERT_EQ(b[i].grad().scalar_type(), torch::kFloat);
        EXPECT_LT(relative_error(b[i].grad().to(torch::kDouble), b64[i].grad()), tolerance);
      }
    }
  }
}

// Bad splits are refused with what was expected.
TEST(CudaKernelsEmulated, DenseHeadsRefuseSplitsThatAreNotWholeHeads) {
  const torch::Tensor x = torch::randn({2, 3, 8}).requires_grad_();
  const std::vector<torch::Tensor> w = {torch::randn({12, 8}), torch::randn({12, 8})};
  try {
    dense_through_heads(kEmulatedDense, x, w, {}, torch::kFloat, {10, 14}, 4);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("split 10 is not a whole number of heads of 4"), std::string::npos)
        << e.what();
  }
  try {
    dense_through_heads(kEmulatedDense, x, w, {}, torch::kFloat, {12, 8}, 4);
    FAIL() << "expected an error";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("splits of 20 columns for 24 weight rows"), std::string::npos) << e.what();
  }
}

// The emulation itself: a __syncthreads that only some threads reach is an
// error, not a hang (on a GPU it is undefined behaviour).
namespace {
__global__ void half_the_block_waits(int* reached) {
  if (threadIdx.x < 32) __syncthreads();
  reached[threadIdx.x] = 1;
}
}  // namespace

TEST(CudaKernelsEmulated, ABarrierSomeThreadsNeverReachIsAnError) {
  std::vector<int> reached(64, 0);
  EXPECT_THROW(ZOO_LAUNCH(1, 64, nullptr, half_the_block_waits)(reached.data()), std::logic_error);
}

TEST(CudaKernels, TheRunsPolicyPicksWhichRun) {
  using Names = std::set<std::string>;
  const Names all = {"adam",      "cross_entropy", "cross_entropy_fused", "dense", "dense_heads",
                     "embedding", "norm",          "weight_copies"};
  EXPECT_EQ(zoo::models::parse_cuda_kernels("all"), all);
  EXPECT_EQ(zoo::models::parse_cuda_kernels("none"), Names{});
  EXPECT_EQ(zoo::cuda::enabled_kernels(nullptr), all) << "ZOO_CUDA_KERNELS unset: all";
  EXPECT_EQ(zoo::cuda::enabled_kernels("1"), all);
  EXPECT_EQ(zoo::cuda::enabled_kernels("0"), Names{});
  EXPECT_EQ(zoo::cuda::enabled_kernels("norm"), Names{"norm"});
  EXPECT_EQ(zoo::cuda::enabled_kernels("cross_entropy,norm"), (Names{"cross_entropy", "norm"}));
  try {
    zoo::cuda::enabled_kernels("norm,softmax");
    ADD_FAILURE() << "an unknown kernel name was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("ZOO_CUDA_KERNELS=norm,softmax: unknown kernel 'softmax' in 'norm,softmax' "
                                         "(expected all, none, or a comma list of: adam, cross_entropy, "
                                         "cross_entropy_fused, dense, dense_heads, embedding, norm, weight_copies)"),
              std::string::npos)
        << e.what();
  }
  // Read from the policy the runner sets for each run, not kept from the first call.
  {
    zoo::models::KernelPolicy only_norm = zoo::models::KernelPolicy::all();
    only_norm.cuda_kernels = {"norm"};
    zoo::models::ScopedKernelPolicy scoped(only_norm);
    EXPECT_TRUE(zoo::cuda::kernel_enabled("norm"));
    EXPECT_FALSE(zoo::cuda::kernel_enabled("dense"));
  }
  EXPECT_TRUE(zoo::cuda::kernel_enabled("dense"));
}

// Under autocast the decoder's norms hand the attention and FFN projections
// their input already in bfloat16: the same values the projections would
// have cast it to, so the loss and every gradient are bit for bit those of
// float32 norm outputs (CPU autocast here; on CUDA zoo's norm kernel writes
// the bfloat16 itself).
TEST(CudaKernels, NormsHandingMatmulsTheAutocastTypeLeaveAStepAsItWas) {
  Gpt2Options o;
  o.vocab_size = 64;
  o.hidden_size = 32;
  o.num_hidden_layers = 2;
  o.num_heads = 4;
  o.filter_size = 64;
  o.max_position_embeddings = 16;
  o.dropout_rate = 0.0;
  torch::manual_seed(23);
  Gpt2Model m(o, torch::TensorOptions());
  m.reset_parameters();
  const torch::Tensor ids = torch::randint(0, 64, {2, 16}, torch::kLong);
  const Features batch{{"input_ids", ids}, {"labels", ids.roll(-1, 1)}, {"attention_mask", torch::ones({2, 16})}};
  int handing_over = 0;
  for (LayerNormImpl* norm : norms_of(m)) handing_over += norm->autocast_output;
  EXPECT_EQ(handing_over, 4) << "norm1 and norm3 of both layers (not the final norm)";
  auto step = [&]() {
    m.zero_grad();
    torch::Tensor loss;
    {
      zoo::amp::AutocastGuard autocast(torch::kCPU, torch::kBFloat16);
      loss = m.forward(batch, false).loss;
    }
    loss.backward();
    std::map<std::string, torch::Tensor> grads;
    for (const auto& p : m.named_parameters()) grads[p.key()] = p.value().grad().clone();
    return std::pair{loss.item<double>(), grads};
  };
  auto [cast_loss, cast_grads] = step();
  for (LayerNormImpl* norm : norms_of(m)) norm->autocast_output = false;
  auto [plain_loss, plain_grads] = step();
  EXPECT_EQ(cast_loss, plain_loss);
  for (const auto& [name, g] : plain_grads) EXPECT_TRUE(torch::equal(cast_grads.at(name), g)) << name;
}
