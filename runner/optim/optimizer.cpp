// Implementation of runner/optim/optimizer.h: AdamW and Adam with modelzoo's
// AdamBase math (eps added to sqrt(v) before bias correction; state
// beta1_power/beta2_power), and torch-style SGD.
#include "runner/optim/optimizer.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace zoo::optim {

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
  for (auto& g : groups_) g.lr = lr;
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
  std::vector<torch::Tensor> params = parameters();
  for (auto& s : state_) s.clear();
  for (const auto& kv : dict.at("state").toGenericDict()) {
    int64_t i = kv.key().toInt();
    if (i < 0 || i >= static_cast<int64_t>(state_.size()))
      throw std::runtime_error("optimizer state names parameter " + std::to_string(i) + " which does not exist");
    for (const auto& e : kv.value().toGenericDict())
      state_[i][e.key().toStringRef()] = e.value().toTensor().to(params[i].device());
  }
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

namespace {

class AdamBase : public Optimizer {
 public:
  AdamBase(std::vector<ParamGroup> groups, const OptimizerConfig& c, bool decoupled)
      : Optimizer(std::move(groups), {{"eps", c.eps}, {"correct_bias", c.correct_bias ? 1.0 : 0.0}}),
        beta1_(c.betas[0]),
        beta2_(c.betas[1]),
        eps_(c.eps),
        correct_bias_(c.correct_bias),
        decoupled_(decoupled) {}

  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor grad = p.grad();
      if (!decoupled_ && g.weight_decay > 0) grad = grad + g.weight_decay * p;
      torch::Tensor& m = state(i, "exp_avg");
      torch::Tensor& v = state(i, "exp_avg_sq");
      torch::Tensor& b1p = state(i, "beta1_power");
      torch::Tensor& b2p = state(i, "beta2_power");
      if (!m.defined()) {
        m = torch::zeros_like(p);
        v = torch::zeros_like(p);
        b1p = torch::full({}, beta1_, torch::dtype(torch::kDouble));
        b2p = torch::full({}, beta2_, torch::dtype(torch::kDouble));
      }
      m.mul_(beta1_).add_(grad, 1 - beta1_);
      v.mul_(beta2_).addcmul_(grad, grad, 1 - beta2_);
      torch::Tensor update = m / (v.sqrt() + eps_);
      if (correct_bias_) {
        const double b1 = b1p.item<double>(), b2 = b2p.item<double>();
        update.mul_(std::sqrt(1 - b2) / (1 - b1));
        b1p.mul_(beta1_);
        b2p.mul_(beta2_);
      }
      if (decoupled_ && g.weight_decay > 0) update.add_(p, g.weight_decay);
      p.add_(update, -g.lr);
    });
  }

 private:
  double beta1_, beta2_, eps_;
  bool correct_bias_, decoupled_;
};

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> groups, const OptimizerConfig& c)
      : Optimizer(std::move(groups), {{"momentum", c.momentum}, {"dampening", c.dampening}}),
        momentum_(c.momentum),
        dampening_(c.dampening),
        nesterov_(c.nesterov) {}

  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor d = p.grad();
      if (g.weight_decay > 0) d = d + g.weight_decay * p;
      if (momentum_ > 0) {
        torch::Tensor& buf = state(i, "momentum_buffer");
        if (!buf.defined())
          buf = d.clone();
        else
          buf.mul_(momentum_).add_(d, 1 - dampening_);
        d = nesterov_ ? d + momentum_ * buf : buf;
      }
      p.add_(d, -g.lr);
    });
  }

 private:
  double momentum_, dampening_;
  bool nesterov_;
};

}  // namespace

std::unique_ptr<Optimizer> make_optimizer(const OptimizerConfig& c, std::vector<ParamGroup> groups) {
  std::string t = c.optimizer_type;
  std::transform(t.begin(), t.end(), t.begin(), ::tolower);
  if (t == "adamw") return std::make_unique<AdamBase>(std::move(groups), c, /*decoupled=*/true);
  if (t == "adam") return std::make_unique<AdamBase>(std::move(groups), c, /*decoupled=*/false);
  if (t == "sgd") return std::make_unique<Sgd>(std::move(groups), c);
  throw std::invalid_argument("unsupported optimizer_type '" + c.optimizer_type + "'");
}

}  // namespace zoo::optim
