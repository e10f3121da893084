// Implementation of runner/sparsity.h.
#include "runner/sparsity.h"

#include <fnmatch.h>

#include <cmath>
#include <regex>
#include <stdexcept>

#include "runner/log.h"

namespace zoo {

const config::Schema<DropFractionSchedule>& DropFractionSchedule::schema() {
  using S = DropFractionSchedule;
  static const config::Schema<S> s =
      config::Schema<S>("drop_fraction", "Share of the active weights SET/RigL drop (and regrow) per update.")
          .field("type", &S::type, "cosine: init x (1 + cos(pi x step / half_period)) / 2; constant: init.",
                 config::one_of({"cosine", "constant"}))
          .field("init", &S::init, "The fraction at step 0.", config::in_range(0.0, 1.0, false))
          .field("half_period", &S::half_period, "cosine: the step at which the fraction reaches 0.",
                 config::if_set(config::positive<int64_t>()))
          .validate([](const S& o, const auto& fail) {
            if (o.type == "cosine" && !o.half_period) fail("half_period", "required for the cosine schedule");
          });
  return s;
}

const config::Schema<SparsityUpdate>& SparsityUpdate::schema() {
  using S = SparsityUpdate;
  static const config::Schema<S> s =
      config::Schema<S>("update", "When SET/RigL move the masks.")
          .field("freq", &S::freq, "Steps between mask updates.", config::if_set(config::positive<int64_t>()))
          .field("start", &S::start, "First step that may update.", config::non_negative<int64_t>())
          .field("stop", &S::stop, "Updates happen before this step only (null: until the end).",
                 config::if_set(config::positive<int64_t>()));
  return s;
}

const config::Schema<SparsityConfig>& SparsityConfig::schema() {
  using S = SparsityConfig;
  static const config::Schema<S> s =
      config::Schema<S>("sparsity", "Weight sparsity: masks holding a fraction of chosen weights at zero.")
          .field("sparsity", &S::sparsity, "Fraction of each chosen weight held at zero.",
                 config::in_range(0.0, 1.0, true))
          .field("init_method", &S::init_method, "random: masks drawn uniformly; topk: keep the largest magnitudes.",
                 config::one_of({"random", "topk"}))
          .field("algorithm", &S::algorithm, "static: fixed masks; set / rigl: masks moved every update.freq steps.",
                 config::one_of({"static", "set", "rigl"}))
          .field("drop_fraction", &S::drop_fraction, "set / rigl: the share moved per update.")
          .field("update", &S::update, "set / rigl: when the masks move.")
          .field("param_filter", &S::param_filter,
                 "fnmatch globs over parameter names (e.g. '*proj_[qkv]_dense_layer.weight'); empty: every weight "
                 "of two or more dimensions.")
          .field("param_name_patterns", &S::param_name_patterns,
                 "modelzoo 2.0's form of param_filter: regular expressions matched at the start of each name.")
          .renamed("type", "algorithm")
          .renamed("schedule", "update")  // modelzoo 2.1's name
          .validate([](const S& o, const auto& fail) {
            if (!o.param_filter.items.empty() && !o.param_name_patterns.items.empty())
              fail("param_name_patterns", "give param_filter or param_name_patterns, not both");
            const bool dynamic = o.algorithm != "static";
            if (dynamic && (!o.update || !o.update->freq)) fail("update", o.algorithm + " needs update.freq");
            if (dynamic && !o.drop_fraction) fail("drop_fraction", o.algorithm + " needs drop_fraction");
            if (!dynamic && (o.update || o.drop_fraction))
              fail(o.update ? "update" : "drop_fraction", "applies to algorithm set or rigl only (this one is static)");
          });
  return s;
}

WeightSparsity::WeightSparsity(const SparsityConfig& c, const torch::nn::Module& model, uint64_t seed)
    : config_(c), generator_(at::detail::createCPUGenerator(seed)) {
  for (const auto& item : model.named_parameters()) {
    if (!item.value().requires_grad()) continue;  // frozen (DPO's reference): never trained, never pruned
    const std::string& name = item.key();
    bool chosen = c.param_filter.items.empty() && c.param_name_patterns.items.empty() && item.value().dim() >= 2;
    for (const auto& glob : c.param_filter.items) chosen = chosen || fnmatch(glob.c_str(), name.c_str(), 0) == 0;
    for (const auto& pattern : c.param_name_patterns.items)  // Python's re.match: anchored at the start only
      chosen = chosen || std::regex_search(name, std::regex(pattern), std::regex_constants::match_continuous);
    if (chosen) targets_.push_back({item.key(), item.value(), {}, {}});
  }
  if (targets_.empty())
    throw std::runtime_error("sparsity.param_filter / param_name_patterns: no parameter of the model matches");
}

torch::Tensor WeightSparsity::random_scores(const torch::Tensor& like) {
  // Drawn on the CPU from the run's own generator: every rank draws the same.
  return torch::rand(like.sizes(), generator_, torch::kFloat).to(like.device());
}

void WeightSparsity::initialize() {
  torch::NoGradGuard no_grad;
  for (Target& t : targets_) {
    const int64_t n = t.param.numel(), keep = n - std::llround(config_.sparsity * double(n));
    torch::Tensor scores =
        config_.init_method == "topk" ? t.param.detach().abs().to(torch::kFloat) : random_scores(t.param);
    torch::Tensor flat = torch::zeros({n}, torch::TensorOptions().dtype(torch::kBool).device(t.param.device()));
    flat.index_fill_(0, std::get<1>(scores.reshape(-1).topk(keep)), true);
    t.mask = flat.view(t.param.sizes());
    t.param.mul_(t.mask);
  }
  ready_ = true;
}

bool WeightSparsity::is_update_step(int64_t step) const {
  if (config_.algorithm == "static" || !config_.update || !config_.update->freq) return false;
  const SparsityUpdate& u = *config_.update;
  return step >= u.start && (step - u.start) % *u.freq == 0 && (!u.stop || step < *u.stop);
}

double WeightSparsity::drop_fraction(int64_t step) const {
  if (!config_.drop_fraction) return 0.0;
  const DropFractionSchedule& d = *config_.drop_fraction;
  if (d.type == "constant") return d.init;
  if (step >= *d.half_period) return 0.0;
  return d.init * 0.5 * (1.0 + std::cos(M_PI * double(step) / double(*d.half_period)));
}

void WeightSparsity::mask_gradients(int64_t step) {
  torch::NoGradGuard no_grad;
  const bool keep_dense = config_.algorithm == "rigl" && is_update_step(step);
  for (Target& t : targets_) {
    torch::Tensor g = t.param.grad();
    if (!g.defined()) continue;
    if (keep_dense) t.dense_grad = g.abs().to(torch::kFloat);
    g.mul_(t.mask);
  }
}

void WeightSparsity::update_mask(Target& t, double fraction) {
  const int64_t active = t.mask.sum().item<int64_t>();
  const int64_t moved = std::llround(fraction * double(active));
  if (moved == 0) return;
  torch::Tensor mask = t.mask.reshape(-1).clone();
  // Drop: the smallest magnitudes among the active weights.
  torch::Tensor magnitude = t.param.detach().abs().to(torch::kFloat).reshape(-1);
  magnitude = magnitude.masked_fill(~mask, std::numeric_limits<float>::infinity());
  torch::Tensor dropped = std::get<1>(magnitude.topk(moved, 0, /*largest=*/false));
  mask.index_fill_(0, dropped, false);
  t.param.view(-1).index_fill_(0, dropped, 0.0);  // a weight dropped and grown again restarts at zero too
  // Grow as many among the inactive ones: at random (SET) or by gradient (RigL).
  torch::Tensor score = config_.algorithm == "rigl" && t.dense_grad.defined() ? t.dense_grad.reshape(-1)
                                                                              : random_scores(t.param).reshape(-1);
  score = score.masked_fill(mask, -1.0);  // scores are >= 0: active weights never win
  mask.index_fill_(0, std::get<1>(score.topk(moved)), true);
  t.mask = mask.view(t.param.sizes());
}

void WeightSparsity::after_step(int64_t step) {
  torch::NoGradGuard no_grad;
  const bool update = is_update_step(step);
  const double fraction = drop_fraction(step);
  for (Target& t : targets_) {
    if (update) update_mask(t, fraction);
    t.dense_grad = torch::Tensor();
    t.param.mul_(t.mask);
  }
}

std::string WeightSparsity::summary() const {
  int64_t total = 0, zeros = 0;
  for (const Target& t : targets_) {
    total += t.mask.numel();
    zeros += t.mask.numel() - t.mask.sum().item<int64_t>();
  }
  char text[160];
  std::snprintf(text, sizeof text, "Sparsity (%s): %.1f%% of %lld weights in %zu tensors are zero",
                config_.algorithm.c_str(), 100.0 * double(zeros) / double(std::max<int64_t>(total, 1)),
                static_cast<long long>(total), targets_.size());
  return text;
}

c10::impl::GenericDict WeightSparsity::state_dict() const {
  c10::impl::GenericDict masks(c10::StringType::get(), c10::TensorType::get());
  for (const Target& t : targets_) masks.insert(t.name, t.mask.to(torch::kCPU));
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("masks", masks);
  d.insert("generator", generator_.get_state());
  return d;
}

void WeightSparsity::load_state_dict(const c10::impl::GenericDict& state) {
  const auto masks = state.at("masks").toGenericDict();
  for (Target& t : targets_) {
    if (!masks.contains(t.name))
      throw std::runtime_error("the checkpoint's sparsity masks have none for " + t.name +
                               " (was it trained with another param_filter?)");
    torch::Tensor m = masks.at(t.name).toTensor();
    if (m.sizes() != t.param.sizes())
      throw std::runtime_error("the checkpoint's sparsity mask for " + t.name + " has another shape");
    t.mask = m.to(torch::kBool).to(t.param.device());
  }
  generator_.set_state(state.at("generator").toTensor());
  ready_ = true;
}

}  // namespace zoo
