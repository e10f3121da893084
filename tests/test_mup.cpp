// muP: modelzoo 2.3+'s base widths (mup_base_hidden_size/filter_size) give
// the initializers, logits scale and learning rates they stand for, in the
// gpt2 family (scaled by depth too) and the gptj family (by width only).
#include <gtest/gtest.h>

#include <map>

#include "configs/schema/yaml_util.h"
#include "models/gptj/gptj.h"
#include "runner/params/params.h"
#include "runner/trainer.h"
#include "test_util.h"

using namespace zoo;

// muP as modelzoo >= 2.3 writes it (mup_base_hidden_size/filter_size,
// output_logits_alpha) trains exactly as the explicit form it stands for:
// initializers scaled by sqrt(base / width) (output layers also by
// 1/sqrt(2 L); the last FFN layer from the default initializer), the logits
// times alpha * base / hidden_size, and the learning rates of
// decoder_attention, decoder_input_ffn and decoder_output_ffn times base /
// width. Both runs start from the same weights and end with the same ones.
TEST(Mup, Gpt2BaseWidthsTrainAsTheExplicitScalesTheyStandFor) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  const std::string common =
      "  embedding_initializer: {name: truncated_normal, std: 0.3, a: -0.6, b: 0.6}\n"
      "  scale_qk_dot_by_d: true\n"
      "  attention_logits_alpha: 0.5\n"
      "  embeddings_scale: 4.0\n";
  const std::string mup = common +
                          "  initializer: {name: truncated_normal, std: 0.4, a: -0.8, b: 0.8}\n"
                          "  output_layer_initializer: {name: truncated_normal, std: 0.4, a: -0.8, b: 0.8}\n"
                          "  mup_base_hidden_size: 8\n"   // hidden_size 32: width ratio 1/4
                          "  mup_base_filter_size: 16\n"  // filter_size 64: 1/4
                          "  output_logits_alpha: 2.0\n";
  const std::string explicit_form = common +
                                    "  initializer: {name: truncated_normal, std: 0.2, a: -0.4, b: 0.4}\n"
                                    "  output_layer_initializer: {name: truncated_normal, std: 0.1, a: -0.2, b: 0.2}\n"
                                    "  ffn_output_layer_initializer: {name: truncated_normal, std: 0.005, a: -0.01, "
                                    "b: 0.01}\n"
                                    "  output_logits_scale: 0.5\n";
  auto train = [&](const std::string& model_keys, const std::string& optimizer_keys, const std::string& name) {
    std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / name, "  max_steps: 4\n");
    y.replace(y.find("  dropout_rate: 0.0\n"), 19, "  dropout_rate: 0.0\n" + model_keys);
    y.replace(y.find("  max_gradient_norm: 1.0\n"), 24, "  max_gradient_norm: 1.0\n" + optimizer_keys);
    Trainer t(params_from_node(config::load_yaml_string(y, name + ".yaml"), name + ".yaml", YAML::Node()), torch::kCPU,
              true);
    std::map<std::string, torch::Tensor> start;
    for (const auto& kv : t.model().named_parameters()) start[kv.key()] = kv.value().detach().clone();
    t.train(4);
    std::map<std::string, torch::Tensor> end;
    for (const auto& kv : t.model().named_parameters()) end[kv.key()] = kv.value().detach().clone();
    return std::make_pair(start, end);
  };
  const auto a = train(mup, "", "mup");
  const auto b = train(explicit_form,
                       "  adjust_learning_rate: {decoder_attention: 0.25, decoder_input_ffn: 0.25, "
                       "decoder_output_ffn: 0.25}\n",
                       "explicit");
  ASSERT_EQ(a.first.size(), b.first.size());
  for (const auto& [name, t] : a.first) EXPECT_TRUE(torch::equal(t, b.first.at(name))) << "initial " << name;
  for (const auto& [name, t] : a.second) EXPECT_TRUE(torch::equal(t, b.second.at(name))) << "trained " << name;
  // The last FFN layer starts from truncated_normal(initializer_range) scaled: within 0.04 / 4.
  const torch::Tensor ffn_out = a.first.at("transformer_decoder.layers.0.ffn.ffn.1.linear_layer.weight");
  EXPECT_LE(ffn_out.abs().max().item<double>(), 0.01);
  // The params' own adjust_learning_rate replaces the model's scale for that group (as modelzoo).
  const auto frozen = train(mup, "  adjust_learning_rate: {decoder_output_ffn: 0.0}\n", "override");
  for (const auto& [name, t] : frozen.second)
    EXPECT_EQ(torch::equal(t, frozen.first.at(name)), name.find("ffn.ffn.1.linear_layer.weight") != std::string::npos)
        << name;
}

