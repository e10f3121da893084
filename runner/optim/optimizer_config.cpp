// Schema of runner/optim/optimizer_config.h.
#include "runner/optim/optimizer_config.h"

#include <algorithm>
#include <cstdlib>

#include "configs/schema/yaml_util.h"
#include "runner/optim/registry.h"

namespace zoo {

const config::Schema<OptimizerConfig>& OptimizerConfig::schema() {
  using O = OptimizerConfig;
  using config::if_set;
  using config::positive;
  static const config::Schema<O> s =
      config::Schema<O>("optimizer", "Optimizer, learning rate, clipping and loss scaling.")
          .field("optimizer_type", &O::optimizer_type,
                 "SGD, Adam, AdamW, Adamax, Adadelta, Adagrad, ASGD, Lamb, Lion, NAdam, RAdam, RMSprop, Rprop or "
                 "Adafactor "
                 "(case-insensitive).")
          .field("learning_rate", &O::learning_rate,
                 "A float, one scheduler mapping ({scheduler: Linear, ...}) or a list run one after another "
                 "(null: the optimizer's default lr).")
          .field("betas", &O::betas, "Adam-family (beta1, beta2) (null: the optimizer's default).")
          .field("eps", &O::eps,
                 "Epsilon (null: the optimizer's default; Adam/AdamW add it to sqrt(v) before "
                 "bias correction; Adafactor takes a pair, default [1e-30, 1e-3]).")
          .field("weight_decay", &O::weight_decay,
                 "Decoupled (AdamW) or L2 (Adam, SGD) weight decay; never applied to biases or norm layers.",
                 config::non_negative<double>())
          .field("correct_bias", &O::correct_bias, "Adam/AdamW bias correction.")
          .field("amsgrad", &O::amsgrad, "Adam/AdamW AMSGrad variant (not supported: must be false).")
          .field("momentum", &O::momentum, "SGD / RMSprop momentum.", config::non_negative<double>())
          .field("dampening", &O::dampening, "SGD dampening.")
          .field("nesterov", &O::nesterov, "SGD Nesterov momentum.")
          .field("rho", &O::rho, "Adadelta running-average coefficient.", config::in_range(0, 1, false))
          .field("lr_decay", &O::lr_decay, "Adagrad learning-rate decay.", config::non_negative<double>())
          .field("initial_accumulator_value", &O::initial_accumulator_value, "Adagrad initial sum of squares.",
                 config::non_negative<double>())
          .field("lambd", &O::lambd, "ASGD decay term.", config::non_negative<double>())
          .field("alpha", &O::alpha, "ASGD eta exponent (default 0.75) / RMSprop smoothing (default 0.99).",
                 if_set(config::non_negative<double>()))
          .field("t0", &O::t0, "ASGD step at which averaging starts.", config::non_negative<double>())
          .field("momentum_decay", &O::momentum_decay, "NAdam momentum decay.", config::non_negative<double>())
          .field("centered", &O::centered, "RMSprop: normalize by the estimated gradient variance.")
          .field("etas", &O::etas, "Rprop (decrease, increase) factors.")
          .field("step_sizes", &O::step_sizes, "Rprop (minimum, maximum) step sizes.")
          .field("beta1", &O::beta1, "Adafactor: first-moment decay (null: none). Other optimizers use betas.",
                 if_set(config::in_range(0, 1, true)))
          .field("clip_threshold", &O::clip_threshold, "Adafactor: update RMS clipping threshold.",
                 config::positive<double>())
          .field("decay_rate", &O::decay_rate, "Adafactor: second-moment decay exponent (beta2_t = 1 - t^rate).")
          .field("scale_parameter", &O::scale_parameter, "Adafactor: scale the LR by the parameter's RMS.")
          .field("relative_step", &O::relative_step,
                 "Adafactor: use its own 1/sqrt(t) step size instead of learning_rate.")
          .field("warmup_init", &O::warmup_init, "Adafactor: relative step warm-up.")
          .field("max_gradient_norm", &O::max_gradient_norm, "Clip the global gradient L2 norm to this.",
                 if_set(positive<double>()))
          .field("max_gradient_value", &O::max_gradient_value, "Clip each gradient value to +-this.",
                 if_set(positive<double>()))
          .field("grad_accum_steps", &O::grad_accum_steps,
                 "Micro-batches per optimizer step (the loss is divided by this).", positive<int64_t>())
          .field("loss_scaling_factor", &O::loss_scaling_factor,
                 "Static loss scale (a number) or \"dynamic\" (not used with bfloat16, which needs none).")
          .field("initial_loss_scale", &O::initial_loss_scale, "Dynamic loss scaling: initial scale.",
                 if_set(positive<double>()))
          .field("steps_per_increase", &O::steps_per_increase, "Dynamic loss scaling: steps between doublings.",
                 positive<int64_t>())
          .field("min_loss_scale", &O::min_loss_scale, "Dynamic loss scaling: lower bound.", if_set(positive<double>()))
          .field("max_loss_scale", &O::max_loss_scale, "Dynamic loss scaling: upper bound.", if_set(positive<double>()))
          .field("log_summaries", &O::log_summaries, "Also log gradient and weight norms.")
          .field("adjust_learning_rate", &O::adjust_learning_rate,
                 "Learning-rate multipliers by parameter group, as muP uses (decoder_kernel: 0.1); the groups are "
                 "the model's (GPT models: embedding, decoder_kernel, decoder_attention, decoder_input_ffn, "
                 "decoder_output_ffn).")
          .hardware_only({"ws_summary"}, "a summary-only key of modelzoo's Cerebras runs; zoo writes no such summary")
          .hardware_only({"disable_lr_steps_reset"}, "modelzoo R1.x passed it to Cerebras's own LR schedulers only")
          // modelzoo R1.x names, read with a warning.
          .renamed("weight_decay_rate", "weight_decay")
          .renamed("beta1", "betas", 0)
          .renamed("beta2", "betas", 1)
          .renamed("eps1", "eps", 0)
          .renamed("eps2", "eps", 1)
          .renamed("eta1", "etas", 0)
          .renamed("eta2", "etas", 1)
          .renamed("step_size_min", "step_sizes", 0)
          .renamed("step_size_max", "step_sizes", 1)
          .validate([](const O& o, const auto& fail) {
            std::string t = o.optimizer_type;
            std::transform(t.begin(), t.end(), t.begin(), ::tolower);
            if (o.betas && (o.betas->size() != 2 || (*o.betas)[0] < 0 || (*o.betas)[0] >= 1 || (*o.betas)[1] < 0 ||
                            (*o.betas)[1] >= 1))
              fail("betas", "expected two values in [0, 1)");
            if (o.amsgrad) fail("amsgrad", "AMSGrad is not supported; set it to false");
            for (const auto& [group, scale] : o.adjust_learning_rate)
              if (!(scale >= 0))
                fail("adjust_learning_rate", group + ": expected a multiplier >= 0, got " + std::to_string(scale));
            if (t == "adafactor") {
              if (o.eps && o.eps->items.size() != 2) fail("eps", "Adafactor takes a pair [eps1, eps2]");
            } else if (o.eps && (o.eps->items.size() != 1 || o.eps->items[0] <= 0)) {
              fail("eps", "expected one positive number");
            }
            if (o.etas.size() != 2 || o.etas[0] >= 1 || o.etas[1] <= 1)
              fail("etas", "expected (decrease < 1, increase > 1)");
            if (o.step_sizes.size() != 2 || o.step_sizes[0] > o.step_sizes[1])
              fail("step_sizes", "expected (minimum, maximum)");
            if (o.min_loss_scale && o.max_loss_scale && *o.min_loss_scale > *o.max_loss_scale)
              fail("min_loss_scale", "min_loss_scale (" + config::describe_value(YAML::Node(*o.min_loss_scale)) +
                                         ") is above max_loss_scale (" +
                                         config::describe_value(YAML::Node(*o.max_loss_scale)) + ")");
            if (o.max_gradient_norm && o.max_gradient_value)
              fail("max_gradient_value", "set only one of max_gradient_norm and max_gradient_value");
            const std::string& f = o.loss_scaling_factor;
            char* end = nullptr;
            double v = std::strtod(f.c_str(), &end);
            if (f != "dynamic" && (end == f.c_str() || *end != '\0' || v <= 0))
              fail("loss_scaling_factor", "expected a positive number or \"dynamic\", got '" + f + "'");
          });
  return s;
}

OptimizerConfig OptimizerConfig::parse(const YAML::Node& section, const config::Context& ctx) {
  const YAML::Node type = section.IsMap() ? section["optimizer_type"] : YAML::Node();
  OptimizerConfig start;
  if (type && type.IsScalar()) start.optimizer_type = type.Scalar();
  const optim::OptimizerEntry* entry = optim::find_optimizer(start.optimizer_type);
  if (!entry) {
    std::vector<std::string> names;
    std::string list;
    for (const auto& e : optim::optimizer_registry())
      names.push_back(e.name), list += (list.empty() ? "" : ", ") + e.name;
    ctx.fail(type ? type : section, "optimizer_type",
             "unsupported optimizer '" + start.optimizer_type + "'" +
                 config::did_you_mean(start.optimizer_type, names) + " (supported: " + list + ")");
  }
  // The optimizer's own defaults, read through the same declarations.
  config::Context builtin{"<" + entry->name + " defaults>", ctx.path};
  start = schema().parse(config::load_yaml_string(entry->defaults, builtin.file), builtin, nullptr, nullptr, &start);
  config::KeyFilter filter = [entry](const std::string& key) {
    if (entry->takes(key)) return std::string();
    std::string takes;
    for (const auto& k : entry->keys) takes += (takes.empty() ? "" : ", ") + k;
    return "not a key of the " + entry->name + " optimizer (it takes " + (takes.empty() ? "none" : takes) +
           ", besides learning_rate, weight_decay, clipping, grad_accum_steps, loss scaling and adjust_learning_rate)";
  };
  config::Origin origin;
  OptimizerConfig o = schema().parse(section, ctx, filter, &origin, &start);
  o.origin = origin;
  o.optimizer_type = entry->name;
  if (o.learning_rate.empty()) {
    if (!entry->default_lr) origin.fail("learning_rate", "required for " + entry->name + " (it has no default)");
    o.learning_rate.constant = *entry->default_lr;
  }
  return o;
}

YAML::Node OptimizerConfig::to_yaml() const {
  const optim::OptimizerEntry* entry = optim::find_optimizer(optimizer_type);
  return schema().to_yaml(*this, [&](const std::string& key) { return entry && entry->takes(key); });
}

}  // namespace zoo
