// Decoder families beyond GPT-2/LLaMA (issue 13): GPT-J, GPT-NeoX and Falcon
// through modelzoo's gptj model, BLOOM and MPT (ALiBi) through its gpt2 model.
// Logits against an independent forward pass written from the published
// math, real configs shrunk and trained, and the family picked from the keys
// when model.name is absent.
#include <gtest/gtest.h>

#include <cmath>
#include <tuple>

#include "configs/schema/yaml_util.h"
#include "models/gptj/gptj.h"
#include "models/registry.h"
#include "reference_case.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "runner/run.h"
#include "runner/trainer.h"
#include "test_util.h"

using namespace zoo;
using namespace zoo::models;

namespace {

// The small widths every layer test here uses.
void make_tiny(DecoderLmOptions& o) {
  o.vocab_size = 50;
  o.hidden_size = 32;
  o.num_hidden_layers = 2;
  o.num_heads = 4;
  o.filter_size = 48;
  o.max_position_embeddings = 16;
  o.nonlinearity = "gelu";
}

GptjOptions tiny_gptj() {
  GptjOptions o;
  make_tiny(o);
  o.residual_dropout_rate = o.embedding_dropout_rate = o.attention_dropout_rate = 0.0;
  return o;
}

Gpt2Options tiny_gpt2() {
  Gpt2Options o;
  make_tiny(o);
  o.dropout_rate = 0.0;
  return o;
}

// A float64 forward pass of a decoder-only LM written from the papers' math
// (GPT-2/J/NeoX/Falcon layers, interleaved rotary, ALiBi), reading a
// checkpoint of {state, ids, logits}; exits 1 when zoo's logits differ by
// more than 1e-5. Arguments: file rotary_dim theta kv_groups
// parallel|sequential alibi|none heads [embeddings_scale logits_scale
// sqrt|d by_layer(0|1) [attention_softcap final_softcap odd_layer_window]];
// norm1_post / norm3_post in the state are Gemma 2's sandwich norms.
std::string write_reference_forward(const zoo::testing::TempDir& dir) {
  return zoo::testing::write_file(dir / "ref.py", zoo::testing::oracle("families_reference.py"));
}

// The logits of `model` for `ids`, with a cache fed a prompt then one token at a time.
torch::Tensor cached_logits(Model& model, const torch::Tensor& ids, int64_t prompt) {
  GenerationCache cache;
  std::vector<torch::Tensor> parts = {model.next_logits(ids.narrow(1, 0, prompt), cache)};
  for (int64_t t = prompt; t < ids.size(1); ++t) parts.push_back(model.next_logits(ids.narrow(1, t, 1), cache));
  return torch::cat(parts, 1);
}

// Initializes `m` (seeded), writes its state, 12 random ids and its logits,
// and expects the reference forward (`script`, run with `args` after the
// file) to agree, and the KV cache to give the full pass's logits.
void expect_reference_logits(Gpt2Model& m, const zoo::testing::TempDir& dir, const std::string& script,
                             const std::string& args, const std::string& label) {
  torch::manual_seed(11);
  m.reset_parameters();
  m.eval();
  torch::Tensor ids = torch::randint(0, 50, {2, 12}, torch::kLong);
  zoo::testing::write_reference_case(m, ids, dir / "case.pt");
  auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt") + " " + args);
  EXPECT_EQ(r.exit_code, 0) << label << ": " << r.output;
  torch::NoGradGuard no_grad;
  EXPECT_TRUE(torch::allclose(cached_logits(m, ids, 5), m.logits(ids), 1e-5, 1e-5)) << label;
}

}  // namespace

