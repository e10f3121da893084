// Device helpers shared by zoo's CUDA kernels (included by .cu files only):
// float conversions of the element types, 16-byte packs and smaller groups,
// warp- and block-wide sums, the launch macro, and the launch check each
// entry point returns. The tests compile the kernels for the CPU through
// tests/cuda_emulation.h, which stands in for CUDA's headers and defines
// ZOO_LAUNCH its own way.
#pragma once

#include <cstdint>
#include <type_traits>

#ifndef ZOO_CUDA_EMULATION
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

// ZOO_LAUNCH(grid, block, stream, kernel)(args...): kernel<<<grid, block, 0, stream>>>(args...)
// (the kernel last, as its template arguments may hold commas).
#define ZOO_LAUNCH(grid, block, stream, ...) __VA_ARGS__<<<(grid), (block), 0, (stream)>>>
#endif

#include "models/kernels/cuda/element_type.h"

namespace zoo::cuda {

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16(x);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half(x);
}

// exp(d) as the hardware's exp2 of d * log2(e) (ex2.approx: 2^-22 relative
// error), one multiply before it where expf's range reduction takes about
// eight instructions. The loss takes two exps per logit, billions a step;
// with expf's the one-pass loss kernel, doing twice the work per byte of the
// two-pass ones, was bound by arithmetic instead of memory.
__device__ __forceinline__ float exp_of(float d) { return exp2f(d * 1.44269504088896341f); }

// N adjacent elements of T, read or written as one access (16 bytes at most;
// the address a multiple of sizeof(T) * N).
template <typename T, int N>
struct alignas(sizeof(T) * N) Group {
  static constexpr int kSize = N;
  T v[N];
};

// 16 bytes of T, read or written as one vector access (ld/st.global.v4):
// a warp moves 512 bytes per instruction instead of 64 for 2-byte elements.
template <typename T>
using Pack = Group<T, 16 / sizeof(T)>;

// A pack read for the last time, and one written that no kernel reads back
// soon: both marked evict-first in L2 (ld/st.global.cs), so that they do not
// push out of it what is read again shortly (the fused loss's rows).
template <typename T>
__device__ __forceinline__ Pack<T> load_last_use(const Pack<T>* p) {
  const int4 v = __ldcs(reinterpret_cast<const int4*>(p));
  return *reinterpret_cast<const Pack<T>*>(&v);
}
template <typename T>
__device__ __forceinline__ void store_streaming(Pack<T>* p, const Pack<T>& v) {
  __stcs(reinterpret_cast<int4*>(p), *reinterpret_cast<const int4*>(&v));
}

// Whether a host or device pointer is a multiple of `bytes`.
__host__ __device__ __forceinline__ bool aligned_to(const void* p, int bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Whether p may be read or written as Packs.
__device__ __forceinline__ bool pack_aligned(const void* p) { return aligned_to(p, 16); }

// The sum of v over the warp, in lane 0.
__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_down_sync(0xffffffffu, v, offset);
  return v;
}

// The sum of v over the warp, in every lane (a butterfly of shuffles).
__device__ __forceinline__ float warp_all_sum(float v) {
  for (int mask = 16; mask > 0; mask /= 2) v += __shfl_xor_sync(0xffffffffu, v, mask);
  return v;
}

// The sum of v over a block of kThreads (a multiple of 32), in every thread.
// `shared` holds kThreads / 32 + 1 floats; it may be reused once this returns.
template <int kThreads>
__device__ float block_sum(float v, float* shared) {
  constexpr int kWarps = kThreads / 32;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  v = warp_sum(v);
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = warp_sum(lane < kWarps ? shared[lane] : 0.f);
    if (lane == 0) shared[kWarps] = v;
  }
  __syncthreads();
  const float total = shared[kWarps];
  __syncthreads();
  return total;
}

// Calls launch(T*{}) with the device type T of `type`; launch reads T as
// std::remove_pointer_t<decltype(its argument)>.
template <typename Launch>
void with_element_type(ElementType type, Launch&& launch) {
  switch (type) {
    case ElementType::f32: launch(static_cast<float*>(nullptr)); break;
    case ElementType::bf16: launch(static_cast<__nv_bfloat16*>(nullptr)); break;
    case ElementType::f16: launch(static_cast<__half*>(nullptr)); break;
  }
}

// How many blocks of `threads` threads running `kernel` one multiprocessor
// holds at once (0 if CUDA cannot say).
template <typename Kernel>
int64_t resident_blocks_per_sm(Kernel kernel, int threads) {
  int blocks = 0;
  return cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads, 0) == cudaSuccess ? blocks : 0;
}

// The current device's multiprocessors (0 if CUDA cannot say).
inline int64_t multiprocessors() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  return cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) == cudaSuccess ? count : 0;
}

// nullptr, or the message of the error the last launch left.
inline const char* launched() {
  const cudaError_t e = cudaGetLastError();
  return e == cudaSuccess ? nullptr : cudaGetErrorString(e);
}

}  // namespace zoo::cuda
