// Internal to runner/optim: one factory per update rule. Defines: make_* for
// each optimizer, lower, scalar_state, next_step, l2_decayed_grad.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "runner/optim/optimizer.h"

namespace zoo::optim {

std::string lower(std::string s);

// Helpers shared by the update rules.
torch::Tensor scalar_state(double v);                                        // a double scalar tensor
double next_step(torch::Tensor& step);                                       // increments, returns the new count
torch::Tensor l2_decayed_grad(const ParamGroup& g, const torch::Tensor& p);  // grad + weight_decay * p

// adaptive.cpp
std::unique_ptr<Optimizer> make_cerebras_adam(std::vector<ParamGroup> g, const OptimizerConfig& c,
                                              bool decoupled_weight_decay);
std::unique_ptr<Optimizer> make_adamax(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_nadam(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_radam(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_lamb(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_lion(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_adafactor(std::vector<ParamGroup> g, const OptimizerConfig& c);

// classic.cpp
std::unique_ptr<Optimizer> make_sgd(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_asgd(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_adadelta(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_adagrad(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_rmsprop(std::vector<ParamGroup> g, const OptimizerConfig& c);
std::unique_ptr<Optimizer> make_rprop(std::vector<ParamGroup> g, const OptimizerConfig& c);

}  // namespace zoo::optim
