// Implementation of runner/optim/optimizer.h: the shared Optimizer machinery
// and the factory. The update rules live in adaptive.cpp and classic.cpp.
#include "runner/optim/optimizer.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "models/kernels/torch_version.h"
#include "runner/optim/algorithms.h"
#include "runner/optim/registry.h"

namespace zoo::optim {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), ::tolower);
  return s;
}

torch::Tensor scalar_state(double v) { return torch::full({}, v, torch::dtype(torch::kDouble)); }

double next_step(torch::Tensor& step) { return step.add_(1.0).item<double>(); }

torch::Tensor l2_decayed_grad(const ParamGroup& g, const torch::Tensor& p) {
  return g.weight_decay != 0 ? p.grad() + g.weight_decay * p : p.grad();
}

Optimizer::Optimizer(std::vector<ParamGroup> groups, std::map<std::string, double> hyper)
    : groups_(std::move(groups)), hyper_(std::move(hyper)) {
  size_t n = 0;
  for (const auto& g : groups_) n += g.params.size();
  state_.resize(n);
}

void Optimizer::for_each_param_with_grad(const std::function<void(ParamGroup&, torch::Tensor&, size_t)>& fn) {
  torch::NoGradGuard no_grad;
  size_t index = 0;
  for (auto& g : groups_) {
    for (auto& p : g.params) {
      const size_t i = index++;
      if (p.grad().defined()) fn(g, p, i);
    }
  }
}

void Optimizer::zero_grad() {
  for (auto& g : groups_)
    for (auto& p : g.params)
      if (p.grad().defined()) p.mutable_grad() = torch::Tensor();
}

void Optimizer::set_lr(double lr) {
  for (auto& g : groups_) g.lr = lr * g.lr_scale;
}

std::vector<torch::Tensor> Optimizer::parameters() const {
  std::vector<torch::Tensor> out;
  for (const auto& g : groups_) out.insert(out.end(), g.params.begin(), g.params.end());
  return out;
}

c10::impl::GenericDict Optimizer::state_dict() const {
  c10::impl::GenericDict state(c10::IntType::get(), c10::AnyType::get());
  for (size_t i = 0; i < state_.size(); ++i) {
    if (state_[i].empty()) continue;
    c10::impl::GenericDict entry(c10::StringType::get(), c10::AnyType::get());
    for (const auto& [k, v] : state_[i]) entry.insert(k, v);
    state.insert(static_cast<int64_t>(i), entry);
  }
  c10::impl::GenericList groups(c10::AnyType::get());
  int64_t index = 0;
  for (const auto& g : groups_) {
    c10::impl::GenericDict gd(c10::StringType::get(), c10::AnyType::get());
    gd.insert("lr", g.lr);
    gd.insert("weight_decay", g.weight_decay);
    for (const auto& [k, v] : hyper_) gd.insert(k, v);
    std::vector<int64_t> ids;
    for (size_t j = 0; j < g.params.size(); ++j) ids.push_back(index++);
    gd.insert("params", ids);
    groups.push_back(gd);
  }
  c10::impl::GenericDict out(c10::StringType::get(), c10::AnyType::get());
  out.insert("state", state);
  out.insert("param_groups", groups);
  return out;
}

void Optimizer::keep_state_of(const std::vector<bool>& keep) {
  for (size_t i = 0; i < state_.size(); ++i)
    if (i >= keep.size() || !keep[i]) state_[i].clear();
}

void Optimizer::add_state(const c10::impl::GenericDict& entries) {
  std::vector<torch::Tensor> params = parameters();
  for (const auto& kv : entries) {
    const int64_t i = kv.key().toInt();
    if (i < 0 || i >= static_cast<int64_t>(state_.size()))
      throw std::runtime_error("optimizer state names parameter " + std::to_string(i) + " which does not exist");
    for (const auto& e : kv.value().toGenericDict()) {
      // Scalars (step counts, beta powers) stay on the CPU, where reading them costs no device sync.
      const torch::Tensor t = e.value().toTensor();
      state_[i][e.key().toStringRef()] = t.dim() == 0 && params[i].dim() > 0 ? t.cpu() : t.to(params[i].device());
    }
  }
}

void Optimizer::load_state_dict(const c10::impl::GenericDict& dict) {
  auto groups = dict.at("param_groups").toList();
  if (groups.size() != groups_.size())
    throw std::runtime_error("optimizer state has " + std::to_string(groups.size()) + " parameter groups, expected " +
                             std::to_string(groups_.size()));
  for (size_t i = 0; i < groups_.size(); ++i) {
    auto gd = groups.get(i).toGenericDict();
    if (gd.at("params").toIntVector().size() != groups_[i].params.size())
      throw std::runtime_error("optimizer state group " + std::to_string(i) + " has a different parameter count");
    groups_[i].lr = gd.at("lr").toDouble();
  }
  for (auto& s : state_) s.clear();
  add_state(dict.at("state").toGenericDict());
}

