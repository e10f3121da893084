// What the trainer checks of a model before it allocates one and before it
// saves one. Defines: apply_lora_params, build_model, non_finite_parameters.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "runner/params/params.h"

namespace zoo {

// params.model built on `device`, its fused kernels planned for the run's
// kernel policy (models/fusion.h); when memory runs out, a std::runtime_error
// naming the params file, the model, its parameter count and the GiB its
// float32 weights need (the allocator's own text names none of them).
// With params.lora the model then gets its adapters (apply_lora_params).
std::shared_ptr<models::Model> build_model(const Params& params, const torch::Device& device);

// Adapters on the layers params.lora targets (models/common/lora.h), the
// rest frozen and, on a GPU with mixed precision, held in the compute dtype.
// Throws std::runtime_error naming the params file and key when
// target_modules match nothing.
void apply_lora_params(models::Model& model, const Params& params, const torch::Device& device);

// The names of the model's parameters that hold a NaN or an infinity.
std::vector<std::string> non_finite_parameters(const torch::nn::Module& model);

}  // namespace zoo
