// Implementation of models/kernels/cuda/dense.h, in float32 arithmetic.
// A grid of row chunks by column tiles, as many blocks as the GPU holds at
// once; each thread takes one group of adjacent columns (16 bytes where the
// rows allow) and walks its chunk's rows, keeping the group's sums in
// registers; the block adds up its threads' sums once at the end and the
// caller adds up the chunks'. Gathering, a thread finds its group's part,
// head and column once; each row then costs a 32-bit division into the
// part's two levels of rows (at most 2^31 rows).
#include <algorithm>
#include <limits>

#include "models/kernels/cuda/dense.h"
#include "models/kernels/cuda/device_common.cuh"

namespace zoo::cuda {
namespace {

constexpr int kDenseThreads = 256;
// Groups of columns a tile holds: a warp's 32 threads each take one group of
// a row, 512 adjacent bytes where the groups are 16-byte packs.
constexpr int kTileGroups = 32;
// Rows each thread loads before it computes on any: enough reads in flight
// to keep the memory busy with a few blocks per multiprocessor.
constexpr int kRowsInFlight = 4;
// More blocks than any current GPU holds at once (an H100: 132 SMs x 8).
constexpr int64_t kMaxDenseChunks = 2048;

// g * act'(x), as LibTorch's activation backward computes it.
template <Activation kAct>
__device__ __forceinline__ float through_activation(float x, float g) {
  if constexpr (kAct == Activation::gelu) {  // Phi(x) + x phi(x)
    const float cdf = 0.5f * (1.f + erff(x * 0.70710678118654752f));
    const float pdf = 0.39894228040143268f * exp_of(-0.5f * x * x);
    return g * (cdf + x * pdf);
  } else if constexpr (kAct == Activation::gelu_tanh) {
    constexpr float kBeta = 0.79788456080286536f, kKappa = 0.044715f;  // sqrt(2 / pi)
    const float x2 = x * x, t = tanhf(kBeta * (x + kKappa * x2 * x));
    return g * (0.5f * (1.f + t) + 0.5f * x * (1.f - t * t) * kBeta * (1.f + 3.f * kKappa * x2));
  } else if constexpr (kAct == Activation::relu) {
    return x > 0.f ? g : 0.f;
  } else {
    return g;
  }
}

// The parts of a gathered output gradient, as a kernel parameter.
struct GatheredParts {
  GradientPart part[kMaxGradientParts];
  int count = 0;
};

// Where a thread's group of columns c.. lies in each row of the output
// gradient: row-major dy (C wide), or gathered from the part holding column
// c (the groups never straddle parts or heads).
template <typename T, bool kGather>
struct GroupSource {
  const T* base;
  int64_t inner = 1, outer_stride = 0, inner_stride = 0;

