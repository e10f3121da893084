// Schema of runner/optimizer_config.h.
#include "runner/optimizer_config.h"

#include <algorithm>
#include <cstdlib>

namespace zoo {

const config::Schema<OptimizerConfig>& OptimizerConfig::schema() {
  using O = OptimizerConfig;
  using config::if_set;
  using config::positive;
  static const config::Schema<O> s =
      config::Schema<O>("optimizer", "Optimizer, learning rate, clipping and loss scaling.")
          .field("optimizer_type", &O::optimizer_type, "AdamW, Adam or SGD (case-insensitive).")
          .field("learning_rate", &O::learning_rate,
                 "A float, one scheduler mapping ({scheduler: Linear, ...}) or a list run one after another.")
          .field("betas", &O::betas, "Adam/AdamW (beta1, beta2).")
          .field("eps", &O::eps, "Adam/AdamW epsilon, added to sqrt(v) before bias correction.",
                 config::positive<double>())
          .field("weight_decay", &O::weight_decay,
                 "Decoupled (AdamW) or L2 (Adam, SGD) weight decay; never applied to biases or norm layers.",
                 config::non_negative<double>())
          .field("correct_bias", &O::correct_bias, "AdamW bias correction.")
          .field("momentum", &O::momentum, "SGD momentum.", config::non_negative<double>())
          .field("dampening", &O::dampening, "SGD dampening.")
          .field("nesterov", &O::nesterov, "SGD Nesterov momentum.")
          .field("max_gradient_norm", &O::max_gradient_norm, "Clip the global gradient L2 norm to this.",
                 if_set(positive<double>()))
          .field("max_gradient_value", &O::max_gradient_value, "Clip each gradient value to +-this.",
                 if_set(positive<double>()))
          .field("grad_accum_steps", &O::grad_accum_steps,
                 "Micro-batches per optimizer step (the loss is divided by this).", positive<int64_t>())
          .field("loss_scaling_factor", &O::loss_scaling_factor,
                 "Static loss scale (a number) or \"dynamic\"; only used with float16 training.")
          .field("initial_loss_scale", &O::initial_loss_scale, "Dynamic loss scaling: initial scale.",
                 if_set(positive<double>()))
          .field("steps_per_increase", &O::steps_per_increase, "Dynamic loss scaling: steps between doublings.",
                 positive<int64_t>())
          .field("min_loss_scale", &O::min_loss_scale, "Dynamic loss scaling: lower bound.",
                 if_set(positive<double>()))
          .field("max_loss_scale", &O::max_loss_scale, "Dynamic loss scaling: upper bound.",
                 if_set(positive<double>()))
          .field("log_summaries", &O::log_summaries, "Also log gradient and weight norms.")
          .renamed("weight_decay_rate", "weight_decay")
          .renamed("beta1", "betas")
          .renamed("beta2", "betas")
          .renamed("eps1", "eps")
          .renamed("eps2", "eps")
          .renamed("eta1", "etas")
          .renamed("eta2", "etas")
          .renamed("step_size_min", "step_sizes")
          .renamed("step_size_max", "step_sizes")
          .validate([](const O& o, const auto& fail) {
            std::string t = o.optimizer_type;
            std::transform(t.begin(), t.end(), t.begin(), ::tolower);
            if (t != "adamw" && t != "adam" && t != "sgd")
              fail("optimizer_type", "unsupported optimizer '" + o.optimizer_type +
                                         "' (supported so far: AdamW, Adam, SGD)");
            if (o.betas.size() != 2 || o.betas[0] < 0 || o.betas[0] >= 1 || o.betas[1] < 0 || o.betas[1] >= 1)
              fail("betas", "expected two values in [0, 1)");
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

}  // namespace zoo
