// Optimizers against oracles: every optimizer torch.optim has is run next to
// torch.optim (Debian's python3-torch) for 100 steps on the same initial
// weights and gradient sequence; modelzoo-only rules (Cerebras Adam/AdamW,
// Lamb, Lion) against their reference formulas written out in Python. Also:
// state dicts restore an optimizer exactly.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "configs/schema/yaml_util.h"
#include "runner/optim/lr_schedule.h"
#include "runner/optim/optimizer.h"
#include "tensor_compare.h"
#include "test_util.h"

using namespace zoo;

namespace {

struct Case {
  std::string name;
  std::string yaml;    // zoo's optimizer section
  std::string oracle;  // Python: builds the optimizer (torch.optim) or a reference step function
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"sgd", "{optimizer_type: SGD, learning_rate: 0.01, momentum: 0.9, dampening: 0.1, weight_decay: 0.01}",
       "torch.optim.SGD(ps, lr=LR, momentum=0.9, dampening=0.1, weight_decay=0.01)"},
      {"sgd_nesterov", "{optimizer_type: sgd, learning_rate: 0.01, momentum: 0.9, nesterov: true}",
       "torch.optim.SGD(ps, lr=LR, momentum=0.9, nesterov=True)"},
      {"adamax", "{optimizer_type: Adamax, betas: [0.8, 0.99], weight_decay: 0.01}",
       "torch.optim.Adamax(ps, lr=LR, betas=(0.8, 0.99), weight_decay=0.01)"},
      {"adadelta", "{optimizer_type: Adadelta, rho: 0.8, weight_decay: 0.01}",
       "torch.optim.Adadelta(ps, lr=LR, rho=0.8, weight_decay=0.01)"},
      {"adagrad", "{optimizer_type: Adagrad, lr_decay: 0.01, initial_accumulator_value: 0.1, weight_decay: 0.01}",
       "torch.optim.Adagrad(ps, lr=LR, lr_decay=0.01, initial_accumulator_value=0.1, weight_decay=0.01)"},
      {"asgd", "{optimizer_type: ASGD, lambd: 0.001, alpha: 0.7, t0: 20, weight_decay: 0.01}",
       "torch.optim.ASGD(ps, lr=LR, lambd=0.001, alpha=0.7, t0=20, weight_decay=0.01)"},
      {"nadam", "{optimizer_type: NAdam, betas: [0.9, 0.99], momentum_decay: 0.004, weight_decay: 0.01}",
       "nadam(ps, lr=LR, betas=(0.9, 0.99), momentum_decay=0.004, weight_decay=0.01)"},
      {"radam", "{optimizer_type: RAdam, weight_decay: 0.01}", "torch.optim.RAdam(ps, lr=LR, weight_decay=0.01)"},
      {"rmsprop_centered", "{optimizer_type: RMSprop, alpha: 0.9, momentum: 0.5, centered: true, weight_decay: 0.01}",
       "torch.optim.RMSprop(ps, lr=LR, alpha=0.9, momentum=0.5, centered=True, weight_decay=0.01)"},
      {"rmsprop", "{optimizer_type: RMSprop}", "torch.optim.RMSprop(ps, lr=LR)"},
      {"rprop", "{optimizer_type: Rprop, etas: [0.4, 1.3], step_sizes: [1.0e-5, 1.0]}",
       "torch.optim.Rprop(ps, lr=LR, etas=(0.4, 1.3), step_sizes=(1e-5, 1.0))"},
      {"adamw_cerebras", "{optimizer_type: AdamW, betas: [0.9, 0.95], eps: 1.0e-8, weight_decay: 0.1}",
       "cs_adam(ps, LR, 0.9, 0.95, 1e-8, 0.1, decoupled=True, correct_bias=True)"},
      {"adamw_no_bias_correction", "{optimizer_type: adamw, weight_decay: 0.1, correct_bias: false}",
       "cs_adam(ps, LR, 0.9, 0.999, 1e-6, 0.1, decoupled=True, correct_bias=False)"},
      {"adam_cerebras", "{optimizer_type: Adam, weight_decay: 0.01}",
       "cs_adam(ps, LR, 0.9, 0.999, 1e-6, 0.01, decoupled=False, correct_bias=True)"},
      {"lamb", "{optimizer_type: Lamb, weight_decay: 0.01}", "lamb(ps, LR, 0.9, 0.999, 1e-6, 0.01)"},
      {"lion", "{optimizer_type: Lion, weight_decay: 0.1}", "lion(ps, LR, 0.9, 0.99, 0.1)"},
      {"adafactor", "{optimizer_type: AdaFactor, beta1: 0.9, weight_decay: 0.01, scale_parameter: true}",
       "adafactor(ps, LR, beta1=0.9, wd=0.01, scale_parameter=True, relative_step=False)"},
      {"adafactor_relative",
       "{optimizer_type: adafactor, eps: [1.0e-30, 0.002], relative_step: true, "
       "warmup_init: true, clip_threshold: 0.5}",
       "adafactor(ps, LR, eps=(1e-30, 2e-3), relative_step=True, warmup_init=True, clip_threshold=0.5)"},
  };
  return c;
}

