// Implementation of models/kernels/cuda/norm.h, in float32 arithmetic.
// Forward: one warp per row (rows up to 4096 wide, a multiple of 4, on 16
// bytes: what models have), reading 16 bytes a lane per access and summing by
// shuffles; else one thread block per row. Either reads the row from memory
// once and keeps it in registers (block: rows up to 8192 wide; wider ones are
// read again from cache) for each further pass (mean, variance, output).
// Backward: as many blocks as the GPU holds at once, each taking every
// gridDim.x-th row (rows up to 2048 wide: each warp every (gridDim.x * 8)-th,
// as the forward's warps) and adding up the weight and bias gradients of its
// rows as it goes; the caller adds up the blocks' sums.
#include <algorithm>

#include "models/kernels/cuda/device_common.cuh"
#include "models/kernels/cuda/norm.h"

namespace zoo::cuda {
namespace {

constexpr int kNormThreads = 256;
constexpr int kTileColumns = 32, kTileRows = 8;
// At most this many blocks, each summing its own rows' weight gradients:
// more than any current GPU holds at once (an H100: 132 SMs x 6 blocks).
// Rows too wide for that are summed by tiles of columns in kTiledChunks
// chunks of rows.
constexpr int64_t kMaxChunks = 2048, kTiledChunks = 256;
// The forward's warp-per-row kernel: kRowsPerBlock rows a block, rows up to
// kMaxWarpColumns wide (LLaMA-7B's 4096).
constexpr int kRowsPerBlock = kNormThreads / 32;
constexpr int64_t kMaxWarpColumns = 32 * 4 * 32;
// The backward's (its lanes also hold the weight and bias gradient sums): 1.3B's 2048.
constexpr int64_t kMaxWarpBackwardColumns = 32 * 4 * 16;
// ... and with dx's column sums as well, a third set of registers: 768
// (GPT-2 small's width: its registers still leave two blocks per
// multiprocessor, as without them; 1024 would leave one).
constexpr int64_t kMaxWarpBranchSumColumns = 32 * 4 * 6;
// Rows up to kNormThreads * kMaxRegisterColumns wide keep their values
// (forward) and weight and bias gradient sums (backward) in registers
// (8192: LLaMA-70B's width).
constexpr int kMaxRegisterColumns = 32;

// Calls launch(std::integral_constant<int, K>{}) with the smallest K of
// 4, 8, 16, 32 that covers each thread's columns of a row of C, or K = 0
// beyond that.
template <typename Launch>
void with_register_columns(int64_t C, Launch&& launch) {
  const int64_t per_thread = (C + kNormThreads - 1) / kNormThreads;
  if (per_thread <= 4) return launch(std::integral_constant<int, 4>{});
  if (per_thread <= 8) return launch(std::integral_constant<int, 8>{});
  if (per_thread <= 16) return launch(std::integral_constant<int, 16>{});
  if (per_thread <= kMaxRegisterColumns) return launch(std::integral_constant<int, kMaxRegisterColumns>{});
  launch(std::integral_constant<int, 0>{});
}

// Calls launch(std::integral_constant<int, K>{}) with the smallest K of 2, 4,
// 6, 8, 16, 32 for which a warp's 128 K columns cover a row of C <=
// kMaxWarpColumns (6: 768, GPT-2 small's width, in fewer registers than 8).
template <typename Launch>
void with_warp_iterations(int64_t C, Launch&& launch) {
  const int64_t iterations = (C + 127) / 128;
  if (iterations <= 2) return launch(std::integral_constant<int, 2>{});
  if (iterations <= 4) return launch(std::integral_constant<int, 4>{});
  if (iterations <= 6) return launch(std::integral_constant<int, 6>{});
  if (iterations <= 8) return launch(std::integral_constant<int, 8>{});
  if (iterations <= 16) return launch(std::integral_constant<int, 16>{});
  launch(std::integral_constant<int, 32>{});
}

// Calls visit(j, k) for this thread's columns j of a row of C. kCols > 0:
// j = threadIdx.x + k * kNormThreads for k < kCols, unrolled, so that arrays
// the caller indexes by k stay in registers; kCols = 0: every
// kNormThreads-th column from threadIdx.x, with k = 0.
template <int kCols, typename Visit>
__device__ __forceinline__ void for_row_columns(int64_t C, Visit visit) {
  if constexpr (kCols > 0) {
#pragma unroll
    for (int k = 0; k < kCols; ++k) {
      const int64_t j = threadIdx.x + int64_t(k) * kNormThreads;
      if (j < C) visit(j, k);
    }
  } else {
    for (int64_t j = threadIdx.x; j < C; j += kNormThreads) visit(j, 0);
  }
}

// The warp kernels' for_row_columns: calls visit(c, k) for this lane's
// groups of 4 columns c = (k * 32 + lane) * 4 of a row of C, k < kIters,
// unrolled, so that arrays the caller indexes by k stay in registers.
template <int kIters, typename Visit>
__device__ __forceinline__ void for_lane_groups(int64_t C, Visit visit) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int k = 0; k < kIters; ++k) {
    const int64_t c = (int64_t(k) * 32 + lane) * 4;
    if (c < C) visit(c, k);
  }
}

