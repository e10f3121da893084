// zoo convert for Hugging Face's LLaVA (models/llava/hf_adapter): a tiny
// LlavaForConditionalGeneration written by a Python fixture from HF's math
// (CLIP: [CLS] first, pre_layrnorm, hidden_states[vision_feature_layer];
// linear_1 / gelu / linear_2; LLaMA with half-split rotary; the image
// features at the <image> tokens), read by zoo to the same logits, exported
// back bit for bit, read in transformers 4.52+'s key layout too, and
// config.json's omitted fields taken at HF's defaults.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "convert_fixtures.h"
#include "models/llava/llava.h"
#include "models/multimodal_simple/multimodal_simple.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// HF's LLaVA on 8 x 8 images: CLIP (width 8, 2 heads, 3 layers, 4 x 4
// patches), a 2-layer projector to width 12, and LLaMA (3 heads, 2 layers,
// vocabulary 37 with <image> = 36). Sample 0 holds its image's 4 tokens at
// positions 1..4; the logits are HF's forward of that.
const std::string kPyHfLlava = zoo::testing::oracle("llava_convert_make_llava.py");

}  // namespace

TEST(ConvertLlava, FromHuggingFaceMatchesItsForwardAndRoundTrips) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir;
  zoo::testing::run_fixture(dir, "llava.py", kPyHfLlava);
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = std::dynamic_pointer_cast<models::LlavaModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  // vision_feature_layer -2 of 3 layers: hidden_states[2], the output of layer 1.
  EXPECT_EQ(params["model"]["image_feature_select_layer_idx"].as<int64_t>(), 1);
  EXPECT_EQ(params["model"]["image_model"]["nonlinearity"].as<std::string>(), "quick_gelu");
  EXPECT_EQ(params["model"]["text_model"]["name"].as<std::string>(), "LlamaModel");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "LlavaHDF5MapDataProcessor");
  EXPECT_EQ(params["train_input"]["image_data_size"][2].as<int64_t>(), 8);

  torch::NoGradGuard no_grad;
  models::Features batch = {{"image_data", zoo::testing::read_raw(dir / "images.bin", torch::kFloat, {2, 3, 8, 8})},
                            {"text_input_ids", zoo::testing::read_raw(dir / "ids.bin", torch::kLong, {2, 10})}};
  const torch::Tensor expected = zoo::testing::read_raw(dir / "logits.bin", torch::kFloat, {2, 10, 37});
  const torch::Tensor logits = model->padded_logits(batch).narrow(2, 0, 37);
  EXPECT_LT((logits - expected).abs().max().item<double>(), 1e-5);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors");
  const auto original = convert::read_safetensors(dir / "hf/model.safetensors");
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("vision_feature_layer"), -2);
  EXPECT_EQ(config.at("vision_feature_select_strategy"), "default");
  EXPECT_EQ(config.at("vision_config").at("hidden_act"), "quick_gelu");
  EXPECT_EQ(config.at("text_config").at("num_hidden_layers"), 2);

  // transformers 4.52+ saves model.language_model.*, model.vision_tower.*,
  // model.multi_modal_projector.* and lm_head: the same model.
  models::StateDict renamed;
  for (const auto& [k, t] : original) {
    std::string key = k;
    if (key.rfind("language_model.model.", 0) == 0) key = "model.language_model." + key.substr(21);
    else if (key == "language_model.lm_head.weight") key = "lm_head.weight";
    else key = "model." + key;
    renamed[key] = t;
  }
  Params p = load_params(dir / "zoo/params.yaml", YAML::Node());
  const auto& adapter = models::find_hf_converter("llava");
  const models::StateDict hub = adapter.from_hf(models::StateDict(original.begin(), original.end()), *p.model);
  const models::StateDict newer = adapter.from_hf(renamed, *p.model);
  ASSERT_EQ(hub.size(), newer.size());
  for (const auto& [k, t] : hub) EXPECT_TRUE(torch::equal(t, newer.at(k))) << k;
}

