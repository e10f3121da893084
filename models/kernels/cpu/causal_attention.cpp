// Implementation of models/kernels/cpu/causal_attention.h. Work is split over
// (batch, key/value head) pairs; each walks the query rows in blocks of
// kBlockRows, multiplying only the keys that block may see.
#include "models/kernels/cpu/causal_attention.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "models/kernels/cpu/cpu_gemm.h"
#include "models/kernels/cpu/cpu_kernels.h"
#include "models/kernels/cpu/vector_math.h"
#include "models/kernels/policy.h"

namespace zoo::models {

namespace {

constexpr int64_t kBlockRows = 64;  // query rows per block: small enough to skip most masked keys

// One (batch, head) pair's view of a (B, T, heads, D) tensor: row t at base + t * row_stride.
struct Rows {
  float* base;
  int64_t row_stride;
  float* row(int64_t t) const { return base + t * row_stride; }
};
Rows rows_of(const torch::Tensor& t, int64_t b, int64_t head) {
  return {t.data_ptr<float>() + b * t.stride(0) + head * t.stride(2), t.stride(1)};
}

struct Shape {
  int64_t B, T, H, G, D, window;
  float scale;
  float slope = 0;                 // this head's ALiBi slope (0: none)
  const int64_t* start = nullptr;  // packed rows: each query's sequence's first position in this row; null: 0
};

// The first key query `row` sees: its window's, or its sequence's first.
int64_t lowest_key(int64_t row, const Shape& sh) {
  int64_t lo = sh.window > 0 ? std::max<int64_t>(0, row - sh.window + 1) : 0;
  if (sh.start) lo = std::max(lo, sh.start[row]);
  return lo;
}

// Columns [lo, hi] of a block row are visible to query row `row`.
struct Visible {
  int64_t lo, hi;
};
Visible visible(int64_t row, int64_t first_key, const Shape& sh) {
  return {lowest_key(row, sh) - first_key, row - first_key};
}

// ALiBi: adds slope * (key - query position) to the m x n block of scores at (r0, c0).
ZOO_VECTOR_CLONES void add_alibi(float* s, int64_t ld, int64_t m, int64_t n, int64_t r0, int64_t c0, float slope) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = s + i * ld;
    const float first = slope * float(c0 - (r0 + i));
    for (int64_t j = 0; j < n; ++j) row[j] += first + slope * float(j);
  }
}

// Softmax of each row of s (m rows of n, row stride ld; only the visible
// columns count), the rest set to 0; lse[i] = log-sum-exp of row i.
ZOO_VECTOR_CLONES void softmax_rows(float* s, int64_t ld, int64_t m, int64_t n, int64_t r0, int64_t c0, const Shape& sh,
                                    float* lse) {
  for (int64_t i = 0; i < m; ++i) {
    float* row = s + i * ld;
    const Visible vis = visible(r0 + i, c0, sh);
    const float mx = max_of(row + vis.lo, vis.hi - vis.lo + 1);
    float sum = 0;
    for (int64_t j = vis.lo; j <= vis.hi; ++j) {
      row[j] = exp_nonpositive(row[j] - mx);
      sum += row[j];
    }
    const float inv = 1.0f / sum;
    for (int64_t j = 0; j < vis.lo; ++j) row[j] = 0;
    for (int64_t j = vis.lo; j <= vis.hi; ++j) row[j] *= inv;
    for (int64_t j = vis.hi + 1; j < n; ++j) row[j] = 0;
    lse[i] = mx + std::log(sum);
  }
}

// First key any row of the block [r0, r1) sees.
int64_t first_key(int64_t r0, int64_t r1, const Shape& sh) {
  if (!sh.start) return lowest_key(r0, sh);
  int64_t lo = r0;
  for (int64_t r = r0; r < r1; ++r) lo = std::min(lo, lowest_key(r, sh));
  return lo;
}

// A (T, T) matrix of one head, or a kBlockRows x T scratch buffer reused per block.
struct Probabilities {
  float* data;
  bool whole;  // the head's whole matrix: block (r0, c0) at data + r0 * T + c0
  float* block(int64_t r0, int64_t c0, int64_t T) const { return whole ? data + r0 * T + c0 : data; }
};