// With a branch: h = x + branch (+ branch_bias, when set) is written to
// `sum` and normalized. kCols > 0: each thread keeps its columns of h in
// registers between the passes; kCols = 0 (wider rows): it reads them again,
// from cache.
template <typename TB, typename TY, int kCols>
__global__ void __launch_bounds__(kNormThreads)
    normalize_rows(const float* __restrict__ x, const TB* __restrict__ branch, const float* __restrict__ branch_bias,
                   float* __restrict__ sum, const float* __restrict__ w, const float* __restrict__ b, int64_t C,
                   float eps, bool rms, TY* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd) {
  __shared__ float shared[kNormThreads / 32 + 1];
  const int64_t r = blockIdx.x;
  const float* hr = x + r * C;
  TY* yr = y + r * C;
  float held[kCols > 0 ? kCols : 1];
  float s = 0.f;
  for_row_columns<kCols>(C, [&](int64_t j, int k) {
    float h = hr[j];
    if (branch) {
      h += to_float(branch[r * C + j]);
      if (branch_bias) h += branch_bias[j];
      sum[r * C + j] = h;
    }
    if constexpr (kCols > 0) held[k] = h;
    s += h;
  });
  if (branch) hr = sum + r * C;  // each thread reads back only what it wrote
  auto h_at = [&](int64_t j, int k) {
    if constexpr (kCols > 0) {
      return held[k];
    } else {
      return hr[j];
    }
  };
  // rms is uniform across the block, as block_sum's barriers need.
  const float m = rms ? 0.f : block_sum<kNormThreads>(s, shared) / float(C);
  float ss = 0.f;
  for_row_columns<kCols>(C, [&](int64_t j, int k) {
    const float d = h_at(j, k) - m;
    ss += d * d;
  });
  const float inv = rsqrtf(block_sum<kNormThreads>(ss, shared) / float(C) + eps);
  for_row_columns<kCols>(C, [&](int64_t j, int k) {
    const float v = (h_at(j, k) - m) * inv * w[j];
    yr[j] = from_float<TY>(b ? v + b[j] : v);
  });
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = inv;
  }
}

