// Learning-rate schedules from the optimizer's `learning_rate` key, with
// modelzoo's formulas: a float is constant, a mapping is one scheduler, a list
// runs them one after another (milestones = running sum of total_iters) or
// all at once (main_scheduler: chained). The key is parsed once, at params
// time, into an LRScheduleSpec; each scheduler accepts only its own keys.
// Optimizer step k (1-based) uses at(k - 1).
// Defines: SchedulerSpec, LRScheduleSpec, LRSchedule, make_lr_schedule,
// scheduler_fields, canonical_scheduler_name, scheduler_class_name.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"

namespace zoo::optim {

// One scheduler mapping. Every field any scheduler takes; which ones a
// scheduler accepts and needs is checked when parsing.
struct SchedulerSpec {
  std::string scheduler;
  std::optional<double> initial_learning_rate;
  std::optional<double> end_learning_rate;
  std::optional<double> learning_rate;  // Constant
  std::optional<int64_t> total_iters;
  double power = 1.0;
  bool cycle = false;
  std::optional<double> decay_rate;
  bool staircase = false;
  double scale = 1.0;
  int64_t warmup_steps = 1;
  double step_exponent = 1.0;
  double gamma = 0.1;
  std::optional<int64_t> step_size;
  std::vector<int64_t> milestones;
  std::vector<double> learning_rates;
  std::optional<int64_t> T_max;
  std::optional<int64_t> T_0;
  int64_t T_mult = 1;
  double eta_min = 0.0;
  std::optional<double> coefficient;
  std::optional<double> max_lr;
  int64_t step_size_up = 2000;
  std::optional<int64_t> step_size_down;
  std::string mode = "triangular";
  std::string scale_mode = "cycle";
  int64_t total_steps = 1000;
  double pct_start = 0.3;
  double final_div_factor = 1e4;
  bool three_phase = false;
  std::string anneal_strategy = "cos";
  std::optional<std::string> main_scheduler;
  config::Origin origin;  // where its keys stood, for messages

  static const config::Schema<SchedulerSpec>& schema();
};

// The whole `learning_rate` value.
struct LRScheduleSpec {
  std::optional<double> constant;         // learning_rate: 0.001
  std::vector<SchedulerSpec> schedulers;  // one mapping, or a list
  bool is_list = false;
  bool chained = false;  // main_scheduler: chained in the list

  bool empty() const { return !constant && schedulers.empty(); }
  // Parses and checks every scheduler (names, own keys, required keys).
  static LRScheduleSpec parse(const YAML::Node& learning_rate, const config::Context& optimizer_ctx);
  YAML::Node to_yaml() const;
};

class LRSchedule {
 public:
  virtual ~LRSchedule() = default;
  virtual double at(int64_t step) const = 0;  // lr after `step` scheduler steps
};

std::unique_ptr<LRSchedule> make_lr_schedule(const LRScheduleSpec& spec);
// Parse and build in one go (tests, tools).
std::unique_ptr<LRSchedule> make_lr_schedule(const YAML::Node& learning_rate, const config::Context& ctx);

// "LinearLR", "linear" -> "linear"; "" when no scheduler has that name.
std::string canonical_scheduler_name(const std::string& name);
// modelzoo's class name ("linear" -> "LinearLR"); "" when unknown.
std::string scheduler_class_name(const std::string& name);

// Every key a scheduler mapping may hold, for --help-config.
std::vector<config::FieldInfo> scheduler_fields();

}  // namespace zoo::optim

namespace zoo::config {
// `learning_rate` as a schema field.
template <>
struct Value<optim::LRScheduleSpec> {
  static optim::LRScheduleSpec parse(const YAML::Node& n, const Context& c, const std::string&) {
    return optim::LRScheduleSpec::parse(n, c);
  }
  static YAML::Node emit(const optim::LRScheduleSpec& v) { return v.to_yaml(); }
  static std::string type_name() { return "float, scheduler mapping or list of them"; }
};
}  // namespace zoo::config
