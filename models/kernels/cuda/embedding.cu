// Implementation of models/kernels/cuda/embedding.h.
// The sorted ids are cut into tasks of kEmbeddingTaskRows; a warp takes a
// task and a slab of columns (32 threads x 4 floats) and walks the task's
// rows in order, summing each run of equal ids. A run wholly inside its task
// is written to grad at once; a run that goes on into the next tasks leaves
// its parts (the owner's, and each later task's head) for a second kernel,
// in which the owning task adds them up in order. So a frequent id costs
// many tasks a few rows each rather than one warp all its rows, and every
// sum is taken in the same order on every run.
#include <algorithm>

#include "models/kernels/cuda/device_common.cuh"
#include "models/kernels/cuda/embedding.h"

namespace zoo::cuda {
namespace {

constexpr int kSlabsPerBlock = 4;  // warps of a block, each its own slab of columns

// W adjacent floats of a row, read or written as one access.
template <int W>
using Floats = Group<float, W>;

template <int W>
__device__ __forceinline__ void add_row(Floats<W>& acc, const float* row) {
  const Floats<W> v = *reinterpret_cast<const Floats<W>*>(row);
#pragma unroll
  for (int k = 0; k < W; ++k) acc.v[k] += v.v[k];
}

template <int W>
__device__ __forceinline__ void clear(Floats<W>& acc) {
#pragma unroll
  for (int k = 0; k < W; ++k) acc.v[k] = 0.f;
}

// This thread's first column: slab (blockIdx.y, threadIdx.y), lane threadIdx.x.
template <int W>
__device__ __forceinline__ int64_t first_column() {
  return ((int64_t(blockIdx.y) * kSlabsPerBlock + threadIdx.y) * 32 + threadIdx.x) * W;
}

// Task blockIdx.x: each run of equal ids among its rows, summed. A run that
// began in an earlier task goes to head_partial[task]; one that began here
// and ends here, to grad; one that began here and goes on, to own_partial[task].
template <int W>
__global__ void __launch_bounds__(32 * kSlabsPerBlock)
    sum_runs(const int64_t* __restrict__ sorted, const int64_t* __restrict__ order, const float* __restrict__ dy,
             int64_t n, int64_t C, float* __restrict__ grad, float* __restrict__ head_partial,
             float* __restrict__ own_partial) {
  const int64_t c = first_column<W>();
  if (c >= C) return;
  const int64_t task = blockIdx.x, begin = task * kEmbeddingTaskRows;
  const int64_t end = begin + kEmbeddingTaskRows < n ? begin + kEmbeddingTaskRows : n;
  const bool continued = begin > 0 && sorted[begin - 1] == sorted[begin];
  Floats<W> acc;
  clear(acc);
  int64_t run_start = begin;
  for (int64_t i = begin; i < end; ++i) {
    add_row(acc, dy + order[i] * C + c);
    const int64_t id = sorted[i];
    if (i + 1 < end && sorted[i + 1] == id) continue;
    const bool goes_on = i + 1 < n && sorted[i + 1] == id;
    float* out = run_start == begin && continued ? head_partial + task * C
                 : goes_on                       ? own_partial + task * C
                                                 : grad + id * C;
    *reinterpret_cast<Floats<W>*>(out + c) = acc;
    clear(acc);
    run_start = i + 1;
  }
}

// Task blockIdx.x, if its last run began in it and goes on: that run's sum,
// its own part then each later task's head part in order, into grad.
template <int W>
__global__ void __launch_bounds__(32 * kSlabsPerBlock)
    sum_long_runs(const int64_t* __restrict__ sorted, int64_t n, int64_t C, int64_t tasks, float* __restrict__ grad,
                  const float* __restrict__ head_partial, const float* __restrict__ own_partial) {
  const int64_t c = first_column<W>();
  if (c >= C) return;
  const int64_t task = blockIdx.x, begin = task * kEmbeddingTaskRows, end = begin + kEmbeddingTaskRows;
  if (end >= n) return;
  const int64_t id = sorted[end - 1];
  if (sorted[end] != id) return;                                            // the last run ends in this task
  if (begin > 0 && sorted[begin] == id && sorted[begin - 1] == id) return;  // began earlier: not this task's
  Floats<W> acc;
  clear(acc);
  add_row(acc, own_partial + task * C + c);
  for (int64_t k = task + 1; k < tasks; ++k) {
    add_row(acc, head_partial + k * C + c);
    const int64_t k_end = (k + 1) * kEmbeddingTaskRows;
    if (k_end >= n || sorted[k_end - 1] != id || sorted[k_end] != id) break;  // the run ends in task k
  }
  *reinterpret_cast<Floats<W>*>(grad + id * C + c) = acc;
}

}  // namespace

int64_t embedding_grad_tasks(int64_t n) { return n < 1 ? 1 : (n + kEmbeddingTaskRows - 1) / kEmbeddingTaskRows; }

const char* embedding_grad(const int64_t* sorted, const int64_t* order, const float* dy, int64_t n, int64_t C,
                           float* grad, float* head_partial, float* own_partial, void* stream) {
  if (n == 0 || C == 0) return nullptr;
  const int64_t tasks = embedding_grad_tasks(n);
  auto launch = [&](auto width) {
    constexpr int W = decltype(width)::value;
    const int64_t slabs = (C + 32 * W - 1) / (32 * W);
    const dim3 grid(static_cast<unsigned>(tasks), static_cast<unsigned>((slabs + kSlabsPerBlock - 1) / kSlabsPerBlock));
    const dim3 block(32, kSlabsPerBlock);
    const auto s = static_cast<cudaStream_t>(stream);
    ZOO_LAUNCH(grid, block, s, sum_runs<W>)(sorted, order, dy, n, C, grad, head_partial, own_partial);
    ZOO_LAUNCH(grid, block, s, sum_long_runs<W>)(sorted, n, C, tasks, grad, head_partial, own_partial);
  };
  // 16-byte accesses where every row start allows them.
  if (C % 4 == 0 && aligned_to(dy, 16) && aligned_to(grad, 16) && aligned_to(head_partial, 16) &&
      aligned_to(own_partial, 16))
    launch(std::integral_constant<int, 4>{});
  else launch(std::integral_constant<int, 1>{});
  return launched();
}

}  // namespace zoo::cuda
