// `zoo convert --model <name>-headless` for every decoder converter: Hugging
// Face's base model (GPT2Model, LlamaModel, ...: no LM head, keys without the
// transformer. / model. / gpt_neox. prefix). Each family's fixture writes its
// full model and the logits of a forward written from the published math; the
// test saves the base model from it as Hugging Face's base class saves it.
// Imported, the base model's layers must equal the full model's conversion bit
// for bit, its last hidden states must be the reference's (1e-5; the
// fixtures compute in float32, BERT's below in float64), with the original
// head the logits must be too, the head zoo adds must be initialized, and the
// export must give back the base model's file bit for bit with the base class
// in config.json.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "convert_fixtures.h"
#include "models/bert/bert.h"
#include "models/gpt2/gpt2.h"
#include "models/hf/headless.h"
#include "models/registry.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

const std::string kPyDecoder = zoo::testing::oracle("convert_families_decoder_prelude.py");

// dir/hf saved as the base model class saves itself: under the base prefix only, without it. Returns the prefix.
std::string save_base_model(const TempDir& dir) {
  auto full = convert::read_safetensors(dir / "hf/model.safetensors");
  std::string prefix;
  for (const char* p : {"transformer.", "model.", "gpt_neox."}) {
    size_t n = 0;
    for (const auto& [k, t] : full) n += k.rfind(p, 0) == 0;
    if (n * 2 > full.size()) prefix = p;
  }
  convert::TensorMap base;
  for (const auto& [k, t] : full)
    if (k.rfind(prefix, 0) == 0) base[k.substr(prefix.size())] = t;
  std::filesystem::create_directories(dir / "base");
  convert::write_safetensors(dir / "base/model.safetensors", base);
  return prefix;
}

void expect_headless_round_trip(const TempDir& dir, const std::string& converter, const std::string& base_class) {
  SCOPED_TRACE(converter);
  convert::run_convert({dir / "hf", converter, "hf", "zoo", std::nullopt, dir / "zoo"});
  const std::string prefix = save_base_model(dir);
  nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "hf/config.json"));
  config["architectures"] = {base_class};
  zoo::testing::write_file(dir / "base/config.json", config.dump());
  // config.json names the base class: zoo picks the headless converter itself.
  convert::run_convert({dir / "base", "", "hf", "zoo", std::nullopt, dir / "zoo_base"});
  const auto full = ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict();
  const auto base = ckpt::load_checkpoint_file(dir / "zoo_base/checkpoint_0.mdl").at("model").toGenericDict();
  ASSERT_EQ(full.size(), base.size());
  for (const auto& kv : full) {
    const std::string key = kv.key().toStringRef();
    ASSERT_TRUE(base.contains(key)) << key;
    const torch::Tensor b = base.at(key).toTensor();
    if (key.rfind("model.lm_head.", 0) == 0) {  // HF's base model has none: zoo's is initialized
      EXPECT_EQ(b.sizes(), kv.value().toTensor().sizes()) << key;
      if (key == "model.lm_head.weight") EXPECT_NEAR(b.std().item<double>(), 0.02, 0.004) << key;
      continue;
    }
    EXPECT_TRUE(torch::equal(b, kv.value().toTensor())) << key;
  }
  // The base layers with the original head give the reference logits.
  Params p = load_params(dir / "zoo_base/params.yaml", YAML::Node());
  auto model = p.model->build(torch::TensorOptions());
  c10::impl::GenericDict weights = base.copy();
  for (const auto& kv : full)
    if (kv.key().toStringRef().rfind("model.lm_head.", 0) == 0) weights.insert_or_assign(kv.key(), kv.value());
  ckpt::load_model_state_dict(*model, weights, true, "headless");
  model->eval();
  const int64_t tokens = static_cast<int64_t>(std::filesystem::file_size(dir / "ids.bin") / 8);
  const int64_t vocab = static_cast<int64_t>(std::filesystem::file_size(dir / "logits.bin") / 4) / tokens;
  torch::Tensor ids = zoo::testing::read_raw(dir / "ids.bin", torch::kLong, {2, tokens / 2});
  torch::Tensor expected = zoo::testing::read_raw(dir / "logits.bin", torch::kFloat, {2, tokens / 2, vocab});
  {
    torch::NoGradGuard no_grad;
    models::GenerationCache cache;
    EXPECT_LT((model->next_logits(ids, cache) - expected).abs().max().item<double>(), 1e-4);
    // The base model's output itself: the last hidden state, as the reference computes it.
    auto decoder = std::dynamic_pointer_cast<models::Gpt2Model>(model);
    ASSERT_TRUE(decoder);
    const torch::Tensor hidden = decoder->hidden_states(ids);
    const torch::Tensor reference = zoo::testing::read_raw(dir / "hidden.bin", torch::kFloat, hidden.sizes().vec());
    EXPECT_LT((hidden - reference).abs().max().item<double>(), 1e-5);
  }
  convert::run_convert(
      {dir / "zoo_base/checkpoint_0.mdl", converter + "-headless", "zoo", "hf", std::nullopt, dir / "base_back"});
  // Every tensor comes back, bit for bit, but those the full converter's export leaves out too (buffers HF
  // rebuilds, as GPT-2's attn.bias mask, and tied copies).
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", converter, "zoo", "hf", std::nullopt, dir / "full_back"});
  std::set<std::string> full_back;  // without the base prefix (BLOOM's fixture saves its base model's keys)
  for (const auto& [k, t] : convert::read_safetensors(dir / "full_back/model.safetensors"))
    full_back.insert(!prefix.empty() && k.rfind(prefix, 0) == 0 ? k.substr(prefix.size())
                     : k.rfind("transformer.", 0) == 0          ? k.substr(12)
                                                                : k);
  const auto original = convert::read_safetensors(dir / "base/model.safetensors");
  const auto back_tensors = convert::read_safetensors(dir / "base_back/model.safetensors");
  size_t compared = 0;
  for (const auto& [k, t] : original) {
    if (!full_back.count(k)) continue;
    ASSERT_TRUE(back_tensors.count(k)) << k << " did not come back";
    EXPECT_TRUE(torch::equal(t, back_tensors.at(k))) << k;
    ++compared;
  }
  EXPECT_EQ(compared, back_tensors.size()) << "the export wrote tensors the base model did not have";
  const auto back = nlohmann::json::parse(zoo::testing::read_file(dir / "base_back/config.json"));
  EXPECT_EQ(back["architectures"], nlohmann::json::array({base_class}));
  EXPECT_EQ(back["model_type"], config["model_type"]);
}

