// Implementation of models/kernels/cuda/cross_entropy.h: one thread block per
// row. Forward: each thread keeps a running (max, sum of exp(x - max)) over
// its strided columns, and the block merges the pairs, so the row is read
// once. Backward: each element's softmax from the saved log-sum-exp, minus the
// one-hot, times the row's upstream gradient, written once. Rows that start
// on 16 bytes are read (and their gradients written) in 16-byte packs, the
// rest element by element. The fused forward makes both passes over each row
// in one block, the second from L2.
#include <algorithm>

#include "models/kernels/cuda/cross_entropy.h"
#include "models/kernels/cuda/device_common.cuh"

namespace zoo::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
// Blocks per multiprocessor of the fused forward: 2 x 132 rows of a 50K
// vocabulary in bfloat16 in flight on an H100 are ~26 MB, so each row's
// second read finds it in the 50 MB L2.
constexpr int kFusedBlocksPerSm = 2;

// Packs each thread loads before it computes on any of them.
constexpr int kPacksInFlight = 4;

// Calls visit(p, k) for this thread's packs p = load(packs + k), k =
// threadIdx.x + i * kThreads < n, with kPacksInFlight loads issued before the
// first visit.
template <typename T, typename Load, typename Visit>
__device__ __forceinline__ void for_thread_packs(const Pack<T>* packs, int64_t n, Load load, Visit visit) {
  int64_t k = threadIdx.x;
  for (; k + (kPacksInFlight - 1) * kThreads < n; k += kPacksInFlight * kThreads) {
    Pack<T> p[kPacksInFlight];
#pragma unroll
    for (int i = 0; i < kPacksInFlight; ++i) p[i] = load(packs + k + i * kThreads);
#pragma unroll
    for (int i = 0; i < kPacksInFlight; ++i) visit(p[i], k + i * kThreads);
  }
  for (; k < n; k += kThreads) visit(load(packs + k), k);
}

// A running log-sum-exp: sum of exp(x - max) over the values seen.
struct MaxSum {
  float max, sum;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, a.sum + b.sum};  // nothing but -inf (padding) seen: 0, or NaN kept
  return {m, a.sum * exp_of(a.max - m) + b.sum * exp_of(b.max - m)};
}

__device__ __forceinline__ void add(MaxSum& v, float x) {
  if (x > v.max) {
    v.sum = v.sum * exp_of(v.max - x) + 1.f;
    v.max = x;
  } else if (x != -INFINITY) {  // -inf adds 0 (and -inf - -inf would be NaN); NaN propagates
    v.sum += exp_of(x - v.max);
  }
}

// A pack at once: one rescale to the pack's max, then its exps.
template <typename T>
__device__ __forceinline__ void add(MaxSum& v, const Pack<T>& p) {
  float x[Pack<T>::kSize];
  float m = v.max;
  for (int e = 0; e < Pack<T>::kSize; ++e) {
    x[e] = to_float(p.v[e]);
    m = fmaxf(m, x[e]);  // ignores NaN, which the sums below carry
  }
  if (m == -INFINITY) {  // nothing but -inf (and NaN) yet: exp(x - m) would be NaN for each -inf
    for (int e = 0; e < Pack<T>::kSize; ++e)
      if (x[e] != x[e]) v.sum = x[e];
    return;
  }
  float sum = v.sum * exp_of(v.max - m);
  for (int e = 0; e < Pack<T>::kSize; ++e) sum += exp_of(x[e] - m);
  v = {m, sum};
}

__device__ __forceinline__ MaxSum warp_merge(MaxSum v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = merge(v, {__shfl_down_sync(0xffffffffu, v.max, offset), __shfl_down_sync(0xffffffffu, v.sum, offset)});
  return v;
}

// The block's merged pair, in thread 0.
__device__ MaxSum block_merge(MaxSum v) {
  __shared__ MaxSum warps[kWarps];
  v = warp_merge(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) warps[warp] = v;
  __syncthreads();
  if (warp == 0) v = warp_merge(lane < kWarps ? warps[lane] : MaxSum{-INFINITY, 0.f});
  return v;
}

