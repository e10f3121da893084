// The GPT-2/3 model: shapes, causality, parameter counts of the Cerebras-GPT
// family (on the meta device), initializers, and logits against an
// independent PyTorch forward pass.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <sstream>

#include "configs/schema/yaml_util.h"
#include "models/common/ffn.h"
#include "models/common/initializers.h"
#include "models/common/rotary.h"
#include "models/gpt2/gpt2.h"
#include "models/registry.h"
#include "reference_case.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/run.h"
#include "test_util.h"

using namespace zoo;
using namespace zoo::models;

namespace {

Gpt2Options tiny_options() {
  Gpt2Options o;
  o.vocab_size = 50;
  o.hidden_size = 16;
  o.num_hidden_layers = 2;
  o.num_heads = 4;
  o.filter_size = 24;
  o.max_position_embeddings = 12;
  o.dropout_rate = 0.0;
  return o;
}

int64_t count(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// Closed-form GPT-2 parameter count, independent of the module code.
int64_t expected_params(int64_t V, int64_t C, int64_t L, int64_t F, int64_t P, bool tied) {
  int64_t per_layer = 4 * C * C + 4 * C    // q, k, v, output projections + biases
                      + 2 * C * F + F + C  // FFN
                      + 4 * C;             // two LayerNorms
  return V * C + P * C + L * per_layer + 2 * C + (tied ? 0 : V * C);
}

}  // namespace

TEST(Model, LogitsShapeAndLossIsFiniteNearUniform) {
  torch::manual_seed(0);
  Gpt2Model m(tiny_options(), torch::TensorOptions());
  m.reset_parameters();
  torch::Tensor ids = torch::randint(0, 50, {3, 12}, torch::kLong);
  EXPECT_EQ(m.logits(ids).sizes(), (std::vector<int64_t>{3, 12, 50}));
  ModelOutput out = m.forward({{"input_ids", ids}, {"labels", ids}, {"attention_mask", torch::ones_like(ids)}}, true);
  EXPECT_EQ(out.loss.dim(), 0);
  EXPECT_NEAR(out.loss.item<double>(), std::log(50.0), 0.5);  // small init: close to uniform
  EXPECT_EQ(out.metrics.count("lm_perplexity"), 1u);
  EXPECT_EQ(out.metrics.at("accuracy").count.item<double>(), 36.0);
}

TEST(Model, AttentionIsCausal) {
  torch::manual_seed(0);
  Gpt2Model m(tiny_options(), torch::TensorOptions());
  m.reset_parameters();
  m.eval();
  torch::Tensor a = torch::randint(0, 50, {1, 10}, torch::kLong);
  torch::Tensor b = a.clone();
  b[0][7] = (a[0][7].item<int64_t>() + 1) % 50;
  torch::Tensor la = m.logits(a), lb = m.logits(b);
  EXPECT_TRUE(torch::allclose(la.narrow(1, 0, 7), lb.narrow(1, 0, 7)));
  EXPECT_FALSE(torch::allclose(la.narrow(1, 7, 3), lb.narrow(1, 7, 3)));
}

TEST(Model, ParameterCountsMatchTheArchitecture) {
  Gpt2Options o = tiny_options();
  EXPECT_EQ(count(Gpt2Model(o, torch::TensorOptions())), expected_params(50, 16, 2, 24, 12, true));
  o.share_embedding_weights = false;
  EXPECT_EQ(count(Gpt2Model(o, torch::TensorOptions())), expected_params(50, 16, 2, 24, 12, false));
  o.position_embedding_type = "fixed";  // sinusoidal: not trained
  EXPECT_EQ(count(Gpt2Model(o, torch::TensorOptions())), expected_params(50, 16, 2, 24, 12, false) - 12 * 16);
  o.use_ffn_bias = false;
  EXPECT_EQ(count(Gpt2Model(o, torch::TensorOptions())),
            expected_params(50, 16, 2, 24, 12, false) - 12 * 16 - 2 * (24 + 16));
}

// Every Cerebras-GPT config in configs/ sizes as its architecture says, on the
// meta device (the 13B model is never allocated), and near its name.
TEST(Model, CerebrasGptFamilySizes) {
  struct Member {
    const char* file;
    double nominal;
    int64_t L, C, F;
  };
  const Member family[] = {{"111m", 111e6, 10, 768, 3072},   {"256m", 256e6, 14, 1088, 4352},
                           {"590m", 590e6, 18, 1536, 6144},  {"1p3b", 1.3e9, 24, 2048, 8192},
                           {"2p7b", 2.7e9, 32, 2560, 10240}, {"6p7b", 6.7e9, 32, 4096, 16384},
                           {"13b", 13e9, 40, 5120, 20480}};
  for (const auto& m : family) {
    std::string path = zoo::testing::source_dir() + "/configs/cerebras_gpt/cerebras_gpt_" + m.file + ".yaml";
    Params p = load_params(path, YAML::Node());
    ModelSummary s = summarize_model(p);
    EXPECT_EQ(s.parameters, expected_params(50257, m.C, m.L, m.F, 2048, true)) << m.file;
    // The names are rounded: 1.3B is 1.316B, 2.7B is 2.652B, 13B is 12.85B.
    EXPECT_LT(std::fabs(s.parameters / m.nominal - 1.0), 0.02) << m.file << ": " << s.parameters;
    EXPECT_GT(s.forward_flops_per_token, 2.0 * s.parameters * 0.9) << m.file;
  }
}

TEST(Model, TruncatedNormalStaysInBoundsWithTheRightSpread) {
  torch::manual_seed(0);
  InitializerSpec spec = truncated_normal_spec(0.02);
  torch::Tensor w = torch::empty({200, 200});
  apply_initializer(spec, w);
  EXPECT_GE(w.min().item<double>(), -0.04);
  EXPECT_LE(w.max().item<double>(), 0.04);
  // A normal truncated at +-2 std has std ~0.88 of the untruncated one.
  EXPECT_NEAR(w.std().item<double>(), 0.02 * 0.8796, 0.0005);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.0005);
  spec.name = "xavier_uniform";
  apply_initializer(spec, w);
  EXPECT_NEAR(w.abs().max().item<double>(), std::sqrt(6.0 / 400), 1e-3);
  // A strided view takes the tensor path of the redraws (as GPU tensors do).
  spec = truncated_normal_spec(0.02);
  torch::Tensor strided = torch::empty({300, 200}).t();
  apply_initializer(spec, strided);
  EXPECT_GE(strided.min().item<double>(), -0.04);
  EXPECT_LE(strided.max().item<double>(), 0.04);
  EXPECT_NEAR(strided.std().item<double>(), 0.02 * 0.8796, 0.0005);
}

