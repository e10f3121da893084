// LLaVA (models/llava) and LlavaHDF5MapDataProcessor (data/llava_hdf5): the
// logits and loss against a float64 forward written in Python from
// modelzoo's layers (ViT features at one layer, [CLS] dropped, the projector
// MLP, the features in place of the image positions, a LLaMA decoder honouring
// key_padding_mask), freezing by regex, the sizes of modelzoo's LLaVA-7B, the
// processor's files as h5py writes them (fixed-length img_path strings, "None"
// for text-only samples, expand_to_square), and a Trainer-format run laid out
// as modelzoo's LLaVA files that trains only what it does not freeze.
#include <gtest/gtest.h>

#include <filesystem>

#include "data/image.h"
#include "data/processors/llava_hdf5.h"
#include "models/llava/llava.h"
#include "multimodal_reference.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

std::shared_ptr<const models::ModelSpec> llava_spec(const std::string& yaml) {
  return models::find_model("llava").parse(YAML::Load(yaml), config::Context{"m.yaml", "model"});
}

// A LLaMA-style decoder (the reference's) and a CLIP-style tower, small.
const char* const kTextModel = zoo::testing::kReferenceTextModel;

std::string image_model(int64_t hidden, bool conv) {
  return "image_model: {name: ViTModel, hidden_size: " + std::to_string(hidden) +
         ", num_hidden_layers: 3, num_heads: 2, filter_size: 16, image_size: [8, 8], patch_size: [4, 4], "
         "num_channels: 3, use_conv_patchified_embedding: " +
         (conv ? "true" : "false") +
         ", use_post_embed_layer_norm: true, use_embed_proj_bias: false, nonlinearity: quick_gelu, "
         "prepend_cls_token: true, dropout_rate: 0.0, attention_dropout_rate: 0.0, norm_first: true}";
}

// modelzoo's LLaVA in float64, from its layers (tests/multimodal_reference.h):
// the tower up to image_feature_select_layer_idx (no final norm), [CLS]
// dropped in patch mode, the projector FeedForwardNetwork, the features
// replacing positions image_start_idx.., then the decoder honouring
// key_padding_mask. A wrong layer, position or mask moves the logits by ~1e-2.
const std::string kReferenceLlava = zoo::testing::oracle("llava_reference.py");

models::Features llava_batch(int64_t B, int64_t T, torch::ScalarType dtype = torch::kDouble) {
  models::Features b = {{"image_data", torch::randn({B, 3, 8, 8}, dtype)},
                        {"text_input_ids", torch::randint(37, {B, T}, torch::kLong)},
                        {"labels", torch::randint(37, {B, T}, torch::kLong)},
                        {"loss_mask", torch::ones({B, T}, torch::kLong)},
                        {"key_padding_mask", torch::zeros({B, T}, torch::kLong)}};
  b["loss_mask"].narrow(1, T - 2, 2).zero_();  // trailing padding, as the preprocessing writes it
  b["key_padding_mask"].narrow(1, T - 2, 2).fill_(1);
  return b;
}

}  // namespace

TEST(Llava, LogitsMatchAFloat64ForwardOfModelzoosLayers) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  struct Case {
    std::string yaml, json;
    int64_t start, features;
  };
  const std::vector<Case> cases = {
      // LLaVA-1.5's layout: the second-to-last layer's patches through a two-layer gelu MLP.
      {"{" + image_model(8, true) + ", " + kTextModel +
           ", projector: {image_model: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12, 12], "
           "layers_activation: [gelu, null], use_bias: true}}, image_feature_select_layer_idx: -2, "
           "image_start_idx: 2, image_feature_select_mode: patch}",
       R"({"image_hidden": 8, "conv": true, "layer": 1, "mode": "patch", "start": 2, "rotary_dim": 4})", 2, 4},
      // [CLS] kept, no image projector, a text projector, the image first: a
      // text-only sample's masked image positions leave its first queries no key.
      {"{" + image_model(12, false) + ", " + kTextModel +
           ", projector: {text_model: {name: FeedForwardNetwork, input_unit: 12, layers_units: [12], "
           "layers_activation: [relu]}}, image_feature_select_layer_idx: 0, image_start_idx: 0, "
           "image_feature_select_mode: cls_patch}",
       R"({"image_hidden": 12, "conv": false, "layer": 0, "mode": "cls_patch", "start": 0, "rotary_dim": 4})", 0, 5},
  };
  TempDir dir;
  for (const auto& c : cases) {
    torch::manual_seed(5);
    auto built = llava_spec(c.yaml)->build(torch::TensorOptions().dtype(torch::kDouble));
    auto& model = dynamic_cast<models::LlavaModel&>(*built);
    model.eval();
    {
      torch::NoGradGuard no_grad;  // away from initial values (zero biases, unit norms)
      for (auto& p : model.parameters()) p.add_(torch::randn_like(p) * 0.1);
    }
    EXPECT_EQ(model.num_image_features(), c.features);
    models::Features batch = llava_batch(2, 12);
    // Sample 0 has no image: its image positions are keys no query sees, and no loss.
    batch["key_padding_mask"][0].narrow(0, c.start, c.features).fill_(1);
    batch["loss_mask"][0].narrow(0, c.start, c.features).zero_();
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("state", ckpt::model_state_dict(model));
    for (const char* f : {"image_data", "text_input_ids", "key_padding_mask", "labels", "loss_mask"})
      d.insert(f, batch[f]);
    d.insert("logits", model.padded_logits(batch).detach());
    d.insert("loss", model.forward(batch, false).loss.detach());
    const std::string file = dir / "case.pt";
    ckpt::save_checkpoint_file(file, d);
    const std::string script = zoo::testing::write_file(
        dir / "ref.py", std::string(zoo::testing::kMultimodalReferenceLayers) + kReferenceLlava);
    const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + file + " '" + c.json + "'");
    EXPECT_EQ(r.exit_code, 0) << c.yaml << "\n" << r.output;
  }
}

