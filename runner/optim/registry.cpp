// Implementation of runner/optim/registry.h.
#include "runner/optim/registry.h"

#include <algorithm>

#include "runner/optim/algorithms.h"
#include "runner/optim/optimizer_config.h"

namespace zoo::optim {
namespace {

std::unique_ptr<Optimizer> make_adam(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return make_cerebras_adam(std::move(g), c, /*decoupled_weight_decay=*/false);
}
std::unique_ptr<Optimizer> make_adamw(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return make_cerebras_adam(std::move(g), c, /*decoupled_weight_decay=*/true);
}

// State bytes per parameter: one float32 tensor like the weight is 4.
double one_tensor(const OptimizerConfig&) { return 4; }
double two_tensors(const OptimizerConfig&) { return 8; }
double sgd_state(const OptimizerConfig& c) { return c.momentum > 0 ? 4 : 0; }  // momentum_buffer
double rmsprop_state(const OptimizerConfig& c) {                               // square_avg, momentum_buffer, grad_avg
  return 4 + (c.momentum > 0 ? 4 : 0) + (c.centered ? 4 : 0);
}
// Second moments factored into a row and a column per matrix (next to
// nothing), exp_avg only with beta1.
double adafactor_state(const OptimizerConfig& c) { return c.beta1 ? 4 : 0; }

}  // namespace

const std::vector<OptimizerEntry>& optimizer_registry() {
  static const std::vector<OptimizerEntry> entries = {
      {"SGD",
       {"momentum", "dampening", "nesterov"},
       "{momentum: 0.0, dampening: 0.0, nesterov: false}",
       std::nullopt,
       sgd_state,
       make_sgd},
      {"Adam",
       {"betas", "eps", "correct_bias", "amsgrad"},
       "{betas: [0.9, 0.999], eps: 1.0e-6, correct_bias: true, amsgrad: false}",
       1e-3,
       two_tensors,
       make_adam},
      {"AdamW",
       {"betas", "eps", "correct_bias", "amsgrad"},
       "{betas: [0.9, 0.999], eps: 1.0e-6, correct_bias: true, amsgrad: false}",
       1e-3,
       two_tensors,
       make_adamw},
      {"Adamax", {"betas", "eps"}, "{betas: [0.9, 0.999], eps: 1.0e-8}", 2e-3, two_tensors, make_adamax},
      {"Adadelta", {"rho", "eps"}, "{rho: 0.9, eps: 1.0e-6}", 1.0, two_tensors, make_adadelta},
      {"Adagrad",
       {"lr_decay", "initial_accumulator_value", "eps"},
       "{lr_decay: 0.0, initial_accumulator_value: 0.0, eps: 1.0e-10}",
       1e-2,
       one_tensor,
       make_adagrad},
      {"ASGD", {"lambd", "alpha", "t0"}, "{lambd: 1.0e-4, alpha: 0.75, t0: 1.0e+6}", 1e-2, one_tensor, make_asgd},
      {"Lamb",
       {"betas", "eps"},
       "{betas: [0.9, 0.999], eps: 1.0e-6}",
       1e-3,
       two_tensors,
       make_lamb,
       /*elementwise=*/false},
      {"Lion", {"betas"}, "{betas: [0.9, 0.99]}", 1e-4, one_tensor, make_lion},
      {"NAdam",
       {"betas", "eps", "momentum_decay"},
       "{betas: [0.9, 0.999], eps: 1.0e-8, momentum_decay: 4.0e-3}",
       2e-3,
       two_tensors,
       make_nadam},
      {"RAdam", {"betas", "eps"}, "{betas: [0.9, 0.999], eps: 1.0e-8}", 1e-3, two_tensors, make_radam},
      {"RMSprop",
       {"alpha", "eps", "momentum", "centered"},
       "{alpha: 0.99, eps: 1.0e-8, momentum: 0.0, centered: false}",
       1e-2,
       rmsprop_state,
       make_rmsprop},
      {"Rprop",
       {"etas", "step_sizes"},
       "{etas: [0.5, 1.2], step_sizes: [1.0e-6, 50.0]}",
       1e-2,
       two_tensors,
       make_rprop},
      {"Adafactor",
       {"eps", "clip_threshold", "decay_rate", "beta1", "scale_parameter", "relative_step", "warmup_init"},
       "{eps: [1.0e-30, 1.0e-3], clip_threshold: 1.0, decay_rate: -0.8, beta1: null, scale_parameter: false, "
       "relative_step: false, warmup_init: false}",
       1e-3,
       adafactor_state,
       make_adafactor,
       /*elementwise=*/false},
  };
  return entries;
}

const OptimizerEntry* find_optimizer(const std::string& name) {
  const std::string wanted = lower(name);
  for (const auto& e : optimizer_registry())
    if (lower(e.name) == wanted) return &e;
  return nullptr;
}

bool OptimizerEntry::takes(const std::string& key) const {
  const auto& common = common_optimizer_keys();
  return std::find(common.begin(), common.end(), key) != common.end() ||
         std::find(keys.begin(), keys.end(), key) != keys.end();
}

const std::vector<std::string>& common_optimizer_keys() {
  static const std::vector<std::string> keys = {
      "optimizer_type",   "learning_rate",       "weight_decay",        "max_gradient_norm",  "max_gradient_value",
      "grad_accum_steps", "loss_scaling_factor", "initial_loss_scale",  "steps_per_increase", "min_loss_scale",
      "max_loss_scale",   "log_summaries",       "adjust_learning_rate"};
  return keys;
}

}  // namespace zoo::optim