// Large CPU tensors are drawn in 1M-value blocks across threads: the same seed
// must give the same weights with one thread or two, every block must get its
// own stream, and the truncation must still hold.
TEST(Model, LargeInitializationIsTheSameOnAnyThreadCountAndBlocksDiffer) {
  const int threads = at::get_num_threads();
  auto draw = [](int n_threads, const std::string& name) {
    at::set_num_threads(n_threads);
    torch::manual_seed(7);
    InitializerSpec spec = truncated_normal_spec(0.02);
    spec.name = name;
    torch::Tensor w = torch::empty({3 << 20});
    apply_initializer(spec, w);
    return w;
  };
  for (const std::string name : {"truncated_normal", "normal", "xavier_uniform"}) {
    SCOPED_TRACE(name);
    torch::Tensor one = draw(1, name), two = draw(2, name);
    EXPECT_TRUE(torch::equal(one, two));
    EXPECT_FALSE(torch::equal(one.narrow(0, 0, 1 << 20), one.narrow(0, 1 << 20, 1 << 20)));
  }
  torch::Tensor w = draw(2, "truncated_normal");
  at::set_num_threads(threads);
  EXPECT_GE(w.min().item<double>(), -0.04);
  EXPECT_LE(w.max().item<double>(), 0.04);
  EXPECT_NEAR(w.std().item<double>(), 0.02 * 0.8796, 0.0001);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.0001);
}

