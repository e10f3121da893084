// Hugging Face <-> zoo conversion for the LLaMA-style decoders: LLaMA,
// Mistral, Mixtral, Qwen2, Gemma and Gemma 2. Each tiny HF checkpoint is
// written by Python with its logits from the published math; zoo's logits
// (whole, and decoded with a cache) match them, the export back is the same
// tensors bit for bit, and what zoo cannot represent is refused by name.
#include <gtest/gtest.h>

#include "convert_fixtures.h"
#include "models/registry.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::load_converted;
using zoo::testing::read_raw;
using zoo::testing::run_fixture;

// LLaMA: rotary (HF half-split vs modelzoo interleaved rows), grouped-query
// attention, RMSNorm and SwiGLU against a LLaMA forward written out in Python.
namespace {

// A tiny LLaMA (grouped-query attention, SwiGLU, RMSNorm, half-split rotary,
// `rope_scaling` as given, biases as the case asks: Qwen2's on q/k/v, or
// LLaMA's attention_bias + mlp_bias on every projection) in Hugging Face's
// layout, and its logits written in Python from the published math.
// rope_parameters: the rotary written as transformers 5 saves it.
const std::string kMakeLlama = zoo::testing::oracle("convert_llama_make_llama.py");

// Converts dir/hf (no --model: the converter comes from config.json's
// model_type) and checks the model gives dir/logits.bin (2 x 16 tokens, 40
// classes) for dir/ids.bin, whole and decoded with a cache from token 9 on
// (rotary positions continue; Gemma 2's window of 5 is passed). Returns the model.
std::shared_ptr<models::Model> expect_converted_logits(const zoo::testing::TempDir& dir) {
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = load_converted(dir);
  torch::NoGradGuard no_grad;
  torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 16});
  torch::Tensor expected = read_raw(dir / "logits.bin", torch::kFloat, {2, 16, 40});
  models::GenerationCache full;
  EXPECT_LT((model->next_logits(ids, full) - expected).abs().max().item<double>(), 1e-4);
  models::GenerationCache cache;
  std::vector<torch::Tensor> parts = {model->next_logits(ids.narrow(1, 0, 9), cache)};
  for (int64_t t = 9; t < 16; ++t) parts.push_back(model->next_logits(ids.narrow(1, t, 1), cache));
  EXPECT_LT((torch::cat(parts, 1) - expected).abs().max().item<double>(), 1e-4);
  return model;
}

// One fixture: its converter (model_type), and what the tiny model has.
struct LlamaCase {
  std::string model_type = "llama";
  nlohmann::json rope_scaling = nullptr;
  nlohmann::json head_dim = nullptr;  // null: hidden_size / heads
  int64_t experts = 0;                // Mixtral's sparse experts in place of the MLPs
  std::string bias;                   // "qkv" (Qwen2), "all" (LLaMA's attention_bias + mlp_bias), "" none
  double theta = 10000.0;
  bool rope_parameters = false;  // config.json as transformers 5 writes it
};

// Converts that model to zoo and checks the logits (whole and decoded with a
// cache), and the export back: the same tensors bit for bit, the same config.
void check_llama_conversion(const LlamaCase& c) {
  zoo::testing::TempDir dir;
  zoo::testing::write_file(dir / "case.json", nlohmann::json{{"model_type", c.model_type},
                                                             {"rope_scaling", c.rope_scaling},
                                                             {"head_dim", c.head_dim},
                                                             {"experts", c.experts},
                                                             {"bias", c.bias},
                                                             {"theta", c.theta},
                                                             {"rope_parameters", c.rope_parameters}}
                                                  .dump());
  run_fixture(dir, "make_llama.py", kMakeLlama);
  expect_converted_logits(dir);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", c.model_type, "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors");
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["model_type"], c.model_type);
  EXPECT_EQ(cfg["num_key_value_heads"], 2);
  EXPECT_EQ(cfg["rope_scaling"], c.rope_scaling);  // written as transformers 4 did, which 5 reads too
  EXPECT_EQ(cfg["rope_theta"], c.theta);
  EXPECT_EQ(cfg["head_dim"], c.head_dim.is_null() ? nlohmann::json(8) : c.head_dim);
  if (c.model_type == "llama") {
    EXPECT_EQ(cfg["attention_bias"], c.bias == "all");
    EXPECT_EQ(cfg["mlp_bias"], c.bias == "all");
  }
  if (c.model_type == "qwen2" || c.model_type == "qwen3") EXPECT_EQ(cfg["use_sliding_window"], false);
  if (c.experts) {
    EXPECT_EQ(cfg["architectures"][0], "MixtralForCausalLM");
    EXPECT_EQ(cfg["num_local_experts"], c.experts);
    EXPECT_EQ(cfg["num_experts_per_tok"], 2);
    EXPECT_EQ(cfg["router_aux_loss_coef"], 0.02);
  }
}

}  // namespace

