// Implementation of runner/optim/lr_schedule.h.
#include "runner/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>

namespace zoo::optim {

const config::Schema<SchedulerSpec>& SchedulerSpec::schema() {
  using S = SchedulerSpec;
  using config::if_set;
  using config::positive;
  // A negative learning rate climbs the loss instead of descending it.
  const config::Check<double> rate = config::non_negative<double>();
  static const config::Schema<S> s =
      config::Schema<S>("learning_rate scheduler", "One learning-rate scheduler.")
          .field("scheduler", &S::scheduler,
                 "Constant, Linear, Polynomial, Exponential, InverseExponentialTimeDecay, InverseSquareRootDecay, "
                 "CosineDecay, PiecewiseConstant, MultiStep, Step, CosineAnnealing, CosineAnnealingWarmRestarts, "
                 "Multiplicative, Lambda, Cyclic or OneCycle (case-insensitive, an LR suffix is allowed).")
          .field("initial_learning_rate", &S::initial_learning_rate,
                 "LR at the scheduler's step 0 (Cyclic: the lower bound, old name base_lr).", if_set(rate))
          .field("end_learning_rate", &S::end_learning_rate, "LR at and after total_iters.", if_set(rate))
          .field("learning_rate", &S::learning_rate, "Constant: the LR.", if_set(rate))
          .field("total_iters", &S::total_iters, "Steps this scheduler runs for.", if_set(positive<int64_t>()))
          .field("power", &S::power, "Polynomial: exponent.")
          .field("cycle", &S::cycle, "Polynomial/Linear: restart the decay after total_iters.")
          .field("decay_rate", &S::decay_rate, "Exponential / InverseExponentialTimeDecay: decay rate.")
          .field("staircase", &S::staircase, "Exponential / InverseExponentialTimeDecay: floor the exponent.")
          .field("scale", &S::scale, "InverseSquareRootDecay: scale.")
          .field("warmup_steps", &S::warmup_steps, "InverseSquareRootDecay: warmup steps.", positive<int64_t>())
          .field("step_exponent", &S::step_exponent, "InverseExponentialTimeDecay: exponent of the step.")
          .field("gamma", &S::gamma, "Step / MultiStep: decay factor; Cyclic exp_range: base of the decay.")
          .field("step_size", &S::step_size, "Step: steps between decays.", if_set(positive<int64_t>()))
          .field("milestones", &S::milestones, "MultiStep / PiecewiseConstant: steps where the LR changes.")
          .field("learning_rates", &S::learning_rates, "PiecewiseConstant: one more LR than milestones.")
          .field("T_max", &S::T_max, "CosineAnnealing: half period.", if_set(positive<int64_t>()))
          .field("T_0", &S::T_0, "CosineAnnealingWarmRestarts: period.", if_set(positive<int64_t>()))
          .field("T_mult", &S::T_mult, "CosineAnnealingWarmRestarts: period growth (only 1).")
          .field("eta_min", &S::eta_min, "CosineAnnealing*: minimum LR.", rate)
          .field("coefficient", &S::coefficient, "Multiplicative: factor applied every step.",
                 if_set(config::non_negative<double>()))
          .field("max_lr", &S::max_lr, "Cyclic / OneCycle: peak LR.", if_set(rate))
          .field("step_size_up", &S::step_size_up, "Cyclic: steps from base to peak.", positive<int64_t>())
          .field("step_size_down", &S::step_size_down, "Cyclic: steps from peak to base (null: step_size_up).",
                 if_set(positive<int64_t>()))
          .field("mode", &S::mode, "Cyclic: triangular, triangular2 or exp_range.",
                 config::one_of({"triangular", "triangular2", "exp_range"}))
          .field("scale_mode", &S::scale_mode,
                 "Cyclic: cycle or iterations (as torch, the mode decides: exp_range scales by iteration).",
                 config::one_of({"cycle", "iterations"}))
          .field("total_steps", &S::total_steps, "OneCycle: length of the cycle.", positive<int64_t>())
          .field("pct_start", &S::pct_start, "OneCycle: fraction of the cycle spent rising.",
                 config::in_range(0, 1, true))
          .field("final_div_factor", &S::final_div_factor, "OneCycle: final LR = initial / this.", positive<double>())
          .field("three_phase", &S::three_phase, "OneCycle: rise, fall back to initial, then anneal.")
          .field("anneal_strategy", &S::anneal_strategy, "OneCycle: cos or linear.", config::one_of({"cos", "linear"}))
          .field("main_scheduler", &S::main_scheduler,
                 "In a list: \"chained\" runs all schedulers at once, multiplying their factors "
                 "(default: one after another).",
                 config::if_set(config::one_of({"chained", "sequential"})))
          // Pre-2.1 spellings (modelzoo's config converter maps them the same way).
          .renamed("steps", "total_iters")
          .renamed("decay_steps", "total_iters")
          .renamed("base_lr", "initial_learning_rate")
          .renamed("values", "learning_rates")
          .renamed("boundaries", "milestones")
          .renamed("t_max", "T_max")
          .renamed("t_0", "T_0")
          .renamed("t_mult", "T_mult");
  return s;
}

namespace {

// Each scheduler by its canonical (lower-case, no LR suffix) name: modelzoo's
// class name, for messages and the Trainer format, and the keys it takes
// besides scheduler, total_iters (its length in a list) and main_scheduler.
struct SchedulerKind {
  std::string class_name;
  std::vector<std::string> keys;
  bool takes(const std::string& key) const {
    return key == "scheduler" || key == "total_iters" || key == "main_scheduler" ||
           std::find(keys.begin(), keys.end(), key) != keys.end();
  }
};

const std::map<std::string, SchedulerKind>& scheduler_kinds() {
  static const std::map<std::string, SchedulerKind> kinds = {
      {"constant", {"ConstantLR", {"learning_rate", "initial_learning_rate"}}},
      {"linear", {"LinearLR", {"initial_learning_rate", "end_learning_rate", "cycle"}}},
      {"polynomial", {"PolynomialLR", {"initial_learning_rate", "end_learning_rate", "power", "cycle"}}},
      {"cosinedecay", {"CosineDecayLR", {"initial_learning_rate", "end_learning_rate"}}},
      {"exponential", {"ExponentialLR", {"initial_learning_rate", "decay_rate", "staircase"}}},
      {"inverseexponentialtimedecay",
       {"InverseExponentialTimeDecayLR", {"initial_learning_rate", "decay_rate", "staircase", "step_exponent"}}},
      {"inversesquarerootdecay", {"InverseSquareRootDecayLR", {"initial_learning_rate", "scale", "warmup_steps"}}},
      {"piecewiseconstant", {"PiecewiseConstantLR", {"learning_rates", "milestones"}}},
      {"multistep", {"MultiStepLR", {"initial_learning_rate", "gamma", "milestones"}}},
      {"step", {"StepLR", {"initial_learning_rate", "step_size", "gamma"}}},
      {"cosineannealing", {"CosineAnnealingLR", {"initial_learning_rate", "T_max", "eta_min"}}},
      {"cosineannealingwarmrestarts",
       {"CosineAnnealingWarmRestarts", {"initial_learning_rate", "T_0", "T_mult", "eta_min"}}},
      {"multiplicative", {"MultiplicativeLR", {"initial_learning_rate", "coefficient"}}},
      {"lambda", {"LambdaLR", {"initial_learning_rate"}}},
      {"cyclic",
       {"CyclicLR",
        {"initial_learning_rate", "max_lr", "step_size_up", "step_size_down", "mode", "gamma", "scale_mode"}}},
      {"onecycle",
       {"OneCycleLR",
        {"initial_learning_rate", "max_lr", "total_steps", "pct_start", "final_div_factor", "three_phase",
         "anneal_strategy"}}},
  };
  return kinds;
}

class Fn : public LRSchedule {
 public:
  explicit Fn(std::function<double(int64_t)> f) : f_(std::move(f)) {}
  double at(int64_t t) const override { return f_(t); }