// The blocks' generators take their 64-bit seeds whole: seeds that differ only
// above bit 31 (which torch's own CPU generator would drop) give other values.
TEST(Model, InitializerBlockGeneratorsUseTheWholeSeed) {
  auto draw = [](uint64_t seed) { return torch::empty({4096}).normal_(0, 1, cpu_generator_from_seed(seed)); };
  const uint64_t seed = 0x9e3779b97f4a7c15ULL;
  const torch::Tensor values = draw(seed);
  EXPECT_TRUE(torch::equal(values, draw(seed)));
  EXPECT_FALSE(torch::equal(values, draw(seed ^ (uint64_t(1) << 32))));
  EXPECT_FALSE(torch::equal(values, draw(seed ^ (uint64_t(1) << 63))));
  EXPECT_FALSE(torch::equal(values, draw(seed ^ 1)));
  EXPECT_EQ(cpu_generator_from_seed(seed).current_seed(), seed);
  EXPECT_NEAR(values.mean().item<double>(), 0.0, 0.06);
  EXPECT_NEAR(values.std().item<double>(), 1.0, 0.04);
}

// An untied LM head starts from normal(0, initializer_range) whatever
// `initializer` says, as modelzoo's gpt2 model initializes it.
TEST(Model, UntiedLmHeadStartsFromModelzoosNormal) {
  torch::manual_seed(0);
  Gpt2Options o = tiny_options();
  o.vocab_size = 512;
  o.hidden_size = 64;
  o.share_embedding_weights = false;
  InitializerSpec xavier;
  xavier.name = "xavier_uniform";
  o.initializer = xavier;
  Gpt2Model m(o, torch::TensorOptions());
  m.reset_parameters();
  const torch::Tensor w = m.lm_head->weight;
  EXPECT_NEAR(w.std().item<double>(), 0.02, 0.0005);
  EXPECT_NEAR(w.mean().item<double>(), 0.0, 0.0005);
  EXPECT_GT(w.abs().max().item<double>(), 0.05);  // not truncated at 2 std
}

TEST(Model, RegistryKnowsGpt2AndAliases) {
  EXPECT_EQ(find_model("gpt3").name, "gpt2");
  // Trainer-format files name modelzoo's model classes that are its gpt2 model under another name.
  for (const char* name : {"bloom", "btlm", "jais", "santacoder", "starcoder", "LlamaModel", "gemma2"})
    EXPECT_EQ(find_model(name).name, "gpt2") << name;
  EXPECT_EQ(find_model("falcon").name, "gptj");
  try {
    find_model("gpt5");
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("known: gpt2, gpt3"), std::string::npos);
  }
}

// Logits equal a forward pass written directly with torch ops in Python from
// the same weights (llm.c's test-against-PyTorch pattern).
TEST(Model, LogitsMatchAnIndependentPyTorchForward) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  for (const char* attention : {"scaled_dot_product", "dot_product"}) {
    torch::manual_seed(3);
    Gpt2Options o = tiny_options();
    o.attention_type = attention;
    o.share_embedding_weights = std::string(attention) == "dot_product";
    o.use_bias_in_output = !o.share_embedding_weights;
    o.nonlinearity = "gelu";
    Gpt2Model m(o, torch::TensorOptions());
    m.reset_parameters();
    m.eval();
    torch::Tensor ids = torch::randint(0, 50, {2, 12}, torch::kLong);
    zoo::testing::write_reference_case(m, ids, dir / "case.pt");
    std::string script = zoo::testing::write_file(dir / "ref.py", zoo::testing::oracle("model_reference.py"));
    auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt") + " " + attention);
    EXPECT_EQ(r.exit_code, 0) << attention << ": " << r.output;
  }
}