TEST(ConvertLlama, LlamaFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({});
}

// Llama 3.1 / 3.2 / 3.3 checkpoints: rope_scaling llama3 becomes modelzoo's
// pos_scaling_type llama3. The head size (8) and original context (64) put
// one frequency in each band: kept, blended and divided by the factor.
TEST(ConvertLlama, Llama31RopeScalingMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({.rope_scaling = {{"rope_type", "llama3"},
                                           {"factor", 8.0},
                                           {"low_freq_factor", 1.0},
                                           {"high_freq_factor", 4.0},
                                           {"original_max_position_embeddings", 64}}});
}

// transformers 5 saves rope_theta and the scaling inside rope_parameters; a
// converter reading only rope_theta would silently rotate with base 10000.
TEST(ConvertLlama, TransformersFiveRopeParametersAreRead) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({.theta = 500000.0, .rope_parameters = true});
  check_llama_conversion({.rope_scaling = {{"rope_type", "llama3"},
                                           {"factor", 8.0},
                                           {"low_freq_factor", 1.0},
                                           {"high_freq_factor", 4.0},
                                           {"original_max_position_embeddings", 64}},
                          .theta = 500000.0,
                          .rope_parameters = true});
}

// Mixtral: each layer's router and 4 SwiGLU experts (w1 gate, w3 up, w2
// down) become modelzoo's `moe` block; logits match HF's routing (float32
// softmax, top 2 renormalized) and the export is bitwise the original.
TEST(ConvertLlama, MixtralFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({.model_type = "mixtral", .experts = 4});
}

// Mistral NeMo's head_dim (128 at hidden_size 5120, 32 heads) is modelzoo's
// attention_inner_dim: q/k/v 64 wide here at hidden_size 32.
TEST(ConvertLlama, LlamaHeadDimIsTheAttentionInnerDim) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({.head_dim = 16});
}

// A config.json whose head counts or head size do not describe the tensors is
// refused, naming the field and the tensor, before any rows are re-ordered
// (a rotary permutation sized from the config wrote past its buffer).
TEST(ConvertLlama, HeadCountsThatDoNotMatchTheTensorsAreRefused) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  zoo::testing::write_file(dir / "case.json", nlohmann::json{{"model_type", "llama"},
                                                             {"rope_scaling", nullptr},
                                                             {"head_dim", nullptr},
                                                             {"experts", 0},
                                                             {"bias", ""},
                                                             {"theta", 10000.0},
                                                             {"rope_parameters", false}}
                                                  .dump());
  run_fixture(dir, "make_llama.py", kMakeLlama);
  const nlohmann::json good = nlohmann::json::parse(zoo::testing::read_file(dir / "hf/config.json"));
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"head_dim", 16, "num_attention_heads (4) x head_dim (16) = 64 rows"},
      {"num_key_value_heads", 4, "num_key_value_heads (4) x head_dim (8) = 32 rows"},
      {"num_attention_heads", 2, "num_attention_heads (2) x head_dim (8) = 16 rows"}};
  for (const auto& [field, value, expected] : cases) {
    nlohmann::json bad = good;
    bad[field] = value;
    zoo::testing::write_file(dir / "hf/config.json", bad.dump());
    zoo::testing::expect_refused(
        [&] {
          convert::run_convert({dir / "hf", "llama", "hf", "zoo", std::nullopt, dir / ("bad_" + field)});
        },
        {"self_attn.proj_", expected, "the config does not describe these weights"});
  }
}

