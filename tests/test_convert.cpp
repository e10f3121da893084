// Hugging Face <-> zoo conversion for GPT-2: a tiny HF-format model written
// by Python is converted, its zoo logits match a GPT-2 forward pass computed
// in Python from the HF weights, the round trip HF -> zoo -> HF is bitwise
// equal, and bad inputs name what is wrong.
#include <gtest/gtest.h>

#include "convert_fixtures.h"
#include "models/registry.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/checkpoint/torch_pickle.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::load_converted;
using zoo::testing::read_raw;
using zoo::testing::run_fixture;

namespace {

// Writes hf/model.safetensors + hf/config.json for a tiny GPT-2 with random
// weights, and ids.bin / logits.bin: GPT-2's forward pass (Conv1D, gelu_new,
// tied lm_head) written out with torch ops.
const std::string kMakeHf = zoo::testing::oracle("convert_make_hf.py");

}  // namespace

TEST(Convert, Gpt2FromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  run_fixture(dir, "make_hf.py", kMakeHf);

  convert::run_convert({dir / "hf", "gpt2", "hf", "zoo", std::nullopt, dir / "zoo"});
  // The written params validate and rebuild the model the checkpoint fits.
  Params p = load_params(dir / "zoo/params.yaml", YAML::Node());
  EXPECT_EQ(p.runconfig.load_checkpoint_states.value().items, std::set<std::string>{"model"});
  EXPECT_EQ(p.runconfig.checkpoint_path.value(), dir / "zoo/checkpoint_0.mdl");
  auto model = load_converted(dir);
  torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12});
  torch::Tensor expected = read_raw(dir / "logits.bin", torch::kFloat, {2, 12, 50});
  torch::NoGradGuard no_grad;
  models::GenerationCache cache;
  torch::Tensor logits = model->next_logits(ids, cache);
  EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-5);

  // zoo -> HF gives back the same tensors, bit for bit (HF's mask buffers aside).
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "gpt2", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  for (auto it = original.begin(); it != original.end();)
    it = it->first.find(".attn.bias") != std::string::npos ? original.erase(it) : std::next(it);
  ASSERT_EQ(original.size(), back.size());
  for (const auto& [k, t] : original) {
    ASSERT_TRUE(back.count(k)) << k;
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
  }
  // pytorch_model.bin (torch.save) converts to the same zoo weights.
  convert::run_convert({dir / "hf_bin", "gpt2", "hf", "zoo", std::nullopt, dir / "zoo_bin"});
  auto from_st = ckpt::load_checkpoint_file(dir / "zoo/checkpoint_0.mdl").at("model").toGenericDict();
  auto from_bin = ckpt::load_checkpoint_file(dir / "zoo_bin/checkpoint_0.mdl").at("model").toGenericDict();
  ASSERT_EQ(from_st.size(), from_bin.size());
  for (const auto& kv : from_st) EXPECT_TRUE(torch::equal(kv.value().toTensor(), from_bin.at(kv.key()).toTensor()));
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["n_embd"], 16);
  EXPECT_EQ(cfg["activation_function"], "gelu_new");
}

TEST(Convert, MissingAndUnexpectedKeysAreNamed) {
  zoo::testing::TempDir dir;
  convert::TensorMap t = {{"transformer.wte.weight", torch::zeros({10, 8})},
                          {"transformer.wpe.weight", torch::zeros({4, 8})},
                          {"transformer.extra.weight", torch::zeros({2})}};
  std::filesystem::create_directories(dir / "hf");
  convert::write_safetensors(dir / "hf/model.safetensors", t);
  zoo::testing::write_file(dir / "hf/config.json",
                           R"({"vocab_size": 10, "n_embd": 8, "n_layer": 1, "n_head": 2, "n_positions": 4})");
  try {
    convert::run_convert({dir / "hf", "gpt2", "hf", "zoo", std::nullopt, dir / "zoo"});
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("missing Hugging Face keys: transformer.h.0.ln_1.weight"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("unexpected Hugging Face keys: transformer.extra.weight"), std::string::npos)
        << e.what();
  }
  // A sharded checkpoint: the index's weight_map names each tensor's file.
  std::filesystem::create_directories(dir / "sharded");
  convert::write_safetensors(dir / "sharded/model-00001-of-00002.safetensors", {{"a", torch::ones({2})}});
  convert::write_safetensors(dir / "sharded/model-00002-of-00002.safetensors", {{"b", torch::zeros({3, 1})}});
  zoo::testing::write_file(dir / "sharded/model.safetensors.index.json",
                           R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", )"
                           R"("b": "model-00002-of-00002.safetensors"}})");
  auto shards = convert::read_hf_weights(dir / "sharded");
  ASSERT_EQ(shards.size(), 2u);
  EXPECT_TRUE(torch::equal(shards["b"], torch::zeros({3, 1})));
  zoo::testing::write_file(dir / "bad.safetensors", "xx");
  EXPECT_THROW(convert::read_safetensors(dir / "bad.safetensors"), std::runtime_error);
  EXPECT_THROW(convert::read_hf_weights(dir / "nowhere"), std::runtime_error);
}