constexpr double kLr = 0.01;
constexpr int kSteps = 100;

// Initial weights and gradients, defined identically in the Python script.
std::vector<torch::Tensor> initial_params() {
  auto o = torch::dtype(torch::kDouble);
  return {torch::sin(torch::arange(12, o) * 0.7).reshape({4, 3}).requires_grad_(),
          torch::sin(torch::arange(5, o) * 0.7 + 1).requires_grad_()};
}
void set_grads(std::vector<torch::Tensor>& ps, int t) {
  for (auto& p : ps) {
    torch::Tensor d = p.detach();
    p.mutable_grad() = torch::cos(d * (1 + t % 5)) * 0.3 + 0.1 * d;
  }
}

std::unique_ptr<optim::Optimizer> build(const Case& c, std::vector<torch::Tensor>& ps) {
  OptimizerConfig oc =
      OptimizerConfig::parse(config::load_yaml_string(c.yaml, c.name), config::Context{c.name, "optimizer"});
  optim::ParamGroup g;
  g.params = ps;
  g.names = {"w", "b"};
  g.weight_decay = oc.weight_decay;
  g.lr = kLr;
  return optim::make_optimizer(oc, {g});
}

torch::Tensor flat(const std::vector<torch::Tensor>& ps) {
  return torch::cat({ps[0].detach().flatten(), ps[1].detach().flatten()});
}

torch::Tensor run_zoo(const Case& c, int steps) {
  auto ps = initial_params();
  auto opt = build(c, ps);
  for (int t = 0; t < steps; ++t) {
    set_grads(ps, t);
    opt->step();
  }
  return flat(ps);
}

const std::string kOracle = zoo::testing::oracle("optim_oracle.py");

}  // namespace

TEST(Optim, EveryOptimizerMatchesItsOracleOver100Steps) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  std::string list;
  for (const auto& c : cases()) list += c.oracle + "\n";
  zoo::testing::write_file(dir / "cases.txt", list);
  std::string script = zoo::testing::write_file(dir / "oracle.py", kOracle);
  auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "cases.txt") + " " +
                                     std::to_string(kLr) + " " + std::to_string(kSteps));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::ifstream in(dir / "cases.txt.out", std::ios::binary);
  for (const auto& c : cases()) {
    torch::Tensor expected = torch::empty({17}, torch::kDouble);
    in.read(reinterpret_cast<char*>(expected.data_ptr<double>()), 17 * sizeof(double));
    ASSERT_TRUE(in) << c.name;
    torch::Tensor got = run_zoo(c, kSteps);
    torch::Tensor rel = (got - expected).abs() / expected.abs().clamp_min(1.0);
    EXPECT_LT(rel.max().item<double>(), 1e-6) << c.name << "\nzoo:   " << got << "\noracle: " << expected;
    EXPECT_GT((got - flat(initial_params())).abs().max().item<double>(), 1e-3) << c.name << " did not move";
  }
}