 private:
  std::function<double(int64_t)> f_;
};

// torch's ChainedScheduler: every scheduler steps at once and each multiplies
// the LR by its own progress, so lr(t) = s_0(t) * prod_{i>0} s_i(t) / s_i(0).
class Chained : public LRSchedule {
 public:
  explicit Chained(std::vector<std::unique_ptr<LRSchedule>> parts) : parts_(std::move(parts)) {}
  double at(int64_t t) const override {
    double lr = parts_[0]->at(t);
    for (size_t i = 1; i < parts_.size(); ++i) {
      const double start = parts_[i]->at(0);
      lr *= start != 0 ? parts_[i]->at(t) / start : 0.0;
    }
    return lr;
  }

 private:
  std::vector<std::unique_ptr<LRSchedule>> parts_;
};

class Sequential : public LRSchedule {
 public:
  Sequential(std::vector<std::unique_ptr<LRSchedule>> parts, std::vector<int64_t> milestones)
      : parts_(std::move(parts)), milestones_(std::move(milestones)) {}
  double at(int64_t t) const override {
    size_t i = 0;
    while (i < milestones_.size() && t >= milestones_[i]) ++i;
    return parts_[i]->at(i == 0 ? t : t - milestones_[i - 1]);
  }

 private:
  std::vector<std::unique_ptr<LRSchedule>> parts_;
  std::vector<int64_t> milestones_;
};

// Number of milestones <= t (Python's bisect_right).
int64_t passed(const std::vector<int64_t>& milestones, int64_t t) {
  return std::upper_bound(milestones.begin(), milestones.end(), t) - milestones.begin();
}

// torch.optim.lr_scheduler.CyclicLR.
std::function<double(int64_t)> cyclic(double base, double peak, int64_t up, int64_t down, std::string mode,
                                      double gamma) {
  const double total = double(up + down), ratio = up / total;
  return [=](int64_t t) {
    const double cycle = std::floor(1 + t / total), x = 1 + t / total - cycle;
    const double factor = x <= ratio ? x / ratio : (x - 1) / (ratio - 1);
    const double height = (peak - base) * factor;
    if (mode == "triangular") return base + height;
    if (mode == "triangular2") return base + height / std::pow(2.0, cycle - 1);
    return base + height * std::pow(gamma, double(t));  // exp_range scales by iteration
  };
}

// torch.optim.lr_scheduler.OneCycleLR with div_factor = max_lr / initial.
std::function<double(int64_t)> one_cycle(const SchedulerSpec& s, double initial, double peak) {
  const double low = initial / s.final_div_factor, T = double(s.total_steps), rise = s.pct_start * T;
  struct Phase {
    double end_step, from, to;
  };
  std::vector<Phase> phases =
      s.three_phase
          ? std::vector<Phase>{{rise - 1, initial, peak}, {2 * rise - 2, peak, initial}, {T - 1, initial, low}}
          : std::vector<Phase>{{rise - 1, initial, peak}, {T - 1, peak, low}};
  const bool cosine = s.anneal_strategy == "cos";
  return [=](int64_t t) {
    double start = 0;
    for (size_t i = 0; i < phases.size(); ++i) {
      const Phase& p = phases[i];
      if (t <= p.end_step || i + 1 == phases.size()) {
        double pct = (t - start) / (p.end_step - start);
        return cosine ? p.to + (p.from - p.to) / 2.0 * (std::cos(M_PI * pct) + 1) : (p.to - p.from) * pct + p.from;
      }
      start = p.end_step;
    }
    return low;
  };
}

// Builds one scheduler; `s` is checked here (so parsing calls it too) and
// problems are reported at the key's line through s.origin.
std::unique_ptr<LRSchedule> make_one(const SchedulerSpec& s) {
  const std::string name = canonical_scheduler_name(s.scheduler);
  auto need = [&](const auto& v, const char* key) {
    if (!v) s.origin.fail(key, "required by the " + s.scheduler + " scheduler");
    return *v;
  };
  auto fn = [](std::function<double(int64_t)> f) { return std::make_unique<Fn>(std::move(f)); };
  if (name == "constant") {
    double lr = s.learning_rate ? *s.learning_rate : need(s.initial_learning_rate, "learning_rate");
    return fn([lr](int64_t) { return lr; });
  }
  const double init = name == "inversesquarerootdecay" ? s.initial_learning_rate.value_or(1.0)
                      : name == "piecewiseconstant"    ? 0.0
                                                       : need(s.initial_learning_rate, "initial_learning_rate");
  if (name == "linear" || name == "polynomial") {
    double end = need(s.end_learning_rate, "end_learning_rate");
    double T = double(need(s.total_iters, "total_iters"));
    double power = name == "linear" ? 1.0 : s.power;
    bool cycle = s.cycle;
    return fn([=](int64_t t) {
      double span = cycle ? T * std::max(1.0, std::ceil(t / T)) : T;
      if (!cycle && t >= T) return end;
      return (init - end) * std::pow(1.0 - t / span, power) + end;
    });
  }
  if (name == "cosinedecay") {
    double end = need(s.end_learning_rate, "end_learning_rate");
    double T = double(need(s.total_iters, "total_iters"));
    return fn(
        [=](int64_t t) { return end + (init - end) * 0.5 * (1.0 + std::cos(M_PI * std::min<double>(t, T) / T)); });
  }
  if (name == "exponential" || name == "inverseexponentialtimedecay") {
    double rate = need(s.decay_rate, "decay_rate");
    double T = double(need(s.total_iters, "total_iters"));
    bool stair = s.staircase, inverse = name != "exponential";
    double k = s.step_exponent;
    return fn([=](int64_t t) {
      if (!inverse) return init * std::pow(rate, stair ? std::floor(t / T) : t / T);
      double x = std::pow(double(t), k) / T;  // lr = init / (1 + rate * t^k / T)
      return init / (1.0 + rate * (stair ? std::floor(x) : x));
    });
  }
  if (name == "inversesquarerootdecay") {
    double scale = s.scale, warmup = double(s.warmup_steps);
    return fn([=](int64_t t) { return init * scale / std::sqrt(std::max<double>(t, warmup)); });
  }
  if (name == "piecewiseconstant") {
    if (s.learning_rates.size() != s.milestones.size() + 1)
      s.origin.fail("learning_rates", "expected one more learning rate than milestones");
    for (double lr : s.learning_rates)
      if (lr < 0) s.origin.fail("learning_rates", "expected values >= 0 (a negative learning rate climbs the loss)");
    auto lrs = s.learning_rates;
    auto ms = s.milestones;
    return fn([=](int64_t t) { return lrs[passed(ms, t)]; });
  }
  if (name == "multistep") {
    auto ms = s.milestones;
    double gamma = s.gamma;
    return fn([=](int64_t t) { return init * std::pow(gamma, double(passed(ms, t))); });
  }
  if (name == "step") {
    int64_t size = need(s.step_size, "step_size");
    double gamma = s.gamma;
    return fn([=](int64_t t) { return init * std::pow(gamma, double(t / size)); });
  }
  if (name == "cosineannealing" || name == "cosineannealingwarmrestarts") {
    bool restarts = name != "cosineannealing";
    if (restarts && s.T_mult != 1) s.origin.fail("T_mult", "only T_mult: 1 is supported (as modelzoo)");
    double T = double(restarts ? need(s.T_0, "T_0") : need(s.T_max, "T_max")), low = s.eta_min;
    return fn([=](int64_t t) {
      double x = restarts ? std::fmod(double(t), T) : double(t);
      return low + (init - low) * (1 + std::cos(M_PI * x / T)) / 2;
    });
  }
  if (name == "multiplicative") {
    double c = need(s.coefficient, "coefficient");
    return fn([=](int64_t t) { return init * std::pow(c, double(t)); });
  }
  if (name == "lambda") return fn([=](int64_t) { return init; });  // modelzoo's LambdaLR: a factor of 1
  if (name == "cyclic") {
    double peak = need(s.max_lr, "max_lr");
    return fn(cyclic(init, peak, s.step_size_up, s.step_size_down.value_or(s.step_size_up), s.mode, s.gamma));
  }
  return fn(one_cycle(s, init, need(s.max_lr, "max_lr")));  // "onecycle": parse() checked the name
}

SchedulerSpec parse_one(const YAML::Node& node, const config::Context& ctx) {
  if (!node.IsMap()) ctx.fail(node, "", "expected a number or a scheduler mapping, got " + config::describe_node(node));
  const YAML::Node name_node = node["scheduler"];
  if (!name_node || !name_node.IsScalar())
    ctx.fail(name_node ? name_node : node, "scheduler", "required: the scheduler's name (a string)");
  const std::string name = canonical_scheduler_name(name_node.Scalar());
  if (name.empty()) {
    std::vector<std::string> known;
    std::string list;
    for (const auto& [k, kind] : scheduler_kinds())
      known.push_back(kind.class_name), list += (list.empty() ? "" : ", ") + kind.class_name;
    ctx.fail(name_node, "scheduler",
             "unsupported scheduler '" + name_node.Scalar() + "'" + config::did_you_mean(name_node.Scalar(), known) +
                 " (supported: " + list + ")");
  }
  const SchedulerKind& kind = scheduler_kinds().at(name);
  config::KeyFilter filter = [&](const std::string& key) {
    if (kind.takes(key)) return std::string();
    std::string takes;
    for (const auto& k : kind.keys) takes += ", " + k;
    return "not a key of the " + kind.class_name + " scheduler (it takes total_iters" + takes + ")";
  };
  // modelzoo R1.x files give PiecewiseConstant an initial_learning_rate too,
  // which R1.x read as another name of its first rate: accepted when it is that rate.
  // (yaml-cpp: assigning to a Node handle rewrites the node it refers to, so the copy is a new handle.)
  YAML::Node without_initial(YAML::NodeType::Map);
  bool drop_initial = false;
  const YAML::Node initial = node["initial_learning_rate"];
  const YAML::Node rates = node["learning_rates"] ? node["learning_rates"] : node["values"];  // values: R1.x
  if (name == "piecewiseconstant" && initial && rates && rates.IsSequence() && rates.size() > 0) {
    if (!config::same_value(initial, rates[0]))
      ctx.fail(
          initial, "initial_learning_rate",
          "PiecewiseConstant starts at learning_rates[0] (" + config::describe_value(rates[0]) + "); remove this key");
    ctx.warn(initial, "initial_learning_rate",
             "ignored (PiecewiseConstant starts at learning_rates[0], the same rate)");
    drop_initial = true;
    for (const auto& kv : node)
      if (kv.first.Scalar() != "initial_learning_rate")
        without_initial[kv.first] = kv.second;  // nodes keep their lines
  }
  const YAML::Node& section = drop_initial ? without_initial : node;
  config::Origin origin;
  SchedulerSpec s = SchedulerSpec::schema().parse(section, ctx, filter, &origin);
  s.origin = origin;
  make_one(s);  // checks what this scheduler needs
  return s;
}

}  // namespace

std::string scheduler_class_name(const std::string& given) {
  const std::string name = canonical_scheduler_name(given);
  return name.empty() ? "" : scheduler_kinds().at(name).class_name;
}

std::string canonical_scheduler_name(const std::string& given) {
  std::string name = given;
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  if (!scheduler_kinds().count(name) && name.size() > 2 && name.compare(name.size() - 2, 2, "lr") == 0)
    name.resize(name.size() - 2);
  return scheduler_kinds().count(name) ? name : "";
}

LRScheduleSpec LRScheduleSpec::parse(const YAML::Node& lr, const config::Context& optimizer_ctx) {
  LRScheduleSpec spec;
  if (!lr.IsDefined() || lr.IsNull()) return spec;
  config::Context ctx = optimizer_ctx.child("learning_rate");
  if (lr.IsScalar()) {
    spec.constant = config::Value<double>::parse(lr, optimizer_ctx, "learning_rate");
    if (*spec.constant < 0)
      optimizer_ctx.fail(lr, "learning_rate", "expected a value >= 0 (a negative learning rate climbs the loss)");
    return spec;
  }
  if (lr.IsMap()) {
    spec.schedulers.push_back(parse_one(lr, ctx));
    return spec;
  }
  if (!lr.IsSequence() || lr.size() == 0)
    ctx.fail(lr, "", "expected a number, a scheduler mapping or a non-empty list of them");
  spec.is_list = true;
  for (size_t i = 0; i < lr.size(); ++i) {
    spec.schedulers.push_back(parse_one(lr[i], ctx.child(std::to_string(i))));
    if (spec.schedulers.back().main_scheduler == "chained") spec.chained = true;
  }
  if (!spec.chained)
    for (size_t i = 0; i + 1 < spec.schedulers.size(); ++i)
      if (!spec.schedulers[i].total_iters)
        spec.schedulers[i].origin.fail("total_iters", "required for every scheduler but the last in a list");
  return spec;
}

YAML::Node LRScheduleSpec::to_yaml() const {
  if (constant) return YAML::Node(*constant);
  if (schedulers.empty()) return YAML::Node(YAML::NodeType::Null);
  auto one = [](const SchedulerSpec& s) {
    const SchedulerKind& kind = scheduler_kinds().at(canonical_scheduler_name(s.scheduler));
    YAML::Node out = SchedulerSpec::schema().to_yaml(s, [&](const std::string& key) {
      return kind.takes(key) && (key != "main_scheduler" || s.main_scheduler.has_value());
    });
    out["scheduler"] = kind.class_name;  // one spelling however it was written
    return out;
  };
  if (!is_list) return one(schedulers.front());
  YAML::Node list(YAML::NodeType::Sequence);
  for (const auto& s : schedulers) list.push_back(one(s));
  return list;
}

std::vector<config::FieldInfo> scheduler_fields() { return SchedulerSpec::schema().describe(); }

std::unique_ptr<LRSchedule> make_lr_schedule(const LRScheduleSpec& spec) {
  if (spec.constant) {
    const double v = *spec.constant;
    return std::make_unique<Fn>([v](int64_t) { return v; });
  }
  if (spec.schedulers.empty()) throw std::invalid_argument("make_lr_schedule: no learning rate");
  std::vector<std::unique_ptr<LRSchedule>> parts;
  std::vector<int64_t> milestones;
  int64_t total = 0;
  for (size_t i = 0; i < spec.schedulers.size(); ++i) {
    parts.push_back(make_one(spec.schedulers[i]));
    if (i + 1 < spec.schedulers.size() && !spec.chained) milestones.push_back(total += *spec.schedulers[i].total_iters);
  }
  if (parts.size() == 1) return std::move(parts.front());
  if (spec.chained) return std::make_unique<Chained>(std::move(parts));
  return std::make_unique<Sequential>(std::move(parts), std::move(milestones));
}

std::unique_ptr<LRSchedule> make_lr_schedule(const YAML::Node& lr, const config::Context& ctx) {
  return make_lr_schedule(LRScheduleSpec::parse(lr, ctx));
}

}  // namespace zoo::optim
