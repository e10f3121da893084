// SGD-family and per-coordinate adaptive update rules, following torch.optim
// (1.13) step for step: SGD, ASGD, Adadelta, Adagrad, RMSprop, Rprop.
#include <cmath>

#include "runner/optim/algorithms.h"

namespace zoo::optim {
namespace {

using Init = std::function<torch::Tensor()>;
const Init kZero = [] { return scalar_state(0); };

class Sgd : public Optimizer {
 public:
  Sgd(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"momentum", c.momentum}, {"dampening", c.dampening}}), c_(c) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor d = l2_decayed_grad(g, p);
      if (c_.momentum > 0) {
        torch::Tensor& buf = state(i, "momentum_buffer");
        if (!buf.defined()) buf = d.clone();
        else buf.mul_(c_.momentum).add_(d, 1 - c_.dampening);
        d = c_.nesterov ? d + c_.momentum * buf : buf;
      }
      p.add_(d, -g.lr);
    });
  }

 private:
  OptimizerConfig c_;
};

// Averaged SGD: eta_t = lr / (1 + lambd lr t)^alpha; averaging starts at t0.
class Asgd : public Optimizer {
 public:
  Asgd(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"lambd", c.lambd}, {"alpha", c.alpha.value()}, {"t0", c.t0}}),
        lambd_(c.lambd),
        alpha_(c.alpha.value()),
        t0_(c.t0) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor grad = l2_decayed_grad(g, p);
      torch::Tensor& step = state_or(i, "step", kZero);
      torch::Tensor& eta = state_or(i, "eta", [&] { return scalar_state(g.lr); });
      torch::Tensor& mu = state_or(i, "mu", [] { return scalar_state(1); });
      torch::Tensor& ax = state_or(i, "ax", [&] { return torch::zeros_like(p); });
      double t = step.add_(1.0).item<double>();
      double e = eta.item<double>();
      p.mul_(1 - lambd_ * e);
      p.add_(grad, -e);
      if (mu.item<double>() != 1) ax.add_((p - ax) * mu.item<double>());
      else ax.copy_(p);
      eta.fill_(g.lr / std::pow(1 + lambd_ * g.lr * t, alpha_));
      mu.fill_(1 / std::max(1.0, t - t0_));
    });
  }

 private:
  double lambd_, alpha_, t0_;
};

class Adadelta : public Optimizer {
 public:
  Adadelta(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"rho", c.rho}, {"eps", c.eps_value()}}), rho_(c.rho), eps_(c.eps_value()) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor grad = l2_decayed_grad(g, p);
      torch::Tensor& sq = state_or(i, "square_avg", [&] { return torch::zeros_like(p); });
      torch::Tensor& acc = state_or(i, "acc_delta", [&] { return torch::zeros_like(p); });
      sq.mul_(rho_).addcmul_(grad, grad, 1 - rho_);
      torch::Tensor delta = (acc + eps_).sqrt() / (sq + eps_).sqrt() * grad;
      acc.mul_(rho_).addcmul_(delta, delta, 1 - rho_);
      p.add_(delta, -g.lr);
    });
  }

 private:
  double rho_, eps_;
};

class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"lr_decay", c.lr_decay}, {"eps", c.eps_value()}}), c_(c), eps_(c.eps_value()) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor grad = l2_decayed_grad(g, p);
      double t = state_or(i, "step", kZero).add_(1.0).item<double>();
      torch::Tensor& sum = state_or(i, "sum", [&] { return torch::full_like(p, c_.initial_accumulator_value); });
      sum.addcmul_(grad, grad, 1.0);
      p.addcdiv_(grad, sum.sqrt() + eps_, -g.lr / (1 + (t - 1) * c_.lr_decay));
    });
  }

 private:
  OptimizerConfig c_;
  double eps_;
};

class RmsProp : public Optimizer {
 public:
  RmsProp(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"alpha", c.alpha.value()},
                                 {"eps", c.eps_value()},
                                 {"momentum", c.momentum},
                                 {"centered", c.centered ? 1.0 : 0.0}}),
        c_(c),
        alpha_(c.alpha.value()),
        eps_(c.eps_value()) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      auto zeros = [&] { return torch::zeros_like(p); };
      torch::Tensor grad = l2_decayed_grad(g, p);
      torch::Tensor& sq = state_or(i, "square_avg", zeros);
      sq.mul_(alpha_).addcmul_(grad, grad, 1 - alpha_);
      torch::Tensor avg;
      if (c_.centered) {
        torch::Tensor& ga = state_or(i, "grad_avg", zeros);
        ga.mul_(alpha_).add_(grad, 1 - alpha_);
        avg = sq.addcmul(ga, ga, -1).sqrt() + eps_;
      } else {
        avg = sq.sqrt() + eps_;
      }
      if (c_.momentum > 0) {
        torch::Tensor& buf = state_or(i, "momentum_buffer", zeros);
        buf.mul_(c_.momentum).addcdiv_(grad, avg);
        p.add_(buf, -g.lr);
      } else {
        p.addcdiv_(grad, avg, -g.lr);
      }
    });
  }

 private:
  OptimizerConfig c_;
  double alpha_, eps_;
};

// Resilient backprop: per-coordinate step sizes grow while the gradient keeps
// its sign and shrink (skipping that update) when it flips.
class Rprop : public Optimizer {
 public:
  Rprop(std::vector<ParamGroup> g, const OptimizerConfig& c) : Optimizer(std::move(g), {}), c_(c) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor& prev = state_or(i, "prev", [&] { return torch::zeros_like(p); });
      torch::Tensor& size = state_or(i, "step_size", [&] { return torch::full_like(p, g.lr); });
      torch::Tensor sign = (p.grad() * prev).sign();
      torch::Tensor factor = torch::where(sign > 0, torch::full_like(p, c_.etas[1]),
                                          torch::where(sign < 0, torch::full_like(p, c_.etas[0]), torch::ones_like(p)));
      size.mul_(factor).clamp_(c_.step_sizes[0], c_.step_sizes[1]);
      torch::Tensor grad = torch::where(sign < 0, torch::zeros_like(p), p.grad());
      p.addcmul_(grad.sign(), size, -1);
      prev.copy_(grad);
    });
  }

 private:
  OptimizerConfig c_;
};

}  // namespace

std::unique_ptr<Optimizer> make_sgd(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Sgd>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_asgd(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Asgd>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_adadelta(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Adadelta>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_adagrad(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Adagrad>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_rmsprop(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<RmsProp>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_rprop(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Rprop>(std::move(g), c);
}

}  // namespace zoo::optim
