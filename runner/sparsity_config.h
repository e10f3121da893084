// modelzoo's `sparsity` section (cerebras.pytorch.sparse's settings), parsed
// into typed specs; runner/sparsity.h applies it. Defines:
// DropFractionSchedule, SparsityUpdate, SparsityConfig.
#pragma once

#include <optional>
#include <string>

#include "configs/schema/schema.h"

namespace zoo {

// drop_fraction: cosine (init * (1 + cos(pi * step / half_period)) / 2, then
// 0 past the half period, RigL's annealing) or constant (init).
struct DropFractionSchedule {
  std::string type = "cosine";
  double init = 0.3;
  std::optional<int64_t> half_period;
  static const config::Schema<DropFractionSchedule>& schema();
};

// Mask updates on steps start, start + freq, ... before stop.
struct SparsityUpdate {
  std::optional<int64_t> freq;
  int64_t start = 0;
  std::optional<int64_t> stop;
  static const config::Schema<SparsityUpdate>& schema();
};

struct SparsityConfig {
  double sparsity = 0.0;               // fraction of each chosen weight that is zero
  std::string init_method = "random";  // random | topk (keep the largest magnitudes)
  std::string algorithm = "static";    // static | set | rigl
  std::optional<DropFractionSchedule> drop_fraction;
  std::optional<SparsityUpdate> update;
  config::PathList param_filter;         // fnmatch globs over parameter names (empty: every weight of 2+ dims)
  config::PathList param_name_patterns;  // or regular expressions matched at the names' start (modelzoo <= 2.0)
  static const config::Schema<SparsityConfig>& schema();
};

}  // namespace zoo