void forward_head(const Shape& sh, Rows q, Rows k, Rows v, Rows out, float* lse, Probabilities probs) {
  for (int64_t r0 = 0; r0 < sh.T; r0 += kBlockRows) {
    const int64_t m = std::min(kBlockRows, sh.T - r0), r1 = r0 + m, c0 = first_key(r0, r1, sh), n = r1 - c0;
    float* p = probs.block(r0, c0, sh.T);
    cpu_gemm(false, true, m, n, sh.D, sh.scale, q.row(r0), q.row_stride, k.row(c0), k.row_stride, 0, p, sh.T);
    if (sh.slope != 0) add_alibi(p, sh.T, m, n, r0, c0, sh.slope);
    softmax_rows(p, sh.T, m, n, r0, c0, sh, lse + r0);
    cpu_gemm(false, false, m, sh.D, n, 1, p, sh.T, v.row(c0), v.row_stride, 0, out.row(r0), out.row_stride);
  }
}

// Adds this head's share to dk, dv (its key/value head's gradients) and
// writes dq. With the forward's whole probability matrix it reads the blocks
// from there; otherwise it recomputes them into the scratch buffer from lse.
ZOO_VECTOR_CLONES void backward_head(const Shape& sh, Rows q, Rows k, Rows v, Rows out, Rows dout, const float* lse,
                                     Rows dq, Rows dk, Rows dv, Probabilities probs, float* dp) {
  for (int64_t r0 = 0; r0 < sh.T; r0 += kBlockRows) {
    const int64_t m = std::min(kBlockRows, sh.T - r0), r1 = r0 + m, c0 = first_key(r0, r1, sh), n = r1 - c0;
    float* p = probs.block(r0, c0, sh.T);
    if (!probs.whole) {
      cpu_gemm(false, true, m, n, sh.D, sh.scale, q.row(r0), q.row_stride, k.row(c0), k.row_stride, 0, p, sh.T);
      if (sh.slope != 0) add_alibi(p, sh.T, m, n, r0, c0, sh.slope);
    }
    cpu_gemm(false, true, m, n, sh.D, 1, dout.row(r0), dout.row_stride, v.row(c0), v.row_stride, 0, dp, sh.T);
    for (int64_t i = 0; i < m; ++i) {
      float* pr = p + i * sh.T;
      float* dpr = dp + i * sh.T;
      const float* o = out.row(r0 + i);
      const float* dor = dout.row(r0 + i);
      float delta = 0;  // sum_j P_ij dP_ij = dout_i . out_i
      for (int64_t d = 0; d < sh.D; ++d) delta += o[d] * dor[d];
      const Visible vis = visible(r0 + i, c0, sh);
      if (!probs.whole) {
        const float l = lse[r0 + i];
        for (int64_t j = 0; j < vis.lo; ++j) pr[j] = 0;
        for (int64_t j = vis.lo; j <= vis.hi; ++j) pr[j] = exp_nonpositive(pr[j] - l);
        for (int64_t j = vis.hi + 1; j < n; ++j) pr[j] = 0;
      }
      for (int64_t j = 0; j < n; ++j) dpr[j] = pr[j] * (dpr[j] - delta);  // dS; 0 where P is
    }
    cpu_gemm(true, false, n, sh.D, m, 1, p, sh.T, dout.row(r0), dout.row_stride, 1, dv.row(c0), dv.row_stride);
    cpu_gemm(false, false, m, sh.D, n, sh.scale, dp, sh.T, k.row(c0), k.row_stride, 0, dq.row(r0), dq.row_stride);
    cpu_gemm(true, false, n, sh.D, m, sh.scale, dp, sh.T, q.row(r0), q.row_stride, 1, dk.row(c0), dk.row_stride);
  }
}

// OpenBLAS would start its own threads inside ours; run it single-threaded
// while the heads are spread over LibTorch's threads.
class SingleThreadedBlas {
 public:
  SingleThreadedBlas() {
    static auto get = reinterpret_cast<int (*)()>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
    static auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"));
    if (get && set && at::get_num_threads() > 1 && (saved_ = get()) > 1) {
      set_ = set;
      set_(1);
    }
  }
  ~SingleThreadedBlas() {
    if (set_) set_(saved_);
  }