// A text-only sample: its absent image's positions change nothing the text
// sees, whatever the image holds, and nothing turns into NaN.
TEST(Llava, MaskedImagePositionsDoNotReachTheText) {
  auto spec = llava_spec("{" + image_model(12, true) + ", " + kTextModel + ", image_start_idx: 0}");
  torch::manual_seed(1);
  auto model = spec->build(torch::TensorOptions());
  auto& llava = dynamic_cast<models::LlavaModel&>(*model);
  llava.eval();
  models::Features a = llava_batch(1, 12, torch::kFloat);
  a["key_padding_mask"].narrow(1, 0, 4).fill_(1);
  models::Features b = a;
  b["image_data"] = torch::randn({1, 3, 8, 8});
  torch::NoGradGuard no_grad;
  const torch::Tensor la = llava.padded_logits(a), lb = llava.padded_logits(b);
  EXPECT_FALSE(la.isnan().any().item<bool>());
  EXPECT_TRUE(torch::allclose(la.narrow(1, 4, 8), lb.narrow(1, 4, 8), 1e-5, 1e-5));
  // Attended, the image does reach the text.
  a["key_padding_mask"].zero_();
  b["key_padding_mask"].zero_();
  EXPECT_FALSE(
      torch::allclose(llava.padded_logits(a).narrow(1, 4, 8), llava.padded_logits(b).narrow(1, 4, 8), 1e-5, 1e-5));
}

TEST(Llava, FreezesByRegexAndKeepsModelzoosKeys) {
  auto spec = llava_spec("{" + image_model(8, true) + ", " + kTextModel +
                         ", projector: {image_model: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12], "
                         "use_bias: true}}, freeze: ['^image_model', '^text_model']}");
  auto model = spec->build(torch::TensorOptions());
  std::set<std::string> trained, names;
  for (const auto& p : model->named_parameters()) {
    names.insert(p.key());
    if (p.value().requires_grad()) trained.insert(p.key());
  }
  EXPECT_EQ(trained, (std::set<std::string>{"projector_image_model.ffn.0.linear_layer.weight",
                                            "projector_image_model.ffn.0.linear_layer.bias"}));
  for (const char* key :
       {"image_model.embedding_layer.linear_proj.weight", "image_model.embedding_layer.cls_embedding",
        "image_model.embedding_layer.position_embeddings.weight", "image_model.embedding_layer.post_embed_ln.weight",
        "image_model.encoder.transformer_encoder.layers.2.self_attn.proj_q_dense_layer.weight",
        "image_model.encoder.transformer_encoder.norm.weight", "text_model.embedding_layer.word_embeddings.weight",
        "text_model.transformer_decoder.layers.1.ffn.ffn.0.linear_layer_for_glu.weight", "text_model.lm_head.weight"})
    EXPECT_TRUE(names.count(key)) << key;
  // torch.nn.Linear's initialization, as modelzoo's LLaVA gives its projector.
  const torch::Tensor w = model->named_parameters()["projector_image_model.ffn.0.linear_layer.weight"];
  EXPECT_LE(w.abs().max().item<double>(), 1.0 / std::sqrt(8.0));
  EXPECT_GT(w.abs().max().item<double>(), 0.8 / std::sqrt(8.0));
  EXPECT_EQ(model->named_parameters()["projector_image_model.ffn.0.linear_layer.bias"].abs().max().item<double>(), 0.0);
  try {
    llava_spec("{" + image_model(8, true) + ", " + kTextModel +
               ", projector: {image_model: {input_unit: 8, layers_units: [12]}}, freeze: ['^vision_tower']}")
        ->build(torch::TensorOptions());
    ADD_FAILURE() << "a pattern matching nothing was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'^vision_tower' matches no module"), std::string::npos) << e.what();
  }
}

