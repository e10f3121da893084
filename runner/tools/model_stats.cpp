// Implementation of runner/tools/model_stats.h.
#include "runner/tools/model_stats.h"

#include <torch/torch.h>

#include <algorithm>

#include "data/registry.h"
#include "models/common/layer_hooks.h"
#include "models/common/lora.h"
#include "models/registry.h"
#include "runner/log.h"
#include "runner/model_guards.h"
#include "runner/optim/registry.h"
#include "runner/parallel/strategy.h"

namespace zoo {

ModelSummary summarize_model(const Params& params) {
  auto model = params.model->build(torch::TensorOptions().device(torch::kMeta));
  ModelSummary s;
  s.forward_flops_per_token = model->forward_flops_per_token();
  if (!params.lora.empty()) {
    apply_lora_params(*model, params, torch::Device(torch::kMeta));
    s.adapter_layers = static_cast<int64_t>(models::lora_layers(*model).size());
  }
  s.parameters = models::parameter_count(*model);
  s.trained_parameters = models::trainable_parameter_count(*model);
  int64_t in_layers = 0;
  for (const auto& layer : models::hooked_layers(*model)) {
    const int64_t n = models::parameter_count(*layer);
    in_layers += n;
    s.largest_layer_parameters = std::max(s.largest_layer_parameters, n);
  }
  s.root_unit_parameters = s.parameters - in_layers;
  // Weights and gradients (4 B each) plus the optimizer's state per trained parameter.
  const optim::OptimizerEntry* optimizer = optim::find_optimizer(params.optimizer.optimizer_type);
  const double state = optimizer ? optimizer->state_bytes(params.optimizer) : 8;
  s.trained_state_bytes = static_cast<double>(s.trained_parameters) * (8 + state);
  const bool half_base =
      !params.lora.empty() && params.runconfig.target_device == "GPU" && params.precision.mixed_precision;
  s.frozen_bytes = static_cast<double>(s.parameters - s.trained_parameters) * (half_base ? 2 : 4);
  return s;
}

namespace tools {

void describe_model_stats(const Params& params, int64_t ranks, std::ostream& out) {
  const ModelSummary s = summarize_model(params);
  out << "Model: " << params.model_name << " (built on the meta device; no weights allocated)\n"
      << strf("Parameters: %ld (%.2fM)", static_cast<long>(s.parameters), s.parameters / 1e6)
      << (s.trained_parameters == s.parameters
              ? std::string("\n")
              : strf("; trained: %ld (%.2fM), the rest frozen\n", static_cast<long>(s.trained_parameters),
                     s.trained_parameters / 1e6))
      << strf("FLOPs per token: forward %.4g, training (3x forward) %.4g\n", s.forward_flops_per_token,
              3 * s.forward_flops_per_token);
  // batch_size is the global batch (split over the ranks) of max_sequence_length tokens; data that sets its own
  // length (modelzoo's HDF5 samples) is counted at the model's longest.
  const std::optional<int64_t> input_length = params.train_input ? params.train_input->sequence_length() : std::nullopt;
  const std::optional<int64_t> length = input_length ? input_length : params.model->max_sequence_length();
  if (params.train_input && length) {
    const double tokens = static_cast<double>(params.train_input->batch_size()) * static_cast<double>(*length);
    out << strf("Tokens per step: %.0f (train_input.batch_size %ld, the global batch, x %s %ld); ", tokens,
                static_cast<long>(params.train_input->batch_size()),
                input_length ? "max_sequence_length" : "the model's max_position_embeddings",
                static_cast<long>(*length))
        << strf("training FLOPs per step %.4g, %.4g per rank at %ld ranks\n", 3 * s.forward_flops_per_token * tokens,
                3 * s.forward_flops_per_token * tokens / static_cast<double>(ranks), static_cast<long>(ranks));
  }
  if (s.adapter_layers > 0)
    out << strf("LoRA: adapters on %ld dense layers: %ld trainable parameters (%.3f%% of %ld), %ld frozen\n",
                static_cast<long>(s.adapter_layers), static_cast<long>(s.trained_parameters),
                100.0 * static_cast<double>(s.trained_parameters) / static_cast<double>(s.parameters),
                static_cast<long>(s.parameters), static_cast<long>(s.parameters - s.trained_parameters));
  const auto size = parallel::memory_text;
  out << "Model state for training on one " << params.runconfig.target_device << ": "
      << size(s.trained_state_bytes + s.frozen_bytes) << " (trained: " << size(s.trained_state_bytes)
      << " of float32 weights, gradients and " << params.optimizer.optimizer_type
      << " state; frozen: " << size(s.frozen_bytes) << "), before activations\n";
  const RunConfig& rc = params.runconfig;
  if (rc.parallelism() == Parallelism::optimizer || rc.parallelism() == Parallelism::full) {
    parallel::ModelStateSizes sizes;
    sizes.trained_parameters = static_cast<double>(s.trained_parameters);
    sizes.trained_state_bytes = s.trained_state_bytes;
    sizes.frozen_bytes = s.frozen_bytes;
    sizes.root_unit_parameters = s.root_unit_parameters;
    sizes.largest_layer_parameters = s.largest_layer_parameters;
    const parallel::MemoryPerDevice m = parallel::memory_per_device(rc.parallelism(), sizes, ranks);
    out << strf("Model state per device at %ld ranks (WORLD_SIZE), sharding: ", static_cast<long>(ranks))
        << parallelism_name(rc.parallelism()) << ": " << size(m.bytes) << " (" << m.what << "), before activations\n";
  }
}

}  // namespace tools
}  // namespace zoo
