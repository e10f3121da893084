// Adam-family update rules. Adam/AdamW follow modelzoo's AdamBase (eps added
// to sqrt(v) before bias correction, state beta1_power/beta2_power); Adamax,
// NAdam and RAdam follow torch.optim (1.13); Lamb follows the cybertronai
// implementation modelzoo adapted (no bias correction, weight norm clamped to
// [0, 10]); Lion follows Chen et al. (2023) with decoupled weight decay;
// Adafactor follows Hugging Face transformers.
#include <cmath>

#include "models/kernels/adam_update.h"
#include "runner/optim/algorithms.h"

namespace zoo::optim {
namespace {

using Init = std::function<torch::Tensor()>;
const Init kZero = [] { return scalar_state(0); };

struct Betas {
  double b1, b2;
};
// OptimizerConfig::parse fills each optimizer's default betas (runner/optim/registry.cpp).
Betas betas_of(const OptimizerConfig& c) { return Betas{c.betas.value()[0], c.betas.value()[1]}; }

// Base of the rules that keep Adam's running moments exp_avg / exp_avg_sq.
class MomentOptimizer : public Optimizer {
 protected:
  MomentOptimizer(std::vector<ParamGroup> g, std::map<std::string, double> hyper, Betas b, double eps)
      : Optimizer(std::move(g),
                  [&] {
                    hyper["eps"] = eps;
                    return hyper;
                  }()),
        b_(b),
        eps_(eps) {}
  // m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2.
  std::pair<torch::Tensor&, torch::Tensor&> update_moments(size_t i, const torch::Tensor& p,
                                                           const torch::Tensor& grad) {
    Init zeros = [&] { return torch::zeros_like(p); };
    torch::Tensor& m = state_or(i, "exp_avg", zeros);
    torch::Tensor& v = state_or(i, "exp_avg_sq", zeros);
    m.mul_(b_.b1).add_(grad, 1 - b_.b1);
    v.mul_(b_.b2).addcmul_(grad, grad, 1 - b_.b2);
    return {m, v};
  }
  Betas b_;
  double eps_;
};

class CerebrasAdam : public MomentOptimizer {
 public:
  CerebrasAdam(std::vector<ParamGroup> g, const OptimizerConfig& c, bool decoupled)
      : MomentOptimizer(std::move(g), {{"correct_bias", c.correct_bias ? 1.0 : 0.0}}, betas_of(c), c.eps_value()),
        correct_bias_(c.correct_bias),
        decoupled_(decoupled) {}

  void step() override { update({}); }
  void step_scaled(const torch::Tensor& coefficient) override { update(coefficient); }

 private:
  // One adam_update per parameter group, so a GPU runs a few kernels per group.
  void update(const torch::Tensor& grad_coefficient) {
    std::vector<std::vector<AdamSlot>> slots(groups_.size());
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      Init zeros = [&] { return torch::zeros_like(p); };
      AdamSlot s{p, state_or(i, "exp_avg", zeros), state_or(i, "exp_avg_sq", zeros)};
      // The powers are CPU scalars (see Optimizer::load_state_dict): reading them never waits on a GPU.
      torch::Tensor& b1p = state_or(i, "beta1_power", [&] { return scalar_state(b_.b1); });
      torch::Tensor& b2p = state_or(i, "beta2_power", [&] { return scalar_state(b_.b2); });
      if (correct_bias_) {
        s.correction = std::sqrt(1 - b2p.item<double>()) / (1 - b1p.item<double>());
        b1p.mul_(b_.b1);
        b2p.mul_(b_.b2);
      }
      slots[&g - groups_.data()].push_back(s);
    });
    for (size_t k = 0; k < groups_.size(); ++k)
      adam_update(slots[k],
                  AdamHyper{b_.b1, b_.b2, eps_, groups_[k].lr, groups_[k].weight_decay, decoupled_, grad_coefficient});
  }

  bool correct_bias_, decoupled_;
};