// The row's (max, sum of exp(x - max)) over its first `columns` columns, in
// thread 0 (a block-wide call: every thread of the block makes it).
template <typename T>
__device__ MaxSum row_max_sum(const T* row, int64_t columns) {
  MaxSum v{-INFINITY, 0.f};
  int64_t j = 0;            // the first column the element loops read
  if (pack_aligned(row)) {  // the same in all threads of the block
    const int64_t n = columns / Pack<T>::kSize;
    // Plain loads: the fused kernel reads the row again right after.
    for_thread_packs(
        reinterpret_cast<const Pack<T>*>(row), n, [](const Pack<T>* p) { return *p; },
        [&](const Pack<T>& p, int64_t) { add(v, p); });
    j = n * Pack<T>::kSize;
  }
  j += threadIdx.x;
  // Four loads in flight per thread before their exps.
  for (; j + 3 * kThreads < columns; j += 4 * kThreads) {
    const float x0 = to_float(row[j]), x1 = to_float(row[j + kThreads]);
    const float x2 = to_float(row[j + 2 * kThreads]), x3 = to_float(row[j + 3 * kThreads]);
    add(v, x0), add(v, x1), add(v, x2), add(v, x3);
  }
  for (; j < columns; j += kThreads) add(v, to_float(row[j]));
  return block_merge(v);
}

// drow[j] = g * (exp(x_j - l) - [j == y]) for j < columns, 0 up to width.
template <typename T>
__device__ void write_row_grad(const T* row, T* drow, float l, float g, int64_t y, int64_t columns, int64_t width) {
  // p - 1 at the label is taken in float32: p can round to 1 in bfloat16.
  // Columns from `columns` on get 0 (a pack may read them: they lie inside the row).
  const auto d = [&](T x, int64_t j) {
    return from_float<T>(j < columns ? (exp_of(to_float(x) - l) - (j == y)) * g : 0.f);
  };
  int64_t j = 0;  // the first column the element loop writes
  if (pack_aligned(row) && pack_aligned(drow)) {
    constexpr int kSize = Pack<T>::kSize;
    Pack<T>* dpacks = reinterpret_cast<Pack<T>*>(drow);
    const int64_t n = width / kSize;
    // The row's last read and a gradient the GEMMs read later: evict-first,
    // so that the rows still to be read again stay in L2; without the hints
    // a row's second read came from memory.
    for_thread_packs(reinterpret_cast<const Pack<T>*>(row), n, load_last_use<T>, [&](const Pack<T>& p, int64_t k) {
      const int64_t first = k * kSize;
      Pack<T> dp;
      // All but a pack or two per row: no label, no padding, no test per column.
      if (first + kSize <= columns && static_cast<uint64_t>(y - first) >= kSize) {
        for (int e = 0; e < kSize; ++e) dp.v[e] = from_float<T>(exp_of(to_float(p.v[e]) - l) * g);
      } else {
        for (int e = 0; e < kSize; ++e) dp.v[e] = d(p.v[e], first + e);
      }
      store_streaming(dpacks + k, dp);
    });
    j = n * kSize;
  }
  for (j += threadIdx.x; j < width; j += kThreads) drow[j] = d(row[j], j);
}

