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
  double a = -2.0;              // lower bound (truncated_normal: absolute; uniform: low)
  double b = 2.0;               // upper bound
  double gain = 1.0;            // xavier_*
  double val = 0.0;             // constant
  double scale = 1.0;           // variance_scaling
  std::string mode = "fan_in";  // kaiming_* / variance_scaling
  std::string nonlinearity = "leaky_relu";
  std::string distribution = "truncated_normal";  // variance_scaling
  static constexpr bool kHelpCollapsed = true;    // its keys: see the README, not under every initializer field
  static const config::Schema<InitializerSpec>& schema();
};

}  // namespace zoo::models

namespace zoo::config {
// An initializer given by name alone (`bias_initializer: zeros`), as
// modelzoo's create_initializer takes a bare string, or as a mapping.
template <>
struct Value<models::InitializerSpec> {
  static models::InitializerSpec parse(const YAML::Node& n, const Context& c, const std::string& k) {
    if (!n.IsScalar()) return models::InitializerSpec::schema().parse(n, c.child(k));
    YAML::Node named(YAML::NodeType::Map);
    named["name"] = n;  // the value's node, so a bad name is reported at its line
    return models::InitializerSpec::schema().parse(named, c.child(k));
  }
  static YAML::Node emit(const models::InitializerSpec& v) { return models::InitializerSpec::schema().to_yaml(v); }
  static std::string type_name() { return "initializer (a name or a mapping)"; }
};
}  // namespace zoo::config

namespace zoo::models {

// modelzoo's default: truncated normal(0, std) cut at +-2 std.
InitializerSpec truncated_normal_spec(double std);

// A (truncated) normal initializer with its spread times `by`, bounds too (muP).
InitializerSpec scaled_initializer(InitializerSpec spec, double by);

// Fills `weight` in place; no-op for meta tensors. Throws std::invalid_argument
// for an unknown name (the schema already rejects those when read from YAML).
void apply_initializer(const InitializerSpec& spec, torch::Tensor weight);

// A CPU generator whose mt19937 state is spread from all 64 bits of `seed`.
// torch's CPUGeneratorImpl(seed) keeps only the low 32 bits, so two of the
// blocks a large tensor is drawn in (seeds drawn as 64-bit numbers) would get
// the same values about once in 2^32 pairs: likely somewhere in a 13B model.
at::Generator cpu_generator_from_seed(uint64_t seed);

}  // namespace zoo::models
