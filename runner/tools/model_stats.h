// A model's size from its params alone, built on the meta device (no
// weights allocated): parameters, FLOPs per token, model state per device for
// the runconfig's parallelism. `--validate_only` and `zoo config stats` print
// it. Defines: ModelSummary, summarize_model, describe_model_stats.
#pragma once

#include <cstdint>
#include <ostream>

#include "runner/params/params.h"

namespace zoo {

struct ModelSummary {
  int64_t parameters = 0;
  int64_t trained_parameters = 0;  // fewer when some are frozen (DPO's reference, LoRA's base)
  int64_t adapter_layers = 0;      // dense layers with a LoRA adapter
  double forward_flops_per_token = 0;
  // Model state on one device for training: trained parameters in float32
  // with their gradients and optimizer state, frozen ones in the dtype they
  // are held in (the compute dtype for LoRA's base on a GPU with mixed precision).
  double trained_state_bytes = 0, frozen_bytes = 0;
  // Full sharding's units, in parameters: the root (everything outside the
  // repeated layers) and the largest layer.
  int64_t root_unit_parameters = 0, largest_layer_parameters = 0;
};
// Builds the model (with its adapters) on the meta device: sizes without allocating weights.
ModelSummary summarize_model(const Params& params);

namespace tools {
// Parameters, FLOPs per token (and per step: train_input's global batch of
// max_sequence_length tokens, or of the model's max_position_embeddings when
// the data sets its own length), model state on one device and per device at
// `ranks` ranks under the runconfig's parallelism.
void describe_model_stats(const Params& params, int64_t ranks, std::ostream& out);
}  // namespace tools

}  // namespace zoo
