// Implementation of models/common/cuda/norm.h. Forward and input gradient:
// one thread block per row, the row read from memory once and again from
// cache for each further pass (sum, mean, variance, output), float32 arithmetic.
// Weight and bias gradients: a grid of 32-column tiles by row chunks, each
// thread summing one column down its chunk (a warp reads 32 adjacent values
// of a row), the chunks' sums added up by the caller.
#include "models/common/cuda/device_common.cuh"
#include "models/common/cuda/norm.h"

namespace zoo::cuda {
namespace {

constexpr int kNormThreads = 256;
constexpr int kTileColumns = 32, kTileRows = 8;
constexpr int64_t kRowsPerChunk = 128, kMaxChunks = 1024;

// With a branch: h = x + branch is written to `sum` and normalized.
template <typename TB, typename TY>
__global__ void __launch_bounds__(kNormThreads)
    normalize_rows(const float* __restrict__ x, const TB* __restrict__ branch, float* __restrict__ sum,
                   const float* __restrict__ w, const float* __restrict__ b, int64_t C, float eps, bool rms,
                   TY* __restrict__ y, float* __restrict__ mean, float* __restrict__ rstd) {
  __shared__ float shared[kNormThreads / 32 + 1];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * C;
  TY* yr = y + r * C;
  float s = 0.f;
  if (branch) {
    const TB* br = branch + r * C;
    float* hr = sum + r * C;
    for (int64_t j = threadIdx.x; j < C; j += kNormThreads) {
      const float h = xr[j] + to_float(br[j]);
      hr[j] = h;
      s += h;
    }
    xr = hr;  // each thread reads back only what it wrote
  } else {
    for (int64_t j = threadIdx.x; j < C; j += kNormThreads) s += xr[j];
  }
  // rms is uniform across the block, as block_sum's barriers need.
  const float m = rms ? 0.f : block_sum<kNormThreads>(s, shared) / float(C);
  float ss = 0.f;
  for (int64_t j = threadIdx.x; j < C; j += kNormThreads) {
    const float d = xr[j] - m;
    ss += d * d;
  }
  const float inv = rsqrtf(block_sum<kNormThreads>(ss, shared) / float(C) + eps);
  for (int64_t j = threadIdx.x; j < C; j += kNormThreads) {
    const float v = (xr[j] - m) * inv * w[j];
    yr[j] = from_float<TY>(b ? v + b[j] : v);
  }
  if (threadIdx.x == 0) {
    mean[r] = m;
    rstd[r] = inv;
  }
}

// x is the normalized input (the sum, with a branch). residual_grad, the
// gradient reaching x from elsewhere, is added in; branch_grad gets a copy
// of dx in the branch's type.
template <typename TD, typename TB>
__global__ void __launch_bounds__(kNormThreads)
    input_grad_rows(const float* __restrict__ x, const float* __restrict__ w, const TD* __restrict__ dy,
                    const float* __restrict__ residual_grad, const float* __restrict__ mean,
                    const float* __restrict__ rstd, int64_t C, bool rms, float* __restrict__ dx,
                    TB* __restrict__ branch_grad) {
  __shared__ float shared[kNormThreads / 32 + 1];
  const int64_t r = blockIdx.x;
  const float* xr = x + r * C;
  const TD* dyr = dy + r * C;
  float* dxr = dx + r * C;
  const float m = mean[r], inv = rstd[r];
  float sum_g = 0.f, sum_gx = 0.f;
  for (int64_t j = threadIdx.x; j < C; j += kNormThreads) {
    const float g = to_float(dyr[j]) * w[j];
    sum_g += g;
    sum_gx += g * (xr[j] - m) * inv;
  }
  const float mean_gx = block_sum<kNormThreads>(sum_gx, shared) / float(C);
  const float mean_g = rms ? 0.f : block_sum<kNormThreads>(sum_g, shared) / float(C);
  for (int64_t j = threadIdx.x; j < C; j += kNormThreads) {
    float d = inv * (to_float(dyr[j]) * w[j] - mean_g - (xr[j] - m) * inv * mean_gx);
    if (residual_grad) d += residual_grad[r * C + j];
    dxr[j] = d;
    if (branch_grad) branch_grad[r * C + j] = from_float<TB>(d);
  }
}

template <typename TD>
__global__ void __launch_bounds__(kTileColumns* kTileRows)
    param_grad_chunks(const float* __restrict__ x, const TD* __restrict__ dy, const float* __restrict__ mean,
                      const float* __restrict__ rstd, int64_t rows, int64_t C, int64_t rows_per_chunk,
                      float* __restrict__ dw_partial, float* __restrict__ db_partial) {
  __shared__ float sums_w[kTileRows][kTileColumns + 1], sums_b[kTileRows][kTileColumns + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c = int64_t(blockIdx.x) * kTileColumns + tx;
  const int64_t begin = int64_t(blockIdx.y) * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sw = 0.f, sb = 0.f;
  if (c < C) {
    for (int64_t r = begin + ty; r < end; r += kTileRows) {
      const float d = to_float(dy[r * C + c]);
      sw += d * (x[r * C + c] - mean[r]) * rstd[r];
      sb += d;
    }
  }
  sums_w[ty][tx] = sw;
  sums_b[ty][tx] = sb;
  __syncthreads();
  if (ty == 0 && c < C) {
    for (int k = 1; k < kTileRows; ++k) sw += sums_w[k][tx], sb += sums_b[k][tx];
    dw_partial[blockIdx.y * C + c] = sw;
    if (db_partial) db_partial[blockIdx.y * C + c] = sb;
  }
}

}  // namespace

const char* norm_forward(ElementType y_type, const float* x, ElementType branch_type, const void* branch, float* sum,
                         const float* w, const float* b, int64_t rows, int64_t C, float eps, bool rms, void* y,
                         float* mean, float* rstd, void* stream) {
  if (rows == 0) return nullptr;
  with_element_type(branch ? branch_type : ElementType::f32, [&](auto* branch_tag) {
    using TB = std::remove_pointer_t<decltype(branch_tag)>;
    with_element_type(y_type, [&](auto* y_tag) {
      using TY = std::remove_pointer_t<decltype(y_tag)>;
      ZOO_LAUNCH(static_cast<unsigned>(rows), kNormThreads, static_cast<cudaStream_t>(stream), normalize_rows<TB, TY>)
      (x, static_cast<const TB*>(branch), sum, w, b, C, eps, rms, static_cast<TY*>(y), mean, rstd);
    });
  });
  return launched();
}

const char* norm_input_grad(ElementType dy_type, const float* x, const float* w, const void* dy,
                            const float* residual_grad, const float* mean, const float* rstd, int64_t rows, int64_t C,
                            bool rms, float* dx, ElementType branch_type, void* branch_grad, void* stream) {
  if (rows == 0) return nullptr;
  with_element_type(dy_type, [&](auto* dy_tag) {
    using TD = std::remove_pointer_t<decltype(dy_tag)>;
    with_element_type(branch_grad ? branch_type : ElementType::f32, [&](auto* branch_tag) {
      using TB = std::remove_pointer_t<decltype(branch_tag)>;
      ZOO_LAUNCH(static_cast<unsigned>(rows), kNormThreads, static_cast<cudaStream_t>(stream), input_grad_rows<TD, TB>)
      (x, w, static_cast<const TD*>(dy), residual_grad, mean, rstd, C, rms, dx, static_cast<TB*>(branch_grad));
    });
  });
  return launched();
}

int64_t norm_param_grad_chunks(int64_t rows) {
  const int64_t chunks = (rows + kRowsPerChunk - 1) / kRowsPerChunk;
  return chunks < 1 ? 1 : chunks > kMaxChunks ? kMaxChunks : chunks;
}

const char* norm_param_grads(ElementType dy_type, const float* x, const void* dy, const float* mean, const float* rstd,
                             int64_t rows, int64_t C, float* dw_partial, float* db_partial, void* stream) {
  const int64_t chunks = norm_param_grad_chunks(rows);
  const int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const dim3 grid(static_cast<unsigned>((C + kTileColumns - 1) / kTileColumns), static_cast<unsigned>(chunks));
  const dim3 block(kTileColumns, kTileRows);
  with_element_type(dy_type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ZOO_LAUNCH(grid, block, static_cast<cudaStream_t>(stream), param_grad_chunks<T>)
    (x, static_cast<const T*>(dy), mean, rstd, rows, C, rows_per_chunk, dw_partial, db_partial);
  });
  return launched();
}

}  // namespace zoo::cuda
