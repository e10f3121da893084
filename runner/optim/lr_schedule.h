// Learning-rate schedules from the optimizer's `learning_rate` key, with
// modelzoo's formulas: a float is constant, a mapping is one scheduler, a list
// runs them one after another (milestones = running sum of total_iters).
// Optimizer step k (1-based) uses at(k - 1).
// Defines: LRSchedule, make_lr_schedule, scheduler_fields.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "runner/config/schema.h"

namespace zoo::optim {

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double at(int64_t step) const = 0;  // lr after `step` scheduler steps
};

// Throws config::ConfigError naming the key and line for unknown schedulers,
// missing or bad fields.
std::unique_ptr<LRSchedule> make_lr_schedule(const YAML::Node& learning_rate, const config::Context& ctx);

// Every key a scheduler mapping may hold, for --help-config.
std::vector<config::FieldInfo> scheduler_fields();

}  // namespace zoo::optim