// The same checkpoint in modelzoo's multimodal_simple layout (--model
// mmsimple-llava, as modelzoo's converter of that name): one tower at its
// image_layer_idx, the projector as the global image projection, the
// features where image_data_loc says; the same logits, exported back bit
// for bit. A model HF's LLaVA cannot hold is refused naming the key.
TEST(ConvertLlava, IntoMultimodalSimplesLayoutAndBack) {
  ZOO_SKIP_WITHOUT_FIXTURE_TORCH();
  TempDir dir;
  zoo::testing::run_fixture(dir, "llava.py", kPyHfLlava);
  convert::run_convert({dir / "hf", "mmsimple-llava", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = std::dynamic_pointer_cast<models::MultimodalSimpleModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["model"]["image_model_list"]["image_models"][0]["image_encoder"]["image_layer_idx"].as<int64_t>(),
            1);
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "MultimodalSimpleHDF5MapDataProcessor");
  torch::NoGradGuard no_grad;
  models::Features batch = {{"image_data", zoo::testing::read_raw(dir / "images.bin", torch::kFloat, {2, 1, 3, 8, 8})},
                            {"image_data_loc", torch::arange(1, 5, torch::kLong).expand({2, 1, 4})},
                            {"text_input_ids", zoo::testing::read_raw(dir / "ids.bin", torch::kLong, {2, 10})}};
  const torch::Tensor expected = zoo::testing::read_raw(dir / "logits.bin", torch::kFloat, {2, 10, 37});
  EXPECT_LT((model->padded_logits(batch).narrow(2, 0, 37) - expected).abs().max().item<double>(), 1e-5);
  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "", "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors");

  YAML::Node two = YAML::Clone(params["model"]);
  two.remove("name");
  two["image_model_list"]["image_models"].push_back(YAML::Clone(two["image_model_list"]["image_models"][0]));
  two["image_model_list"]["global_image_projection"]["input_unit"] = 8;
  auto spec = models::find_model("multimodal_simple").parse(two, config::Context{"m.yaml", "model"});
  zoo::testing::expect_refused([&] { models::find_hf_converter("mmsimple-llava").config_to_hf(*spec); },
                               {"model.image_model_list.image_models = 2 towers", "has one vision tower"});
}

// What zoo's llava cannot say in HF's terms, and HF's LLaVA variants zoo
// does not convert, are errors naming the field.
TEST(ConvertLlava, UnconvertibleConfigsAreNamed) {
  const auto& adapter = models::find_hf_converter("llava");
  zoo::testing::expect_refused(
      [&] {
        adapter.config_from_hf({{"model_type", "llava"}, {"vision_feature_layer", {-2, -5}}});
      },
      {"vision_feature_layer", "several layers"});
  zoo::testing::expect_refused(
      [&] {
        adapter.config_from_hf({{"model_type", "llava"}, {"vision_config", {{"model_type", "siglip_vision_model"}}}});
      },
      {"vision_config", "model_type", "CLIP"});
  zoo::testing::expect_refused(
      [&] {
        adapter.config_from_hf({{"model_type", "llava"}, {"text_config", {{"model_type", "gemma"}}}});
      },
      {"text_config.model_type", "gemma"});
  // LLaVA-1.5-7B's config.json leaves CLIP's width and LLaMA's shape to their defaults.
  const YAML::Node m = adapter.config_from_hf(nlohmann::json::parse(R"({"model_type": "llava",
      "vision_config": {"model_type": "clip_vision_model", "hidden_size": 1024, "image_size": 336,
                        "intermediate_size": 4096, "num_attention_heads": 16, "num_hidden_layers": 24, "patch_size": 14},
      "text_config": {"model_type": "llama", "max_position_embeddings": 4096, "rms_norm_eps": 1e-05,
                      "vocab_size": 32064}, "vision_feature_layer": -2})"));
  const YAML::Node section = YAML::Clone(m);
  auto spec = models::find_model("llava").parse(
      [&] {
        YAML::Node s(YAML::NodeType::Map);
        for (const auto& kv : section)
          if (kv.first.as<std::string>() != "name") s[kv.first] = kv.second;
        return s;
      }(),
      config::Context{"c.yaml", "model"});
  auto built = spec->build(torch::TensorOptions().device(torch::kMeta));
  EXPECT_EQ(models::parameter_count(*built),
            7063427072);  // 7,062,902,784 + 64 more tokens (embeddings and head) than LLaMA's 32,000 tokens
  EXPECT_EQ(m["image_feature_select_layer_idx"].as<int64_t>(), 22);
}