// One family's fixture (with `preamble` first) in a fresh directory, then the round trip.
void check(const std::string& converter, const std::string& base_class, const std::string& script,
           const std::string& preamble = "", const nlohmann::json& case_json = nullptr) {
  TempDir dir;
  if (!case_json.is_null()) zoo::testing::write_file(dir / "case.json", case_json.dump());
  zoo::testing::run_fixture(dir, converter + ".py", preamble + script);
  if (::testing::Test::HasFatalFailure()) return;
  expect_headless_round_trip(dir, converter, base_class);
}

}  // namespace

TEST(ConvertHeadless, BaseArchitectureNames) {
  EXPECT_EQ(models::base_architecture("GPT2LMHeadModel"), "GPT2Model");
  EXPECT_EQ(models::base_architecture("BTLMLMHeadModel"), "BTLMModel");
  EXPECT_EQ(models::base_architecture("LlamaForCausalLM"), "LlamaModel");
  EXPECT_EQ(models::base_architecture("BertForPreTraining"), "BertModel");
  EXPECT_EQ(models::base_architecture("GPTNeoXModel"), "GPTNeoXModel");
}

TEST(ConvertHeadless, EveryDecoderFamilyRoundTripsItsBaseModel) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  const std::string decoder = kPyDecoder;
  check("gpt2", "GPT2Model", zoo::testing::oracle("convert_make_hf.py"));
  check("gpt-neox", "GPTNeoXModel", zoo::testing::oracle("convert_make_neox.py"));
  for (const std::string t : {"gptj", "codegen"})
    check(t, t == "gptj" ? "GPTJModel" : "CodeGenModel", zoo::testing::oracle("convert_families_gptj_codegen.py"),
          decoder + "MODEL_TYPE = \"" + t + "\"\n");
  for (const std::string t : {"btlm", "jais"})
    check(t, t == "btlm" ? "BTLMModel" : "JAISModel", zoo::testing::oracle("convert_families_btlm_jais.py"),
          decoder + "MODEL_TYPE = \"" + t + "\"\n");
  for (const char* falcon_new : {"False", "True"})
    check("falcon", "FalconModel", zoo::testing::oracle("convert_families_make_falcon.py"),
          decoder + "FALCON_NEW = " + falcon_new + "\n");
  check("bloom", "BloomModel", zoo::testing::oracle("convert_families_make_bloom.py"), decoder);
  check("mpt", "MptModel", zoo::testing::oracle("convert_families_make_mpt.py"), decoder);
  check("santacoder", "GPT2CustomModel", zoo::testing::oracle("convert_families_make_santacoder.py"), decoder);
  check("starcoder", "GPTBigCodeModel", zoo::testing::oracle("convert_families_make_starcoder.py"),
        decoder + "MULTI_QUERY = True\n");
  const nlohmann::json llama = {
      {"model_type", "llama"}, {"rope_scaling", nullptr}, {"head_dim", nullptr}, {"experts", 0}, {"bias", ""},
      {"theta", 10000.0},      {"rope_parameters", false}};
  for (const std::string t : {"llama", "mistral", "qwen2", "qwen3", "mixtral"}) {
    nlohmann::json c = llama;
    c["model_type"] = t;
    if (t == "mixtral") c["experts"] = 4;
    if (t == "qwen2") c["bias"] = "qkv";
    const std::string cls = t == "llama"     ? "LlamaModel"
                            : t == "mistral" ? "MistralModel"
                            : t == "qwen2"   ? "Qwen2Model"
                            : t == "qwen3"   ? "Qwen3Model"
                                             : "MixtralModel";
    check(t, cls, zoo::testing::oracle("convert_llama_make_llama.py"), "", c);
  }
  for (const bool gemma2 : {false, true})
    check(gemma2 ? "gemma2" : "gemma", gemma2 ? "Gemma2Model" : "GemmaModel",
          zoo::testing::oracle("convert_llama_make_gemma.py"), "",
          {{"gemma2", gemma2},
           {"layer_types", nullptr},
           {"theta", 10000.0},
           {"rope_parameters", false},
           {"bf16_norm", false}});
}

