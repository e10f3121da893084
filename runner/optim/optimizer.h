// Optimizers with modelzoo's update rules and torch.optim-shaped state dicts,
// so checkpoints open in Python. Defines: ParamGroup, Optimizer, make_optimizer,
// LRScheduler, split_weight_decay_groups, clip_grad_norm.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "runner/optim/lr_schedule.h"
#include "runner/optim/optimizer_config.h"

namespace zoo::optim {

struct ParamGroup {
  std::vector<torch::Tensor> params;
  std::vector<std::string> names;
  double weight_decay = 0.0;
  double lr = 0.0;        // this step's: the schedule's times lr_scale
  double lr_scale = 1.0;  // from optimizer.adjust_learning_rate
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  virtual void step() = 0;  // uses each group's lr
  // The step as if every gradient were first multiplied by `coefficient`, a
  // float32 scalar on the gradients' device (clip_coefficient's). This one
  // multiplies the gradients in place, then steps; Adam and AdamW take the
  // coefficient into their update pass, which reads the gradients anyway,
  // and may leave them as they were.
  virtual void step_scaled(const torch::Tensor& coefficient);
  void zero_grad();
  void set_lr(double lr);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  std::vector<torch::Tensor> parameters() const;
  // {"state": {index: {name: tensor}}, "param_groups": [{lr, weight_decay, ..., params: [index]}]}
  c10::impl::GenericDict state_dict() const;
  // Throws std::runtime_error when the saved groups do not match these parameters.
  void load_state_dict(const c10::impl::GenericDict& dict);
  // Sharded optimizer state (runner/parallel/optimizer_sharding.h): forget the state
  // of parameters (flat index) not in `keep`; add entries {index: {name:
  // tensor}} of state_dict()["state"] form.
  void keep_state_of(const std::vector<bool>& keep);
  void add_state(const c10::impl::GenericDict& entries);

 protected:
  Optimizer(std::vector<ParamGroup> groups, std::map<std::string, double> hyper);
  // The state tensor `key` of parameter i, created by `init` on first use.
  torch::Tensor& state_or(size_t i, const std::string& key, const std::function<torch::Tensor()>& init) {
    torch::Tensor& t = state_[i][key];
    if (!t.defined()) t = init();
    return t;
  }
  torch::Tensor& state(size_t flat_index, const std::string& key) { return state_[flat_index][key]; }
  // Calls fn(group, param, flat index) for every parameter that has a gradient.
  void for_each_param_with_grad(const std::function<void(ParamGroup&, torch::Tensor&, size_t)>& fn);
  std::vector<ParamGroup> groups_;
  std::vector<std::map<std::string, torch::Tensor>> state_;  // per parameter, in group order
  std::map<std::string, double> hyper_;                      // echoed into param_groups
};

// What torch.nn.utils.clip_grad_norm_ multiplies the gradients of
// `parameters` by so that their global 2-norm is at most max_norm:
// max_norm / (norm + 1e-6), at most 1; a float32 scalar on the gradients'
// device (nothing here waits for a GPU), undefined without gradients. `norm`,
// when given, gets the norm before clipping.
torch::Tensor clip_coefficient(const std::vector<torch::Tensor>& parameters, double max_norm,
                               torch::Tensor* norm = nullptr);
// The same from the gradients' global 2-norm (a float32 scalar), however it was summed.
torch::Tensor clip_coefficient_of_norm(const torch::Tensor& norm, double max_norm);

// Multiplies the gradients of `parameters` in place by `coefficient` (a scalar
// tensor on their device), in one multi-tensor kernel on CUDA.
void scale_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& coefficient);

// Both: clips the gradients as clip_grad_norm_ does and returns the norm
// before clipping, as a tensor on the gradients' device.
torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm);

// A schedule and how far it has stepped (torch's lr_scheduler.last_epoch),
// saved as modelzoo's "lr_scheduler" state.
class LRScheduler {
 public:
  explicit LRScheduler(const LRScheduleSpec& spec) : schedule_(make_lr_schedule(spec)) {}
  double lr() const { return schedule_->at(steps_); }  // optimizer step k uses lr(k - 1)
  void step() { ++steps_; }
  c10::impl::GenericDict state_dict() const;
  void load_state_dict(const c10::impl::GenericDict& saved) { steps_ = saved.at("last_epoch").toInt(); }

 private:
  std::unique_ptr<LRSchedule> schedule_;
  int64_t steps_ = 0;
};

// Two groups as modelzoo builds them: with weight_decay, and without it for
// biases ("bias" in the name) and the parameters listed in `no_decay`.
std::vector<ParamGroup> split_weight_decay_groups(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_params, const std::set<std::string>& no_decay,
    double weight_decay);

// Each group split by learning-rate multiplier: a parameter gets the product
// of `scales[name]` over the adjustment groups whose glob patterns
// (fnmatch, as modelzoo's LRAdjustmentGroup) match its name. Groups that
// end up empty are dropped. Throws std::invalid_argument naming a scale
// whose group the model does not declare.
std::vector<ParamGroup> adjust_learning_rates(std::vector<ParamGroup> groups,
                                              const std::map<std::string, double>& scales,
                                              const std::map<std::string, std::vector<std::string>>& patterns);

// Through the optimizer registry (runner/optim/registry.h).
std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& config, std::vector<ParamGroup> groups);

}  // namespace zoo::optim