// Rows up to kMaxWarpColumns wide, a multiple of 4, start on 16 bytes: one
// warp per row (kRowsPerBlock rows a block), each lane reading 4 adjacent
// columns per access (16 bytes of float32) and keeping them in registers,
// its sums made by shuffles alone, with no block barrier between the passes.
// kIters accesses per lane cover 128 kIters columns.
template <typename TB, typename TY, int kIters>
__global__ void __launch_bounds__(kNormThreads)
    normalize_rows_by_warp(const float* __restrict__ x, const TB* __restrict__ branch,
                           const float* __restrict__ branch_bias, float* __restrict__ sum, const float* __restrict__ w,
                           const float* __restrict__ b, int64_t rows, int64_t C, float eps, bool rms,
                           TY* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd) {
  using Floats = Group<float, 4>;
  const int lane = threadIdx.x % 32;
  const int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp: this kernel has no block barrier
  float held[kIters][4];
  float s = 0.f;
  for_lane_groups<kIters>(C, [&](int64_t c, int k) {
    Floats h = *reinterpret_cast<const Floats*>(x + r * C + c);
    if (branch) {
      const Group<TB, 4> add = *reinterpret_cast<const Group<TB, 4>*>(branch + r * C + c);
      for (int e = 0; e < 4; ++e) h.v[e] += to_float(add.v[e]);
      if (branch_bias) {
        const Floats bias = *reinterpret_cast<const Floats*>(branch_bias + c);
        for (int e = 0; e < 4; ++e) h.v[e] += bias.v[e];
      }
      *reinterpret_cast<Floats*>(sum + r * C + c) = h;
    }
    for (int e = 0; e < 4; ++e) held[k][e] = h.v[e], s += h.v[e];
  });
  const float m = rms ? 0.f : warp_all_sum(s) / float(C);
  float ss = 0.f;
  for_lane_groups<kIters>(C, [&](int64_t, int k) {
    for (int e = 0; e < 4; ++e) ss += (held[k][e] - m) * (held[k][e] - m);
  });
  const float inv = rsqrtf(warp_all_sum(ss) / float(C) + eps);
  for_lane_groups<kIters>(C, [&](int64_t c, int k) {
    const Floats wk = *reinterpret_cast<const Floats*>(w + c);
    Floats bk{};
    if (b) bk = *reinterpret_cast<const Floats*>(b + c);
    Group<TY, 4> out;
    for (int e = 0; e < 4; ++e) out.v[e] = from_float<TY>((held[k][e] - m) * inv * wk.v[e] + bk.v[e]);
    *reinterpret_cast<Group<TY, 4>*>(y + r * C + c) = out;
  });
  if (lane == 0) {
    mean[r] = m;
    rstd[r] = inv;
  }
}

// Each block takes every gridDim.x-th row (its chunk), row by row. x is the
// normalized input (the sum, with a branch). Where dx is set: the input
// gradient, residual_grad (the gradient reaching x from elsewhere) added in,
// and branch_grad, when set, a copy of it in the branch's type. Where
// dw_partial is set (kCols > 0: each thread's columns tid + k * kNormThreads,
// k < kCols), the chunk's column sums of dy * xhat and of dy (db_partial,
// when set) are kept in registers and written once, from the same reads of
// x and dy.
template <typename TD, typename TB, int kCols>
__global__ void __launch_bounds__(kNormThreads)
    backward_rows(const float* __restrict__ x, const float* __restrict__ w, const TD* __restrict__ dy,
                  const float* __restrict__ residual_grad, const float* __restrict__ mean,
                  const float* __restrict__ rstd, int64_t rows, int64_t C, bool rms, float* __restrict__ dx,
                  TB* __restrict__ branch_grad, float* __restrict__ dw_partial, float* __restrict__ db_partial) {
  __shared__ float shared[kNormThreads / 32 + 1];
  constexpr int kSums = kCols > 0 ? kCols : 1;
  float sum_w[kSums], sum_b[kSums];
  for (int k = 0; k < kSums; ++k) sum_w[k] = sum_b[k] = 0.f;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float* xr = x + r * C;
    const TD* dyr = dy + r * C;
    const float m = mean[r], inv = rstd[r];
    float mean_g = 0.f, mean_gx = 0.f;
    if (dx) {  // uniform across the block, as block_sum's barriers need
      float g_total = 0.f, gx_total = 0.f;
      for (int64_t j = threadIdx.x; j < C; j += kNormThreads) {
        const float g = to_float(dyr[j]) * w[j];
        g_total += g;
        gx_total += g * (xr[j] - m) * inv;
      }
      mean_gx = block_sum<kNormThreads>(gx_total, shared) / float(C);
      mean_g = rms ? 0.f : block_sum<kNormThreads>(g_total, shared) / float(C);
    }
    auto column = [&](int64_t j, int k) {
      const float d_y = to_float(dyr[j]), xhat = (xr[j] - m) * inv;
      if (dx) {
        float d = inv * (d_y * w[j] - mean_g - xhat * mean_gx);
        if (residual_grad) d += residual_grad[r * C + j];
        dx[r * C + j] = d;
        if (branch_grad) branch_grad[r * C + j] = from_float<TB>(d);
      }
      if (kCols > 0 && dw_partial) {
        sum_w[k] += d_y * xhat;
        sum_b[k] += d_y;
      }
    };
    for_row_columns<kCols>(C, column);
  }
  if (kCols > 0 && dw_partial) {
#pragma unroll
    for (int k = 0; k < kSums; ++k) {
      const int64_t j = threadIdx.x + int64_t(k) * kNormThreads;
      if (j >= C) break;
      dw_partial[blockIdx.x * C + j] = sum_w[k];
      if (db_partial) db_partial[blockIdx.x * C + j] = sum_b[k];
    }
  }
}