// GPT-J (one norm feeds attention and FFN, partial interleaved rotary),
// GPT-NeoX (untied norms, projection biases, rope_theta) and Falcon 7B
// (multi-query attention, full rotary, no biases, tied embeddings): zoo's
// logits equal a float64 forward written in the test from the papers' math.
TEST(Families, ParallelDecodersMatchAnIndependentForward) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  const std::string script = write_reference_forward(dir);
  struct Case {
    const char* name;
    std::function<void(GptjOptions&)> set;
    int64_t rotary_dim, kv_groups;
    double theta;
  };
  const std::vector<Case> cases = {
      {"gptj",
       [](GptjOptions& o) {
         o.rotary_dim = 4;  // half of the head's 8 dims
         o.use_projection_bias_in_attention = o.use_ffn_bias_in_attention = false;
         o.use_ffn_bias = true;
         o.share_embedding_weights = false;
         o.use_bias_in_output = true;
       },
       4, 4, 10000.0},
      {"neox",
       [](GptjOptions& o) {
         o.rotary_dim = 2;
         o.rope_theta = 1e6;
         o.use_untied_layer_norm = true;
         o.use_ffn_bias = true;
         o.share_embedding_weights = false;
       },
       2, 4, 1e6},
      {"falcon",
       [](GptjOptions& o) {
         o.attention_module = "multiquery_attention";
         o.extra_attention_params.num_kv_groups = 1;
         o.use_projection_bias_in_attention = o.use_ffn_bias_in_attention = o.use_ffn_bias = false;
       },
       8, 1, 10000.0},
  };
  for (const Case& c : cases) {
    GptjOptions o = tiny_gptj();
    c.set(o);
    GptjModel m(o, torch::TensorOptions());
    expect_reference_logits(m, dir, script,
                            std::to_string(c.rotary_dim) + " " + std::to_string(c.theta) + " " +
                                std::to_string(c.kv_groups) + " parallel none 4",
                            c.name);
    // A parallel layer with one shared norm has no norm3 at all (checkpoint keys as modelzoo's).
    const bool has_norm3 = ckpt::model_state_dict(m).contains("model.transformer_decoder.layers.0.norm3.weight");
    EXPECT_EQ(has_norm3, o.use_untied_layer_norm) << c.name;
  }
}

namespace {

// A real modelzoo config with its model shrunk (its own keys and flags kept,
// widths cut) and zoo's tiny byte-level corpus as data, written to dir/name.yaml.
std::string shrunk_config(const zoo::testing::TempDir& dir, const std::string& file, int64_t rotary_dim) {
  YAML::Node y = config::load_yaml_file(zoo::testing::modelzoo_configs_dir() + "/" + file);
  YAML::Node model = y["model"];
  model["vocab_size"] = 256;
  model["hidden_size"] = 32;
  model["num_heads"] = 4;
  model["num_hidden_layers"] = 2;
  model["filter_size"] = 64;
  model["max_position_embeddings"] = 32;
  if (rotary_dim > 0) model["rotary_dim"] = rotary_dim;
  YAML::Node tiny = config::load_yaml_string(zoo::testing::tiny_params_yaml(dir / "data", dir / file), "tiny.yaml");
  y["train_input"] = tiny["train_input"];
  y["eval_input"] = tiny["eval_input"];
  const YAML::Node adjust = y["optimizer"]["adjust_learning_rate"];  // muP's, kept
  y["optimizer"] = tiny["optimizer"];
  if (adjust) y["optimizer"]["adjust_learning_rate"] = adjust;
  y["runconfig"] = tiny["runconfig"];
  y["runconfig"]["max_steps"] = 30;
  y["runconfig"]["log_steps"] = 1;
  y["runconfig"]["eval_steps"] = 2;
  y["runconfig"]["checkpoint_steps"] = 30;
  y["runconfig"]["eval_frequency"] = 30;
  YAML::Emitter out;
  out << y;
  return zoo::testing::write_file(dir / (file + ".p.yaml"), out.c_str());
}

}  // namespace