// Files written by Python's torch.save: dtypes, views over shared storages,
// non-contiguous tensors and nested dicts come back exactly.
TEST(Convert, ReadsTorchSaveFiles) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  run_fixture(dir, "save.py", zoo::testing::oracle("convert_save.py"));
  auto expected = convert::read_safetensors(dir / "expected.safetensors");
  auto got = convert::tensor_dict(convert::read_torch_save(dir / "state.pt"));
  ASSERT_EQ(got.size(), expected.size());
  for (const auto& [k, t] : expected) {
    ASSERT_TRUE(got.count(k)) << k;
    EXPECT_EQ(got[k].scalar_type(), t.scalar_type()) << k;
    EXPECT_TRUE(torch::equal(got[k], t)) << k;
  }
  // As a checkpoint: {"model": state dict, "global_step": 7} loads as model weights and step.
  auto ckpt = ckpt::load_checkpoint_file(dir / "ckpt.pt");
  EXPECT_EQ(ckpt.at("global_step").toInt(), 7);
  EXPECT_TRUE(torch::equal(ckpt.at("model").toGenericDict().at("a.t").toTensor(), expected["a.t"]));
  zoo::testing::write_file(dir / "junk.pt", "PK not really a zip");
  EXPECT_THROW(ckpt::load_checkpoint_file(dir / "junk.pt"), std::runtime_error);
}

// GPT-NeoX: a tiny Hugging Face checkpoint (fused query_key_value laid out
// per head, partial rotary in NeoX's half-split layout, untied norms,
// parallel residual) converts to zoo's gptj family with the logits of NeoX's
// forward written in Python, and back to the same tensors bit for bit.
TEST(Convert, GptNeoxFromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  zoo::testing::TempDir dir;
  run_fixture(dir, "make_neox.py", zoo::testing::oracle("convert_make_neox.py"));
  convert::run_convert({dir / "hf", "gpt-neox", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = load_converted(dir);
  torch::Tensor ids = read_raw(dir / "ids.bin", torch::kLong, {2, 12});
  torch::Tensor expected = read_raw(dir / "logits.bin", torch::kFloat, {2, 12, 50});
  torch::NoGradGuard no_grad;
  models::GenerationCache cache;
  EXPECT_LT((model->next_logits(ids, cache) - expected).abs().max().item<double>(), 1e-5);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "gpt-neox", "zoo", "hf", std::nullopt, dir / "back"});
  auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  auto back = convert::read_safetensors(dir / "back/model.safetensors");
  for (auto it = original.begin(); it != original.end();)
    it = it->first.find("rotary_emb.inv_freq") != std::string::npos ? original.erase(it) : std::next(it);
  ASSERT_EQ(original.size(), back.size());
  for (const auto& [k, t] : original) {
    ASSERT_TRUE(back.count(k)) << k;
    EXPECT_TRUE(torch::equal(t, back[k])) << k;
  }
  auto cfg = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(cfg["rotary_pct"], 0.5);
  EXPECT_EQ(cfg["rotary_emb_base"], 1000.0);
  // A sequential NeoX (use_parallel_residual false) is refused by name, not converted to another model.
  auto config = nlohmann::json::parse(zoo::testing::read_file(dir / "hf/config.json"));
  config["use_parallel_residual"] = false;
  zoo::testing::write_file(dir / "hf/config.json", config.dump());
  try {
    convert::run_convert({dir / "hf", "gpt-neox", "hf", "zoo", std::nullopt, dir / "zoo2"});
    ADD_FAILURE() << "a sequential NeoX converted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("use_parallel_residual = false"), std::string::npos) << e.what();
  }
}
