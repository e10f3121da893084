// zoo convert for GPT-J, CodeGen, Falcon, BLOOM, MPT, BTLM, Jais, SantaCoder
// and StarCoder. For each, Python writes a tiny random checkpoint in the Hugging Face
// model's own layout and key names, and the logits of that model's forward
// pass written here from its published math (transformers cannot be
// installed here). zoo must convert it (picking the converter from
// config.json's model_type), give those logits to 1e-5, and convert back to
// the same tensors bit for bit. Config fields zoo cannot represent, and
// exports the target cannot hold, must be refused by name.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "convert_fixtures.h"
#include "models/registry.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::expect_refused;
using zoo::testing::TempDir;

namespace {

// The shared pieces of the reference forwards, written from the papers and
// model cards, not from zoo's code.
const std::string kPyDecoder = zoo::testing::oracle("convert_families_decoder_prelude.py");

// Converts the fixture's dir/hf with the converter its model_type picks,
// checks the logits, converts back with `converter` and checks every tensor
// (but the fixture's HF_ONLY) comes back bit for bit under its name (or with
// "transformer." added: a base model's keys). `more` checks the rest.
void expect_converts(const std::string& converter, const std::string& fixture,
                     const std::function<void(const TempDir&)>& more = {}) {
  TempDir dir;
  zoo::testing::run_fixture(dir, converter + ".py", std::string(kPyDecoder) + fixture);
  if (::testing::Test::HasFatalFailure()) return;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = zoo::testing::load_converted(dir);
  torch::Tensor ids = zoo::testing::read_raw(dir / "ids.bin", torch::kLong, {2, 12});
  torch::Tensor expected = zoo::testing::read_raw(dir / "logits.bin", torch::kFloat, {2, 12, 50});
  {
    torch::NoGradGuard no_grad;
    models::GenerationCache cache;
    EXPECT_LT((model->next_logits(ids, cache) - expected).abs().max().item<double>(), 1e-5) << converter;
  }
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", converter, "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  std::string hf_only = zoo::testing::read_file(dir / "hf_only.txt");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (("\n" + hf_only + "\n").find("\n" + k + "\n") != std::string::npos) continue;
    const std::string name = back.count(k) ? k : "transformer." + k;
    ASSERT_TRUE(back.count(name)) << converter << ": " << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back[name])) << converter << ": " << k;
    ++compared;
  }
  EXPECT_EQ(compared, back.size()) << converter << ": the export wrote tensors the original did not have";
  if (more) more(dir);
}

nlohmann::json read_json(const std::string& path) { return nlohmann::json::parse(zoo::testing::read_file(path)); }

// hf/config.json changed by `edit`, converted again: an error naming `parts`.
void expect_config_refused(const TempDir& dir, const std::function<void(nlohmann::json&)>& edit,
                           const std::vector<std::string>& parts) {
  nlohmann::json c = read_json(dir / "hf/config.json");
  edit(c);
  zoo::testing::write_file(dir / "edited.json", c.dump());
  expect_refused(
      [&] {
        convert::run_convert({dir / "hf", "", "hf", "zoo", std::string(dir / "edited.json"), dir / "z2"});
      },
      parts);
}

bool have_python() { return zoo::testing::have_fixture_torch(); }
#define SKIP_WITHOUT_PYTHON() \
  if (!have_python()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed"

}  // namespace

// GPT-J: separate q/k/v without biases, one norm feeding attention and FFN in
// parallel, partial rotary on interleaved pairs, a biased LM head.
// CodeGen: GPT-J's math with q/k/v fused into qkv_proj as saved from 4
// model-parallel shards, each [queries; values; keys] of 2 of the 8 heads.
TEST(ConvertFamilies, GptJAndCodeGen) {
  SKIP_WITHOUT_PYTHON();
  for (const std::string model_type : {"gptj", "codegen"}) {
    SCOPED_TRACE(model_type);
    const std::string fixture = zoo::testing::oracle("convert_families_gptj_codegen.py");
    expect_converts(model_type, "MODEL_TYPE = \"" + model_type + "\"\n" + fixture, [&](const TempDir& dir) {
      auto c = read_json(dir / "back/config.json");
      EXPECT_EQ(c["model_type"], model_type);
      EXPECT_EQ(c["architectures"][0], model_type == "codegen" ? "CodeGenForCausalLM" : "GPTJForCausalLM");
      EXPECT_EQ(c["rotary_dim"], 2);
      expect_config_refused(dir, [](nlohmann::json& c) { c["rotary_dim"] = nullptr; }, {"rotary_dim = null"});
    });
  }
}