// Qwen2 / Qwen2.5: LLaMA with biases on q, k and v only (modelzoo's
// use_projection_bias_in_attention without use_ffn_bias_in_attention), its
// unused sliding_window left behind; LLaMA's attention_bias and mlp_bias put
// biases on every projection.
TEST(ConvertLlama, Qwen2AndLlamaBiasesMatchTheReferenceAndRoundTrip) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({.model_type = "qwen2", .bias = "qkv", .theta = 1000000.0});
  check_llama_conversion({.bias = "all"});
}

// Qwen3: LLaMA with each head's queries and keys RMS-normalized before the
// rotary (modelzoo's attention_qk_norm_layer); the norms' weights re-ordered
// with the rotary dims.
TEST(ConvertLlama, Qwen3QkNormsMatchTheReferenceAndRoundTrip) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  check_llama_conversion({.model_type = "qwen3", .head_dim = 16, .theta = 1000000.0});
}

// Mistral's sliding window travels both ways; config.json fields that change
// the math and that zoo cannot represent are refused by name, never dropped.
TEST(ConvertLlama, MistralSlidingWindowIsCarriedAndUnrepresentableFieldsAreRefused) {
  const models::ModelFamily& family = models::find_model("mistral");
  const models::HfAdapter& mistral = family.hf.at("mistral");
  nlohmann::json config = {{"model_type", "mistral"},  {"vocab_size", 64},
                           {"hidden_size", 32},        {"num_hidden_layers", 2},
                           {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                           {"intermediate_size", 48},  {"max_position_embeddings", 64},
                           {"sliding_window", 8},      {"rope_theta", 1e6},
                           {"hidden_act", "silu"},     {"rope_scaling", nullptr}};
  YAML::Node model = mistral.config_from_hf(config);
  EXPECT_EQ(model["attention_sliding_window_length"].as<int64_t>(), 8);
  model.remove("name");
  auto spec = family.parse(model, config::Context{"converted", "model", nullptr});
  const nlohmann::json back = mistral.config_to_hf(*spec);
  EXPECT_EQ(back.at("model_type"), "mistral");
  EXPECT_EQ(back.at("sliding_window"), 8);
  EXPECT_EQ(back.at("rope_theta"), 1e6);
  try {
    family.hf.at("llama").config_to_hf(*spec);
    ADD_FAILURE() << "a LLaMA config.json would drop the sliding window";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("llama has no sliding window; convert with --model mistral"),
              std::string::npos);
  }
  for (const auto& [key, value] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}}},
           {"rope_scaling", {{"rope_type", "llama3"}, {"factor", 8.0}, {"beta_fast", 2.0}}},
           {"rope_parameters", {{"rope_type", "yarn"}, {"factor", 4.0}, {"rope_theta", 1e6}}},
           {"rope_parameters",
            {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 1e6}}},
             {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 1e4}}}}},
           {"attention_bias", true},
           {"mlp_bias", true}}) {
    nlohmann::json changed = config;
    changed[key] = value;
    try {
      mistral.config_from_hf(changed);
      ADD_FAILURE() << "no error for " << key;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("config.json: " + key + " = "), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(key == "rope_parameters" && value.contains("full_attention")
                                               ? "differs between layer types"
                                               : "changes the model's math"),
                std::string::npos)
          << e.what();
    }
  }
  // Qwen2's use_sliding_window windows only the layers from max_window_layers on: refused, not dropped.
  nlohmann::json qwen = config;
  qwen["model_type"] = "qwen2";
  qwen["use_sliding_window"] = true;
  zoo::testing::expect_refused([&] { family.hf.at("qwen2").config_from_hf(qwen); },
                               {"config.json: use_sliding_window = true", "max_window_layers"});
}