// Clipping by norm hands its coefficient to the step (Trainer): every
// optimizer's step_scaled(c) is its step on gradients multiplied by c first:
// bit for bit in float64, to float32 rounding in float32 (Adam(W)'s single
// CPU pass reads c into its loop).
TEST(Optim, ScaledStepIsTheStepOnScaledGradients) {
  const torch::Tensor coefficient = torch::full({}, 0.37f);
  for (const auto dtype : {torch::kFloat, torch::kDouble}) {
    for (const auto& c : cases()) {
      SCOPED_TRACE(c.name + (dtype == torch::kFloat ? ", float32" : ", float64"));
      std::vector<torch::Tensor> scaled, plain;
      for (const torch::Tensor& p : initial_params()) {
        scaled.push_back(p.detach().to(dtype).requires_grad_());
        plain.push_back(p.detach().to(dtype).requires_grad_());
      }
      auto by_coefficient = build(c, scaled);
      auto by_hand = build(c, plain);
      for (int t = 0; t < 5; ++t) {
        set_grads(scaled, t);
        set_grads(plain, t);
        by_coefficient->step_scaled(coefficient);
        for (auto& p : plain) p.mutable_grad().mul_(coefficient.to(dtype));
        by_hand->step();
      }
      if (dtype == torch::kDouble) EXPECT_TRUE(torch::equal(flat(scaled), flat(plain))) << flat(scaled) - flat(plain);
      else  // where the compiler fuses g c + wd p into one multiply-add, one rounding fewer
        EXPECT_LT(zoo::testing::relative_error(flat(scaled), flat(plain)), 1e-6);
      EXPECT_GT((flat(scaled).to(torch::kDouble) - flat(initial_params())).abs().max().item<double>(), 1e-6)
          << "did not move";
    }
  }
}

// 50 steps, save, a fresh optimizer loads the state, 50 more == 100 straight.
TEST(Optim, StateDictRestoresExactly) {
  for (const auto& c : cases()) {
    auto ps = initial_params();
    auto opt = build(c, ps);
    for (int t = 0; t < 50; ++t) set_grads(ps, t), opt->step();
    c10::impl::GenericDict state = opt->state_dict();
    auto resumed = build(c, ps);
    resumed->load_state_dict(state);
    for (int t = 50; t < kSteps; ++t) set_grads(ps, t), resumed->step();
    EXPECT_TRUE(torch::equal(flat(ps), run_zoo(c, kSteps))) << c.name;
  }
}

TEST(Optim, DefaultsAreEachOptimizersOwn) {
  auto eps_of = [](const std::string& type) {
    Case c{type, "{optimizer_type: " + type + "}", ""};
    auto ps = initial_params();
    return build(c, ps)->state_dict().at("param_groups").toList().get(0).toGenericDict().at("eps").toDouble();
  };
  EXPECT_EQ(eps_of("AdamW"), 1e-6);  // modelzoo's (Cerebras) Adam default
  EXPECT_EQ(eps_of("NAdam"), 1e-8);  // torch's
  EXPECT_EQ(eps_of("Adagrad"), 1e-10);
  auto parse = [](const std::string& yaml) {
    return OptimizerConfig::parse(config::load_yaml_string(yaml, "o.yaml"), config::Context{"o.yaml", "optimizer"});
  };
  // No learning_rate: torch's default for the class, shown in the resolved params; SGD has none.
  EXPECT_EQ(parse("{optimizer_type: Lion}").learning_rate.constant, 1e-4);
  EXPECT_EQ(parse("{optimizer_type: lion}").to_yaml()["learning_rate"].as<double>(), 1e-4);
  EXPECT_EQ(parse("{optimizer_type: lion}").to_yaml()["betas"][1].as<double>(), 0.99);
  try {
    parse("{optimizer_type: SGD, momentum: 0.9}");
    ADD_FAILURE() << "SGD without learning_rate was accepted";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer.learning_rate: required for SGD (it has no default)"),
              std::string::npos)
        << e.what();
  }
}

