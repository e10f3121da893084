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
const char* const kPyHfLlava = R"PY(
import math, os, sys
import torch.nn.functional as F
out = sys.argv[1]; os.makedirs(out + "/hf", exist_ok=True)
torch.manual_seed(0)
Cv, Hv, Lv, Fv, P, S = 8, 2, 3, 16, 4, 8
C, H, L, Fi, V, T, IMG = 12, 3, 2, 20, 37, 10, 36
sd = {}
def r(*shape): return torch.randn(*shape) * 0.2
def lin(name, i, o, bias=True):
    sd[name + ".weight"] = r(o, i)
    if bias: sd[name + ".bias"] = r(o)
def ln(name, d): sd[name + ".weight"] = 1 + r(d); sd[name + ".bias"] = r(d)
v = "vision_tower.vision_model."
sd[v + "embeddings.class_embedding"] = r(Cv)
sd[v + "embeddings.patch_embedding.weight"] = r(Cv, 3, P, P)
sd[v + "embeddings.position_embedding.weight"] = r((S // P) ** 2 + 1, Cv)
ln(v + "pre_layrnorm", Cv); ln(v + "post_layernorm", Cv)
for i in range(Lv):
    p = v + "encoder.layers.%d." % i
    for n in "qkv": lin(p + "self_attn.%s_proj" % n, Cv, Cv)
    lin(p + "self_attn.out_proj", Cv, Cv); ln(p + "layer_norm1", Cv); ln(p + "layer_norm2", Cv)
    lin(p + "mlp.fc1", Cv, Fv); lin(p + "mlp.fc2", Fv, Cv)
lin("multi_modal_projector.linear_1", Cv, C); lin("multi_modal_projector.linear_2", C, C)
t = "language_model.model."
sd[t + "embed_tokens.weight"] = r(V, C); sd[t + "norm.weight"] = 1 + r(C); sd["language_model.lm_head.weight"] = r(V, C)
for i in range(L):
    p = t + "layers.%d." % i
    for n in "qkvo": lin(p + "self_attn.%s_proj" % n, C, C, False)
    lin(p + "mlp.gate_proj", C, Fi, False); lin(p + "mlp.up_proj", C, Fi, False); lin(p + "mlp.down_proj", Fi, C, False)
    sd[p + "input_layernorm.weight"] = 1 + r(C); sd[p + "post_attention_layernorm.weight"] = 1 + r(C)
def W(n): return sd[n + ".weight"]
def dense(x, n): return F.linear(x, W(n), sd.get(n + ".bias"))
def heads(x, h): return x.view(x.shape[0], x.shape[1], h, -1).transpose(1, 2)
images = torch.randn(2, 3, S, S)
# CLIP, as HF's CLIPVisionModel with output_hidden_states
x = F.conv2d(images, sd[v + "embeddings.patch_embedding.weight"], stride=P).flatten(2).transpose(1, 2)
x = torch.cat([sd[v + "embeddings.class_embedding"].expand(2, 1, Cv), x], 1) + sd[v + "embeddings.position_embedding.weight"]
x = F.layer_norm(x, (Cv,), W(v + "pre_layrnorm"), sd[v + "pre_layrnorm.bias"], 1e-5)
states = [x]
for i in range(Lv):
    p = v + "encoder.layers.%d." % i
    y = F.layer_norm(x, (Cv,), W(p + "layer_norm1"), sd[p + "layer_norm1.bias"], 1e-5)
    q, k, vv = (heads(dense(y, p + "self_attn.%s_proj" % n), Hv) for n in "qkv")
    a = ((q @ k.transpose(-1, -2)) * (Cv // Hv) ** -0.5).softmax(-1) @ vv
    x = x + dense(a.transpose(1, 2).reshape(2, -1, Cv), p + "self_attn.out_proj")
    y = F.layer_norm(x, (Cv,), W(p + "layer_norm2"), sd[p + "layer_norm2.bias"], 1e-5)
    y = dense(y, p + "mlp.fc1"); y = y * torch.sigmoid(1.702 * y)
    x = x + dense(y, p + "mlp.fc2"); states.append(x)
feats = dense(F.gelu(dense(states[-2][:, 1:], "multi_modal_projector.linear_1")), "multi_modal_projector.linear_2")
# LLaMA with the features at the <image> tokens
ids = torch.randint(0, IMG, (2, T)); ids[:, 1:5] = IMG
h = sd[t + "embed_tokens.weight"][ids]
h = h.masked_scatter((ids == IMG).unsqueeze(-1).expand_as(h), feats)
def rms(x, w): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * w
d = C // H
inv = 1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))
ang = torch.arange(T).float()[:, None] * inv
cos, sin = torch.cat([ang, ang], -1).cos(), torch.cat([ang, ang], -1).sin()
def rot(x): return x * cos + torch.cat([-x[..., d // 2:], x[..., :d // 2]], -1) * sin
mask = torch.ones(T, T, dtype=torch.bool).triu(1)
for i in range(L):
    p = t + "layers.%d." % i
    y = rms(h, W(p + "input_layernorm"))
    q, k, vv = (heads(dense(y, p + "self_attn.%s_proj" % n), H) for n in "qkv")
    sc = (rot(q) @ rot(k).transpose(-1, -2)) / math.sqrt(d)
    a = sc.masked_fill(mask, float("-inf")).softmax(-1) @ vv
    h = h + dense(a.transpose(1, 2).reshape(2, T, C), p + "self_attn.o_proj")
    y = rms(h, W(p + "post_attention_layernorm"))
    h = h + dense(F.silu(dense(y, p + "mlp.gate_proj")) * dense(y, p + "mlp.up_proj"), p + "mlp.down_proj")
logits = F.linear(rms(h, W(t + "norm")), sd["language_model.lm_head.weight"])
write_safetensors(out + "/hf/model.safetensors", sd)
# config.json as HF's LLaVA-1.5 files have it: fields at their defaults left out
json.dump({"model_type": "llava", "architectures": ["LlavaForConditionalGeneration"], "image_token_index": IMG,
           "vision_config": {"model_type": "clip_vision_model", "hidden_size": Cv, "intermediate_size": Fv,
                             "num_hidden_layers": Lv, "num_attention_heads": Hv, "image_size": S, "patch_size": P},
           "text_config": {"model_type": "llama", "vocab_size": V, "hidden_size": C, "intermediate_size": Fi,
                           "num_hidden_layers": L, "num_attention_heads": H, "max_position_embeddings": 16,
                           "rms_norm_eps": 1e-5}}, open(out + "/hf/config.json", "w"))
for name, x in [("images", images), ("ids", ids), ("logits", logits)]:
    open(out + "/" + name + ".bin", "wb").write(x.detach().numpy().tobytes())
)PY";

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
    if (key.rfind("language_model.model.", 0) == 0)
      key = "model.language_model." + key.substr(21);
    else if (key == "language_model.lm_head.weight")
      key = "lm_head.weight";
    else
      key = "model." + key;
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