// The Falcon fixture: FALCON_NEW false is Falcon 7B (one key/value head,
// one norm, tied head, no biases); true the new decoder architecture
// (key/value groups, ln_attn and ln_mlp, biases, untied head).
const std::string kPyFalcon = zoo::testing::oracle("convert_families_make_falcon.py");

TEST(ConvertFamilies, Falcon7BMultiQuery) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("falcon", std::string("FALCON_NEW = False\n") + kPyFalcon, [](const TempDir& dir) {
    auto c = read_json(dir / "back/config.json");
    EXPECT_EQ(c["multi_query"], true);
    EXPECT_EQ(c["new_decoder_architecture"], false);
    EXPECT_EQ(c["rope_theta"], 500.0);
    auto p = YAML::LoadFile(dir / "zoo/params.yaml");
    EXPECT_EQ(p["model"]["extra_attention_params"]["num_kv_groups"].as<int>(), 1);
    EXPECT_FALSE(p["model"]["use_untied_layer_norm"].as<bool>());
    expect_config_refused(dir, [](nlohmann::json& c) { c["alibi"] = true; }, {"config.json: alibi = true"});
    // Falcon ships bfloat16 weights: they become the model's float32, value for value.
    auto weights = convert::read_safetensors(dir / "hf/model.safetensors");
    for (auto& [k, t] : weights) t = t.to(torch::kBFloat16);
    std::filesystem::create_directories(dir / "hf16");
    convert::write_safetensors(dir / "hf16/model.safetensors", weights);
    std::filesystem::copy_file(dir / "hf/config.json", dir / "hf16/config.json");
    convert::run_convert({dir / "hf16", "", "hf", "zoo", std::nullopt, dir / "zoo16"});
    auto saved = ckpt::load_checkpoint_file(dir / "zoo16/checkpoint_0.mdl").at("model").toGenericDict();
    torch::Tensor wte = saved.at("model.embedding_layer.word_embeddings.weight").toTensor();
    EXPECT_EQ(wte.scalar_type(), torch::kFloat);
    EXPECT_TRUE(torch::equal(wte, weights.at("transformer.word_embeddings.weight").to(torch::kFloat)));
    expect_config_refused(dir, [](nlohmann::json& c) { c["parallel_attn"] = false; }, {"parallel_attn = false"});
  });
}

TEST(ConvertFamilies, FalconNewDecoderArchitecture) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("falcon", std::string("FALCON_NEW = True\n") + kPyFalcon, [](const TempDir& dir) {
    auto c = read_json(dir / "back/config.json");
    EXPECT_EQ(c["new_decoder_architecture"], true);
    EXPECT_EQ(c["num_kv_heads"], 2);
    EXPECT_EQ(c["bias"], true);
    // Falcon 40B's original config.json: model_type RefinedWeb, n_head_kv, no new_decoder_architecture.
    nlohmann::json old{{"model_type", "RefinedWeb"},
                       {"vocab_size", 50},
                       {"n_embed", 32},
                       {"n_layer", 2},
                       {"n_head", 4},
                       {"n_head_kv", 2},
                       {"bias", true},
                       {"parallel_attn", true},
                       {"ffn_hidden_size", 64}};
    YAML::Node m = models::find_hf_converter(models::hf_converter_for(old)).config_from_hf(old);
    EXPECT_TRUE(m["use_untied_layer_norm"].as<bool>());
    EXPECT_EQ(m["extra_attention_params"]["num_kv_groups"].as<int>(), 2);
  });
}

// BLOOM: a norm after the embeddings, ALiBi for 6 heads (not a power of
// two), query_key_value per head, tanh GELU; saved as a base model (no
// "transformer." prefix), as bloom-560m is.
TEST(ConvertFamilies, BloomWithSixHeadsAndBaseModelKeys) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("bloom", zoo::testing::oracle("convert_families_make_bloom.py"), [](const TempDir& dir) {
    expect_config_refused(dir, [](nlohmann::json& c) { c["apply_residual_connection_post_layernorm"] = true; },
                          {"apply_residual_connection_post_layernorm = true"});
    // A BLOOM is no MPT: the export names what MPT cannot hold, and writes nothing.
    expect_refused(
        [&] {
          convert::run_convert({dir / "zoo/checkpoint_0.mdl", "mpt", "zoo", "hf", std::nullopt, dir / "as_mpt"});
        },
        {"model.embedding_layer_norm = true", "Hugging Face's mpt"});
    EXPECT_FALSE(std::filesystem::exists(dir / "as_mpt/model.safetensors"));
  });
}