// Mistral's sliding window: a token sees only the last `window` positions.
TEST(Model, SlidingWindowLimitsAttentionAndSinksStayVisible) {
  torch::manual_seed(0);
  Gpt2Options o = tiny_options();
  o.position_embedding_type = "rotary";
  o.attention_sliding_window_length = 3;
  Gpt2Model m(o, torch::TensorOptions());
  m.reset_parameters();
  m.eval();
  torch::NoGradGuard no_grad;
  torch::Tensor a = torch::randint(0, 50, {1, 10}, torch::kLong), b = a.clone();
  b[0][2] = (a[0][2].item<int64_t>() + 1) % 50;
  // Each layer reaches 2 positions further back; 2 layers: position 2 reaches up to 6.
  torch::Tensor la = m.logits(a), lb = m.logits(b);
  EXPECT_FALSE(torch::allclose(la.narrow(1, 6, 1), lb.narrow(1, 6, 1)));
  EXPECT_TRUE(torch::allclose(la.narrow(1, 7, 3), lb.narrow(1, 7, 3)));
  // attention_sink_tokens: the first tokens stay visible to every query
  // (StreamingLLM), the rest of the window as before; decoding with the cache agrees.
  o.attention_sink_tokens = 1;
  Gpt2Model sinks(o, torch::TensorOptions());
  for (auto& kv : sinks.named_parameters()) kv.value().copy_(m.named_parameters()[kv.key()]);
  sinks.eval();
  torch::Tensor c = a.clone();
  c[0][0] = (a[0][0].item<int64_t>() + 1) % 50;
  EXPECT_TRUE(torch::allclose(sinks.logits(a).narrow(1, 7, 3), sinks.logits(b).narrow(1, 7, 3)));
  EXPECT_FALSE(torch::allclose(sinks.logits(a).narrow(1, 9, 1), sinks.logits(c).narrow(1, 9, 1)));
  EXPECT_TRUE(torch::allclose(m.logits(a).narrow(1, 9, 1), m.logits(c).narrow(1, 9, 1)));
  models::GenerationCache full, cache;
  const torch::Tensor whole = sinks.next_logits(a, full);
  std::vector<torch::Tensor> parts = {sinks.next_logits(a.narrow(1, 0, 4), cache)};
  for (int64_t t = 4; t < 10; ++t) parts.push_back(sinks.next_logits(a.narrow(1, t, 1), cache));
  EXPECT_TRUE(torch::allclose(torch::cat(parts, 1), whole, 1e-5, 1e-5));
}

// LLaMA-style modelzoo configs build through the same decoder; their sizes
// are the published ones (Llama-2-7B 6,738,415,616; Llama-2-70B
// 68,976,648,192; Mistral-7B 7,241,732,096).
TEST(Model, LlamaAndMistralConfigsHaveTheirPublishedSizes) {
  const std::pair<const char*, int64_t> configs[] = {
      {"transformers_pytorch_llama_params_llama2_7b.yaml", 6738415616},
      {"transformers_pytorch_llama_params_llama2_70b.yaml", 68976648192},
      {"transformers_pytorch_mistral_params_mistral_7B.yaml", 7241732096}};
  for (const auto& [file, expected] : configs) {
    Params p = load_params(zoo::testing::modelzoo_configs_dir() + "/" + file, YAML::Node());
    EXPECT_EQ(summarize_model(p).parameters, expected) << file;
  }
}

// Recomputing each layer in the backward pass gives the gradients of the
// plain forward, dropout included (its random draws are replayed).
TEST(Model, ActivationCheckpointingGivesTheSameLossAndGradients) {
  Gpt2Options o = tiny_options();
  o.num_hidden_layers = 3;
  o.dropout_rate = 0.2;
  torch::Tensor ids = torch::randint(0, 50, {4, 12}, torch::kLong);
  const Features batch{{"input_ids", ids}, {"labels", ids.roll(1, 1)}, {"attention_mask", torch::ones_like(ids)}};
  auto run = [&](bool recompute) {
    o.activation_checkpointing = recompute;
    torch::manual_seed(3);
    Gpt2Model m(o, torch::TensorOptions());
    m.reset_parameters();
    return zoo::testing::step_gradients(m, batch, 4);  // the dropout masks
  };
  zoo::testing::expect_same_step(run(false), run(true), 0, 1e-5, 1e-7);
}