TEST(Optim, UnknownOptimizerAndLegacyKeysAreClearErrors) {
  auto error_of = [](const std::string& yaml) {
    try {
      OptimizerConfig::parse(config::load_yaml_string(yaml, "o.yaml"), config::Context{"o.yaml", "optimizer"});
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of("{optimizer_type: Adamw2}").find("unsupported optimizer 'Adamw2' (did you mean 'AdamW'?)"),
            std::string::npos)
      << error_of("{optimizer_type: Adamw2}");
  // R1.x names are read as their new key; only a disagreement with the new key is an error.
  EXPECT_EQ(error_of("{optimizer_type: AdamW, beta1: 0.8, beta2: 0.9}"), "");
  EXPECT_NE(error_of("{optimizer_type: AdamW, beta1: 0.8, betas: [0.9, 0.999]}")
                .find("optimizer.beta1: old name of betas[0], which is also given, with another value"),
            std::string::npos)
      << error_of("{optimizer_type: AdamW, beta1: 0.8, betas: [0.9, 0.999]}");
  EXPECT_EQ(error_of("{optimizer_type: AdamW, beta1: 0.9, betas: [0.9, 0.999]}"), "");
  EXPECT_NE(error_of("{optimizer_type: AdamW, eps: [1.0, 2.0]}").find("optimizer.eps: expected one positive number"),
            std::string::npos);
  EXPECT_EQ(error_of("{optimizer_type: Adafactor, beta1: 0.9, eps: [1.0e-30, 1.0e-3]}"), "");
  EXPECT_NE(error_of("{optimizer_type: Rprop, etas: [1.5, 1.2]}").find("optimizer.etas: expected (decrease < 1"),
            std::string::npos);
}

namespace {

struct ScheduleCase {
  std::string yaml;    // zoo's learning_rate
  std::string oracle;  // torch.optim.lr_scheduler on `opt` (an SGD with lr=0.1, momentum 0.9)
};

const std::vector<ScheduleCase>& schedule_cases() {
  static const std::vector<ScheduleCase> c = {
      {"{scheduler: Step, initial_learning_rate: 0.1, step_size: 7, gamma: 0.5}",
       "StepLR(opt, step_size=7, gamma=0.5)"},
      {"{scheduler: MultiStepLR, initial_learning_rate: 0.1, milestones: [5, 12, 30], gamma: 0.3}",
       "MultiStepLR(opt, milestones=[5, 12, 30], gamma=0.3)"},
      {"{scheduler: CosineAnnealing, initial_learning_rate: 0.1, T_max: 25, eta_min: 0.01}",
       "CosineAnnealingLR(opt, T_max=25, eta_min=0.01)"},
      {"{scheduler: CosineAnnealingWarmRestarts, initial_learning_rate: 0.1, t_0: 13, eta_min: 0.001}",
       "CosineAnnealingWarmRestarts(opt, T_0=13, eta_min=0.001)"},
      {"{scheduler: Multiplicative, initial_learning_rate: 0.1, coefficient: 0.95}",
       "MultiplicativeLR(opt, lr_lambda=lambda e: 0.95)"},
      {"{scheduler: Cyclic, base_lr: 0.01, max_lr: 0.1, step_size_up: 7, step_size_down: 5}",
       "CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=7, step_size_down=5, cycle_momentum=False)"},
      {"{scheduler: CyclicLR, base_lr: 0.01, max_lr: 0.1, step_size_up: 6, mode: triangular2}",
       "CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=6, mode='triangular2', cycle_momentum=False)"},
      {"{scheduler: Cyclic, base_lr: 0.01, max_lr: 0.1, step_size_up: 4, mode: exp_range, gamma: 0.97}",
       "CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4, mode='exp_range', gamma=0.97, cycle_momentum=False)"},
      {"{scheduler: OneCycle, initial_learning_rate: 0.004, max_lr: 0.1, total_steps: 60, final_div_factor: 100}",
       "OneCycleLR(opt, max_lr=0.1, total_steps=60, div_factor=25.0, final_div_factor=100, cycle_momentum=False)"},
      {"{scheduler: OneCycleLR, initial_learning_rate: 0.004, max_lr: 0.1, total_steps: 60, pct_start: 0.25, "
       "three_phase: true, anneal_strategy: linear}",
       "OneCycleLR(opt, max_lr=0.1, total_steps=60, div_factor=25.0, pct_start=0.25, three_phase=True, "
       "anneal_strategy='linear', cycle_momentum=False)"},
  };
  return c;
}

const std::string kScheduleOracle = zoo::testing::oracle("optim_schedule_oracle.py");

std::unique_ptr<optim::LRSchedule> schedule(const std::string& yaml) {
  return optim::make_lr_schedule(config::load_yaml_string(yaml, "lr.yaml"), config::Context{"lr.yaml", "optimizer"});
}

}  // namespace

TEST(Optim, SchedulersMatchTorchLrSchedulerOver60Steps) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  std::string list;
  for (const auto& c : schedule_cases()) list += c.oracle + "\n";
  zoo::testing::write_file(dir / "cases.txt", list);
  std::string script = zoo::testing::write_file(dir / "oracle.py", kScheduleOracle);
  auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "cases.txt") + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream lines(r.output);
  for (const auto& c : schedule_cases()) {
    std::string line;
    ASSERT_TRUE(std::getline(lines, line)) << c.yaml;
    std::istringstream values(line);
    auto s = schedule(c.yaml);
    double expected;
    int t = 0;
    for (; values >> expected; ++t)
      ASSERT_NEAR(s->at(t), expected, 1e-6 * std::max(1.0, std::fabs(expected))) << c.yaml << " at step " << t;
    EXPECT_EQ(t, 60) << c.yaml;
  }
}