// modelzoo's gptj model scales by width only: the attention and first FFN
// initializers (the FFN's from output_layer_initializer) by sqrt(base /
// hidden_size), the attention output's by the same, the last FFN layer's by
// sqrt(base / filter_size); the logits by alpha * base / hidden_size; the
// learning rates as gpt2's.
TEST(Mup, GptjScalesByWidthOnly) {
  models::GptjOptions o;
  o.vocab_size = 64, o.hidden_size = 32, o.num_hidden_layers = 2, o.num_heads = 2, o.filter_size = 64;
  o.max_position_embeddings = 16;
  o.residual_dropout_rate = o.embedding_dropout_rate = o.attention_dropout_rate = 0.0;
  models::InitializerSpec wide = models::truncated_normal_spec(1.0), narrow = models::truncated_normal_spec(0.1);
  o.initializer = wide;                 // bounds +-2
  o.output_layer_initializer = narrow;  // bounds +-0.2
  models::GptjOptions plain = o;
  o.mup_base_hidden_size = 8;  // width ratio 1/4: std x 1/2
  o.mup_base_filter_size = 4;  // filter ratio 1/16: std x 1/4
  o.output_logits_alpha = 2.0;
  torch::manual_seed(0);
  models::GptjModel m(o, torch::TensorOptions());
  m.reset_parameters();
  auto max_abs = [&](const std::string& name) {
    return m.named_parameters()["transformer_decoder.layers.0." + name + ".weight"].abs().max().item<double>();
  };
  // Each bound is the scaled one, and nearly reached (1024+ samples).
  auto expect_bound = [&](const std::string& name, double bound) {
    EXPECT_LE(max_abs(name), bound) << name;
    EXPECT_GT(max_abs(name), 0.8 * bound) << name;
  };
  expect_bound("self_attn.proj_q_dense_layer", 1.0);
  expect_bound("self_attn.proj_output_dense_layer", 0.1);  // gpt2 would also take 1/sqrt(4): 0.05
  expect_bound("ffn.ffn.0.linear_layer", 0.1);
  expect_bound("ffn.ffn.1.linear_layer", 0.05);
  const auto groups = m.lr_adjustment_groups();
  EXPECT_DOUBLE_EQ(groups.at("decoder_attention").scale, 0.25);
  EXPECT_DOUBLE_EQ(groups.at("decoder_input_ffn").scale, 0.25);
  EXPECT_DOUBLE_EQ(groups.at("decoder_output_ffn").scale, 1.0 / 16);
  EXPECT_DOUBLE_EQ(groups.at("embedding").scale, 1.0);
  // Logits: the same weights without muP, times 2 * 8 / 32.
  models::GptjModel same(plain, torch::TensorOptions());
  torch::NoGradGuard no_grad;
  for (auto& kv : same.named_parameters()) kv.value().copy_(m.named_parameters()[kv.key()]);
  const torch::Tensor ids = torch::randint(0, 64, {2, 16});
  EXPECT_TRUE(torch::allclose(m.logits(ids), same.logits(ids) * 0.5, 1e-5, 1e-6));
}
