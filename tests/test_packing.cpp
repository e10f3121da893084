// Rows that pack several sequences (modelzoo's variable sequence length):
// each sequence in a packed row gets the logits, per-token losses and, in a
// training step, the gradients it gets alone, for every kind of position
// (learned, rotary with Llama 3's scaling, ALiBi) and attention (grouped
// keys, a sliding window), down every attention path: the reference, zoo's
// CPU kernel and the CUDA path's host code on the emulated kernels. Then the
// CPU kernel alone on rows longer than its blocks.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "models/common/attention.h"
#include "models/fusion.h"
#include "models/gpt2/gpt2.h"
#include "models/kernels/cpu/causal_attention.h"
#include "models/kernels/cpu/cpu_gemm.h"
#include "models/kernels/policy.h"
#include "models/kernels/torch_version.h"
#include "tests/decoder_cases.h"
#include "tests/emulated_kernels.h"
#include "tests/tensor_compare.h"
#include "tests/test_util.h"

using namespace zoo;
using zoo::models::KernelPolicy;
using zoo::models::ScopedKernelPolicy;
using zoo::testing::relative_error;

namespace {

constexpr int64_t kVocab = 61, kLength = 12;

// One packed sequence: its tokens, labels and loss mask, and where it sits.
struct Sequence {
  torch::Tensor ids, labels, mask;  // (L) int64
  int64_t row, column;
};

struct PackedData {
  std::vector<Sequence> sequences;
  models::Features packed;    // rows of kLength holding the sequences side by side, padding after
  models::Features unpacked;  // one sequence per row, padded to kLength
};

// Rows packing sequences of these lengths (each row's adding up to at most kLength).
PackedData pack(const std::vector<std::vector<int64_t>>& rows) {
  PackedData d;
  const int64_t R = static_cast<int64_t>(rows.size());
  auto zeros = [](int64_t n) { return torch::zeros({n, kLength}, torch::kLong); };
  d.packed = {{"input_ids", zeros(R)},
              {"labels", zeros(R)},
              {"attention_mask", zeros(R)},
              {"attention_span", zeros(R)},
              {"position_ids", zeros(R)}};
  for (int64_t r = 0; r < R; ++r) {
    int64_t column = 0;
    for (int64_t L : rows[r]) {
      Sequence s{torch::randint(0, kVocab, {L}, torch::kLong), torch::randint(0, kVocab, {L}, torch::kLong),
                 torch::randint(0, 2, {L}, torch::kLong), r, column};
      s.mask[L - 1] = 1;  // at least one label counts
      d.packed["input_ids"][r].narrow(0, column, L).copy_(s.ids);
      d.packed["labels"][r].narrow(0, column, L).copy_(s.labels);
      d.packed["attention_mask"][r].narrow(0, column, L).copy_(s.mask);
      d.packed["attention_span"][r].narrow(0, column, L).copy_(torch::arange(L - 1, -1, -1, torch::kLong));
      d.packed["position_ids"][r].narrow(0, column, L).copy_(torch::arange(L, torch::kLong));
      d.sequences.push_back(s);
      column += L;
    }
  }
  const int64_t n = static_cast<int64_t>(d.sequences.size());
  d.unpacked = {{"input_ids", zeros(n)}, {"labels", zeros(n)}, {"attention_mask", zeros(n)}};
  for (int64_t i = 0; i < n; ++i) {
    const Sequence& s = d.sequences[i];
    d.unpacked["input_ids"][i].narrow(0, 0, s.ids.size(0)).copy_(s.ids);
    d.unpacked["labels"][i].narrow(0, 0, s.ids.size(0)).copy_(s.labels);
    d.unpacked["attention_mask"][i].narrow(0, 0, s.ids.size(0)).copy_(s.mask);
  }
  return d;
}

struct Path {
  std::string name;
  KernelPolicy policy;
};

std::vector<Path> attention_paths() {
  KernelPolicy emulated = KernelPolicy::all();
  emulated.cpu_kernels = false;
  emulated.emulated_cuda = &zoo::testing::kEmulatedCuda;
  return {{"reference", KernelPolicy::reference()},
          {"zoo's CPU kernels", KernelPolicy::all()},
          {"the CUDA path on the emulated kernels", emulated}};
}

std::map<std::string, torch::Tensor> gradients(models::Model& model, const models::Features& batch) {
  model.zero_grad();
  model.forward(batch, false).loss.backward();
  std::map<std::string, torch::Tensor> g;
  for (const auto& p : model.named_parameters())
    if (p.value().grad().defined()) g[p.key()] = p.value().grad().clone();
  return g;
}

// Per-token negative log-likelihood of `labels` under logits (L, V).
torch::Tensor token_nll(const torch::Tensor& logits, const torch::Tensor& labels) {
  return -torch::log_softmax(logits.to(torch::kDouble), -1).gather(-1, labels.unsqueeze(-1)).squeeze(-1);
}

void expect_sequences_kept_apart(const std::string& name, const std::string& model_lines) {
  // Row 0 packs three sequences, row 1 two and padding; the 6- and 7-long
  // ones reach past the llama case's 5-token window.
  torch::manual_seed(11);
  const PackedData d = pack({{5, 4, 3}, {7, 4}});
  const Params params = zoo::testing::decoder_params(model_lines, kVocab, kLength);
  for (const Path& path : attention_paths()) {
    SCOPED_TRACE(name + " on " + path.name);
    ScopedKernelPolicy scoped(path.policy);
    torch::manual_seed(5);
    const std::shared_ptr<models::Model> built = params.model->build(torch::TensorOptions());
    models::apply_fusion(*built);
    auto& model = dynamic_cast<models::Gpt2Model&>(*built);
    {
      torch::NoGradGuard no_grad;
      const torch::Tensor packed =
          model.padded_logits(d.packed.at("input_ids"), d.packed.at("position_ids")).narrow(-1, 0, kVocab);
      const torch::Tensor unaware = model.padded_logits(d.packed.at("input_ids")).narrow(-1, 0, kVocab);
      double apart = 0;
      for (const Sequence& s : d.sequences) {
        const int64_t L = s.ids.size(0);
        const torch::Tensor alone = model.padded_logits(s.ids.unsqueeze(0)).narrow(-1, 0, kVocab)[0];
        const torch::Tensor together = packed[s.row].narrow(0, s.column, L);
        EXPECT_LT(relative_error(together, alone), 1e-5) << "sequence at row " << s.row << ", column " << s.column;
        EXPECT_LT((token_nll(together, s.labels) - token_nll(alone, s.labels)).abs().max().item<double>(), 1e-5);
        if (s.column > 0) apart = std::max(apart, relative_error(unaware[s.row].narrow(0, s.column, L), alone));
      }
      EXPECT_GT(apart, 1e-3) << "without position_ids the later sequences see the earlier ones";
    }
    const auto packed = gradients(model, d.packed), unpacked = gradients(model, d.unpacked);
    ASSERT_EQ(packed.size(), unpacked.size());
    double largest = 0;
    for (const auto& [key, g] : unpacked) largest = std::max(largest, g.abs().max().item<double>());
    for (const auto& [key, g] : unpacked)
      EXPECT_LT((packed.at(key) - g).abs().max().item<double>(), 1e-5 * largest) << key;
  }
}

}  // namespace