// Hugging Face's BertModel (no heads, keys without bert., a pooler): its last hidden states and pooled [CLS] state
// equal a float64 reference to 1e-5; zoo keeps the next-sentence head (the pooler says so) and both heads are
// initialized; the export is the base model's file bit for bit.
TEST(ConvertHeadless, BertBaseModelMatchesAFloat64ReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir;
  zoo::testing::run_fixture(dir, "bert.py", zoo::testing::oracle("bert_convert_make_bert.py"), "base");
  if (::testing::Test::HasFatalFailure()) return;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_FALSE(params["model"]["disable_nsp"].as<bool>());
  auto model = std::dynamic_pointer_cast<models::BertModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  const auto saved = ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict();
  EXPECT_TRUE(saved.contains("model.bert_cls_head.classifier.ffn.0.linear_layer.weight"));
  EXPECT_TRUE(saved.contains("model.bert_mlm_head.mlm_transform.ffn.ffn.0.linear_layer.weight"));
  using zoo::testing::read_raw;
  const torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12}),
                      types = read_raw(dir / "types.bin", torch::kLong, {2, 12}),
                      mask = read_raw(dir / "mask.bin", torch::kLong, {2, 12});
  torch::NoGradGuard no_grad;
  const auto [hidden, pooled] = model->bert_encoder->forward(ids, mask, types, {});
  const torch::Tensor real = mask.to(torch::kBool).unsqueeze(-1);
  const torch::Tensor expected = read_raw(dir / "mlm.bin", torch::kDouble, {2, 12, 32});
  EXPECT_LT(((hidden.to(torch::kDouble) - expected) * real).abs().max().item<double>(), 1e-5);
  const torch::Tensor expected_pooled = read_raw(dir / "pooled.bin", torch::kDouble, {2, 32});
  EXPECT_LT((pooled.to(torch::kDouble) - expected_pooled).abs().max().item<double>(), 1e-5);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "bert-headless", "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors",
                                            {"embeddings.position_ids"});
  const auto config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config["architectures"], nlohmann::json::array({"BertModel"}));
  EXPECT_EQ(models::hf_converter_for(config), "bert-headless");
}

TEST(ConvertHeadless, ConvertListNamesEveryConverter) {
  const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " convert --list");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const auto& name : models::hf_converter_names())
    EXPECT_NE(r.output.find("\n  " + name + " "), std::string::npos) << name << "\n" << r.output;
  for (const char* name : {"llama-headless", "gpt2-headless", "falcon-headless", "bert-headless", "bert-qa"})
    EXPECT_NE(r.output.find("\n  " + std::string(name) + " "), std::string::npos) << name;
  EXPECT_NE(r.output.find("bert-qa                   zoo model bert/qa; config.json model_type bert"),
            std::string::npos)
      << r.output;
}
