// Weight sparsity (modelzoo's `sparsity` section): static masks hold while
// training, SET and RigL move masks by their rules at their steps, resume is
// bit-exact with moving masks, and the section's errors and Trainer form.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "configs/schema/yaml_util.h"
#include "models/registry.h"
#include "runner/sparsity.h"
#include "runner/trainer.h"
#include "test_util.h"

using namespace zoo;

namespace {

const char* kFilter = "  param_filter: ['*proj_[qkv]_dense_layer.weight', '*linear_layer.weight']\n";

Params sparse_params(const zoo::testing::TempDir& dir, const std::string& sparsity, const std::string& extra = "") {
  const std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / "m", extra) + "sparsity:\n" + sparsity;
  return params_from_node(config::load_yaml_string(y, "sparse.yaml"), "sparse.yaml", YAML::Node());
}

// Whether each parameter is chosen by the filter, and its zero pattern.
std::map<std::string, torch::Tensor> zero_patterns(Trainer& t) {
  std::map<std::string, torch::Tensor> out;
  for (const auto& item : t.model().named_parameters()) out[item.key()] = item.value().detach() == 0;
  return out;
}

bool chosen(const std::string& name) {
  return name.find("_dense_layer.weight") != std::string::npos && name.find("proj_output") == std::string::npos
             ? true
             : name.size() >= 19 && name.compare(name.size() - 19, 19, "linear_layer.weight") == 0;
}

SparsityConfig dynamic_config(const std::string& algorithm) {
  SparsityConfig c;
  c.sparsity = 0.5;
  c.init_method = "topk";
  c.algorithm = algorithm;
  c.drop_fraction = DropFractionSchedule{"constant", 0.25, std::nullopt};
  c.update = SparsityUpdate{2, 0, 100};
  return c;
}

// Indices of the n smallest (or largest) `values` among those where `among` is true.
std::vector<int64_t> extreme(const std::vector<float>& values, const std::vector<bool>& among, size_t n, bool largest) {
  std::vector<int64_t> idx;
  for (size_t i = 0; i < values.size(); ++i)
    if (among[i]) idx.push_back(int64_t(i));
  std::sort(idx.begin(), idx.end(),
            [&](int64_t a, int64_t b) { return largest ? values[a] > values[b] : values[a] < values[b]; });
  idx.resize(n);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<int64_t> where(const torch::Tensor& mask_now, const torch::Tensor& mask_before, bool became) {
  std::vector<int64_t> out;
  auto now = mask_now.reshape(-1), before = mask_before.reshape(-1);
  for (int64_t i = 0; i < now.numel(); ++i)
    if (now[i].item<bool>() == became && before[i].item<bool>() != became) out.push_back(i);
  return out;
}

}  // namespace

// modelzoo's static 75% on the attention projections and FFN layers: exactly
// 75% of each chosen weight is zero, at the same places after 1 and after 40
// steps, the rest of the model is dense, and the model still learns.
TEST(Sparsity, StaticMasksHoldWhileTraining) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  Trainer t(sparse_params(dir, std::string("  sparsity: 0.75\n  init_method: random\n") + kFilter, "  eval_steps: 4\n"),
            torch::kCPU, true);
  const double before = t.evaluate("init").loss;
  t.train(1);
  const auto first = zero_patterns(t);
  t.train(39);
  const auto later = zero_patterns(t);
  int chosen_count = 0;
  for (const auto& [name, zeros] : later) {
    if (chosen(name)) {
      ++chosen_count;
      EXPECT_EQ(zeros.sum().item<int64_t>(), std::llround(0.75 * double(zeros.numel()))) << name;
      EXPECT_TRUE(torch::equal(zeros, first.at(name))) << name << ": a static mask moved";
    } else {
      EXPECT_LT(zeros.to(torch::kFloat).mean().item<double>(), 0.05) << name << " is not chosen but sparse";
    }
  }
  EXPECT_EQ(chosen_count, 2 * 5);  // per layer: q, k, v, and the two FFN layers
  EXPECT_LT(t.evaluate("trained").loss, before - 0.5);
}