TEST(Llava, ShapeErrorsNameTheKey) {
  auto expect_error = [](const std::string& yaml, const std::string& key, const std::string& what) {
    zoo::testing::expect_model_error("llava", yaml, key, what);
  };
  const std::string towers = "{" + image_model(8, true) + ", " + kTextModel;
  expect_error(towers + "}", "projector", "the image features are 8 wide and the decoder's input 12");
  expect_error(towers + ", projector: {image_model: {input_unit: 6, layers_units: [12]}}}", "projector",
               "input_unit is 6 but the image model's hidden_size is 8");
  expect_error(towers +
                   ", projector: {image_model: {input_unit: 8, layers_units: [12]}}, "
                   "image_feature_select_layer_idx: 3}",
               "image_feature_select_layer_idx", "-3 .. 2");
  expect_error(towers + ", projector: {image_model: {input_unit: 8, layers_units: [12]}}, image_start_idx: 13}",
               "image_start_idx", "exceed the text model's max_position_embeddings 16");
  expect_error("{" + image_model(8, true) + ", text_model: {name: bert, vocab_size: 37}}", "text_model.name",
               "a decoder of the gpt2 family");
  expect_error("{" + std::string(kTextModel) + ", image_model: {name: resnet}}", "image_model.name",
               "takes a ViTModel image tower");
}

// modelzoo's LLaVA-7B phase files: CLIP ViT-L/14-336 and Vicuna-7B with the
// 2-layer projector: 303.5M + 6738.4M + 21.0M parameters; 576 image features.
TEST(Llava, SevenBHasTheSizesOfItsTowers) {
  auto spec = llava_spec(
      "{image_model: {name: ViTModel, hidden_size: 1024, num_hidden_layers: 24, num_heads: 16, filter_size: 4096, "
      "image_size: [336, 336], patch_size: [14, 14], use_conv_patchified_embedding: true, "
      "use_post_embed_layer_norm: true, use_embed_proj_bias: false, nonlinearity: quick_gelu, prepend_cls_token: "
      "true}, "
      "text_model: {name: LlamaModel, vocab_size: 32000, hidden_size: 4096, num_hidden_layers: 32, num_heads: 32, "
      "filter_size: 11008, max_position_embeddings: 2048, position_embedding_type: rotary, rotary_dim: 128, "
      "norm_type: rmsnorm, nonlinearity: swiglu, use_projection_bias_in_attention: false, "
      "use_ffn_bias_in_attention: false, use_ffn_bias: false, use_bias_in_output: false, share_embedding_weights: "
      "false}, "
      "projector: {image_model: {name: FeedForwardNetwork, input_unit: 1024, layers_units: [4096, 4096], "
      "layers_activation: [gelu, null], use_bias: true}}, image_feature_select_layer_idx: -2, image_start_idx: 1}");
  auto model = spec->build(torch::TensorOptions().device(torch::kMeta));
  auto& llava = dynamic_cast<models::LlavaModel&>(*model);
  EXPECT_EQ(llava.num_image_features(), 576);
  EXPECT_EQ(models::parameter_count(*llava.text_model), 6738415616);  // Llama-2-7B
  // HF's CLIPVisionModel ViT-L/14-336 has 303,507,456 parameters; modelzoo's
  // tower adds only the post-embedding LayerNorm's name for CLIP's pre_layrnorm.
  EXPECT_EQ(models::parameter_count(*llava.image_model), 303507456);
  EXPECT_EQ(models::parameter_count(*llava.projector_image_model), 1024 * 4096 + 4096 + 4096 * 4096 + 4096);
}

