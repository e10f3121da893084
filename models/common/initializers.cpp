// Implementation of models/common/initializers.h.
#include "models/common/initializers.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <random>

namespace zoo::models {

namespace {
const std::vector<std::string> kNames = {
    "normal",         "truncated_normal", "uniform",         "constant",      "zeros",           "ones",
    "xavier_uniform", "xavier_normal",    "glorot_uniform",  "glorot_normal", "kaiming_uniform", "kaiming_normal",
    "lecun_normal",   "lecun_uniform",    "variance_scaling"};

std::pair<double, double> fans(const torch::Tensor& w) {
  if (w.dim() < 2) return {double(w.numel()), double(w.numel())};
  double receptive = w.dim() > 2 ? double(w[0][0].numel()) : 1.0;
  return {w.size(1) * receptive, w.size(0) * receptive};
}

// Fills w by `draw(part, generator)`. A contiguous CPU tensor of 2M values or
// more is drawn in fixed blocks of 1M on all threads, each from its own
// generator seeded in turn from the global one: torch's CPU normal_/uniform_
// draw every value from one mt19937 stream on one thread, which dominates
// building a large model. Block seeds and sizes do not depend on the thread count, so a seed
// gives the same weights with any number of threads (but not the values of
// one serial stream). Elsewhere the generator is empty: the device's default.
using OptionalGenerator = c10::optional<at::Generator>;
template <typename Draw>
void draw_in_blocks(const torch::Tensor& w, Draw draw) {
  constexpr int64_t kBlock = int64_t(1) << 20;
  const int64_t n = w.numel();
  if (!w.device().is_cpu() || !w.is_contiguous() || n < 2 * kBlock) return draw(w, OptionalGenerator());
  std::vector<uint64_t> seeds((n + kBlock - 1) / kBlock);
  {
    at::Generator global = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(global.mutex());
    for (uint64_t& seed : seeds) seed = global.get<at::CPUGeneratorImpl>()->random64();
  }
  // Detached: worker threads do not inherit the caller's no-grad mode.
  const torch::Tensor flat = w.detach().view({-1});
  at::parallel_for(0, int64_t(seeds.size()), 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b)
      draw(flat.narrow(0, b * kBlock, std::min(kBlock, n - b * kBlock)),
           OptionalGenerator(cpu_generator_from_seed(seeds[b])));
  });
}

// Redraws the values of w outside [a, b] from normal(mean, std) until none is
// left. On a contiguous CPU float tensor one read of w finds them and only
// they are checked again; the tensor expression makes three temporaries of
// w's size (two compares and their or) on every round.
template <typename T>
void redraw_outside(T* w, int64_t n, double mean, double std, double a, double b, const OptionalGenerator& g) {
  const T lo = static_cast<T>(a), hi = static_cast<T>(b);  // compared in w's type, as `w < a` does
  std::vector<int64_t> outside;
  for (int64_t i = 0; i < n; ++i)
    if (w[i] < lo || w[i] > hi) outside.push_back(i);
  while (!outside.empty()) {
    const torch::Tensor fresh = torch::empty({int64_t(outside.size())}, torch::dtype<T>()).normal_(mean, std, g);
    const T* f = fresh.data_ptr<T>();
    size_t still = 0;
    for (size_t k = 0; k < outside.size(); ++k) {
      w[outside[k]] = f[k];
      if (f[k] < lo || f[k] > hi) outside[still++] = outside[k];
    }
    outside.resize(still);
  }
}
void redraw_outside(torch::Tensor w, double mean, double std, double a, double b, const OptionalGenerator& g) {
  if (w.device().is_cpu() && w.is_contiguous() && w.scalar_type() == torch::kFloat)
    return redraw_outside(w.data_ptr<float>(), w.numel(), mean, std, a, b, g);
  if (w.device().is_cpu() && w.is_contiguous() && w.scalar_type() == torch::kDouble)
    return redraw_outside(w.data_ptr<double>(), w.numel(), mean, std, a, b, g);
  // Elsewhere (GPU, strided or reduced-precision tensors) w is scanned once and
  // only the redrawn values are checked again.
  const torch::Tensor outside = (w < a) | (w > b);
  const int64_t n = outside.sum().item<int64_t>();
  if (n == 0) return;
  const torch::Tensor redraw = torch::empty({n}, w.options()).normal_(mean, std, g);
  for (;;) {
    const torch::Tensor again = (redraw < a) | (redraw > b);
    const int64_t m = again.sum().item<int64_t>();
    if (m == 0) break;
    redraw.masked_scatter_(again, torch::empty({m}, w.options()).normal_(mean, std, g));
  }
  w.masked_scatter_(outside, redraw);
}

void normal_fill(const torch::Tensor& w, double mean, double std) {
  draw_in_blocks(w, [&](torch::Tensor part, const OptionalGenerator& g) { part.normal_(mean, std, g); });
}
void uniform_fill(const torch::Tensor& w, double low, double high) {
  draw_in_blocks(w, [&](torch::Tensor part, const OptionalGenerator& g) { part.uniform_(low, high, g); });
}

// A normal(mean, std) sample restricted to [a, b] (absolute bounds). Where
// most of the mass lies inside, draw normals and redraw those outside (the
// same distribution, and much faster on CPU than inverse-CDF sampling, whose
// erfinv dominated building a model); for far-tail windows, sample
// the inverse CDF as torch.nn.init.trunc_normal_ does.
void truncated_normal_(torch::Tensor& w, double mean, double std, double a, double b) {
  auto cdf = [](double x) { return (1.0 + std::erf(x / std::sqrt(2.0))) / 2.0; };
  double lo = cdf((a - mean) / std), hi = cdf((b - mean) / std);
  if (hi - lo >= 0.5) {
    draw_in_blocks(w, [&](torch::Tensor part, const OptionalGenerator& g) {
      part.normal_(mean, std, g);
      redraw_outside(part, mean, std, a, b, g);
    });
    return;
  }
  uniform_fill(w, 2 * lo - 1, 2 * hi - 1);
  w.erfinv_();
  w.mul_(std * std::sqrt(2.0)).add_(mean);
  w.clamp_(a, b);
}
}  // namespace

