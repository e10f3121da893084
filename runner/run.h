// zoo's entry point, mirroring modelzoo's run(): parse the command line, load
// and validate params, then drive train / eval / train_and_eval / eval_all.
// Defines: run, ModelSummary, summarize_model.
#pragma once

#include <string>
#include <vector>

#include "runner/params/params.h"

namespace zoo {

// Returns the process exit code: 0 on success, 1 with a one-line reason on
// stderr otherwise. args excludes the program name.
int run(const std::vector<std::string>& args);

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

}  // namespace zoo
