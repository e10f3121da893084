// The `optimizer` section: optimizer type and hyper-parameters, the learning
// rate (scalar or schedule list), gradient clipping, accumulation and the
// loss-scaling keys modelzoo keeps in this section. Each optimizer accepts
// only its own hyper-parameters (runner/optim/registry.h) and fills in its
// own defaults, so the echoed params show the values used.
// Defines: OptimizerConfig.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "runner/optim/lr_schedule.h"

namespace zoo {

struct OptimizerConfig {
  std::string optimizer_type = "AdamW";
  optim::LRScheduleSpec learning_rate;  // unset: the optimizer's default lr
  // Hyper-parameters; null means the chosen optimizer's own default.
  std::optional<std::vector<double>> betas;
  std::optional<config::NumberList> eps;  // one value; Adafactor: (eps1, eps2)
  double weight_decay = 0.0;
  bool correct_bias = true;
  bool amsgrad = false;
  double momentum = 0.0;
  double dampening = 0.0;
  bool nesterov = false;
  double rho = 0.9;
  double lr_decay = 0.0;
  double initial_accumulator_value = 0.0;
  double lambd = 1e-4;
  std::optional<double> alpha;
  double t0 = 1e6;
  double momentum_decay = 4e-3;
  bool centered = false;
  std::vector<double> etas = {0.5, 1.2};
  std::vector<double> step_sizes = {1e-6, 50.0};
  std::optional<double> beta1;  // Adafactor's first-moment decay (null: no first moment)
  double clip_threshold = 1.0;
  double decay_rate = -0.8;
  bool scale_parameter = false;
  bool relative_step = false;
  bool warmup_init = false;
  std::optional<double> max_gradient_norm;
  std::optional<double> max_gradient_value;
  int64_t grad_accum_steps = 1;
  std::string loss_scaling_factor = "1.0";
  std::optional<double> initial_loss_scale;
  int64_t steps_per_increase = 2000;
  std::optional<double> min_loss_scale;
  std::optional<double> max_loss_scale;
  bool log_summaries = false;
  // muP: learning-rate multipliers by the model's named parameter groups (decoder_kernel: 0.1).
  std::map<std::string, double> adjust_learning_rate;

  // The scalar eps (OptimizerConfig::parse fills each optimizer's own default).
  double eps_value() const { return eps.value().items.front(); }

  config::Origin origin;  // where its keys stood, for messages

  static const config::Schema<OptimizerConfig>& schema();
  // The section read with the chosen optimizer's keys and defaults.
  static OptimizerConfig parse(const YAML::Node& section, const config::Context& ctx);
  // The common keys and the chosen optimizer's own, resolved.
  YAML::Node to_yaml() const;
};

}  // namespace zoo