// MPT: biasless LayerNorms and projections, Wqkv as [q; k; v], exact GELU,
// and MPT's own ALiBi slopes (alibi_bias_max 8) for 6 heads.
TEST(ConvertFamilies, MptWithSixHeads) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("mpt", zoo::testing::oracle("convert_families_make_mpt.py"), [](const TempDir& dir) {
    // Only MPT's config.json holds this model: the export needs no --model.
    convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "auto"});
    EXPECT_EQ(read_json(dir / "auto/config.json")["model_type"], "mpt");
    expect_config_refused(dir, [](nlohmann::json& c) { c["attn_config"]["clip_qkv"] = 6.0; },
                          {"config.json: attn_config.clip_qkv = 6.0"});
    expect_config_refused(dir, [](nlohmann::json& c) { c["attn_config"]["alibi_bias_max"] = 16; },
                          {"attn_config.alibi_bias_max = 16"});
    expect_config_refused(dir, [](nlohmann::json& c) { c["attn_config"]["attn_type"] = "grouped_query_attention"; },
                          {"attn_config.attn_type = \"grouped_query_attention\""});
  });
}

// BTLM and Jais (one layout): GPT-2's Conv1D layout with SwiGLU (c_fc2 the
// gate), stored ALiBi slopes and muP (embeddings, scores / head dim, logits
// scaled).
TEST(ConvertFamilies, BtlmAndJaisWithMuP) {
  SKIP_WITHOUT_PYTHON();
  for (const std::string model_type : {"btlm", "jais"}) {
    SCOPED_TRACE(model_type);
    std::string fixture = zoo::testing::oracle("convert_families_btlm_jais.py");
    expect_converts(model_type, "MODEL_TYPE = \"" + model_type + "\"\n" + fixture, [&](const TempDir& dir) {
      auto p = YAML::LoadFile(dir / "zoo/params.yaml");
      EXPECT_EQ(p["optimizer"]["adjust_learning_rate"]["decoder_kernel"].as<double>(), 0.5);
      EXPECT_EQ(p["model"]["output_logits_scale"].as<double>(), 0.75);
      auto c = read_json(dir / "back/config.json");
      EXPECT_EQ(c["mup_output_alpha"].get<double>() * c["mup_width_scale"].get<double>(), 0.75);
      EXPECT_EQ(c["mup_embeddings_scale"], 3.0);
      expect_config_refused(dir,
                            [](nlohmann::json& c) {
                              c["alibi_scaling"] = {{"type", "linear"}, {"factor", 2}};
                            },
                            {"alibi_scaling"});
      EXPECT_EQ(c["model_type"], model_type);
      EXPECT_EQ(c["architectures"][0], model_type == "jais" ? "JAISLMHeadModel" : "BTLMLMHeadModel");
    });
  }
}

// SantaCoder (BigCode's remote-code GPT-2, model_type gpt2): Conv1D q_attn
// and a fused [k; v] kv_attn for one key/value head, scores also divided by
// the layer's index + 1.
TEST(ConvertFamilies, SantaCoderMultiQuery) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("santacoder", zoo::testing::oracle("convert_families_make_santacoder.py"), [](const TempDir& dir) {
    auto c = read_json(dir / "back/config.json");
    EXPECT_EQ(c["attention_head_type"], "multiquery");
    EXPECT_EQ(c["scale_attn_by_inverse_layer_idx"], true);
    // Plain GPT-2 has no multi-query attention: refused by name.
    expect_refused(
        [&] {
          convert::run_convert({dir / "zoo/checkpoint_0.mdl", "gpt2", "zoo", "hf", std::nullopt, dir / "g"});
        },
        {"model.attention_module = multiquery_attention", "--model santacoder or starcoder"});
  });
}

// StarCoder (transformers' GPTBigCode): nn.Linear weights, c_attn per key/value
// group: [q; k; v] with one key/value head, or per head [q_h; k_h; v_h].
const std::string kPyStarcoder = zoo::testing::oracle("convert_families_make_starcoder.py");

TEST(ConvertFamilies, StarCoderMultiQuery) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("starcoder", std::string("MULTI_QUERY = True\n") + kPyStarcoder, [](const TempDir& dir) {
    EXPECT_EQ(read_json(dir / "back/config.json")["multi_query"], true);
    // SantaCoder's and StarCoder's layouts both hold a multi-query GPT-2: the export asks which.
    expect_refused(
        [&] {
          convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "a"});
        },
        {"pass --model", "the model exports as santacoder, starcoder"});
  });
}

TEST(ConvertFamilies, StarCoderMultiHead) {
  SKIP_WITHOUT_PYTHON();
  expect_converts("starcoder", std::string("MULTI_QUERY = False\n") + kPyStarcoder,
                  [](const TempDir& dir) { EXPECT_EQ(read_json(dir / "back/config.json")["multi_query"], false); });
}