// ... while keeping far less: peak host memory of one training step of an
// 8-layer model, measured in separate processes (the heap keeps what it grew).
TEST(Model, ActivationCheckpointingLowersPeakMemory) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  auto peak_gib = [&](bool recompute) {
    std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / (recompute ? "m1" : "m0"), "  max_steps: 1\n");
    for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
             {"max_sequence_length: 32\n  batch_size: 8", "max_sequence_length: 256\n  batch_size: 16"},
             {"hidden_size: 32", "hidden_size: 256"},
             {"num_hidden_layers: 2", "num_hidden_layers: 8"},
             {"filter_size: 64", "filter_size: 1024"},
             {"max_position_embeddings: 32", std::string("max_position_embeddings: 256\n  activation_checkpointing: ") +
                                                 (recompute ? "true" : "false")}})
      y.replace(y.find(from), from.size(), to);
    const std::string params = zoo::testing::write_file(dir / (recompute ? "p1.yaml" : "p0.yaml"), y);
    auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::smatch m;
    EXPECT_TRUE(std::regex_search(r.output, m, std::regex("Peak host memory \\(RSS\\): ([0-9.]+) GiB"))) << r.output;
    return m.empty() ? 0.0 : std::stod(m[1]);
  };
  const double plain = peak_gib(false), recomputed = peak_gib(true);
  std::cout << "peak RSS, one step: " << plain << " GiB plain, " << recomputed
            << " GiB with activation checkpointing\n";
  EXPECT_LT(recomputed, plain - 0.2) << plain << " vs " << recomputed;
}

// Rotary position scaling (modelzoo's pos_scaling_*): linear interpolation
// rotates position p as unscaled p / factor would; llama3 and YaRN change
// the frequencies as Hugging Face's modeling_rope_utils computes them
// (written out in Python here from the published formulas).
TEST(Model, RotaryPositionScalingMatchesThePublishedFormulas) {
  torch::manual_seed(0);
  const torch::Tensor x = torch::randn({1, 8, 2, 16});
  models::RotaryOptions plain, linear;
  plain.dim = linear.dim = 12;  // partial rotary: the last 4 dims pass through
  linear.scaling_factor = 4.0;
  const torch::Tensor scaled = models::apply_rotary(x, linear, 0), unscaled = models::apply_rotary(x, plain, 0);
  for (int64_t p : {0, 4}) {  // scaled position p sits where the plain rotation puts p / 4
    EXPECT_TRUE(torch::allclose(scaled.select(1, p), models::apply_rotary(x.narrow(1, p, 1), plain, p / 4).select(1, 0),
                                1e-6, 1e-6));
  }
  EXPECT_FALSE(torch::allclose(scaled, unscaled));
  EXPECT_TRUE(torch::equal(scaled.narrow(-1, 12, 4), x.narrow(-1, 12, 4)));
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  const std::string script = zoo::testing::write_file(dir / "rope.py", zoo::testing::oracle("model_rope.py"));
  const zoo::testing::CommandResult r = zoo::testing::run_command("/usr/bin/python3 " + script);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  std::vector<double> expected(64);
  for (double& v : expected) in >> v;
  double yarn_magnitude = 0;
  in >> yarn_magnitude;
  models::RotaryOptions llama3, yarn;
  llama3.dim = yarn.dim = 64;
  llama3.scaling_type = "llama3";
  llama3.scaling_factor = 8.0;
  yarn.scaling_type = "yarn";
  yarn.scaling_factor = 4.0;
  yarn.original_max_position_embeddings = 4096;
  const torch::Tensor got =
      torch::cat({models::rotary_inverse_frequencies(llama3), models::rotary_inverse_frequencies(yarn)});
  const torch::Tensor want = torch::tensor(expected, torch::kFloat);
  EXPECT_TRUE(torch::allclose(got, want, 1e-5, 1e-12)) << (got - want).abs().max();
  // YaRN also scales cos and sin by 0.1 ln(factor) + 1: position 0 leaves each rotated dim times that.
  const torch::Tensor y = models::apply_rotary(
      x.narrow(1, 0, 1).narrow(-1, 0, 16),
      [&] {
        models::RotaryOptions o = yarn;
        o.dim = 16;
        return o;
      }(),
      0);
  EXPECT_TRUE(torch::allclose(y, x.narrow(1, 0, 1).narrow(-1, 0, 16) * yarn_magnitude, 1e-6, 1e-6));
}

// ALiBi with pos_scaling_factor (modelzoo's linear scaling for ALiBi): the
// slopes attention adds with are the paper's divided by the factor; the
// checkpoint keeps the paper's.
TEST(Model, AlibiPositionScalingDividesTheSlopes) {
  models::Gpt2Options o;
  o.vocab_size = 64, o.hidden_size = 32, o.num_hidden_layers = 1, o.num_heads = 4, o.filter_size = 64;
  o.max_position_embeddings = 16;
  o.position_embedding_type = "alibi";
  o.pos_scaling_factor = 4.0;
  models::Gpt2Model m(o, torch::TensorOptions());
  m.reset_parameters();
  const torch::Tensor paper = torch::tensor(models::alibi_slopes(4), torch::kFloat);
  EXPECT_TRUE(torch::allclose(m.embedding_layer->alibi(), paper / 4.0));
  EXPECT_TRUE(torch::allclose(m.embedding_layer->position_embed_helper->slopes.view({-1}), paper));
}