std::vector<ParamGroup> adjust_learning_rates(std::vector<ParamGroup> groups,
                                              const std::map<std::string, double>& scales,
                                              const std::map<std::string, std::vector<std::string>>& patterns) {
  if (scales.empty()) return groups;
  for (const auto& [name, scale] : scales) {
    if (patterns.count(name)) continue;
    std::string known;
    for (const auto& [k, unused] : patterns) known += (known.empty() ? "" : ", ") + k;
    throw std::invalid_argument(
        name + ": the model has no such parameter group (it has: " + (known.empty() ? "none" : known) + ")");
  }
  auto scale_of = [&](const std::string& param) {
    double s = 1.0;
    for (const auto& [name, scale] : scales)
      for (const auto& glob : patterns.at(name))
        if (fnmatch(glob.c_str(), param.c_str(), 0) == 0) {
          s *= scale;
          break;
        }
    return s;
  };
  std::vector<ParamGroup> out;
  for (const ParamGroup& g : groups) {
    std::map<double, ParamGroup> by_scale;  // in order of scale: the same split every run
    for (size_t i = 0; i < g.params.size(); ++i) {
      const double s = scale_of(g.names[i]);
      ParamGroup& part = by_scale.try_emplace(s, ParamGroup{{}, {}, g.weight_decay, g.lr, s}).first->second;
      part.params.push_back(g.params[i]);
      part.names.push_back(g.names[i]);
    }
    for (auto& [s, part] : by_scale) out.push_back(std::move(part));
  }
  return out;
}

std::vector<ParamGroup> split_weight_decay_groups(
    const std::vector<std::pair<std::string, torch::Tensor>>& named_params, const std::set<std::string>& no_decay,
    double weight_decay) {
  ParamGroup decay, plain;
  decay.weight_decay = weight_decay;
  for (const auto& [name, p] : named_params) {
    if (!p.requires_grad()) continue;
    ParamGroup& g = (name.find("bias") != std::string::npos || no_decay.count(name)) ? plain : decay;
    g.params.push_back(p);
    g.names.push_back(name);
  }
  std::vector<ParamGroup> out;
  if (!decay.params.empty()) out.push_back(decay);
  if (!plain.params.empty()) out.push_back(plain);
  return out;
}

torch::Tensor clip_coefficient(const std::vector<torch::Tensor>& parameters, double max_norm, torch::Tensor* norm) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) {
    if (norm) *norm = torch::zeros({});
    return {};
  }
  std::vector<torch::Tensor> norms = at::_foreach_norm(grads, 2);  // one fused kernel on CUDA
  for (auto& n : norms) n = n.to(torch::kFloat);
  torch::Tensor total = torch::stack(norms).norm();
  if (norm) *norm = total;
  return clip_coefficient_of_norm(total, max_norm);
}

torch::Tensor clip_coefficient_of_norm(const torch::Tensor& norm, double max_norm) {
  return (max_norm / (norm + 1e-6)).clamp_max(1.0);
}

void scale_gradients(const std::vector<torch::Tensor>& parameters, const torch::Tensor& coefficient) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> grads;
  for (const auto& p : parameters)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return;
#if ZOO_TORCH_AT_LEAST(2, 1)
  // One multi-tensor kernel by the on-device coefficient (no host sync)
  // instead of a broadcast kernel per gradient, as the loop below launches.
  if (grads.front().is_cuda()) {
    at::_foreach_mul_(grads, coefficient);
    return;
  }
#endif
  for (auto& g : grads) g.mul_(coefficient.to(g.scalar_type()));
}

torch::Tensor clip_grad_norm(const std::vector<torch::Tensor>& parameters, double max_norm) {
  torch::Tensor norm;
  const torch::Tensor coefficient = clip_coefficient(parameters, max_norm, &norm);
  if (coefficient.defined()) scale_gradients(parameters, coefficient);
  return norm;
}

void Optimizer::step_scaled(const torch::Tensor& coefficient) {
  scale_gradients(parameters(), coefficient);
  step();
}

c10::impl::GenericDict LRScheduler::state_dict() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("last_epoch", steps_);
  d.insert("_step_count", steps_ + 1);
  return d;
}

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, std::vector<ParamGroup> groups) {
  const OptimizerEntry* entry = find_optimizer(c.optimizer_type);
  if (!entry) throw std::invalid_argument("unsupported optimizer_type '" + c.optimizer_type + "'");
  return entry->make(std::move(groups), c);
}

}  // namespace zoo::optim