// The backward with one warp per row, for rows up to kMaxWarpBackwardColumns
// wide that normalize_rows_by_warp takes: each block's warps take every
// (gridDim.x * kRowsPerBlock)-th row, a lane 4 adjacent columns per access
// (its second pass over the row finds it in cache), the row's two means made
// by shuffles. Each lane keeps its columns' weight and bias gradient sums in
// registers; the block adds up its warps' sums once, at the end, through
// shared memory, 128 columns at a time. kBranchSums: also the column sums of
// dx (branch_bias_partial: the gradient of a bias added with the branch).
template <typename TD, typename TB, int kIters, bool kBranchSums>
__global__ void __launch_bounds__(kNormThreads)
    backward_rows_by_warp(const float* __restrict__ x, const float* __restrict__ w, const TD* __restrict__ dy,
                          const float* __restrict__ residual_grad, const float* __restrict__ mean,
                          const float* __restrict__ rstd, int64_t rows, int64_t C, bool rms, float* __restrict__ dx,
                          TB* __restrict__ branch_grad, float* __restrict__ dw_partial, float* __restrict__ db_partial,
                          float* __restrict__ branch_bias_partial) {
  using Floats = Group<float, 4>;
  __shared__ float warp_sums[kRowsPerBlock][128];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  constexpr int kDxSums = kBranchSums ? kIters : 1;
  float sum_w[kIters][4], sum_b[kIters][4], sum_dx[kDxSums][4];
#pragma unroll
  for (int k = 0; k < kIters; ++k)
    for (int e = 0; e < 4; ++e) sum_w[k][e] = sum_b[k][e] = 0.f;
#pragma unroll
  for (int k = 0; k < kDxSums; ++k)
    for (int e = 0; e < 4; ++e) sum_dx[k][e] = 0.f;
  const int64_t stride = int64_t(gridDim.x) * kRowsPerBlock;
  for (int64_t r = int64_t(blockIdx.x) * kRowsPerBlock + warp; r < rows; r += stride) {
    const float m = mean[r], inv = rstd[r];
    float mean_g = 0.f, mean_gx = 0.f;
    if (dx) {
      float g_total = 0.f, gx_total = 0.f;
      for_lane_groups<kIters>(C, [&](int64_t c, int) {
        const Floats xk = *reinterpret_cast<const Floats*>(x + r * C + c);
        const Floats wk = *reinterpret_cast<const Floats*>(w + c);
        const Group<TD, 4> dyk = *reinterpret_cast<const Group<TD, 4>*>(dy + r * C + c);
        for (int e = 0; e < 4; ++e) {
          const float g = to_float(dyk.v[e]) * wk.v[e];
          g_total += g;
          gx_total += g * (xk.v[e] - m) * inv;
        }
      });
      mean_gx = warp_all_sum(gx_total) / float(C);
      mean_g = rms ? 0.f : warp_all_sum(g_total) / float(C);
    }
    for_lane_groups<kIters>(C, [&](int64_t c, int k) {
      const Floats xk = *reinterpret_cast<const Floats*>(x + r * C + c);
      const Group<TD, 4> dyk = *reinterpret_cast<const Group<TD, 4>*>(dy + r * C + c);
      float xhat[4], d_y[4];
      for (int e = 0; e < 4; ++e) xhat[e] = (xk.v[e] - m) * inv, d_y[e] = to_float(dyk.v[e]);
      if (dx) {
        const Floats wk = *reinterpret_cast<const Floats*>(w + c);
        Floats d;
        for (int e = 0; e < 4; ++e) d.v[e] = inv * (d_y[e] * wk.v[e] - mean_g - xhat[e] * mean_gx);
        if (residual_grad) {
          const Floats rk = *reinterpret_cast<const Floats*>(residual_grad + r * C + c);
          for (int e = 0; e < 4; ++e) d.v[e] += rk.v[e];
        }
        *reinterpret_cast<Floats*>(dx + r * C + c) = d;
        if constexpr (kBranchSums)
          for (int e = 0; e < 4; ++e) sum_dx[k][e] += d.v[e];
        if (branch_grad) {
          Group<TB, 4> bk;
          for (int e = 0; e < 4; ++e) bk.v[e] = from_float<TB>(d.v[e]);
          *reinterpret_cast<Group<TB, 4>*>(branch_grad + r * C + c) = bk;
        }
      }
      if (dw_partial)
        for (int e = 0; e < 4; ++e) sum_w[k][e] += d_y[e] * xhat[e], sum_b[k][e] += d_y[e];
    });
  }
  if (!dw_partial && !kBranchSums) return;  // the same in every thread: no barrier is left half-reached
  auto write_block_sums = [&](float(*sums)[4], float* partial) {
#pragma unroll
    for (int k = 0; k < kIters; ++k) {
      for (int e = 0; e < 4; ++e) warp_sums[warp][lane * 4 + e] = sums[k][e];
      __syncthreads();
      const int64_t c = int64_t(k) * 128 + threadIdx.x;
      if (threadIdx.x < 128 && c < C) {
        float total = 0.f;
        for (int v = 0; v < kRowsPerBlock; ++v) total += warp_sums[v][threadIdx.x];
        partial[blockIdx.x * C + c] = total;
      }
      __syncthreads();  // read before the next k writes
    }
  };
  if (dw_partial) write_block_sums(sum_w, dw_partial);
  if (db_partial) write_block_sums(sum_b, db_partial);
  if constexpr (kBranchSums) write_block_sums(sum_dx, branch_bias_partial);
}

