// Runs zoo's CUDA kernels (models/kernels/cuda/*.cu) on the CPU, so that CI,
// which has no GPU, tests their indexing, reductions and type conversions.
// Include it, then the .cu files: it defines what those use of CUDA (the
// built-in indices, __syncthreads, __shfl_down_sync and __shfl_xor_sync,
// bfloat16 and half as c10's types, int4 and its cache-hinted loads and
// stores, the launch macro, the error calls). Each CUDA thread of a block
// is a fiber (ucontext) on the calling thread; blocks run one after another,
// so a kernel's __shared__ arrays can be function statics. Barriers switch
// fibers; a barrier that some threads never reach (divergent code) throws
// instead of hanging. Slow (a few ms per block): for small shapes only.
#pragma once

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <ucontext.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <vector>

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct CUstream_st;
using cudaStream_t = CUstream_st*;
enum cudaError_t { cudaSuccess = 0 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorString(cudaError_t) { return "no error"; }
// A small GPU: 2 multiprocessors holding 2 blocks each, so that kernels
// sizing their grid to the GPU still run several blocks here.
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
inline cudaError_t cudaGetDevice(int* device) { return *device = 0, cudaSuccess; }
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr, int) { return *value = 2, cudaSuccess; }
template <typename Kernel>
cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int* blocks, Kernel, int, size_t) {
  return *blocks = 2, cudaSuccess;
}

using __nv_bfloat16 = c10::BFloat16;
using __half = c10::Half;
inline float __bfloat162float(__nv_bfloat16 x) { return float(x); }
inline __nv_bfloat16 __float2bfloat16(float x) { return __nv_bfloat16(x); }  // round to nearest even, as CUDA's
inline float __half2float(__half x) { return float(x); }
inline __half __float2half(float x) { return __half(x); }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
// 16 bytes, and the cache-hinted (evict-first) load and store: plain here.
struct alignas(16) int4 {
  int x, y, z, w;
};
inline int4 __ldcs(const int4* p) { return *p; }
inline void __stcs(int4* p, int4 v) { *p = v; }

namespace zoo_cuda_emulation {

// One block's threads as fibers, and the state of its barriers.
class Block {
 public:
  Block(dim3 grid, dim3 block) : grid_dim(grid), block_dim(block), threads_(int(block.x * block.y * block.z)) {
    if (threads_ % 32 != 0) throw std::invalid_argument("cuda_emulation: a block of threads in whole warps only");
    fibers_.resize(threads_);
    for (Fiber& f : fibers_) f.stack.resize(64 * 1024);
    warp_arrived_.assign(threads_ / 32, 0);
    warp_generation_.assign(threads_ / 32, 0);
    warp_slots_.assign(threads_, 0);
  }

  // Runs body in every thread of block `index`.
  void run(dim3 index, const std::function<void()>& body) {
    block_idx = index;
    body_ = &body;
    for (int t = 0; t < threads_; ++t) {
      Fiber& f = fibers_[t];
      f.done = false;
      f.waiting_on = nullptr;
      getcontext(&f.context);
      f.context.uc_stack.ss_sp = f.stack.data();
      f.context.uc_stack.ss_size = f.stack.size();
      f.context.uc_link = &scheduler_;
      makecontext(&f.context, &Block::entry, 0);
    }
    Block* outer = current_;
    current_ = this;
    for (int finished = 0; finished < threads_;) {
      bool progress = false;
      for (current_thread_ = 0; current_thread_ < threads_; ++current_thread_) {
        Fiber& f = fibers_[current_thread_];
        if (f.done || (f.waiting_on && *f.waiting_on == f.waiting_since)) continue;  // still held at its barrier
        progress = true;
        swapcontext(&scheduler_, &f.context);
        if (f.done) ++finished;
      }
      if (!progress && finished < threads_) {
        current_ = outer;
        throw std::logic_error("cuda_emulation: threads wait at a barrier that others never reach");
      }
    }
    current_ = outer;
  }

  static Block& current() { return *current_; }
  dim3 thread_idx() const {
    const unsigned t = unsigned(current_thread_);
    return dim3(t % block_dim.x, t / block_dim.x % block_dim.y, t / (block_dim.x * block_dim.y));
  }

  void sync_block() { wait(block_arrived_, block_generation_, threads_); }

