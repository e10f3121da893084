// The 16-bit copies of float32 parameters that zoo's CUDA dense layer
// multiplies with under autocast, kept from one step to the next. Cast per
// layer and per step, the 111M model's weights took ~100 small kernels a
// step (a cast of each weight and bias, a concatenation of q, k and v's);
// kept, they are refreshed only after the optimizer changed them, all in one
// multi-tensor pass, and q, k and v's copies are laid side by side from the
// start. A part has changed when its version counter (bumped by every
// in-place op: optimizer steps, checkpoint loads, broadcasts) or its storage
// has. Costs 2 bytes a parameter between steps (during one, autocast's casts
// were held for the backward anyway).
// Defines: stacked_copy, weight_copy_applies, weight_copy, WeightCopyStats,
// weight_copy_stats, forget_weight_copies.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/ArrayRef.h>

#include <cstddef>
#include <cstdint>

namespace zoo::models {

// parts (each (rows_i, ...), one trailing shape, type and device) cast to
// `type` and stacked along dim 0, then `padding` rows of `padding_value`;
// a new tensor, without gradient.
at::Tensor stacked_copy(at::TensorList parts, at::ScalarType type, int64_t padding = 0, double padding_value = 0);

// True when weight_copy keeps a copy of parts: leaves of autograd (the
// parameters; a tensor computed each step would only fill the store), of
// one floating type other than `type`, on one device.
bool weight_copy_applies(at::TensorList parts, at::ScalarType type);

// stacked_copy(parts, type, padding, padding_value), kept: the same copy
// while no part has changed. The first call that finds its copy stale
// refreshes every stale copy at once (the optimizer updated them all) and
// forgets those whose parts are gone. The copy's own version counter moves
// with each refresh, so a graph still holding the old values for its
// backward fails loudly instead of using the new ones. weight_copy_applies
// must hold.
at::Tensor weight_copy(at::TensorList parts, at::ScalarType type, int64_t padding = 0, double padding_value = 0);

struct WeightCopyStats {
  size_t kept = 0;       // copies held now
  size_t made = 0;       // copies made since the start
  size_t refreshes = 0;  // passes that refreshed stale copies
  size_t refreshed = 0;  // copies refreshed by them
};
WeightCopyStats weight_copy_stats();

// Drops every kept copy (tests; a process done training).
void forget_weight_copies();

}  // namespace zoo::models