namespace {

// LLaVA samples as modelzoo's preprocessing and h5py write them: a.h5 with
// fixed-length img_path strings (dtype "S", shape (n, 1)), b.h5 with
// variable-length ones; wide.png (6 x 10), square.png (8 x 8), and a
// text-only sample ("None"). Rows: ids, loss mask, labels, key padding.
// `labels`: a Python expression of the (k, T) labels (learnable ones for training).
std::string write_llava_samples(const TempDir& dir, int64_t T, int64_t samples_a = 3, const std::string& change = "",
                                const std::string& labels = "rng.integers(0, 37, (k, T))") {
  std::filesystem::create_directories(dir / "h5");
  zoo::testing::write_test_images(dir);
  const auto r = zoo::testing::run_command(
      "/usr/bin/python3 " + zoo::testing::source_dir() + "/tests/oracles/llava_write_samples.py " +
      zoo::testing::shell_quoted(dir / "h5") + " " + std::to_string(T) + " " + std::to_string(samples_a) + " " +
      zoo::testing::shell_quoted(change) + " " + zoo::testing::shell_quoted(labels));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return "{data_processor: LlavaHDF5MapDataProcessor, data_dir: " + (dir / "h5") +
         ", img_data_dir: " + (dir / "images") + ", shuffle: false, batch_size: 5, ";
}

}  // namespace

TEST(LlavaData, ReadsModelzoosFilesAndImages) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py is not installed";
  TempDir dir;
  const std::string section = write_llava_samples(dir, 12);
  // expand_to_square alone: the 6 x 10 image centred on a 10 x 10 square of the background.
  auto loader = zoo::testing::open_loader(
      section +
      "image_data_size: [3, 10, 10], transforms: [{name: expand_to_square, background_color: [122, 116, 104]}, "
      "{name: center_crop, size: 10}, {name: to_tensor}]}");
  const models::Features b = loader->next();
  for (const char* f : {"text_input_ids", "loss_mask", "labels", "key_padding_mask"})
    EXPECT_EQ(b.at(f).sizes(), torch::IntArrayRef({5, 12})) << f;
  ASSERT_EQ(b.at("image_data").sizes(), torch::IntArrayRef({5, 3, 10, 10}));
  const torch::Tensor wide = data::read_image(dir / "images/sub/wide.png", 3).to(torch::kFloat) / 255;
  const torch::Tensor expanded = b.at("image_data")[0];
  EXPECT_TRUE(torch::equal(expanded.narrow(1, 2, 6), wide));
  EXPECT_TRUE(torch::allclose(expanded.select(1, 0).select(1, 0), torch::tensor({122.f, 116.f, 104.f}) / 255));
  EXPECT_TRUE(torch::allclose(expanded.select(1, 9).select(1, 9), torch::tensor({122.f, 116.f, 104.f}) / 255));
  // Sample 2 has no image: a black stand-in. Its image positions are masked; b.h5 follows a.h5 with variable-length
  // paths.
  EXPECT_EQ(b.at("image_data")[2].abs().max().item<float>(), 0.0f);
  EXPECT_EQ(b.at("key_padding_mask")[2].narrow(0, 1, 4).sum().item<int64_t>(), 4);
  EXPECT_EQ(b.at("key_padding_mask")[0].narrow(0, 0, 10).sum().item<int64_t>(), 0);
  // center_crop to 10 pads the 8 x 8 image with a black border, as torchvision's.
  EXPECT_TRUE(torch::equal(b.at("image_data")[3].narrow(1, 1, 8).narrow(2, 1, 8),
                           data::read_image(dir / "images/square.png", 3).to(torch::kFloat) / 255));
  EXPECT_TRUE(torch::equal(b.at("image_data")[4], expanded));

  // LLaVA-1.5's pipeline; the stand-in normalizes to -mean / std.
  auto clip = zoo::testing::open_loader(
      section +
      "image_data_size: [3, 8, 8], transforms: [{name: expand_to_square, background_color: [122, 116, 104]}, "
      "{name: resize, size: 8, interpolation: bicubic}, {name: center_crop, size: 8}, {name: to_tensor}, "
      "{name: normalize, mean: [0.5, 0.25, 0.5], std: [0.5, 0.25, 0.25]}]}");
  const torch::Tensor black = clip->next().at("image_data")[2];
  EXPECT_TRUE(torch::allclose(black.amax({1, 2}), torch::tensor({-1.f, -1.f, -2.f})));
  EXPECT_TRUE(torch::allclose(black.amin({1, 2}), torch::tensor({-1.f, -1.f, -2.f})));

  const std::string size =
      zoo::testing::first_batch_error(section + "image_data_size: [3, 8, 8], transforms: [{name: to_tensor}]}");
  EXPECT_NE(size.find("a.h5, sample 0: its image sub/wide.png is [3, 6, 10] after the transforms, but image_data_size "
                      "is [3, 8, 8]"),
            std::string::npos)
      << size;
  const std::string color = zoo::testing::open_error(section +
                                                     "image_data_size: [3, 8, 8], transforms: "
                                                     "[{name: expand_to_square}]}");
  EXPECT_NE(color.find("background_color: required by expand_to_square"), std::string::npos) << color;
}

