// Mixture of experts (modelzoo's `moe` section, its mixtral model): the
// logits and the load-balancing loss against a float64 forward written from
// modelzoo's math, activation checkpointing, training through the runner,
// config errors, and Mixtral 8x7B's published size.
#include <gtest/gtest.h>

#include <regex>

#include "configs/schema/yaml_util.h"
#include "models/gpt2/gpt2.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using namespace zoo::models;

namespace {

Gpt2Options tiny_moe() {
  Gpt2Options o;
  o.vocab_size = 50;
  o.hidden_size = 32;
  o.num_hidden_layers = 2;
  o.num_heads = 4;
  o.filter_size = 24;
  o.max_position_embeddings = 16;
  o.dropout_rate = 0.0;
  o.moe.num_experts = 4;
  o.moe.top_k = 2;
  InitializerSpec gate;  // a router far from uniform, so float32 and float64 pick the same experts
  gate.std = 0.5;
  o.moe.gate_initializer = gate;
  return o;
}

// A float64 forward of a 2-layer GPT-2 whose FFNs are experts, from
// modelzoo's SparseMoEBlock and LoadBalancingLoss: router nonlinearities,
// top-k, normalization with the null expert, shared experts, hash and
// uniform routing. Reads {state, ids, mask, logits, aux} and exits 1 unless
// zoo's logits and load-balancing loss (aux; < 0: none) agree to 1e-5. Arguments: file
// routing top_k null_bias normalize(0|1) select weigh prob_before(0|1) act.
const std::string kReference = zoo::testing::oracle("moe_reference.py");

Features batch_of(const torch::Tensor& ids, const torch::Tensor& mask) {
  return {{"input_ids", ids}, {"labels", ids.roll(-1, 1)}, {"attention_mask", mask}};
}

}  // namespace

// Each routing modelzoo has, against the reference: softmax top-2 with a
// null expert and a shared expert; sigmoid expert weights, unnormalized,
// applied before a SwiGLU FFN; a sinkhorn router; hash and uniform routing.
// The load-balancing loss (training minus eval loss over the coefficient)
// agrees too, counted over the unmasked tokens only.
TEST(Moe, LogitsAndLoadBalancingLossMatchTheReference) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "ref.py", kReference);
  struct Case {
    const char* name;
    std::function<void(Gpt2Options&)> set;
  };
  const std::vector<Case> cases = {
      {"softmax, null expert, shared expert",
       [](Gpt2Options& o) {
         o.moe.null_expert_bias = 0.5;
         o.moe.num_shared_experts = 1;
         o.moe.load_balancing_loss_coef = 0.1;
       }},
      {"sigmoid weights before a SwiGLU",
       [](Gpt2Options& o) {
         o.nonlinearity = "swiglu";
         o.moe.top_k = 1;
         o.moe.expert_weighting_nonlinearity = "sigmoid";
         o.moe.expert_weighting_normalization = false;
         o.moe.probability_before_ffn = true;
         o.moe.load_balancing_loss_coef = 0.05;
       }},
      {"sinkhorn", [](Gpt2Options& o) { o.moe.router_selection_nonlinearity = "sinkhorn"; }},
      {"hash",
       [](Gpt2Options& o) {
         o.moe.routing_algorithm = "hash";
         o.moe.top_k = 1;
       }},
      {"uniform", [](Gpt2Options& o) { o.moe.routing_algorithm = "uniform"; }},
  };
  for (const Case& c : cases) {
    Gpt2Options o = tiny_moe();
    c.set(o);
    Gpt2Model m(o, torch::TensorOptions());
    torch::manual_seed(5);
    m.reset_parameters();
    torch::Tensor ids = torch::randint(0, 50, {2, 12}, torch::kLong);
    torch::Tensor mask = torch::ones_like(ids);
    mask.index_put_({0, torch::indexing::Slice(8)}, 0);  // a padded row
    torch::NoGradGuard no_grad;
    m.eval();
    const double eval_loss = m.forward(batch_of(ids, mask), false).loss.item<double>();
    torch::Tensor logits = m.logits(ids);
    // Decoding with a cache routes each token as the whole pass does (uniform routing counts positions);
    // not sinkhorn, which normalizes over the whole sequence, later tokens included.
    if (o.moe.router_selection_nonlinearity != "sinkhorn") {
      GenerationCache cache;
      std::vector<torch::Tensor> parts = {m.next_logits(ids.narrow(1, 0, 5), cache)};
      for (int64_t t = 5; t < ids.size(1); ++t) parts.push_back(m.next_logits(ids.narrow(1, t, 1), cache));
      EXPECT_TRUE(torch::allclose(torch::cat(parts, 1), logits, 1e-5, 1e-5)) << c.name;
    }
    m.train();
    const double train_loss = m.forward(batch_of(ids, mask), false).loss.item<double>();
    const double coef = o.moe.load_balancing_loss_coef;
    if (coef == 0) EXPECT_EQ(train_loss, eval_loss) << c.name;
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("state", ckpt::model_state_dict(m));
    d.insert("ids", ids);
    d.insert("mask", mask);
    d.insert("logits", logits);
    d.insert("aux", torch::tensor(coef > 0 ? (train_loss - eval_loss) / coef : -1.0));  // -1: none to compare
    ckpt::save_checkpoint_file(dir / "case.pt", d);
    const MoeOptions& e = o.moe;
    const std::string args = e.routing_algorithm + " " + std::to_string(e.top_k) + " " +
                             std::to_string(e.null_expert_bias.value_or(0)) + " " +
                             (e.expert_weighting_normalization.value_or(false) ? "1 " : "0 ") +
                             e.router_selection_nonlinearity.value_or("softmax") + " " +
                             e.expert_weighting_nonlinearity.value_or("softmax") + " " +
                             (e.probability_before_ffn ? "1 " : "0 ") + o.nonlinearity;
    auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt") + " " + args);
    EXPECT_EQ(r.exit_code, 0) << c.name << ": " << r.output;
  }
}