// The column sums the backward kernels do not keep in registers (rows too
// wide; dx's sums beside the warp kernel's widest rows): a grid of 32-column
// tiles by row chunks, each thread summing one column down its chunk (a warp
// reads 32 adjacent values of a row). Where dw_partial is set, those of dy *
// xhat and dy (db_partial, when set); where dx_partial is, those of dx.
template <typename TD>
__global__ void __launch_bounds__(kTileColumns* kTileRows)
    param_grad_chunks(const float* __restrict__ x, const TD* __restrict__ dy, const float* __restrict__ mean,
                      const float* __restrict__ rstd, const float* __restrict__ dx, int64_t rows, int64_t C,
                      int64_t rows_per_chunk, float* __restrict__ dw_partial, float* __restrict__ db_partial,
                      float* __restrict__ dx_partial) {
  __shared__ float sums_w[kTileRows][kTileColumns + 1], sums_b[kTileRows][kTileColumns + 1],
      sums_dx[kTileRows][kTileColumns + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kTileColumns + tx;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sw = 0.f, sb = 0.f, sd = 0.f;
  if (c < C) {
    for (int64_t r = begin + ty; r < end; r += kTileRows) {
      if (dw_partial) {
        const float d = to_float(dy[r * C + c]);
        sw += d * (x[r * C + c] - mean[r]) * rstd[r];
        sb += d;
      }
      if (dx_partial) sd += dx[r * C + c];
    }
  }
  sums_w[ty][tx] = sw;
  sums_b[ty][tx] = sb;
  sums_dx[ty][tx] = sd;
  __syncthreads();
  if (ty == 0 && c < C) {
    for (int k = 1; k < kTileRows; ++k) sw += sums_w[k][tx], sb += sums_b[k][tx], sd += sums_dx[k][tx];
    if (dw_partial) dw_partial[blockIdx.y * C + c] = sw;
    if (db_partial) db_partial[blockIdx.y * C + c] = sb;
    if (dx_partial) dx_partial[blockIdx.y * C + c] = sd;
  }
}

}  // namespace