// GPT-J 6B, GPT-NeoX, Falcon 7B, BLOOM 7B, MPT 7B, BTLM, Cerebras-GPT muP,
// StarCoder and SantaCoder as modelzoo ships them
// (no model.name: the keys pick the family), shrunk: training lowers the
// loss, evaluation runs, and generation with the KV cache equals the
// uncached forward.
TEST(Families, ShrunkRealConfigsTrainEvaluateAndGenerate) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  const std::vector<std::tuple<std::string, int64_t, std::string>> configs = {
      {"transformers_pytorch_gptj_params_gptj_6B.yaml", 2, "gptj"},  // 25% of the 8-dim head, as GPT-J's 64 of 256
      {"transformers_pytorch_gptj_params_gpt_neox_small.yaml", 2, "gptj"},  // 25%, as NeoX
      {"transformers_pytorch_falcon_params_falcon_7b.yaml", 8, "gptj"},     // all of it, as Falcon (MQA: one kv head)
      {"transformers_pytorch_bloom_params_bloom_7b.yaml", 0, "gpt2"},       // ALiBi
      {"transformers_pytorch_mpt_params_mpt_7B.yaml", 0, "gpt2"},
      {"transformers_pytorch_btlm_params_btlm_2p7b_2k.yaml", 0, "gpt2"},        // ALiBi, SwiGLU, muP
      {"transformers_pytorch_gpt3_Cerebras_GPT_111m_mup.yaml", 0, "gpt2"},      // muP
      {"transformers_pytorch_starcoder_params_starcoder_15b.yaml", 0, "gpt2"},  // MQA
      {"transformers_pytorch_santacoder_params_santacoder_1b.yaml", 0, "gpt2"}};
  for (const auto& [file, rotary_dim, family] : configs) {
    const std::string params = shrunk_config(dir, file, rotary_dim);
    auto r =
        zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train_and_eval");
    ASSERT_EQ(r.exit_code, 0) << file << "\n" << r.output;
    EXPECT_EQ(r.output.find("so zoo builds gptj") != std::string::npos, family == "gptj") << file << "\n" << r.output;
    const std::vector<double> losses = zoo::testing::train_losses(r.output);
    ASSERT_EQ(losses.size(), 30u) << file << "\n" << r.output;
    // (BTLM's loss is per sample / max_sequence_length: compare relatively)
    EXPECT_LT(losses.back(), 0.8 * losses.front()) << file << ": " << losses.front() << " -> " << losses.back();
    EXPECT_NE(r.output.find("Avg Eval Loss:"), std::string::npos) << file;

    Params p = load_params(params, YAML::Node());
    EXPECT_EQ(p.model_name, family);
    torch::manual_seed(2);
    std::shared_ptr<Model> model = p.model->build(torch::TensorOptions());
    model->eval();
    torch::NoGradGuard no_grad;
    torch::Tensor ids = torch::randint(0, 256, {2, 10}, torch::kLong);
    GenerationCache whole;
    EXPECT_TRUE(torch::allclose(cached_logits(*model, ids, 4), model->next_logits(ids, whole), 1e-5, 1e-5)) << file;
  }
}

// Published sizes: GPT-J 6B is Hugging Face's 6,050,882,784 less the 143
// padding rows of its 50400-token vocabulary (in wte, lm_head and its bias);
// Falcon 7B equals Hugging Face's falcon-7b (multi-query: one key/value
// head); MPT 7B and BLOOM 7B are mosaicml/mpt-7b and bigscience/bloom-7b1
// plus their 32 ALiBi slopes, which modelzoo keeps as a (frozen) parameter.
TEST(Families, RealConfigsHaveTheirPublishedSizes) {
  const std::map<std::string, int64_t> expected = {
      {"transformers_pytorch_gptj_params_gptj_6B.yaml", 6050882784 - 143 * (2 * 4096 + 1)},
      {"transformers_pytorch_falcon_params_falcon_7b.yaml", 6921720704},
      {"transformers_pytorch_mpt_params_mpt_7B.yaml", 6649286656 + 32},
      {"transformers_pytorch_bloom_params_bloom_7b.yaml", 7069016064 + 32},
      // BTLM: 32 x (4C^2 + 4C + SwiGLU's 3CF + 2F + C + four norm vectors) + VC + 2C + 32 slopes, C 2560, F 6826
      {"transformers_pytorch_btlm_params_btlm_2p7b_2k.yaml",
       int64_t{32} * (4 * 2560 * 2560 + 4 * 2560 + 3 * 2560 * 6826 + 2 * 6826 + 2560 + 4 * 2560) + 50257 * 2560 +
           2 * 2560 + 32},
      {"transformers_pytorch_gpt3_Cerebras_GPT_111m_mup.yaml", 111050496},  // muP changes no shapes
      // Multi-query: q and output C x C, k and v C x 128 each, with biases; learned positions; tied.
      {"transformers_pytorch_santacoder_params_santacoder_1b.yaml",
       int64_t{24} * (2 * (2048 * 2048 + 2048) + 2 * (2048 * 128 + 128) + 2 * 2048 * 8192 + 8192 + 2048 + 4 * 2048) +
           (49280 + 2048) * 2048 + 2 * 2048},
      {"transformers_pytorch_starcoder_params_starcoder_15b.yaml",
       int64_t{40} * (2 * (int64_t{6144} * 6144 + 6144) + 2 * (6144 * 128 + 128) + 2 * 6144 * 24576 + 24576 + 6144 +
                      4 * 6144) +
           int64_t{49152 + 8192} * 6144 + 2 * 6144},
      // GPT-2-small widths with untied embeddings and biases: 12 x (4C^2 + 4C + 2CF + F + C + 4C) + 2VC + 2C
      {"transformers_pytorch_gptj_params_gpt_neox_small.yaml",
       12 * (4 * 768 * 768 + 4 * 768 + 2 * 768 * 3072 + 3072 + 768 + 4 * 768) + 2 * 50277 * 768 + 2 * 768}};
  for (const auto& [name, count] : expected)
    EXPECT_EQ(summarize_model(load_params(zoo::testing::modelzoo_configs_dir() + "/" + name, YAML::Node())).parameters,
              count)
        << name;
}