// RigL on a 4x8 weight at 50%: an update step drops the 25% smallest active
// magnitudes and regrows as many where the dense gradient is largest among
// the inactive weights; the weights outside the mask are zero, gradients
// outside it too, and other steps leave the mask alone. SET drops the same
// way and regrows elsewhere at random, keeping the count.
TEST(Sparsity, SetAndRiglMoveMasksByTheirRules) {
  for (const std::string algorithm : {"rigl", "set"}) {
    torch::manual_seed(1);
    torch::nn::Linear layer(8, 4);
    WeightSparsity s(dynamic_config(algorithm), *layer, 7);  // 2+ dims: the weight only
    s.initialize();
    torch::Tensor w = layer->weight;
    torch::Tensor mask = w.detach() != 0;
    ASSERT_EQ(mask.sum().item<int64_t>(), 16);
    // topk init: the 16 largest magnitudes stayed
    std::vector<float> magnitude(32);
    {
      torch::manual_seed(1);
      torch::nn::Linear fresh(8, 4);
      for (int64_t i = 0; i < 32; ++i) magnitude[i] = std::abs(fresh->weight.reshape(-1)[i].item<float>());
      std::vector<bool> all(32, true);
      std::vector<int64_t> kept = extreme(magnitude, all, 16, true), got;
      for (int64_t i = 0; i < 32; ++i)
        if (mask.reshape(-1)[i].item<bool>()) got.push_back(i);
      EXPECT_EQ(got, kept) << algorithm;
    }
    // A step that is not an update: gradients masked, mask unchanged.
    w.mutable_grad() = torch::randn_like(w);
    s.mask_gradients(1);
    EXPECT_EQ(((w.grad() != 0) & ~mask).sum().item<int64_t>(), 0) << algorithm;
    s.after_step(1);
    EXPECT_TRUE(torch::equal(w.detach() != 0, mask)) << algorithm;
    // An update step (2): drop 4, grow 4.
    torch::Tensor grad = torch::randn_like(w);
    w.mutable_grad() = grad.clone();
    {
      torch::NoGradGuard no_grad;
      w.add_(torch::randn_like(w) * 0.01 * mask);  // as an optimizer step would move the active weights
    }
    std::vector<float> now(32), g(32);
    std::vector<bool> active(32);
    for (int64_t i = 0; i < 32; ++i) {
      now[i] = std::abs(w.reshape(-1)[i].item<float>());
      g[i] = std::abs(grad.reshape(-1)[i].item<float>());
      active[i] = mask.reshape(-1)[i].item<bool>();
    }
    s.mask_gradients(2);
    s.after_step(2);
    // Grown weights (and dropped ones grown again) restart at zero: 12 nonzero weights remain.
    EXPECT_EQ((w.detach() != 0).sum().item<int64_t>(), 12) << algorithm;
    const std::vector<int64_t> dropped = extreme(now, active, 4, false);
    std::vector<bool> inactive_after(32);
    for (int64_t i = 0; i < 32; ++i)
      inactive_after[i] = !active[i] || std::find(dropped.begin(), dropped.end(), i) != dropped.end();
    if (algorithm == "rigl") {
      // Grown weights start at zero, so compare masks through the state rather than the weights.
      torch::Tensor state_mask = s.state_dict().at("masks").toGenericDict().at("weight").toTensor();
      std::vector<int64_t> grown = where(state_mask, mask, true);
      EXPECT_EQ(grown, extreme(g, inactive_after, 4, true)) << "rigl grows where |grad| is largest";
      std::vector<int64_t> lost = where(state_mask, mask, false);
      // a dropped weight may be regrown at once when its gradient is among the largest
      for (int64_t i : lost) EXPECT_NE(std::find(dropped.begin(), dropped.end(), i), dropped.end()) << i;
      EXPECT_EQ(state_mask.sum().item<int64_t>(), 16);
    } else {
      torch::Tensor state_mask = s.state_dict().at("masks").toGenericDict().at("weight").toTensor();
      EXPECT_EQ(state_mask.sum().item<int64_t>(), 16) << "set keeps the count";
      for (int64_t i : where(state_mask, mask, false))
        EXPECT_NE(std::find(dropped.begin(), dropped.end(), i), dropped.end()) << "set drops the smallest: " << i;
    }
  }
  // RigL's cosine annealing of the drop fraction.
  SparsityConfig c = dynamic_config("rigl");
  c.drop_fraction = DropFractionSchedule{"cosine", 0.3, 100};
  torch::nn::Linear layer(4, 4);
  WeightSparsity s(c, *layer, 1);
  EXPECT_DOUBLE_EQ(s.drop_fraction(0), 0.3);
  EXPECT_NEAR(s.drop_fraction(50), 0.15, 1e-12);
  EXPECT_DOUBLE_EQ(s.drop_fraction(100), 0.0);
  EXPECT_TRUE(s.is_update_step(98));
  EXPECT_FALSE(s.is_update_step(99));
  EXPECT_FALSE(s.is_update_step(100));  // stop is exclusive
}