  // A full-warp shuffle: every lane posts its value, then takes lane
  // source(lane)'s (its own where that is outside the warp), as
  // __shfl_down_sync (lane + delta) and __shfl_xor_sync (lane ^ mask) do.
  template <typename T, typename Source>
  T shuffle(T value, Source source) {
    static_assert(sizeof(T) <= sizeof(uint64_t), "values of up to 8 bytes");
    const int warp = current_thread_ / 32, lane = current_thread_ % 32, from = source(lane);
    std::memcpy(&warp_slots_[current_thread_], &value, sizeof(T));
    wait(warp_arrived_[warp], warp_generation_[warp], 32);
    T result = value;
    if (from >= 0 && from < 32) std::memcpy(&result, &warp_slots_[warp * 32 + from], sizeof(T));
    wait(warp_arrived_[warp], warp_generation_[warp], 32);  // all read before the next write
    return result;
  }

  dim3 grid_dim, block_dim, block_idx;

 private:
  struct Fiber {
    ucontext_t context;
    std::vector<char> stack;
    bool done = false;
    const uint64_t* waiting_on = nullptr;  // the generation of the barrier it waits at
    uint64_t waiting_since = 0;
  };

  static void entry() {
    Block& b = *current_;
    (*b.body_)();
    b.fibers_[b.current_thread_].done = true;
  }  // uc_link: back to the scheduler

  void yield() { swapcontext(&fibers_[current_thread_].context, &scheduler_); }

  // Arrive at a barrier of `count` threads, and wait until all have.
  void wait(int& arrived, uint64_t& generation, int count) {
    if (++arrived == count) {
      arrived = 0, ++generation;
      return;
    }
    Fiber& f = fibers_[current_thread_];
    f.waiting_on = &generation, f.waiting_since = generation;
    yield();  // resumed once the generation has moved on
    f.waiting_on = nullptr;
  }

  static inline Block* current_ = nullptr;
  int threads_;
  std::vector<Fiber> fibers_;
  ucontext_t scheduler_;
  const std::function<void()>* body_ = nullptr;
  int current_thread_ = 0;
  int block_arrived_ = 0;
  uint64_t block_generation_ = 0;
  std::vector<int> warp_arrived_;
  std::vector<uint64_t> warp_generation_;
  std::vector<uint64_t> warp_slots_;
};

// kernel<<<grid, block>>>(args...): every block in turn.
template <typename... Params>
struct Launch {
  void (*kernel)(Params...);
  dim3 grid, block;
  template <typename... Args>
  void operator()(Args&&... args) const {
    Block b(grid, block);
    const std::function<void()> body = [&] { kernel(args...); };
    for (unsigned z = 0; z < grid.z; ++z)
      for (unsigned y = 0; y < grid.y; ++y)
        for (unsigned x = 0; x < grid.x; ++x) b.run(dim3(x, y, z), body);
  }
};
template <typename... Params>
Launch<Params...> launch(void (*kernel)(Params...), dim3 grid, dim3 block) {
  return {kernel, grid, block};
}

}  // namespace zoo_cuda_emulation

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define threadIdx (::zoo_cuda_emulation::Block::current().thread_idx())
#define blockIdx (::zoo_cuda_emulation::Block::current().block_idx)
#define blockDim (::zoo_cuda_emulation::Block::current().block_dim)
#define gridDim (::zoo_cuda_emulation::Block::current().grid_dim)
#define ZOO_CUDA_EMULATION 1
#define ZOO_LAUNCH(grid, block, stream, ...) ::zoo_cuda_emulation::launch(__VA_ARGS__, grid, block)

inline void __syncthreads() { ::zoo_cuda_emulation::Block::current().sync_block(); }

template <typename T>
T __shfl_down_sync(unsigned mask, T value, unsigned delta) {
  if (mask != 0xffffffffu) throw std::invalid_argument("cuda_emulation: full-warp shuffles only");
  return ::zoo_cuda_emulation::Block::current().shuffle(value, [&](int lane) { return lane + int(delta); });
}
template <typename T>
T __shfl_xor_sync(unsigned mask, T value, int lane_mask) {
  if (mask != 0xffffffffu) throw std::invalid_argument("cuda_emulation: full-warp shuffles only");
  return ::zoo_cuda_emulation::Block::current().shuffle(value, [&](int lane) { return lane ^ lane_mask; });
}