 private:
  void (*set_)(int) = nullptr;
  int saved_ = 0;
};

// Runs fn(b, g, buffers) for each (batch, key/value head) pair, across
// threads when there is enough work: for less, waking LibTorch's threads
// (which then spin) beside OpenBLAS's costs more than it saves.
template <typename Fn>
void for_each_kv_head(const Shape& sh, int buffers, Fn fn) {
  constexpr int64_t kWorkPerTask = int64_t{1} << 24;  // multiply-adds: enough to outweigh a task's start
  const int64_t pairs = sh.B * sh.G, work_per_pair = (sh.H / sh.G) * sh.T * sh.T * sh.D;
  const int64_t grain = std::max<int64_t>(1, kWorkPerTask / std::max<int64_t>(work_per_pair, 1));
  std::optional<SingleThreadedBlas> blas;
  if (pairs > grain && at::get_num_threads() > 1) blas.emplace();
  at::parallel_for(0, pairs, grain, [&](int64_t begin, int64_t end) {
    std::vector<std::vector<float>> buf(buffers, std::vector<float>(std::min(kBlockRows, sh.T) * sh.T));
    for (int64_t i = begin; i < end; ++i) fn(i / sh.G, i % sh.G, buf);
  });
}

// Head (b, h)'s whole matrix in `probs` (B, H, T, T) when defined, else the scratch buffer.
Probabilities head_probabilities(const torch::Tensor& probs, int64_t b, int64_t h, std::vector<float>& scratch) {
  if (!probs.defined()) return {scratch.data(), false};
  return {probs.data_ptr<float>() + (b * probs.size(1) + h) * probs.size(2) * probs.size(3), true};
}

// The packed (B, T, (H + 2G) D) projection output seen as q, k, v: (B, T, heads, D) views.
struct Packed {
  torch::Tensor q, k, v;
};
Packed unpack(const torch::Tensor& qkv, int64_t H, int64_t G) {
  const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(2) / (H + 2 * G);
  auto heads = [&](int64_t first, int64_t n) { return qkv.narrow(2, first * D, n * D).view({B, T, n, D}); };
  return {heads(0, H), heads(H, G), heads(H + G, G)};
}

// sh for query head `head` of batch row b.
Shape for_head(Shape sh, const std::vector<double>& slopes, const torch::Tensor& starts, int64_t b, int64_t head) {
  if (!slopes.empty()) sh.slope = float(slopes[static_cast<size_t>(head)]);
  if (starts.numel() > 0) sh.start = starts.data_ptr<int64_t>() + b * sh.T;
  return sh;
}