  __device__ GroupSource(const T* dy, int64_t C, int64_t c, const GatheredParts& parts) {
    if constexpr (kGather) {
      int k = 0;
      while (k + 1 < parts.count && c >= parts.part[k].columns) c -= parts.part[k++].columns;
      const GradientPart& p = parts.part[k];
      base = static_cast<const T*>(p.data) + (c / p.head_dim) * p.head_stride + c % p.head_dim;
      inner = p.inner, outer_stride = p.outer_stride, inner_stride = p.inner_stride;
    } else {
      base = dy + c, inner_stride = C;
    }
  }
  __device__ const T* row(int64_t r) const {
    if constexpr (kGather) {  // 32-bit: a 64-bit division is a call, whose registers spilled
      const uint32_t o = static_cast<uint32_t>(r) / static_cast<uint32_t>(inner);
      return base + o * outer_stride + (r - int64_t(o) * inner) * inner_stride;
    } else {
      return base + r * inner_stride;
    }
  }
};

// A block's threads are `lanes` rows of groups_per_tile threads, thread
// (lane, p) taking group p of column tile blockIdx.y; rows blockIdx.x * lanes
// + lane, then every gridDim.x * lanes-th: neighbouring threads read
// neighbouring columns, neighbouring blocks neighbouring rows. Gathering,
// the gradient is read from `parts` and written packed to dpre.
template <typename T, Activation kAct, int N, bool kGather>
__global__ void __launch_bounds__(kDenseThreads)
    activation_and_column_sums(const T* __restrict__ pre, const T* __restrict__ dy, GatheredParts parts,
                               T* __restrict__ dpre, int64_t rows, int64_t C, int groups_per_tile,
                               float* __restrict__ partial) {
  using Columns = Group<T, N>;
  __shared__ float sums[kDenseThreads * N];
  const int lanes = kDenseThreads / groups_per_tile;
  const int lane = threadIdx.x / groups_per_tile, p = threadIdx.x % groups_per_tile;
  const int64_t c = (int64_t(blockIdx.y) * groups_per_tile + p) * N;
  float acc[N];
#pragma unroll
  for (int k = 0; k < N; ++k) acc[k] = 0.f;
  if (lane < lanes && c < C) {
    const GroupSource<T, kGather> source(dy, C, c, parts);
    const int64_t step = int64_t(gridDim.x) * lanes;
    for (int64_t first = int64_t(blockIdx.x) * lanes + lane; first < rows; first += step * kRowsInFlight) {
      Columns g[kRowsInFlight];
      [[maybe_unused]] Columns x[kRowsInFlight];
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int64_t r = first + i * step;
        if (r < rows) {
          g[i] = *reinterpret_cast<const Columns*>(source.row(r));
          if constexpr (kAct != Activation::none) x[i] = *reinterpret_cast<const Columns*>(pre + r * C + c);
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsInFlight; ++i) {
        const int64_t r = first + i * step;
        if (r < rows) {
          if constexpr (kAct != Activation::none) {
#pragma unroll
            for (int k = 0; k < N; ++k)
              g[i].v[k] = from_float<T>(through_activation<kAct>(to_float(x[i].v[k]), to_float(g[i].v[k])));
          }
          if constexpr (kAct != Activation::none || kGather) *reinterpret_cast<Columns*>(dpre + r * C + c) = g[i];
#pragma unroll
          for (int k = 0; k < N; ++k) acc[k] += to_float(g[i].v[k]);
        }
      }
    }
  }
  if (!partial) return;  // the same in every thread: no barrier is left half-reached
#pragma unroll
  for (int k = 0; k < N; ++k) sums[threadIdx.x * N + k] = acc[k];
  __syncthreads();
  if (lane == 0 && c < C) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      float total = 0.f;
      for (int l = 0; l < lanes; ++l) total += sums[(l * groups_per_tile + p) * N + k];
      partial[blockIdx.x * C + c + k] = total;
    }
  }
}

// Calls launch(std::integral_constant<Activation, act>{}).
template <typename Launch>
void with_activation(Activation act, Launch&& launch) {
  switch (act) {
    case Activation::none: return launch(std::integral_constant<Activation, Activation::none>{});
    case Activation::gelu: return launch(std::integral_constant<Activation, Activation::gelu>{});
    case Activation::gelu_tanh: return launch(std::integral_constant<Activation, Activation::gelu_tanh>{});
    case Activation::relu: return launch(std::integral_constant<Activation, Activation::relu>{});
  }
}

// dense_grad_chunks, for the code above its definition.
int64_t most_chunks(int64_t rows) { return rows < 1 ? 1 : std::min(rows, kMaxDenseChunks); }

