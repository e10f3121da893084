// Implementation of runner/optim/lr_schedule.h.
#include "runner/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

namespace zoo::optim {
namespace {

// Every field any supported scheduler takes; each scheduler checks its own.
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
  std::optional<std::string> main_scheduler;
  static const config::Schema<SchedulerSpec>& schema() {
    using S = SchedulerSpec;
    static const config::Schema<S> s =
        config::Schema<S>("learning_rate scheduler", "One learning-rate scheduler.")
            .field("scheduler", &S::scheduler, "Constant, Linear, Polynomial, CosineDecay, Exponential or "
                                               "InverseSquareRootDecay (an LR suffix is allowed).")
            .field("initial_learning_rate", &S::initial_learning_rate, "LR at the scheduler's step 0.")
            .field("end_learning_rate", &S::end_learning_rate, "LR at and after total_iters.")
            .field("learning_rate", &S::learning_rate, "Constant: the LR.")
            .field("total_iters", &S::total_iters, "Steps this scheduler runs for.",
                   config::if_set(config::positive<int64_t>()))
            .field("power", &S::power, "Polynomial: exponent.")
            .field("cycle", &S::cycle, "Polynomial/Linear: restart the decay after total_iters.")
            .field("decay_rate", &S::decay_rate, "Exponential: factor per total_iters steps.")
            .field("staircase", &S::staircase, "Exponential: floor the exponent.")
            .field("scale", &S::scale, "InverseSquareRootDecay: scale.")
            .field("warmup_steps", &S::warmup_steps, "InverseSquareRootDecay: warmup steps.",
                   config::positive<int64_t>())
            .field("main_scheduler", &S::main_scheduler, "\"chained\" (not supported yet).");
    return s;
  }
};

// Pre-2.1 spellings mapped to today's, as modelzoo's config converter does.
YAML::Node modernize(const YAML::Node& in) {
  static const std::vector<std::pair<std::string, std::string>> renames = {
      {"steps", "total_iters"}, {"decay_steps", "total_iters"}, {"base_lr", "initial_learning_rate"}};
  YAML::Node out(YAML::NodeType::Map);
  for (const auto& kv : in) {
    std::string k = kv.first.as<std::string>();
    for (const auto& [old_name, new_name] : renames)
      if (k == old_name) k = new_name;
    out[k] = kv.second;
  }
  return out;
}

class Fn : public LRSchedule {
 public:
  explicit Fn(std::function<double(int64_t)> f) : f_(std::move(f)) {}
  double at(int64_t t) const override { return f_(t); }

 private:
  std::function<double(int64_t)> f_;
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

std::unique_ptr<LRSchedule> make_one(const YAML::Node& node, const config::Context& ctx, SchedulerSpec* out_spec) {
  if (!node.IsMap()) ctx.fail(node, "", "expected a number or a scheduler mapping, got " + config::describe_node(node));
  SchedulerSpec s = SchedulerSpec::schema().parse(modernize(node), ctx);
  if (out_spec) *out_spec = s;
  std::string name = s.scheduler;
  std::transform(name.begin(), name.end(), name.begin(), ::tolower);
  if (name.size() > 2 && name.compare(name.size() - 2, 2, "lr") == 0) name.resize(name.size() - 2);
  if (s.main_scheduler) ctx.fail(node["main_scheduler"], "main_scheduler", "chained schedulers are not supported yet");
  auto need = [&](const auto& v, const char* key) {
    if (!v) ctx.fail(node, key, "required by the " + s.scheduler + " scheduler");
    return *v;
  };
  if (name == "constant") {
    double lr = s.learning_rate ? *s.learning_rate : need(s.initial_learning_rate, "learning_rate");
    return std::make_unique<Fn>([lr](int64_t) { return lr; });
  }
  if (name == "linear" || name == "polynomial") {
    double init = need(s.initial_learning_rate, "initial_learning_rate");
    double end = need(s.end_learning_rate, "end_learning_rate");
    double T = double(need(s.total_iters, "total_iters"));
    double power = name == "linear" ? 1.0 : s.power;
    bool cycle = s.cycle;
    return std::make_unique<Fn>([=](int64_t t) {
      double span = cycle ? T * std::max(1.0, std::ceil(t / T)) : T;
      if (!cycle && t >= T) return end;
      return (init - end) * std::pow(1.0 - t / span, power) + end;
    });
  }
  if (name == "cosinedecay") {
    double init = need(s.initial_learning_rate, "initial_learning_rate");
    double end = need(s.end_learning_rate, "end_learning_rate");
    double T = double(need(s.total_iters, "total_iters"));
    return std::make_unique<Fn>([=](int64_t t) {
      return end + (init - end) * 0.5 * (1.0 + std::cos(M_PI * std::min<double>(t, T) / T));
    });
  }
  if (name == "exponential") {
    double init = need(s.initial_learning_rate, "initial_learning_rate");
    double rate = need(s.decay_rate, "decay_rate");
    double T = double(need(s.total_iters, "total_iters"));
    bool stair = s.staircase;
    return std::make_unique<Fn>([=](int64_t t) { return init * std::pow(rate, stair ? std::floor(t / T) : t / T); });
  }
  if (name == "inversesquarerootdecay") {
    double init = s.initial_learning_rate.value_or(1.0), scale = s.scale;
    double warmup = double(s.warmup_steps);
    return std::make_unique<Fn>([=](int64_t t) { return init * scale / std::sqrt(std::max<double>(t, warmup)); });
  }
  ctx.fail(node["scheduler"] ? node["scheduler"] : node, "scheduler",
           "unsupported scheduler '" + s.scheduler +
               "' (supported so far: Constant, Linear, Polynomial, CosineDecay, Exponential, InverseSquareRootDecay)");
}

}  // namespace

std::unique_ptr<LRSchedule> make_lr_schedule(const YAML::Node& lr, const config::Context& ctx_in) {
  config::Context ctx = ctx_in.child("learning_rate");
  if (lr.IsScalar()) {
    double v = config::Value<double>::parse(lr, ctx_in, "learning_rate");
    return std::make_unique<Fn>([v](int64_t) { return v; });
  }
  if (lr.IsMap()) return make_one(lr, ctx, nullptr);
  if (!lr.IsSequence() || lr.size() == 0)
    ctx.fail(lr, "", "expected a number, a scheduler mapping or a non-empty list of them");
  std::vector<std::unique_ptr<LRSchedule>> parts;
  std::vector<int64_t> milestones;
  int64_t total = 0;
  for (size_t i = 0; i < lr.size(); ++i) {
    SchedulerSpec spec;
    config::Context item = ctx.child(std::to_string(i));
    parts.push_back(make_one(lr[i], item, &spec));
    if (i + 1 < lr.size()) {
      if (!spec.total_iters) item.fail(lr[i], "total_iters", "required for every scheduler but the last in a list");
      total += *spec.total_iters;
      milestones.push_back(total);
    }
  }
  if (parts.size() == 1) return std::move(parts.front());
  return std::make_unique<Sequential>(std::move(parts), std::move(milestones));
}

}  // namespace zoo::optim