class CausalAttentionFunction : public torch::autograd::Function<CausalAttentionFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor qkv, int64_t H, int64_t G,
                               double scale, int64_t window, std::vector<double> slopes, torch::Tensor starts) {
    const Packed in = unpack(qkv, H, G);
    const Shape sh{qkv.size(0), qkv.size(1), H, G, in.q.size(3), window, float(scale)};
    torch::Tensor out = torch::empty({sh.B, sh.T, sh.H, sh.D}, qkv.options());
    torch::Tensor lse = torch::empty({sh.B, sh.H, sh.T}, qkv.options());
    // Keep the probabilities for the backward while they are no bigger than
    // twice the q/k/v activations (T <= 6 D): it then skips recomputing them.
    // Longer sequences recompute them block by block from lse instead.
    torch::Tensor probs;
    if (sh.T <= 6 * sh.D) probs = torch::empty({sh.B, sh.H, sh.T, sh.T}, qkv.options());
    const int64_t per_group = sh.H / sh.G;
    for_each_kv_head(sh, 1, [&](int64_t b, int64_t g, std::vector<std::vector<float>>& buf) {
      for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h)
        forward_head(for_head(sh, slopes, starts, b, h), rows_of(in.q, b, h), rows_of(in.k, b, g), rows_of(in.v, b, g),
                     rows_of(out, b, h), lse.data_ptr<float>() + (b * sh.H + h) * sh.T,
                     head_probabilities(probs, b, h, buf[0]));
    });
    ctx->save_for_backward({qkv, out, lse, probs, starts});
    ctx->saved_data["shape"] = std::vector<int64_t>{H, G, window};
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["slopes"] = slopes;
    return out;
  }

  // The gradient of the packed input, its q, k and v parts written in place.
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &qkv = saved[0], &out = saved[1], &lse = saved[2], &probs = saved[3], &starts = saved[4];
    const std::vector<int64_t> hg = ctx->saved_data["shape"].toIntVector();
    const Packed in = unpack(qkv, hg[0], hg[1]);
    const Shape sh{
        qkv.size(0), qkv.size(1), hg[0], hg[1], in.q.size(3), hg[2], float(ctx->saved_data["scale"].toDouble())};
    torch::Tensor dout = grads[0].contiguous();
    torch::Tensor dqkv = torch::empty_like(qkv, at::MemoryFormat::Contiguous);
    const Packed d = unpack(dqkv, sh.H, sh.G);
    const std::vector<double> slopes = ctx->saved_data["slopes"].toDoubleVector();
    const int64_t per_group = sh.H / sh.G;
    for_each_kv_head(sh, 2, [&](int64_t b, int64_t g, std::vector<std::vector<float>>& buf) {
      const Rows dk = rows_of(d.k, b, g), dv = rows_of(d.v, b, g);
      for (int64_t t = 0; t < sh.T; ++t) {  // the heads of this group add into these
        std::fill_n(dk.row(t), sh.D, 0.0f);
        std::fill_n(dv.row(t), sh.D, 0.0f);
      }
      for (int64_t h = g * per_group; h < (g + 1) * per_group; ++h)
        backward_head(for_head(sh, slopes, starts, b, h), rows_of(in.q, b, h), rows_of(in.k, b, g), rows_of(in.v, b, g),
                      rows_of(out, b, h), rows_of(dout, b, h), lse.data_ptr<float>() + (b * sh.H + h) * sh.T,
                      rows_of(d.q, b, h), dk, dv, head_probabilities(probs, b, h, buf[0]), buf[1].data());
    });
    return {dqkv, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};

}  // namespace

bool causal_attention_available(const torch::Tensor& q) {
  return kernel_policy().cpu_kernels && is_cpu_float32(q) && cpu_gemm_available();
}

torch::Tensor causal_attention(const torch::Tensor& qkv, int64_t num_heads, int64_t num_kv_heads, double scale,
                               int64_t window, const std::vector<double>& alibi_slopes,
                               const torch::Tensor& sequence_start) {
  TORCH_CHECK(qkv.dim() == 3 && num_kv_heads > 0 && num_heads % num_kv_heads == 0 &&
                  qkv.size(2) % (num_heads + 2 * num_kv_heads) == 0 && qkv.stride(2) == 1,
              "causal_attention: expected qkv (B, T, (H + 2G) D) with G dividing H, dense in its last dim");
  TORCH_CHECK(alibi_slopes.empty() || static_cast<int64_t>(alibi_slopes.size()) == num_heads,
              "causal_attention: expected one ALiBi slope per query head");
  torch::Tensor starts = torch::empty({0}, torch::kLong);  // none (autograd's apply takes no undefined tensor)
  if (sequence_start.defined()) {
    const int64_t B = qkv.size(0), T = qkv.size(1);
    TORCH_CHECK(sequence_start.dim() == 2 && sequence_start.size(0) == B && sequence_start.size(1) == T,
                "causal_attention: expected sequence_start (B, T)");
    starts = sequence_start.to(torch::kCPU, torch::kLong).contiguous();
    // Each query's sequence starts at or before it: the kernel indexes keys from there.
    TORCH_CHECK(((starts >= 0) & (starts <= torch::arange(T, starts.options()))).all().item<bool>(),
                "causal_attention: a sequence_start lies outside 0 .. its own position");
  }
  return CausalAttentionFunction::apply(qkv, num_heads, num_kv_heads, scale, window, alibi_slopes, starts);
}

}  // namespace zoo::models