at::Generator cpu_generator_from_seed(uint64_t seed) {
  at::mt19937 engine(seed);  // keeps `seed` whole as the generator's initial_seed()
  at::mt19937_data_pod state = engine.data();
  std::seed_seq spread{uint32_t(seed), uint32_t(seed >> 32)};
  spread.generate(state.state_.begin(), state.state_.end());
  engine.set_data(state);  // left_ = 1, next_ = 0 as seeded: the first draw twists the new state
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed);
  generator.get<at::CPUGeneratorImpl>()->set_engine(engine);
  return generator;
}

const config::Schema<InitializerSpec>& InitializerSpec::schema() {
  using S = InitializerSpec;
  static const config::Schema<S> s =
      config::Schema<S>("initializer", "A weight initializer, as modelzoo's {name: ..., ...} mappings.")
          .field("name", &S::name, "Initializer kind.", config::one_of(kNames))
          .field("mean", &S::mean, "Mean (normal, truncated_normal).")
          .field("std", &S::std, "Standard deviation (normal, truncated_normal).", config::positive<double>())
          .field("a", &S::a, "Lower bound (truncated_normal: absolute value; uniform: low).")
          .field("b", &S::b, "Upper bound (truncated_normal: absolute value; uniform: high).")
          .field("gain", &S::gain, "Gain (xavier_*).")
          .field("val", &S::val, "Value (constant).")
          .field("scale", &S::scale, "Scale (variance_scaling).")
          .field("mode", &S::mode, "fan_in, fan_out or fan_avg (kaiming_*, variance_scaling).",
                 config::one_of({"fan_in", "fan_out", "fan_avg"}))
          .field("nonlinearity", &S::nonlinearity, "Nonlinearity for the kaiming gain.",
                 config::one_of({"leaky_relu", "relu", "linear", "tanh", "sigmoid"}))
          .field("distribution", &S::distribution, "variance_scaling distribution.",
                 config::one_of({"truncated_normal", "normal", "uniform"}))
          .validate([](const S& s, const auto& fail) {
            if (s.a >= s.b) fail("b", "expected b > a");
          });
  return s;
}

InitializerSpec truncated_normal_spec(double std) {
  InitializerSpec s;
  s.name = "truncated_normal";
  s.std = std;
  s.a = -2 * std;
  s.b = 2 * std;
  return s;
}

InitializerSpec scaled_initializer(InitializerSpec s, double by) {
  s.std *= by;
  if (s.name == "truncated_normal") s.a *= by, s.b *= by;
  return s;
}

void apply_initializer(const InitializerSpec& spec, torch::Tensor w) {
  if (!w.defined() || w.device().is_meta()) return;
  torch::NoGradGuard no_grad;
  const std::string& n = spec.name;
  auto [fan_in, fan_out] = fans(w);
  double fan = spec.mode == "fan_in" ? fan_in : spec.mode == "fan_out" ? fan_out : (fan_in + fan_out) / 2;
  if (n == "normal") {
    normal_fill(w, spec.mean, spec.std);
  } else if (n == "truncated_normal") {
    truncated_normal_(w, spec.mean, spec.std, spec.a, spec.b);
  } else if (n == "uniform") {
    uniform_fill(w, spec.a, spec.b);
  } else if (n == "constant") {
    w.fill_(spec.val);
  } else if (n == "zeros") {
    w.zero_();
  } else if (n == "ones") {
    w.fill_(1.0);
  } else if (n == "xavier_uniform" || n == "glorot_uniform") {
    double bound = spec.gain * std::sqrt(6.0 / (fan_in + fan_out));
    uniform_fill(w, -bound, bound);
  } else if (n == "xavier_normal" || n == "glorot_normal") {
    normal_fill(w, 0.0, spec.gain * std::sqrt(2.0 / (fan_in + fan_out)));
  } else if (n == "kaiming_uniform" || n == "kaiming_normal") {
    double gain = spec.nonlinearity == "relu"         ? std::sqrt(2.0)
                  : spec.nonlinearity == "tanh"       ? 5.0 / 3.0
                  : spec.nonlinearity == "leaky_relu" ? std::sqrt(2.0 / (1 + 0.01 * 0.01))
                                                      : 1.0;
    double std = gain / std::sqrt(fan);
    if (n == "kaiming_normal") normal_fill(w, 0.0, std);
    else uniform_fill(w, -std::sqrt(3.0) * std, std::sqrt(3.0) * std);
  } else if (n == "lecun_normal") {
    truncated_normal_(w, 0.0, std::sqrt(1.0 / fan_in) / .87962566103423978, -2, 2);
  } else if (n == "lecun_uniform") {
    double limit = std::sqrt(3.0 / fan_in);
    uniform_fill(w, -limit, limit);
  } else if (n == "variance_scaling") {
    double variance = spec.scale / fan;
    if (spec.distribution == "truncated_normal") {
      double std = std::sqrt(variance) / .87962566103423978;
      truncated_normal_(w, 0.0, std, -2 * std, 2 * std);
    } else if (spec.distribution == "normal") {
      normal_fill(w, 0.0, std::sqrt(variance));
    } else {
      double bound = std::sqrt(3 * variance);
      uniform_fill(w, -bound, bound);
    }
  } else {
    throw std::invalid_argument("unknown initializer '" + n + "'");
  }
}

}  // namespace zoo::models