// Gemma and Gemma 2. The fixture writes HF's math: RMSNorm scaling by
// (1 + weight), embeddings times sqrt(hidden_size), a GELU-tanh gated FFN,
// head_dim apart from hidden_size / heads, tied embeddings; Gemma 2 adds the
// norms after attention and FFN, query_pre_attn_scalar in the scale,
// attention and final softcapping, and a window on the layers layer_types
// names (absent: 0, 2, ...).
namespace {

const std::string kMakeGemma = zoo::testing::oracle("convert_llama_make_gemma.py");

struct GemmaCase {
  bool gemma2 = true;
  nlohmann::json layer_types = nullptr;  // Gemma 2's, as transformers 4.53+ writes them
  double theta = 10000.0;
  bool rope_parameters = false;
  bool bf16_norm = false;  // the final norm's weight stored in bfloat16
};

// Converts the fixture to zoo and checks logits (whole and decoded with a
// cache past the window), the converted norm (HF's weight + 1) and the export
// back: the same tensors, the config.json fields Gemma's math reads. Returns
// that config.json.
nlohmann::json check_gemma_conversion(const GemmaCase& c) {
  zoo::testing::TempDir dir;
  zoo::testing::write_file(dir / "case.json", nlohmann::json{{"gemma2", c.gemma2},
                                                             {"layer_types", c.layer_types},
                                                             {"theta", c.theta},
                                                             {"rope_parameters", c.rope_parameters},
                                                             {"bf16_norm", c.bf16_norm}}
                                                  .dump());
  run_fixture(dir, "make_gemma.py", kMakeGemma);
  auto model = expect_converted_logits(dir);
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  const torch::Tensor final_norm = model->named_parameters()["transformer_decoder.norm.weight"];
  EXPECT_TRUE(torch::equal(final_norm, original["model.norm.weight"].to(torch::kFloat) + 1));

  const std::string converter = c.gemma2 ? "gemma2" : "gemma";
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", converter, "zoo", "hf", std::nullopt, dir / "back"});
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  EXPECT_EQ(back.size(), original.size());
  for (const auto& [k, t] : original) {
    EXPECT_TRUE(back.count(k) && torch::equal(t, back[k].to(t.scalar_type()))) << k;  // zoo's checkpoint holds float32
  }
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["model_type"], converter);
  EXPECT_EQ(cfg["head_dim"], 12);
  EXPECT_EQ(cfg["hidden_activation"], "gelu_pytorch_tanh");
  EXPECT_EQ(cfg["rope_theta"], c.theta);
  EXPECT_EQ(cfg["tie_word_embeddings"], true);
  return cfg;
}

}  // namespace

TEST(ConvertLlama, Gemma2FromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  nlohmann::json cfg = check_gemma_conversion({});
  EXPECT_EQ(cfg["query_pre_attn_scalar"], 16);
  EXPECT_EQ(cfg["sliding_window"], 5);
  EXPECT_EQ(cfg["attn_logit_softcapping"], 3.0);
  EXPECT_EQ(cfg["final_logit_softcapping"], 4.0);
  const nlohmann::json sliding_first = {"sliding_attention", "full_attention", "sliding_attention", "full_attention"};
  EXPECT_EQ(cfg["layer_types"], sliding_first);
  // transformers 5's config.json: layer_types (here windowing layers 1 and 3) and rope_parameters.
  const nlohmann::json full_first = {"full_attention", "sliding_attention", "full_attention", "sliding_attention"};
  cfg = check_gemma_conversion({.layer_types = full_first, .theta = 1000.0, .rope_parameters = true});
  EXPECT_EQ(cfg["layer_types"], full_first);
}

TEST(ConvertLlama, GemmaFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  nlohmann::json cfg = check_gemma_conversion({.gemma2 = false, .bf16_norm = true});
  EXPECT_EQ(cfg["architectures"][0], "GemmaForCausalLM");
  EXPECT_FALSE(cfg.contains("query_pre_attn_scalar"));
}