// Every activation modelzoo's layers/activations.py names, against its
// formula in float64; GLUs gate as modelzoo's bivariate ones (act(gate) * up),
// and swiglu_clamped passes no gradient through the clamped inputs.
TEST(Model, ActivationsAreModelzoos) {
  const torch::Tensor x = torch::linspace(-9, 9, 37, torch::kDouble);
  const double pi = 3.14159265358979323846;
  auto phi = [&](const torch::Tensor& t) { return 0.5 * (1 + torch::erf(t / std::sqrt(2.0))); };
  auto sig = [](const torch::Tensor& t) { return 1 / (1 + torch::exp(-t)); };
  const std::map<std::string, torch::Tensor> want = {
      {"gelu", x * phi(x)},
      {"gelu_new", 0.5 * x * (1 + torch::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)))},
      {"quick_gelu", x * sig(1.702 * x)},
      {"squared_gelu", (x * phi(x)) * (x * phi(x))},
      {"relu", torch::clamp_min(x, 0)},
      {"squared_relu", torch::clamp_min(x, 0) * torch::clamp_min(x, 0)},
      {"leaky_relu", torch::where(x > 0, x, 0.01 * x)},
      {"gelu_fast", 0.5 * x * (1 + torch::tanh(0.7978845608 * x * (1 + 0.044715 * x * x)))},
      {"silu", x * sig(x)},
      {"swish", x * sig(x)},
      {"mish", x * torch::tanh(torch::log1p(torch::exp(x)))},
      {"tanh", torch::tanh(x)},
      {"sigmoid", sig(x)},
      {"linear", x}};
  for (const auto& [name, expected] : want)
    EXPECT_TRUE(torch::allclose(models::activation(name, x), expected, 1e-12, 1e-12)) << name;
  for (const auto& name : models::kActivationNames) EXPECT_TRUE(models::is_glu(name) || want.count(name)) << name;
  const torch::Tensor up = torch::linspace(-10, 10, 37, torch::kDouble), gate = x.flip(0);
  EXPECT_TRUE(torch::allclose(models::glu("swiglu", up, gate), gate * sig(gate) * up, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(models::glu("geglu", up, gate), gate * phi(gate) * up, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(models::glu("reglu", up, gate), torch::clamp_min(gate, 0) * up, 1e-12, 1e-12));
  EXPECT_TRUE(torch::allclose(models::glu("liglu", up, gate), gate * up, 1e-12, 1e-12));
  // zoo's geglu_tanh: Hugging Face's gated-gelu (FLAN-T5), the gate through GELU's tanh form.
  EXPECT_TRUE(torch::allclose(models::glu("geglu_tanh", up, gate), want.at("gelu_new").flip(0) * up, 1e-12, 1e-12));
  const torch::Tensor u = up.clone().requires_grad_(true), g = gate.clone().requires_grad_(true);
  const torch::Tensor clamped = models::glu("swiglu_clamped", u, g);
  const torch::Tensor uc = torch::clamp(up, -7, 7), gc = torch::clamp_max(gate, 7);
  EXPECT_TRUE(torch::allclose(clamped, (uc + 1) * gc * sig(1.702 * gc), 1e-12, 1e-12));
  clamped.sum().backward();
  EXPECT_EQ(u.grad().masked_select(up.abs() > 7).abs().sum().item<double>(), 0.0);
  EXPECT_EQ(g.grad().masked_select(gate > 7).abs().sum().item<double>(), 0.0);
  EXPECT_GT(u.grad().masked_select(up.abs() < 7).abs().sum().item<double>(), 0.0);
  for (const std::string& name : {"swiglu", "geglu", "reglu", "liglu", "swiglu_clamped", "geglu_tanh"})
    EXPECT_TRUE(models::is_glu(name));
}