// Launches activation_and_column_sums over rows x C; `packs_fit(kVector)`
// says whether every access may be a 16-byte pack of kVector elements.
template <bool kGather, typename PacksFit>
const char* column_pass(ElementType type, Activation act, const void* pre, const void* dy, const GatheredParts& parts,
                        void* dpre, int64_t rows, int64_t C, float* partial, int64_t* chunks, void* stream,
                        PacksFit&& packs_fit) {
  with_element_type(type, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kVector = Pack<T>::kSize;  // a 16-byte access
    auto launch = [&](auto width) {
      constexpr int N = decltype(width)::value;
      auto with = [&](auto activation) {
        constexpr Activation kAct = decltype(activation)::value;
        const auto kernel = activation_and_column_sums<T, kAct, N, kGather>;
        // Tiles of a warp's width: every thread of a block busy (a tile of 192
        // groups, 3072 bfloat16 columns by two, left 64 threads of 256 idle).
        const int64_t groups = (C + N - 1) / N;
        const int groups_per_tile = static_cast<int>(std::min<int64_t>(groups, kTileGroups));
        const int64_t tiles = (groups + groups_per_tile - 1) / groups_per_tile;
        const int64_t lanes = kDenseThreads / groups_per_tile;
        // One wave: with more blocks than fit, the last wave would leave most of the GPU idle.
        static const int64_t per_sm = resident_blocks_per_sm(kernel, kDenseThreads);
        const int64_t resident = per_sm * multiprocessors();
        *chunks = std::min({std::max<int64_t>(1, (resident > 0 ? resident : kMaxDenseChunks) / tiles),
                            most_chunks(rows), (rows + lanes - 1) / lanes});
        const dim3 grid(static_cast<unsigned>(*chunks), static_cast<unsigned>(tiles));
        ZOO_LAUNCH(grid, kDenseThreads, static_cast<cudaStream_t>(stream),
                   activation_and_column_sums<T, kAct, N, kGather>)
        (static_cast<const T*>(pre), static_cast<const T*>(dy), parts, static_cast<T*>(dpre), rows, C, groups_per_tile,
         partial);
      };
      if constexpr (kGather)  // gathering takes no activation: one kernel per type and width
        with(std::integral_constant<Activation, Activation::none>{});
      else with_activation(act, with);
    };
    if (packs_fit(kVector)) launch(std::integral_constant<int, kVector>{});
    else launch(std::integral_constant<int, 1>{});
  });
  return launched();
}

}  // namespace

int64_t dense_grad_chunks(int64_t rows) { return most_chunks(rows); }

const char* dense_activation_and_bias_grad(ElementType type, Activation act, const void* pre, const void* dy,
                                           void* dpre, int64_t rows, int64_t C, float* partial, int64_t* chunks,
                                           void* stream) {
  *chunks = 0;
  if (rows == 0 || C == 0 || (act == Activation::none && !partial)) return nullptr;
  return column_pass<false>(type, act, pre, dy, GatheredParts{}, dpre, rows, C, partial, chunks, stream,
                            [&](int vector) {
                              return C % vector == 0 && aligned_to(dy, 16) &&
                                     (act == Activation::none || (aligned_to(pre, 16) && aligned_to(dpre, 16)));
                            });
}

const char* dense_gather_and_bias_grad(ElementType type, const GradientPart* parts, int count, void* dy, int64_t rows,
                                       int64_t C, float* partial, int64_t* chunks, void* stream) {
  *chunks = 0;
  if (count < 1 || count > kMaxGradientParts) return "dense_gather_and_bias_grad: 1 to 4 parts expected";
  GatheredParts gathered;
  gathered.count = count;
  int64_t columns = 0;
  for (int k = 0; k < count; ++k) {
    const GradientPart& p = parts[k];
    if (p.columns < 0 || p.head_dim < 1 || p.inner < 1 || p.columns % p.head_dim != 0)
      return "dense_gather_and_bias_grad: a part's columns are not whole heads";
    gathered.part[k] = p;
    columns += p.columns;
  }
  if (columns != C) return "dense_gather_and_bias_grad: the parts' columns do not add up to the gradient's";
  if (rows > std::numeric_limits<int32_t>::max()) return "dense_gather_and_bias_grad: more than 2^31 rows";
  if (rows == 0 || C == 0) return nullptr;
  return column_pass<true>(
      type, Activation::none, nullptr, nullptr, gathered, dy, rows, C, partial, chunks, stream, [&](int vector) {
        if (C % vector != 0 || !aligned_to(dy, 16)) return false;
        for (int k = 0; k < count; ++k) {
          const GradientPart& p = parts[k];
          if (!aligned_to(p.data, 16) || p.columns % vector != 0 || p.head_dim % vector != 0 ||
              p.outer_stride % vector != 0 || p.inner_stride % vector != 0 || p.head_stride % vector != 0)
            return false;
        }
        return true;
      });
}

}  // namespace zoo::cuda