// modelzoo's Gemma 2 27B params (attention_logits_alpha for its
// query_pre_attn_scalar 144 at head size 128, embeddings_scale to 7
// decimals, its default window pattern) export with HF's 27B values; what
// HF's Gemma cannot hold is refused by name.
TEST(ConvertLlama, ModelzooGemma2ParamsExportAndGemmaRefusals) {
  const models::ModelFamily& family = models::find_model("gemma2");
  YAML::Node m = YAML::Load(R"(
    attention_dropout_rate: 0.0
    attention_inner_dim: 4096
    attention_logit_softcapping: 50.0
    attention_logits_alpha: 0.9428090415820634
    attention_module: multiquery_attention
    attention_sliding_window_length: 4096
    dropout_rate: 0.0
    embeddings_scale: 67.8822509
    extra_attention_params: {num_kv_groups: 16}
    filter_size: 36864
    final_logit_softcapping: 30.0
    hidden_size: 4608
    layer_norm_epsilon: 1.0e-06
    max_position_embeddings: 8192
    norm_first_sandwich: true
    nonlinearity: geglu
    norm_type: rmsnorm
    num_heads: 32
    num_hidden_layers: 46
    position_embedding_type: rotary
    rope_theta: 10000.0
    rotary_dim: 128
    share_embedding_weights: true
    sliding_window_every_other_decoder_layer: true
    use_ffn_bias_in_attention: false
    use_projection_bias_in_attention: false
    use_ffn_bias: false
    vocab_size: 256000
  )");
  auto parse = [&](const YAML::Node& section) {
    return family.parse(section, config::Context{"params_gemma2_27b_msl8k.yaml", "model", nullptr});
  };
  const nlohmann::json cfg = family.hf.at("gemma2").config_to_hf(*parse(m));
  EXPECT_EQ(cfg["query_pre_attn_scalar"], 144);
  EXPECT_EQ(cfg["head_dim"], 128);
  EXPECT_EQ(cfg["num_key_value_heads"], 16);
  EXPECT_EQ(cfg["hidden_activation"], "gelu");         // modelzoo's geglu is exact GELU
  EXPECT_EQ(cfg["layer_types"][0], "full_attention");  // modelzoo's default pattern windows layers 1, 3, ...
  EXPECT_EQ(cfg["layer_types"][1], "sliding_attention");
  // Back from that config.json: the same model section's math.
  const YAML::Node again = family.hf.at("gemma2").config_from_hf(cfg);
  EXPECT_NEAR(again["attention_logits_alpha"].as<double>(), 0.9428090415820634, 1e-12);
  EXPECT_EQ(again["sliding_window_every_other_decoder_layer_pattern"].as<std::string>(), "full_attention_first");
  EXPECT_EQ(again["nonlinearity"].as<std::string>(), "geglu");

  // A config.json's null caps and window are none (absent ones take HF's defaults).
  nlohmann::json uncapped = cfg;
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping", "sliding_window"})
    uncapped[key] = nullptr;
  const YAML::Node plain = family.hf.at("gemma2").config_from_hf(uncapped);
  for (const char* key : {"attention_logit_softcapping", "final_logit_softcapping", "attention_sliding_window_length"})
    EXPECT_FALSE(plain[key]) << key;
  uncapped.erase("attn_logit_softcapping");
  EXPECT_EQ(family.hf.at("gemma2").config_from_hf(uncapped)["attention_logit_softcapping"].as<double>(), 50.0);

  YAML::Node scaled = YAML::Clone(m);
  scaled["embeddings_scale"] = 60.0;
  zoo::testing::expect_refused([&] { family.hf.at("gemma2").config_to_hf(*parse(scaled)); },
                               {"model.embeddings_scale = 60", "sqrt(hidden_size)"});
  zoo::testing::expect_refused([&] { family.hf.at("gemma").config_to_hf(*parse(m)); },
                               {"Hugging Face's gemma has no such option"});
  nlohmann::json odd = cfg;
  odd["layer_types"] = {"sliding_attention", "sliding_attention"};
  zoo::testing::expect_refused([&] { family.hf.at("gemma2").config_from_hf(odd); },
                               {"config.json: layer_types", "alternate"});
}
