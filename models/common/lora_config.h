// modelzoo's `lora_params` (legacy format: in `model`; Trainer format: the
// Lora callback's lora_params): one group of LoRA settings, or a list of
// groups, the first whose target_modules match a layer applying to it.
// Defines: LoraGroup, parse_lora_params.
#pragma once

#include <yaml-cpp/yaml.h>

#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"

namespace zoo::models {

struct LoraGroup {
  int64_t r = 8;
  double alpha = 1.0;
  double dropout = 0.0;
  bool fan_in_fan_out = false;
  bool merge_weights = false;
  std::optional<std::vector<std::string>> target_modules;
  static const config::Schema<LoraGroup>& schema();
};

// A mapping (one group) or a list of mappings; throws config::ConfigError
// naming the file, line and key.
std::vector<LoraGroup> parse_lora_params(const YAML::Node& node, const config::Context& ctx);
YAML::Node lora_params_to_yaml(const std::vector<LoraGroup>& groups);

}  // namespace zoo::models