TEST(Packing, EachPackedSequenceGetsItsLogitsLossesAndGradientsAloneOnEveryPath) {
  const auto& cases = zoo::testing::kDecoderCases;
  for (const auto& c : cases) expect_sequences_kept_apart(c.name, c.model);
  expect_sequences_kept_apart("llama: Llama 3.1's rotary scaling",
                              cases[1].model +
                                  "  pos_scaling_type: llama3\n  pos_scaling_factor: 8.0\n"
                                  "  pos_scaling_extra_args: {original_max_position_embeddings: 8}\n");
}

// The CPU kernel against the reference attention on rows longer than its
// 64-row blocks, sequences crossing block edges, with and without a window
// and ALiBi, keeping the whole probability matrix (D 32) or recomputing it (D 8).
TEST(Packing, TheCpuKernelKeepsSequencesApartAcrossItsBlocks) {
  if (!models::cpu_gemm_available()) GTEST_SKIP() << "no CPU GEMM for zoo's kernel";
  ScopedKernelPolicy scoped(KernelPolicy::all());
  const int64_t B = 2, T = 150, H = 4, G = 2;
  // Sequences of 30, 70 and 50 in row 0; 100, then padding (each its own sequence) in row 1.
  torch::Tensor positions = torch::zeros({B, T}, torch::kLong);
  positions[0].narrow(0, 0, 30).copy_(torch::arange(30));
  positions[0].narrow(0, 30, 70).copy_(torch::arange(70));
  positions[0].narrow(0, 100, 50).copy_(torch::arange(50));
  positions[1].narrow(0, 0, 100).copy_(torch::arange(100));
  const torch::Tensor starts = models::sequence_starts(positions);
  for (const int64_t D : {32, 8})
    for (const int64_t window : {0, 40})
      for (const bool alibi : {false, true}) {
        SCOPED_TRACE("D " + std::to_string(D) + ", window " + std::to_string(window) + (alibi ? ", ALiBi" : ""));
        torch::manual_seed(3);
        const torch::Tensor qkv = torch::randn({B, T, (H + 2 * G) * D}).requires_grad_();
        const std::vector<double> slopes =
            alibi ? std::vector<double>{0.5, 0.25, 0.125, 0.0625} : std::vector<double>{};
        const torch::Tensor fused = models::causal_attention(qkv, H, G, 0.3, window, slopes, starts);
        models::ScoreOptions o;
        o.scale = 0.3;
        o.sliding_window = window;
        o.sequence_start = starts;
        if (alibi) o.alibi_slopes = torch::tensor(slopes, torch::kFloat);
        auto heads = [&](int64_t first, int64_t n) {
          return qkv.narrow(2, first * D, n * D).view({B, T, n, D}).transpose(1, 2);
        };
        const torch::Tensor reference =
            models::reference_attention(heads(0, H), heads(H, G), heads(H + G, G), o).transpose(1, 2);  // (B, T, H, D)
        EXPECT_LT(relative_error(fused, reference), 1e-5);
        const torch::Tensor dout = torch::randn_like(fused);
        const torch::Tensor g_fused = torch::autograd::grad({fused}, {qkv}, {dout})[0];
        const torch::Tensor g_reference = torch::autograd::grad({reference}, {qkv}, {dout})[0];
        EXPECT_LT(relative_error(g_fused, g_reference), 1e-5);
      }
  // A start past its own position would read keys the kernel never wrote.
  torch::Tensor bad = starts.clone();
  bad[0][5] = 6;
  EXPECT_THROW(models::causal_attention(torch::randn({B, T, (H + 2 * G) * 8}), H, G, 0.3, 0, {}, bad), c10::Error);
}