class Adamax : public Optimizer {
 public:
  Adamax(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"eps", c.eps_value()}}), b_(betas_of(c)), eps_(c.eps_value()) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      Init zeros = [&] { return torch::zeros_like(p); };
      torch::Tensor grad = l2_decayed_grad(g, p);
      double t = next_step(state_or(i, "step", kZero));
      torch::Tensor& m = state_or(i, "exp_avg", zeros);
      torch::Tensor& u = state_or(i, "exp_inf", zeros);
      m.mul_(b_.b1).add_(grad, 1 - b_.b1);
      u.copy_(torch::maximum(u * b_.b2, grad.abs() + eps_));  // infinity-norm running max
      p.addcdiv_(m, u, -g.lr / (1 - std::pow(b_.b1, t)));
    });
  }

 private:
  Betas b_;
  double eps_;
};

class NAdam : public MomentOptimizer {
 public:
  NAdam(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : MomentOptimizer(std::move(g), {{"momentum_decay", c.momentum_decay}}, betas_of(c), c.eps_value()),
        psi_(c.momentum_decay) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor grad = l2_decayed_grad(g, p);
      double t = next_step(state_or(i, "step", kZero));
      torch::Tensor& mu_product = state_or(i, "mu_product", [] { return scalar_state(1); });
      // Momentum schedule mu_t = beta1 (1 - 0.5 * 0.96^(t psi)) (Dozat 2016).
      double mu = b_.b1 * (1 - 0.5 * std::pow(0.96, t * psi_));
      double mu_next = b_.b1 * (1 - 0.5 * std::pow(0.96, (t + 1) * psi_));
      mu_product.mul_(mu);
      double prod = mu_product.item<double>(), prod_next = prod * mu_next;
      auto [m, v] = update_moments(i, p, grad);
      torch::Tensor denom = (v / (1 - std::pow(b_.b2, t))).sqrt() + eps_;
      p.addcdiv_(grad, denom, -g.lr * (1 - mu) / (1 - prod));
      p.addcdiv_(m, denom, -g.lr * mu_next / (1 - prod_next));
    });
  }

 private:
  double psi_;
};

class RAdam : public MomentOptimizer {
 public:
  RAdam(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : MomentOptimizer(std::move(g), {}, betas_of(c), c.eps_value()) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor grad = l2_decayed_grad(g, p);
      double t = next_step(state_or(i, "step", kZero));
      auto [m, v] = update_moments(i, p, grad);
      const double bc1 = 1 - std::pow(b_.b1, t), bc2 = 1 - std::pow(b_.b2, t);
      torch::Tensor m_hat = m / bc1;
      // Length of the approximated simple moving average; rectify once it exceeds 5.
      const double rho_inf = 2 / (1 - b_.b2) - 1;
      const double rho_t = rho_inf - 2 * t * std::pow(b_.b2, t) / bc2;
      if (rho_t > 5) {
        double rect = std::sqrt((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t));
        torch::Tensor adaptive = std::sqrt(bc2) / (v.sqrt() + eps_);
        p.sub_(m_hat * g.lr * adaptive * rect);
      } else {
        p.sub_(m_hat * g.lr);
      }
    });
  }
};

class Lamb : public MomentOptimizer {
 public:
  Lamb(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : MomentOptimizer(std::move(g), {}, betas_of(c), c.eps_value()) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      auto [m, v] = update_moments(i, p, p.grad());
      torch::Tensor adam_step = m / (v.sqrt() + eps_);
      if (g.weight_decay != 0) adam_step.add_(p, g.weight_decay);
      // Layer-wise trust ratio ||w|| / ||adam step||, 1 when either norm is 0.
      double weight_norm = std::min(p.norm().item<double>(), 10.0);
      double adam_norm = adam_step.norm().item<double>();
      double trust = (weight_norm == 0 || adam_norm == 0) ? 1.0 : weight_norm / adam_norm;
      p.add_(adam_step, -g.lr * trust);
    });
  }
};