TEST(LlavaData, BadFilesAreNamed) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py is not installed";
  const std::string tail =
      "image_data_size: [3, 8, 8], transforms: [{name: expand_to_square, background_color: "
      "[0, 0, 0]}, {name: resize, size: 8}, {name: to_tensor}]}";
  {
    TempDir dir;
    const std::string section = write_llava_samples(dir, 12, 3, "data[0, 3, 7] = 2");
    const std::string e = zoo::testing::first_batch_error(section + tail);
    EXPECT_NE(e.find("a.h5, sample 0, position 7: key_padding_mask is 2, expected 0 or 1"), std::string::npos) << e;
  }
  {
    TempDir dir;
    const std::string section = write_llava_samples(dir, 12, 3, "data = data[:2]");
    const std::string e = zoo::testing::open_error(section + tail);
    EXPECT_NE(e.find("a.h5: dataset 'img_path' holds 3 strings for 2 samples"), std::string::npos) << e;
  }
  {
    TempDir dir;
    const std::string section = write_llava_samples(dir, 12);
    std::filesystem::remove(dir / "images/square.png");
    const std::string e = zoo::testing::first_batch_error(section + tail);
    EXPECT_NE(e.find("square.png"), std::string::npos) << e;
  }
}

// A Trainer-format file laid out as modelzoo's LLaVA phase 2 (the image
// tower frozen; the projector and the decoder trained) on the files above:
// the loss falls, the image tower's weights stay as they were, the rest
// move, and a stopped run resumes exactly.
TEST(Llava, TrainsOnlyWhatItDoesNotFreezeFromAModelzooStyleConfig) {
  if (!zoo::testing::have_h5py()) ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-h5py is not installed";
  TempDir dir;
  // Every counted label is 7: quickly learnt.
  std::string section = write_llava_samples(dir, 12, 6, "", "np.full((k, T), 7)");
  section.replace(section.find("batch_size: 5"), 13, "batch_size: 4");
  const std::string data = section +
                           "image_data_size: [3, 8, 8], transforms: [{name: expand_to_square, "
                           "background_color: [122, 116, 104]}, {name: resize, size: 8, interpolation: bicubic}, "
                           "{name: center_crop, size: 8}, {name: to_tensor}, {name: normalize, mean: "
                           "[0.48145466, 0.4578275, 0.40821073], std: [0.26862954, 0.26130258, 0.27577711]}]}";
  zoo::testing::expect_trains_all_but_frozen(dir, R"(      name: llava
      )" + image_model(8, true) + R"(
      )" + kTextModel + R"(
      projector:
        image_model: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12, 12], layers_activation: [gelu, null], use_bias: true}
      loss_scaling: num_tokens
      loss_weight: 1.0
      freeze: ['^image_model']
      image_feature_select_layer_idx: -2
      image_start_idx: 1
      image_feature_select_mode: patch)",
                                             data, "model.image_model.");
}

// modelzoo 2.2's layout: no model name; the towers make it LLaVA, and the
// input keys modelzoo 2.2 wrote for its preprocessing are accepted with a warning.
TEST(Llava, LegacyFilesAreRecognisedByTheirTowers) {
  const std::string legacy =
      "train_input: {data_processor: LlavaHDF5MapDataProcessor, data_dir: ./h5, img_data_dir: ./images, "
      "image_data_size: [3, 8, 8], transforms: [{name: to_tensor}], batch_size: 2, bos_token_id: 1, pad_token_id: 0}\n"
      "model: {" +
      image_model(8, true) + ", " + kTextModel +
      ", projector: {image_model: {name: FeedForwardNetwork, input_unit: 8, layers_units: [12]}}, "
      "freeze: ['^image_model'], image_start_idx: 1, mixed_precision: true, fp16_type: bfloat16}\n"
      "optimizer: {optimizer_type: AdamW, learning_rate: 0.001}\nrunconfig: {max_steps: 2}\n";
  const Params p = params_from_node(config::load_yaml_string(legacy, "p.yaml"), "p.yaml", YAML::Node());
  EXPECT_EQ(p.model_name, "llava");
  std::string warnings;
  for (const auto& w : p.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("train_input.bos_token_id: ignored"), std::string::npos) << warnings;
  EXPECT_EQ(p.model->to_yaml()["text_model"]["name"].as<std::string>(), "LlamaModel");
  EXPECT_EQ(p.model->to_yaml()["image_model"]["hidden_size"].as<int64_t>(), 8);
}