// Recomputing each MoE layer in the backward pass gives the loss and every
// gradient of the plain pass, the router's from the load-balancing loss too.
TEST(Moe, ActivationCheckpointingKeepsTheLoadBalancingGradient) {
  Gpt2Options o = tiny_moe();
  o.moe.load_balancing_loss_coef = 0.5;
  torch::Tensor ids = torch::randint(0, 50, {3, 12}, torch::kLong);
  const Features batch = batch_of(ids, torch::ones_like(ids));
  auto run = [&](bool recompute) {
    o.activation_checkpointing = recompute;
    Gpt2Model m(o, torch::TensorOptions());
    torch::manual_seed(3);
    m.reset_parameters();
    return zoo::testing::step_gradients(m, batch);  // every parameter has a gradient: experts no token picked too
  };
  zoo::testing::expect_same_step(run(false), run(true), 0, 1e-5, 1e-7);
}

// A Mixtral-shaped model (SwiGLU experts, top 2 of 4, load balancing) trains
// through the runner: the loss falls, evaluation runs, the checkpoint holds
// modelzoo's expert keys, and generation with the cache equals the full pass.
TEST(Moe, TrainsEvaluatesAndGeneratesThroughTheRunner) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  YAML::Node y = config::load_yaml_string(zoo::testing::tiny_params_yaml(dir / "data", dir / "model"), "tiny.yaml");
  y["model"]["name"] = "mixtral";
  y["model"]["nonlinearity"] = "swiglu";
  y["model"]["moe"] = config::load_yaml_string("{num_experts: 4, top_k: 2, load_balancing_loss_coef: 0.02}", "moe");
  y["runconfig"]["max_steps"] = 30;
  y["runconfig"]["log_steps"] = 1;
  y["runconfig"]["checkpoint_steps"] = 30;
  y["runconfig"]["eval_steps"] = 2;
  y["runconfig"]["eval_frequency"] = 30;
  YAML::Emitter out;
  out << y;
  const std::string params = zoo::testing::write_file(dir / "moe.yaml", out.c_str());
  auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train_and_eval");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<double> losses = zoo::testing::train_losses(r.output);
  ASSERT_EQ(losses.size(), 30u) << r.output;
  EXPECT_LT(losses.back(), 0.8 * losses.front()) << losses.front() << " -> " << losses.back();
  EXPECT_NE(r.output.find("Avg Eval Loss:"), std::string::npos) << r.output;

  auto state = ckpt::load_checkpoint_file(dir / "model/checkpoint_30.mdl").at("model").toGenericDict();
  for (const char* key : {"model.transformer_decoder.layers.1.ffn.gate.weight",
                          "model.transformer_decoder.layers.1.ffn.experts.experts.3.ffn.0.linear_layer_for_glu.weight",
                          "model.transformer_decoder.layers.1.ffn.experts.experts.3.ffn.1.linear_layer.weight"})
    EXPECT_TRUE(state.contains(key)) << key;
  EXPECT_FALSE(state.contains("model.transformer_decoder.layers.1.ffn.ffn.0.linear_layer.weight"));

  Params p = load_params(params, YAML::Node());
  torch::manual_seed(2);
  std::shared_ptr<Model> model = p.model->build(torch::TensorOptions());
  model->eval();
  torch::NoGradGuard no_grad;
  torch::Tensor ids = torch::randint(0, 256, {2, 10}, torch::kLong);
  GenerationCache whole, cache;
  torch::Tensor expected = model->next_logits(ids, whole);
  std::vector<torch::Tensor> parts = {model->next_logits(ids.narrow(1, 0, 4), cache)};
  for (int64_t t = 4; t < 10; ++t) parts.push_back(model->next_logits(ids.narrow(1, t, 1), cache));
  EXPECT_TRUE(torch::allclose(torch::cat(parts, 1), expected, 1e-5, 1e-5));
}