class Lion : public Optimizer {
 public:
  Lion(std::vector<ParamGroup> g, const OptimizerConfig& c) : Optimizer(std::move(g), {}), b_(betas_of(c)) {}
  void step() override {
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      torch::Tensor& m = state_or(i, "exp_avg", [&] { return torch::zeros_like(p); });
      if (g.weight_decay != 0) p.mul_(1 - g.lr * g.weight_decay);
      p.add_(torch::sign(m * b_.b1 + p.grad() * (1 - b_.b1)), -g.lr);
      m.mul_(b_.b2).add_(p.grad(), 1 - b_.b2);
    });
  }

 private:
  Betas b_;
};

// Adafactor (Shazeer & Stern, 2018) as in Hugging Face transformers: factored
// second moments for matrices, update RMS clipping, optional first moment.
class Adafactor : public Optimizer {
 public:
  Adafactor(std::vector<ParamGroup> g, const OptimizerConfig& c)
      : Optimizer(std::move(g), {{"clip_threshold", c.clip_threshold}, {"decay_rate", c.decay_rate}}),
        c_(c),
        eps1_(c.eps.value().items[0]),
        eps2_(c.eps.value().items[1]) {}
  void step() override {
    auto rms = [](const torch::Tensor& x) { return x.norm().item<double>() / std::sqrt(double(x.numel())); };
    for_each_param_with_grad([&](ParamGroup& g, torch::Tensor& p, size_t i) {
      const torch::Tensor grad = p.grad();
      const bool factored = grad.dim() >= 2;
      const double t = next_step(state_or(i, "step", kZero));
      double lr = g.lr;
      if (c_.relative_step) lr = std::min(c_.warmup_init ? 1e-6 * t : 1e-2, 1 / std::sqrt(t));
      if (c_.scale_parameter) lr *= std::max(eps2_, rms(p));
      const double beta2t = 1.0 - std::pow(t, c_.decay_rate);
      torch::Tensor update = grad * grad + eps1_;
      if (factored) {
        torch::Tensor& row = state_or(i, "exp_avg_sq_row", [&] { return torch::zeros_like(grad.select(-1, 0)); });
        torch::Tensor& col = state_or(i, "exp_avg_sq_col", [&] { return torch::zeros_like(grad.select(-2, 0)); });
        row.mul_(beta2t).add_(update.mean(-1), 1 - beta2t);
        col.mul_(beta2t).add_(update.mean(-2), 1 - beta2t);
        // rank-1 approximation of the second moment: row (..., R, 1) x col (..., 1, C) / mean(row)
        torch::Tensor r = (row / row.mean(-1, true)).rsqrt().unsqueeze(-1);
        torch::Tensor cf = col.unsqueeze(-2).rsqrt();
        update = r * cf * grad;
      } else {
        torch::Tensor& v = state_or(i, "exp_avg_sq", [&] { return torch::zeros_like(grad); });
        v.mul_(beta2t).add_(update, 1 - beta2t);
        update = v.rsqrt() * grad;
      }
      update.div_(std::max(1.0, rms(update) / c_.clip_threshold));
      update.mul_(lr);
      if (c_.beta1) {
        torch::Tensor& m = state_or(i, "exp_avg", [&] { return torch::zeros_like(grad); });
        m.mul_(*c_.beta1).add_(update, 1 - *c_.beta1);
        update = m;
      }
      if (g.weight_decay != 0) p.add_(p, -g.weight_decay * lr);
      p.sub_(update);
    });
  }

 private:
  OptimizerConfig c_;
  double eps1_, eps2_;
};

}  // namespace

std::unique_ptr<Optimizer> make_adafactor(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Adafactor>(std::move(g), c);
}

std::unique_ptr<Optimizer> make_cerebras_adam(std::vector<ParamGroup> g, const OptimizerConfig& c, bool decoupled) {
  return std::make_unique<CerebrasAdam>(std::move(g), c, decoupled);
}
std::unique_ptr<Optimizer> make_adamax(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Adamax>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_nadam(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<NAdam>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_radam(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<RAdam>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_lamb(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Lamb>(std::move(g), c);
}
std::unique_ptr<Optimizer> make_lion(std::vector<ParamGroup> g, const OptimizerConfig& c) {
  return std::make_unique<Lion>(std::move(g), c);
}

}  // namespace zoo::optim