// loss = lse - x[label], NaN for a label outside [0, columns).
template <typename T>
__device__ __forceinline__ float label_loss(const T* row, float lse, int64_t y, int64_t columns) {
  return (y >= 0 && y < columns) ? lse - to_float(row[y]) : NAN;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_rows(const T* __restrict__ logits, int64_t ld, const int64_t* __restrict__ labels, int64_t columns,
                 float* __restrict__ lse, float* __restrict__ loss) {
  const int64_t i = blockIdx.x;
  const T* row = logits + i * ld;
  const MaxSum v = row_max_sum(row, columns);
  if (threadIdx.x == 0) {
    const float l = v.max + logf(v.sum);
    lse[i] = l;
    loss[i] = label_loss(row, l, labels[i], columns);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_rows(const T* __restrict__ logits, int64_t ld, const int64_t* __restrict__ labels,
                  const float* __restrict__ lse, const float* __restrict__ grad, int64_t columns, int64_t width,
                  T* __restrict__ dlogits) {
  const int64_t i = blockIdx.x;
  write_row_grad(logits + i * ld, dlogits + i * width, lse[i], grad[i], labels[i], columns, width);
}

// Both passes per row, each block taking every gridDim.x-th row: the second
// pass reads the row again right after the first, mostly from L2 while few
// rows are in flight (see kFusedBlocksPerSm).
template <typename T>
__global__ void __launch_bounds__(kThreads, kFusedBlocksPerSm)
    forward_rows_with_grad(const T* __restrict__ logits, int64_t ld, const int64_t* __restrict__ labels,
                           const float* __restrict__ weights, int64_t n, int64_t columns, int64_t width,
                           float* __restrict__ loss, T* __restrict__ dlogits) {
  __shared__ float row_lse;
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const T* row = logits + i * ld;
    const MaxSum v = row_max_sum(row, columns);
    if (threadIdx.x == 0) {
      row_lse = v.max + logf(v.sum);
      loss[i] = label_loss(row, row_lse, labels[i], columns);
    }
    __syncthreads();
    write_row_grad(row, dlogits + i * width, row_lse, weights[i], labels[i], columns, width);
    __syncthreads();  // every thread has read row_lse (and block_merge's shared sums) before the next row
  }
}

// data *= *scale, unless *scale is exactly 1 (read on the device: no host
// sync). data starts on 16 bytes (a fresh allocation): packs, then the tail.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    scale_unless_one(T* __restrict__ data, int64_t count, const float* __restrict__ scale) {
  const float s = *scale;
  if (s == 1.f) return;
  constexpr int kSize = Pack<T>::kSize;
  const int64_t stride = int64_t(gridDim.x) * kThreads, first = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  Pack<T>* packs = reinterpret_cast<Pack<T>*>(data);
  for (int64_t k = first; k < count / kSize; k += stride) {
    Pack<T> p = packs[k];
    for (int e = 0; e < kSize; ++e) p.v[e] = from_float<T>(to_float(p.v[e]) * s);
    packs[k] = p;
  }
  for (int64_t j = count / kSize * kSize + first; j < count; j += stride)
    data[j] = from_float<T>(to_float(data[j]) * s);
}

}  // namespace

const char* cross_entropy_forward(ElementType type, const void* logits, int64_t ld, const int64_t* labels, int64_t n,
                                  int64_t columns, float* lse, float* loss, void* stream) {
  if (n == 0) return nullptr;
  with_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ZOO_LAUNCH(static_cast<unsigned>(n), kThreads, static_cast<cudaStream_t>(stream), forward_rows<T>)
    (static_cast<const T*>(logits), ld, labels, columns, lse, loss);
  });
  return launched();
}

const char* cross_entropy_forward_with_grad(ElementType type, const void* logits, int64_t ld, const int64_t* labels,
                                            const float* weights, int64_t n, int64_t columns, int64_t width,
                                            float* loss, void* dlogits, void* stream) {
  if (n == 0) return nullptr;
  const int64_t sms = multiprocessors();
  const int64_t blocks = std::min<int64_t>(n, sms > 0 ? kFusedBlocksPerSm * sms : n);
  with_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ZOO_LAUNCH(static_cast<unsigned>(blocks), kThreads, static_cast<cudaStream_t>(stream), forward_rows_with_grad<T>)
    (static_cast<const T*>(logits), ld, labels, weights, n, columns, width, loss, static_cast<T*>(dlogits));
  });
  return launched();
}

const char* cross_entropy_scale_grad(ElementType type, void* dlogits, int64_t count, const float* scale, void* stream) {
  if (count == 0) return nullptr;
  const int64_t sms = multiprocessors();
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, sms > 0 ? 4 * sms : 1024);
  with_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ZOO_LAUNCH(static_cast<unsigned>(blocks), kThreads, static_cast<cudaStream_t>(stream), scale_unless_one<T>)
    (static_cast<T*>(dlogits), count, scale);
  });
  return launched();
}

const char* cross_entropy_backward(ElementType type, const void* logits, int64_t ld, const int64_t* labels,
                                   const float* lse, const float* grad, int64_t n, int64_t columns, int64_t width,
                                   void* dlogits, void* stream) {
  if (n == 0) return nullptr;
  with_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    ZOO_LAUNCH(static_cast<unsigned>(n), kThreads, static_cast<cudaStream_t>(stream), backward_rows<T>)
    (static_cast<const T*>(logits), ld, labels, lse, grad, columns, width, static_cast<T*>(dlogits));
  });
  return launched();
}

}  // namespace zoo::cuda
