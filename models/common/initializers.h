// Weight initializers named as in modelzoo's `initializer` / `embedding_initializer`
// / `output_layer_initializer` mappings. Defines: InitializerSpec (with its
// schema), truncated_normal_spec, scaled_initializer, apply_initializer.
#pragma once

#include <torch/torch.h>

#include <string>

#include "configs/schema/schema.h"

namespace zoo::models {

struct InitializerSpec {
  std::string name = "normal";
  double mean = 0.0;
  double std = 0.02;
  double a = -2.0;            // lower bound (truncated_normal: absolute; uniform: low)
  double b = 2.0;             // upper bound
  double gain = 1.0;          // xavier_*
  double val = 0.0;           // constant
  double scale = 1.0;         // variance_scaling
  std::string mode = "fan_in";  // kaiming_* / variance_scaling
  std::string nonlinearity = "leaky_relu";
  std::string distribution = "truncated_normal";  // variance_scaling
  static constexpr bool kHelpCollapsed = true;  // its keys: see the README, not under every initializer field
  static const config::Schema<InitializerSpec>& schema();
};

// modelzoo's default: truncated normal(0, std) cut at +-2 std.
InitializerSpec truncated_normal_spec(double std);

// A (truncated) normal initializer with its spread times `by`, bounds too (muP).
InitializerSpec scaled_initializer(InitializerSpec spec, double by);

// Fills `weight` in place; no-op for meta tensors. Throws std::invalid_argument
// for an unknown name (the schema already rejects those when read from YAML).
void apply_initializer(const InitializerSpec& spec, torch::Tensor weight);

}  // namespace zoo::models