// SET moves masks with its own random draws; stopping and resuming from a
// checkpoint gives the weights of one uninterrupted run, bit for bit.
TEST(Sparsity, ResumeWithMovingMasksIsBitExact) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  const std::string set = std::string("  sparsity: 0.5\n  algorithm: set\n  update: {freq: 2}\n") +
                          "  drop_fraction: {type: cosine, init: 0.3, half_period: 20}\n" + kFilter;
  std::vector<torch::Tensor> straight;
  {
    Trainer t(sparse_params(dir, set), torch::kCPU, true);
    t.train(12);
    for (const auto& p : t.model().parameters()) straight.push_back(p.detach().clone());
  }
  {
    Trainer first(sparse_params(dir, set, "  checkpoint_steps: 100\n"), torch::kCPU, true);
    first.train(5);
  }
  Trainer second(sparse_params(dir, set), torch::kCPU, true);
  second.restore(true);
  ASSERT_EQ(second.global_step(), 5);
  second.train(7);
  auto params = second.model().parameters();
  ASSERT_EQ(params.size(), straight.size());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_TRUE(torch::equal(params[i], straight[i])) << "parameter " << i;
}

// The section's errors name their key; modelzoo's Trainer-format sparsity
// config reads into the same spec, and legacy -> Trainer keeps it.
TEST(Sparsity, ConfigErrorsAndTheTrainerForm) {
  zoo::testing::TempDir dir;
  auto error = [&](const std::string& sparsity) {
    try {
      sparse_params(dir, sparsity);
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error("  sparsity: 0.5\n  algorithm: rigl\n").find("sparsity.update: rigl needs update.freq"),
            std::string::npos)
      << error("  sparsity: 0.5\n  algorithm: rigl\n");
  EXPECT_NE(error("  sparsity: 1.5\n").find("sparsity.sparsity"), std::string::npos);
  EXPECT_NE(error("  sparsity: 0.5\n  init_mthod: random\n").find("did you mean 'init_method'"), std::string::npos)
      << error("  sparsity: 0.5\n  init_mthod: random\n");
  EXPECT_NE(error("  sparsity: 0.5\n  update: {freq: 10}\n").find("applies to algorithm set or rigl only"),
            std::string::npos);
  // Legacy -> Trainer format: the section moves to trainer.init.sparsity and reads back the same (zoo checks).
  const std::string legacy = zoo::testing::write_file(
      dir / "legacy.yaml", zoo::testing::tiny_params_yaml(dir / "data", dir / "m") +
                               "sparsity:\n  sparsity: 0.5\n  algorithm: rigl\n  update: {freq: 10, stop: 50}\n"
                               "  drop_fraction: {init: 0.3, half_period: 50}\n");
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " config convert-legacy " + legacy + " " +
                                     (dir / "trainer.yaml"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  YAML::Node trainer = config::load_yaml_file(dir / "trainer.yaml");
  EXPECT_EQ(trainer["trainer"]["init"]["sparsity"]["algorithm"].as<std::string>(), "rigl");
  Params back = load_params(dir / "trainer.yaml", YAML::Node());
  ASSERT_TRUE(back.sparsity.has_value());
  EXPECT_EQ(back.sparsity->update->freq, 10);
  EXPECT_EQ(back.sparsity->drop_fraction->half_period, 50);

  // modelzoo 2.1's dynamic sparsity: `type` and `schedule` for 2.2's algorithm and update.
  const std::string release_2_1 = zoo::testing::write_file(
      dir / "release_2_1.yaml", zoo::testing::tiny_params_yaml(dir / "data", dir / "m") +
                                    "sparsity:\n  sparsity: 0.5\n  type: rigl\n  schedule: {freq: 100, stop: 3584}\n"
                                    "  drop_fraction: {type: cosine, init: 0.3, half_period: 3584}\n");
  Params old_form = load_params(release_2_1, YAML::Node());
  ASSERT_TRUE(old_form.sparsity.has_value() && old_form.sparsity->update.has_value());
  EXPECT_EQ(old_form.sparsity->algorithm, "rigl");
  EXPECT_EQ(old_form.sparsity->update->freq, 100);
  EXPECT_EQ(old_form.sparsity->update->stop, 3584);

  Params p = load_params(zoo::testing::modelzoo_configs_dir() +
                             "/transformers_pytorch_gpt3_sparsity_pretraining_params_gpt3_125m_static75.yaml",
                         YAML::Node());
  ASSERT_TRUE(p.sparsity.has_value());
  EXPECT_EQ(p.sparsity->sparsity, 0.75);
  EXPECT_EQ(p.sparsity->algorithm, "static");
  EXPECT_EQ(p.sparsity->param_name_patterns.items.size(), 3u);  // modelzoo 2.0's regexes, its `type` read as algorithm
  zoo::testing::TempDir model_dir;
  Params tiny = sparse_params(
      model_dir, "  sparsity: 0.75\n  type: static\n  param_name_patterns: ['.*proj_[qkv]_dense_layer.weight']\n");
  WeightSparsity s(*tiny.sparsity, *tiny.model->build(torch::TensorOptions()), 1);
  s.initialize();
  EXPECT_NE(s.summary().find("in 6 tensors"), std::string::npos) << s.summary();  // q, k, v of 2 layers
  EXPECT_TRUE(p.resolved()["sparsity"].IsMap());
}