// Bad `moe` values are refused at their line, by modelzoo's rules.
TEST(Moe, BadSettingsAreRefusedAtTheirKey) {
  const std::string base = zoo::testing::tiny_params_yaml("/d", "/m");
  auto with_moe = [&](const std::string& moe) {
    return zoo::testing::params_error(std::regex_replace(base, std::regex("model:\n"), "model:\n  moe: " + moe + "\n"));
  };
  EXPECT_NE(with_moe("{num_experts: 4, top_k: 5}").find("model.moe.top_k"), std::string::npos)
      << with_moe("{num_experts: 4, top_k: 5}");
  const std::string hash = with_moe("{num_experts: 4, routing_algorithm: hash, load_balancing_loss_coef: 0.1}");
  EXPECT_NE(hash.find("model.moe.load_balancing_loss_coef"), std::string::npos) << hash;
  EXPECT_NE(hash.find("learned routing only"), std::string::npos) << hash;
  const std::string typo = with_moe("{num_expert: 4}");
  EXPECT_NE(typo.find("num_expert"), std::string::npos) << typo;
  EXPECT_NE(typo.find("num_experts"), std::string::npos) << typo;  // did you mean
  EXPECT_EQ(with_moe("{num_experts: 4, top_k: 2, router_selection_nonlinearity: sigmoid}"), "");
}

// Mixtral 8x7B's shape as modelzoo's config gives it builds Hugging Face's
// published 46,702,792,704 parameters (on the meta device).
TEST(Moe, Mixtral8x7bHasItsPublishedSize) {
  YAML::Node y = config::load_yaml_string(zoo::testing::tiny_params_yaml("/d", "/m"), "p.yaml");
  y["model"] = config::load_yaml_string(R"(
name: mixtral
vocab_size: 32000
hidden_size: 4096
num_hidden_layers: 32
num_heads: 32
filter_size: 14336
max_position_embeddings: 32768
position_embedding_type: rotary
rope_theta: 1000000.0
norm_type: rmsnorm
nonlinearity: swiglu
attention_module: multiquery_attention
extra_attention_params: {num_kv_groups: 8}
share_embedding_weights: false
use_projection_bias_in_attention: false
use_ffn_bias_in_attention: false
use_ffn_bias: false
moe: {num_experts: 8, top_k: 2, load_balancing_loss_coef: 0.02}
)",
                                        "model");
  Params p = params_from_node(y, "p.yaml", YAML::Node());
  EXPECT_EQ(summarize_model(p).parameters, 46702792704);
}