// Schedulers torch does not have (or defines differently), against the reference formulas.
TEST(Optim, ModelzooOnlySchedulersFollowTheReferenceFormulas) {
  auto s = schedule(
      "{scheduler: Polynomial, initial_learning_rate: 0.1, end_learning_rate: 0.01, total_iters: 10, power: 2}");
  EXPECT_DOUBLE_EQ(s->at(4), 0.09 * 0.6 * 0.6 + 0.01);
  EXPECT_DOUBLE_EQ(s->at(10), 0.01);
  s = schedule("{scheduler: Exponential, initial_learning_rate: 0.1, total_iters: 4, decay_rate: 0.5}");
  EXPECT_DOUBLE_EQ(s->at(6), 0.1 * std::pow(0.5, 1.5));
  s = schedule(
      "{scheduler: Exponential, initial_learning_rate: 0.1, total_iters: 4, decay_rate: 0.5, staircase: true}");
  EXPECT_DOUBLE_EQ(s->at(6), 0.05);
  s = schedule("{scheduler: InverseSquareRootDecay, initial_learning_rate: 2.0, scale: 0.5, warmup_steps: 4}");
  EXPECT_DOUBLE_EQ(s->at(1), 0.5);
  EXPECT_DOUBLE_EQ(s->at(16), 0.25);
  s = schedule("{scheduler: PiecewiseConstant, values: [0.3, 0.2, 0.1], boundaries: [3, 8]}");
  EXPECT_EQ((std::vector<double>{s->at(2), s->at(3), s->at(7), s->at(8)}), (std::vector<double>{0.3, 0.2, 0.2, 0.1}));
  // R1.x files (modelzoo's UNet) repeat the first rate as initial_learning_rate: accepted when it is that rate.
  s = schedule("{scheduler: PiecewiseConstant, initial_learning_rate: 0.3, values: [0.3, 0.1], boundaries: [3]}");
  EXPECT_EQ((std::vector<double>{s->at(2), s->at(3)}), (std::vector<double>{0.3, 0.1}));
  try {
    schedule(
        "{scheduler: PiecewiseConstant,\n initial_learning_rate: 0.5, learning_rates: [0.3, 0.1], milestones: [3]}");
    ADD_FAILURE() << "expected an error";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "lr.yaml:2:25: optimizer.learning_rate.initial_learning_rate: PiecewiseConstant starts at "
                  "learning_rates[0] (0.3); remove this key"),
              std::string::npos)
        << e.what();
  }
  s = schedule("{scheduler: CosineDecay, initial_learning_rate: 0.1, end_learning_rate: 0.0, total_iters: 10}");
  EXPECT_NEAR(s->at(5), 0.05, 1e-15);
  EXPECT_DOUBLE_EQ(s->at(50), 0.0);
  s = schedule(
      "{scheduler: InverseExponentialTimeDecay, initial_learning_rate: 0.1, step_exponent: 1, total_iters: 5, "
      "decay_rate: 0.5}");
  EXPECT_DOUBLE_EQ(s->at(10), 0.1 / 2.0);
  EXPECT_THROW(schedule("{scheduler: CosineAnnealingWarmRestarts, initial_learning_rate: 0.1, T_0: 5, T_mult: 2}"),
               config::ConfigError);
  // Chained: the first scheduler's LR times the others' relative progress.
  s = schedule(
      "- {scheduler: Linear, initial_learning_rate: 0.0, end_learning_rate: 0.1, total_iters: 10, "
      "main_scheduler: chained}\n"
      "- {scheduler: Exponential, initial_learning_rate: 1.0, decay_rate: 0.5, total_iters: 5}\n");
  EXPECT_DOUBLE_EQ(s->at(5), 0.05 * 0.5);
  EXPECT_DOUBLE_EQ(s->at(20), 0.1 * 0.0625);
}