// Without model.name the keys decide, and the choice is said; model.name
// still chooses, and a key no family takes is the usual unknown-key error.
TEST(Families, TheKeysPickTheFamilyWhenModelNameIsAbsent) {
  const std::string base = zoo::testing::tiny_params_yaml("/d", "/m");
  auto parse = [](const std::string& y) {
    return params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
  };
  std::string y = base;
  y.replace(y.find("  dropout_rate: 0.0\n"), 19, "  residual_dropout_rate: 0.0\n  use_untied_layer_norm: true\n");
  EXPECT_EQ(parse(y).model_name, "gptj");
  EXPECT_EQ(parse(base).model_name, "gpt2");
  std::string named = y;
  named.insert(named.find("  vocab_size: 256\n"), "  name: gpt2\n");
  EXPECT_NE(zoo::testing::params_error(named).find("model.residual_dropout_rate: unknown key"), std::string::npos)
      << zoo::testing::params_error(named);
  std::string unknown = y;
  unknown.insert(unknown.find("  vocab_size: 256\n"), "  no_such_key: 1\n");
  EXPECT_NE(zoo::testing::params_error(unknown).find("model.no_such_key: unknown key"), std::string::npos)
      << zoo::testing::params_error(unknown);
}

// ALiBi (BLOOM, MPT): zoo's slopes are the paper's for 8 heads and for 12
// (not a power of two), and the logits of a BLOOM-shaped model (learned
// positions off, a norm after the embeddings) and an MPT-shaped one
// (biasless LayerNorm, no biases) equal the float64 forward with the bias
// -slope * (i - j); the cache gives the same logits as the full pass.
TEST(Families, AlibiModelsMatchAnIndependentForward) {
  EXPECT_EQ(alibi_slopes(8), (std::vector<double>{0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 0.00390625}));
  std::vector<double> twelve = alibi_slopes(12);
  ASSERT_EQ(twelve.size(), 12u);
  for (int k = 0; k < 8; ++k) EXPECT_DOUBLE_EQ(twelve[k], std::pow(2.0, -(k + 1)));
  for (int k = 0; k < 4; ++k) EXPECT_DOUBLE_EQ(twelve[8 + k], std::pow(2.0, -0.5 - k));  // 16 heads' 1st, 3rd, ...
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  const std::string script = write_reference_forward(dir);
  for (const char* family : {"bloom", "mpt"}) {
    Gpt2Options o = tiny_gpt2();
    o.hidden_size = 48;
    o.num_heads = 6;  // not a power of two
    o.position_embedding_type = "alibi";
    if (std::string(family) == "bloom") {
      o.embedding_layer_norm = true;
    } else {
      o.norm_type = "biasless-layernorm";
      o.use_projection_bias_in_attention = o.use_ffn_bias_in_attention = o.use_ffn_bias = false;
    }
    Gpt2Model m(o, torch::TensorOptions());
    expect_reference_logits(m, dir, script, "0 10000 6 sequential alibi 6", family);
    EXPECT_EQ(ckpt::model_state_dict(m).contains("model.transformer_decoder.layers.0.norm1.bias"),
              std::string(family) == "bloom");
    EXPECT_FALSE(m.embedding_layer->position_embed_helper->slopes.requires_grad());
  }
}

