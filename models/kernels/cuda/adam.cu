// Implementation of models/kernels/cuda/adam.h.
// Each block takes kBlockElements of one tensor; a launch covers up to
// kTensorsPerLaunch tensors, whose pointers and first blocks travel in the
// kernel's parameters (no table to copy to the device, none to keep alive).
// Threads move 16 bytes per array and access where a tensor's four arrays
// start on 16 bytes (LibTorch's allocations do), one float at a time for the
// rest. Bandwidth-bound: 16 bytes read and 12 written per element.
#include "models/kernels/cuda/adam.h"
#include "models/kernels/cuda/device_common.cuh"

namespace zoo::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kBlockElements = kThreads * 4 * 8;  // eight 16-byte steps per thread
constexpr int kTensorsPerLaunch = 32;

struct AdamLaunch {
  AdamTensor tensors[kTensorsPerLaunch];
  int64_t first_block[kTensorsPerLaunch + 1];  // tensor k has blocks [first_block[k], first_block[k + 1])
  int count;
};
// Kernel parameters may take 4 KB (before CUDA 12.1 and Volta).
static_assert(sizeof(AdamLaunch) + sizeof(AdamConstants) + sizeof(float*) <= 4096, "launch table too large");

using Floats4 = Group<float, 4>;

__global__ void __launch_bounds__(kThreads)
    adam_blocks(const AdamLaunch launch, const AdamConstants c, const float* __restrict__ grad_coefficient) {
  const int64_t block = blockIdx.x;
  int k = 0;
  while (k + 1 < launch.count && launch.first_block[k + 1] <= block) ++k;  // empty tensors have no blocks
  const AdamTensor& t = launch.tensors[k];
  const float coefficient = grad_coefficient ? *grad_coefficient : 1.f;
  const int64_t begin = (block - launch.first_block[k]) * kBlockElements;
  const int64_t end = begin + kBlockElements < t.numel ? begin + kBlockElements : t.numel;
  int64_t scalar_begin = begin;
  if (aligned_to(t.param, 16) && aligned_to(t.grad, 16) && aligned_to(t.exp_avg, 16) && aligned_to(t.exp_avg_sq, 16)) {
    const int64_t vector_end = begin + (end - begin) / 4 * 4;  // begin is a multiple of 4: so are the groups
    for (int64_t i = begin + threadIdx.x * 4; i < vector_end; i += kThreads * 4) {
      Floats4 p = *reinterpret_cast<const Floats4*>(t.param + i);
      const Floats4 g = *reinterpret_cast<const Floats4*>(t.grad + i);
      Floats4 m = *reinterpret_cast<const Floats4*>(t.exp_avg + i);
      Floats4 v = *reinterpret_cast<const Floats4*>(t.exp_avg_sq + i);
#pragma unroll
      for (int j = 0; j < 4; ++j) adam_element(p.v[j], g.v[j] * coefficient, m.v[j], v.v[j], t.correction, c);
      *reinterpret_cast<Floats4*>(t.param + i) = p;
      *reinterpret_cast<Floats4*>(t.exp_avg + i) = m;
      *reinterpret_cast<Floats4*>(t.exp_avg_sq + i) = v;
    }
    scalar_begin = vector_end;
  }
  for (int64_t i = scalar_begin + threadIdx.x; i < end; i += kThreads)
    adam_element(t.param[i], t.grad[i] * coefficient, t.exp_avg[i], t.exp_avg_sq[i], t.correction, c);
}

}  // namespace

const char* adam_update(const AdamTensor* tensors, int64_t count, const AdamConstants& c, const float* grad_coefficient,
                        void* stream) {
  const auto s = static_cast<cudaStream_t>(stream);
  for (int64_t first = 0; first < count; first += kTensorsPerLaunch) {
    AdamLaunch launch{};
    launch.count = int(count - first < kTensorsPerLaunch ? count - first : kTensorsPerLaunch);
    int64_t blocks = 0;
    for (int k = 0; k < launch.count; ++k) {
      launch.tensors[k] = tensors[first + k];
      launch.first_block[k] = blocks;
      blocks += (tensors[first + k].numel + kBlockElements - 1) / kBlockElements;
    }
    launch.first_block[launch.count] = blocks;
    if (blocks == 0) continue;
    ZOO_LAUNCH(dim3(unsigned(blocks)), dim3(kThreads), s, adam_blocks)(launch, c, grad_coefficient);
    if (const char* error = launched()) return error;
  }
  return launched();
}

}  // namespace zoo::cuda
