// Internal to runner/parallel: a flat buffer of full sharding (all of one
// unit's parameters of one optimizer group, dtype and device, end to end,
// padded to world_size equal shards) and where a parameter's part of this
// rank's shard lies. Shared by full_sharding.cpp (the engine) and
// full_sharding_state.cpp (checkpoints). Defines: FullSharding::Flat, shard_overlap.
#pragma once

#include <torch/torch.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "runner/parallel/full_sharding.h"

namespace zoo {

struct FullSharding::Flat {
  size_t unit = 0;
  int group = -1;  // the optimizer group; -1: frozen
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;
  std::vector<int64_t> offsets;  // of each parameter in the flat buffer
  int64_t numel = 0, shard_numel = 0;
  torch::Tensor shard, full;
  size_t optimizer_index = 0;  // in the sharded optimizer's parameters()
  int64_t begin(int rank) const { return int64_t{rank} * shard_numel; }
};

// The part of a parameter at [offset, offset + n) of a flat buffer that lies
// in [lo, hi): {start in the buffer, length}; length 0 when none.
inline std::pair<int64_t, int64_t> shard_overlap(int64_t offset, int64_t n, int64_t lo, int64_t hi) {
  const int64_t a = std::max(offset, lo), b = std::min(offset + n, hi);
  return {a, std::max<int64_t>(0, b - a)};
}

}  // namespace zoo