// muP (Cerebras-GPT 111M muP, BTLM) and StarCoder's layer scaling: the
// embeddings and logits scales, scores divided by the head size, and layer
// i's scores by i + 1 give the logits of the float64 forward written with
// them; BTLM's whole set (ALiBi, SwiGLU off here) likewise.
TEST(Families, MupAndLayerScalingMatchAnIndependentForward) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  const std::string script = write_reference_forward(dir);
  for (const char* position : {"learned", "alibi"}) {
    Gpt2Options o = tiny_gpt2();
    o.position_embedding_type = position;
    o.embeddings_scale = 10.0;
    o.output_logits_scale = 1.0 / 3;
    o.scale_qk_dot_by_d = true;
    o.scale_qk_dot_by_layer_idx = std::string(position) == "learned";
    Gpt2Model m(o, torch::TensorOptions());
    expect_reference_logits(m, dir, script,
                            std::string("0 10000 4 sequential ") + (o.scale_qk_dot_by_layer_idx ? "none" : "alibi") +
                                " 4 10 " + std::to_string(1.0 / 3) + " d " + (o.scale_qk_dot_by_layer_idx ? "1" : "0"),
                            position);
  }
}

// Gemma 2's options on a GPT-2 base: attention scores and logits softcapped,
// sandwich norms after attention and FFN, and the sliding window on every
// other layer (layer 1 here, modelzoo's full_attention_first) give the
// logits of the float64 forward written with them; decoding with the cache agrees.
TEST(Families, Gemma2OptionsMatchAnIndependentForward) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  zoo::testing::TempDir dir;
  Gpt2Options o = tiny_gpt2();
  o.attention_logit_softcapping = 1.0;
  o.final_logit_softcapping = 2.0;
  o.norm_first_sandwich = true;
  o.attention_sliding_window_length = 3;
  o.sliding_window_every_other_decoder_layer = true;
  o.output_logits_scale = 4.0;  // logits well into the cap's curve
  Gpt2Model m(o, torch::TensorOptions());
  EXPECT_TRUE(ckpt::model_state_dict(m).contains("model.transformer_decoder.layers.1.norm3_post.weight"));
  expect_reference_logits(m, dir, write_reference_forward(dir), "0 10000 4 sequential none 4 1 4 sqrt 0 1 2 3",
                          "gemma2");
}

// optimizer.adjust_learning_rate scales the learning rate of the model's
// named groups: decoder_kernel is every dense weight in the decoder (not
// biases, norms or embeddings); with it at 0 a step leaves exactly those
// unchanged. An unknown group is an error naming the key and the groups.
TEST(Families, AdjustLearningRateScalesTheNamedParameterGroups) {
  zoo::testing::TempDir dir;
  zoo::testing::write_small_corpus(dir / "data");
  YAML::Node overrides;
  std::string y = zoo::testing::tiny_params_yaml(dir / "data", dir / "m", "  max_steps: 3\n");
  y.replace(y.find("  max_gradient_norm: 1.0\n"), 24,
            "  max_gradient_norm: 1.0\n  adjust_learning_rate:\n    decoder_kernel: 0.0\n");
  Params p = params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node());
  EXPECT_EQ(p.optimizer.adjust_learning_rate.at("decoder_kernel"), 0.0);
  Trainer t(p, torch::kCPU, true);
  std::map<std::string, torch::Tensor> before;
  for (const auto& kv : t.model().named_parameters()) before[kv.key()] = kv.value().detach().clone();
  t.train(3);  // the warm-up starts at 0: steps 2 and 3 move the weights
  int frozen = 0, moved = 0;
  for (const auto& kv : t.model().named_parameters()) {
    const std::string& name = kv.key();
    const bool kernel = name.find("decoder") != std::string::npos && name.find("weight") != std::string::npos &&
                        (name.find("dense") != std::string::npos || name.find("linear") != std::string::npos);
    const bool same = torch::equal(before[name], kv.value());
    EXPECT_EQ(same, kernel) << name;
    (kernel ? frozen : moved) += 1;
  }
  EXPECT_EQ(frozen, 2 * (4 + 2));  // per layer: q, k, v, output, two FFN weights
  EXPECT_GT(moved, 0);
  y.replace(y.find("decoder_kernel: 0.0"), 19, "decoder_kernels: 0.1");
  try {
    Trainer bad(params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node()), torch::kCPU, true);
    ADD_FAILURE() << "an unknown group was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(
        std::string(e.what()).find("p.yaml: optimizer.adjust_learning_rate.decoder_kernels: the model has no such "
                                   "parameter group (it has: decoder_attention, decoder_input_ffn, decoder_kernel"),
        std::string::npos)
        << e.what();
  }
}