const char* norm_forward(ElementType y_type, const float* x, ElementType branch_type, const void* branch,
                         const float* branch_bias, float* sum, const float* w, const float* b, int64_t rows, int64_t C,
                         float eps, bool rms, void* y, float* mean, float* rstd, void* stream) {
  if (rows == 0) return nullptr;
  if (!branch) branch_bias = nullptr;
  with_element_type(branch ? branch_type : ElementType::f32, [&](auto* branch_tag) {
    using TB = std::remove_pointer_t<decltype(branch_tag)>;
    with_element_type(y_type, [&](auto* y_tag) {
      using TY = std::remove_pointer_t<decltype(y_tag)>;
      // Groups of 4 columns on their own alignment in every row.
      const bool by_warp = C % 4 == 0 && C <= kMaxWarpColumns && aligned_to(x, 16) && aligned_to(w, 16) &&
                           (!b || aligned_to(b, 16)) && aligned_to(y, 4 * sizeof(TY)) &&
                           (!branch || (aligned_to(branch, 4 * sizeof(TB)) && aligned_to(sum, 16))) &&
                           (!branch_bias || aligned_to(branch_bias, 16));
      if (by_warp) {
        with_warp_iterations(C, [&](auto iterations) {
          constexpr int kIters = decltype(iterations)::value;
          const auto blocks = static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
          ZOO_LAUNCH(blocks, kNormThreads, static_cast<cudaStream_t>(stream), normalize_rows_by_warp<TB, TY, kIters>)
          (x, static_cast<const TB*>(branch), branch_bias, sum, w, b, rows, C, eps, rms, static_cast<TY*>(y), mean,
           rstd);
        });
        return;
      }
      with_register_columns(C, [&](auto cols) {
        constexpr int kCols = decltype(cols)::value;
        ZOO_LAUNCH(static_cast<unsigned>(rows), kNormThreads, static_cast<cudaStream_t>(stream),
                   normalize_rows<TB, TY, kCols>)
        (x, static_cast<const TB*>(branch), branch_bias, sum, w, b, C, eps, rms, static_cast<TY*>(y), mean, rstd);
      });
    });
  });
  return launched();
}

int64_t norm_param_grad_chunks(int64_t rows) { return rows < 1 ? 1 : rows < kMaxChunks ? rows : kMaxChunks; }

bool norm_sums_branch_bias_in_one_pass(int64_t C) { return C % 4 == 0 && C <= kMaxWarpBranchSumColumns; }

