// Implementation of models/common/cuda/cross_entropy.h: one thread block per
// row. Forward: each thread keeps a running (max, sum of exp(x - max)) over
// its strided columns, and the block merges the pairs, so the row is read
// once. Backward: each element's softmax from the saved log-sum-exp, minus the
// one-hot, times the row's upstream gradient, written once.
#include "models/common/cuda/cross_entropy.h"
#include "models/common/cuda/device_common.cuh"

namespace zoo::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;

// A running log-sum-exp: sum of exp(x - max) over the values seen.
struct MaxSum {
  float max, sum;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.max, b.max);
  if (m == -INFINITY) return {m, 0.f};  // nothing but -inf (padding) seen
  return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
}

__device__ __forceinline__ void add(MaxSum& v, float x) {
  if (x > v.max) {
    v.sum = v.sum * expf(v.max - x) + 1.f;
    v.max = x;
  } else if (x != -INFINITY) {  // -inf adds 0 (and -inf - -inf would be NaN); NaN propagates
    v.sum += expf(x - v.max);
  }
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

template <typename T>
__global__ void __launch_bounds__(kThreads)
    forward_rows(const T* __restrict__ logits, int64_t ld, const int64_t* __restrict__ labels, int64_t columns,
                 float* __restrict__ lse, float* __restrict__ loss) {
  const int64_t i = blockIdx.x;
  const T* row = logits + i * ld;
  MaxSum v{-INFINITY, 0.f};
  int64_t j = threadIdx.x;
  // Four loads in flight per thread before their exps.
  for (; j + 3 * kThreads < columns; j += 4 * kThreads) {
    const float x0 = to_float(row[j]), x1 = to_float(row[j + kThreads]);
    const float x2 = to_float(row[j + 2 * kThreads]), x3 = to_float(row[j + 3 * kThreads]);
    add(v, x0), add(v, x1), add(v, x2), add(v, x3);
  }
  for (; j < columns; j += kThreads) add(v, to_float(row[j]));
  v = block_merge(v);
  if (threadIdx.x == 0) {
    const float l = v.max + logf(v.sum);
    const int64_t y = labels[i];
    lse[i] = l;
    loss[i] = (y >= 0 && y < columns) ? l - to_float(row[y]) : NAN;
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    backward_rows(const T* __restrict__ logits, int64_t ld, const int64_t* __restrict__ labels,
                  const float* __restrict__ lse, const float* __restrict__ grad, int64_t columns, int64_t width,
                  T* __restrict__ dlogits) {
  const int64_t i = blockIdx.x;
  const T* row = logits + i * ld;
  T* drow = dlogits + i * width;
  const float l = lse[i], g = grad[i];
  const int64_t y = labels[i];
  for (int64_t j = threadIdx.x; j < width; j += kThreads) {
    // p - 1 at the label is taken in float32: p can round to 1 in bfloat16.
    const float d = j < columns ? (expf(to_float(row[j]) - l) - (j == y ? 1.f : 0.f)) * g : 0.f;
    drow[j] = from_float<T>(d);
  }
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