// Exporting to Hugging Face never drops an option that changes the math:
// muP's scales, ALiBi and the embedding norm are errors naming the key;
// GPT-2's scale_attn_by_inverse_layer_idx is StarCoder's layer scaling and
// is carried both ways.
TEST(Families, HuggingFaceExportRefusesWhatItCannotHold) {
  const ModelFamily& gpt2 = find_model("gpt2");
  auto spec = [](const std::string& extra) {
    std::string y = zoo::testing::tiny_params_yaml("/d", "/m");
    y.insert(y.find("  dropout_rate: 0.0\n"), extra);
    return params_from_node(config::load_yaml_string(y, "p.yaml"), "p.yaml", YAML::Node()).model;
  };
  for (const auto& [extra, key] : std::vector<std::pair<std::string, std::string>>{
           {"  embeddings_scale: 10.0\n", "model.embeddings_scale"},
           {"  output_logits_scale: 0.5\n", "model.output_logits_scale"},
           {"  scale_qk_dot_by_d: true\n", "model.scale_qk_dot_by_d"},
           {"  position_embedding_type: alibi\n", "model.position_embedding_type = alibi"},
           {"  embedding_layer_norm: true\n", "model.embedding_layer_norm"}}) {
    for (const char* type : {"gpt2", "llama"}) {
      try {
        gpt2.hf.at(type).config_to_hf(*spec(extra));
        ADD_FAILURE() << type << " exported " << extra;
      } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(key), std::string::npos) << e.what();
      }
    }
  }
  nlohmann::json config = gpt2.hf.at("gpt2").config_to_hf(*spec("  scale_qk_dot_by_layer_idx: true\n"));
  EXPECT_EQ(config.at("scale_attn_by_inverse_layer_idx"), true);
  EXPECT_TRUE(gpt2.hf.at("gpt2").config_from_hf(config)["scale_qk_dot_by_layer_idx"].as<bool>());
}

// Grouped-query attention with as many key/value groups as heads is
// multi-head attention: the same weights give the same logits, cached or not.
TEST(Families, GroupedQueryAttentionWithAGroupPerHeadIsFullAttention) {
  Gpt2Options o = tiny_gpt2();
  o.position_embedding_type = "rotary";
  Gpt2Model full(o, torch::TensorOptions());
  o.attention_module = "multiquery_attention";
  o.extra_attention_params.num_kv_groups = o.num_heads;
  Gpt2Model grouped(o, torch::TensorOptions());
  torch::manual_seed(3);
  full.reset_parameters();
  torch::NoGradGuard no_grad;
  auto source = full.named_parameters();
  for (auto& kv : grouped.named_parameters()) kv.value().copy_(source[kv.key()]);
  full.eval();
  grouped.eval();
  torch::Tensor ids = torch::randint(0, 50, {2, 12}, torch::kLong);
  EXPECT_TRUE(torch::allclose(grouped.logits(ids), full.logits(ids), 1e-6, 1e-6));
  EXPECT_TRUE(torch::allclose(cached_logits(grouped, ids, 4), full.logits(ids), 1e-5, 1e-5));
}