const char* norm_backward(ElementType dy_type, const float* x, const float* w, const void* dy,
                          const float* residual_grad, const float* mean, const float* rstd, int64_t rows, int64_t C,
                          bool rms, float* dx, ElementType branch_type, void* branch_grad, float* dw_partial,
                          float* db_partial, float* branch_bias_partial, int64_t* chunks, void* stream) {
  const auto cuda_stream = static_cast<cudaStream_t>(stream);
  *chunks = norm_param_grad_chunks(rows);
  // Whether a backward kernel below kept the sums in registers: dw's and db's, dx's.
  bool param_sums_done = false, dx_sums_done = !branch_bias_partial;
  with_element_type(dy_type, [&](auto* dy_tag) {
    using TD = std::remove_pointer_t<decltype(dy_tag)>;
    with_element_type(branch_grad ? branch_type : ElementType::f32, [&](auto* branch_tag) {
      using TB = std::remove_pointer_t<decltype(branch_tag)>;
      // Groups of 4 columns on their own alignment in every row.
      const bool by_warp = C % 4 == 0 && C <= kMaxWarpBackwardColumns && aligned_to(x, 16) && aligned_to(w, 16) &&
                           aligned_to(dy, 4 * sizeof(TD)) && (!residual_grad || aligned_to(residual_grad, 16)) &&
                           (!dx || aligned_to(dx, 16)) && (!branch_grad || aligned_to(branch_grad, 4 * sizeof(TB)));
      if (by_warp) {
        param_sums_done = true;
        if (!dx && !dw_partial) return;
        with_warp_iterations(C, [&](auto iterations) {
          constexpr int kIters = decltype(iterations)::value;
          auto launch = [&](auto branch_sums) {
            constexpr bool kBranchSums = decltype(branch_sums)::value;
            const auto kernel = backward_rows_by_warp<TD, TB, kIters, kBranchSums>;
            // One wave, as below; no more blocks than rows for their warps.
            static const int64_t per_sm = resident_blocks_per_sm(kernel, kNormThreads);
            const int64_t resident = per_sm * multiprocessors();
            *chunks = std::min(*chunks, (rows + kRowsPerBlock - 1) / kRowsPerBlock);
            if (resident > 0 && resident < *chunks) *chunks = resident;
            ZOO_LAUNCH(static_cast<unsigned>(*chunks), kNormThreads, cuda_stream,
                       backward_rows_by_warp<TD, TB, kIters, kBranchSums>)
            (x, w, static_cast<const TD*>(dy), residual_grad, mean, rstd, rows, C, rms, dx,
             static_cast<TB*>(branch_grad), dw_partial, db_partial, branch_bias_partial);
          };
          if constexpr (kIters * 128 <= kMaxWarpBranchSumColumns) {
            if (branch_bias_partial && dx) {
              dx_sums_done = true;
              return launch(std::true_type{});
            }
          }
          if constexpr (kIters * 128 <= kMaxWarpBackwardColumns) launch(std::false_type{});
        });
        return;
      }
      with_register_columns(C, [&](auto cols) {
        constexpr int kCols = decltype(cols)::value;
        param_sums_done = kCols > 0;
        if (!dx && !(param_sums_done && dw_partial)) return;
        const auto kernel = backward_rows<TD, TB, kCols>;
        // One wave: with more blocks than fit, the last wave would leave most of the GPU idle.
        static const int64_t per_sm = resident_blocks_per_sm(kernel, kNormThreads);
        const int64_t resident = per_sm * multiprocessors();
        if (resident > 0 && resident < *chunks) *chunks = resident;
        ZOO_LAUNCH(static_cast<unsigned>(*chunks), kNormThreads, cuda_stream, backward_rows<TD, TB, kCols>)
        (x, w, static_cast<const TD*>(dy), residual_grad, mean, rstd, rows, C, rms, dx, static_cast<TB*>(branch_grad),
         dw_partial, db_partial);
      });
    });
    const bool param_sums_left = dw_partial && !param_sums_done;
    if (param_sums_left || !dx_sums_done) {
      // Row chunks of a grid of column tiles: a few hundred fill the GPU. The
      // chunk count a kernel above used, when its partial sums share the buffer.
      if (!(param_sums_done && dw_partial)) *chunks = std::min<int64_t>(norm_param_grad_chunks(rows), kTiledChunks);
      const int64_t rows_per_chunk = (rows + *chunks - 1) / *chunks;
      const dim3 grid(static_cast<unsigned>((C + kTileColumns - 1) / kTileColumns), static_cast<unsigned>(*chunks));
      ZOO_LAUNCH(grid, dim3(kTileColumns, kTileRows), cuda_stream, param_grad_chunks<TD>)
      (x, static_cast<const TD*>(dy), mean, rstd, dx, rows, C, rows_per_chunk, param_sums_left ? dw_partial : nullptr,
       param_sums_left ? db_partial : nullptr, dx_sums_done ? nullptr : branch_bias_partial);
    }
  });
  return launched();
}

}  // namespace zoo::cuda
