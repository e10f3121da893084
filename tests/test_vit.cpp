// Vision Transformer (models/vit) and ImageNet1KProcessor (data/imagenet,
// data/image_transforms): logits against a float64 ViT forward written in
// Python from modelzoo's layers, torchvision's resizes against torch's
// interpolate, RandomResizedCrop's box rules, ImageFolder class numbering,
// training to high accuracy from a Trainer-format config laid out as
// modelzoo's ViT-Base file, and ViT-Base's size.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>

#include "convert_fixtures.h"
#include "data/image.h"
#include "data/image_transforms.h"
#include "data/processors/imagenet.h"
#include "models/vit/vit.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/convert/convert.h"
#include "runner/convert/safetensors.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

std::shared_ptr<const models::ModelSpec> vit_spec(const std::string& yaml) {
  return models::find_model("vision_transformer").parse(YAML::Load(yaml), config::Context{"m.yaml", "model"});
}

// modelzoo's ViT in float64 from its layers: patches by conv or by
// patchify_helper's (row, column, channel) order + linear; [CLS] in front
// with the position table's last row, patches rows 0..N-1; pre- or post-norm
// encoder layers; the final LayerNorm; [CLS] (through the pooler when
// present) to the classifier.
const std::string kReferenceVit = zoo::testing::oracle("vit_reference.py");

}  // namespace

TEST(Vit, LogitsMatchAFloat64ForwardOfModelzoosLayers) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  struct Case {
    std::string yaml, json;
  };
  const std::vector<Case> cases = {
      {"{num_classes: 5, image_size: [8, 12], num_channels: 3, patch_size: [4, 4], hidden_size: 16, "
       "num_hidden_layers: 2, num_heads: 2, filter_size: 32, layer_norm_epsilon: 1.0e-6, "
       "use_conv_patchified_embedding: true, dropout_rate: 0.0, attention_dropout_rate: 0.0}",
       R"({"conv": true, "patch": 4, "hidden": 16, "heads": 2, "layers": 2, "eps": 1e-6, "norm_first": true,
           "post_ln": false, "pooler": false})"},
      {"{num_classes: 3, image_size: [8, 8], num_channels: 2, patch_size: [4, 4], hidden_size: 16, "
       "num_hidden_layers: 1, num_heads: 4, filter_size: 24, norm_first: false, use_encoder_pooler_layer: true, "
       "pooler_nonlinearity: tanh, use_post_embed_layer_norm: true, dropout_rate: 0.0, attention_dropout_rate: 0.0}",
       R"({"conv": false, "patch": 4, "hidden": 16, "heads": 4, "layers": 1, "eps": 1e-5, "norm_first": false,
           "post_ln": true, "pooler": true})"},
      // DINOv2's layout (its linear-probe files): LayerScale; stochastic depth does nothing in eval.
      {"{num_classes: 5, image_size: [8, 12], num_channels: 3, patch_size: [4, 4], hidden_size: 16, "
       "num_hidden_layers: 3, num_heads: 2, filter_size: 32, layer_norm_epsilon: 1.0e-6, layerscale_value: 0.01, "
       "stochastic_depth_drop_prob: 0.4, use_conv_patchified_embedding: true, dropout_rate: 0.0, "
       "attention_dropout_rate: 0.0}",
       R"({"conv": true, "patch": 4, "hidden": 16, "heads": 2, "layers": 3, "eps": 1e-6, "norm_first": true,
           "post_ln": false, "pooler": false})"},
  };
  for (const auto& c : cases) {
    torch::manual_seed(2);
    auto built = vit_spec(c.yaml)->build(torch::TensorOptions().dtype(torch::kDouble));
    auto& model = dynamic_cast<models::VitModel&>(*built);
    model.eval();
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model.parameters()) p.add_(torch::randn_like(p) * 0.1);
    }
    const auto& embedding = *model.vit_model->embedding_layer;
    const torch::Tensor images = torch::randn({2, embedding.proj_weight.dim() == 4 ? embedding.proj_weight.size(1) : 2,
                                               8, embedding.proj_weight.dim() == 4 ? 12 : 8},
                                              torch::kDouble);
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("state", ckpt::model_state_dict(model));
    d.insert("images", images);
    d.insert("logits", model.logits(images).detach());
    TempDir dir;
    ckpt::save_checkpoint_file(dir / "case.pt", d);
    const std::string script = zoo::testing::write_file(dir / "ref.py", kReferenceVit);
    const auto r =
        zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt") + " '" + c.json + "'");
    EXPECT_EQ(r.exit_code, 0) << r.output;
  }
}

// ViT-Base/16 at 224 x 224 with 1000 classes, as modelzoo's config lays it
// out: Hugging Face's ViTForImageClassification has the same 86,567,656.
TEST(Vit, VitBaseHasTheKnownSize) {
  auto model = vit_spec(
                   "{num_classes: 1000, hidden_size: 768, num_hidden_layers: 12, num_heads: 12, filter_size: 3072, "
                   "image_size: [224, 224], patch_size: [16, 16], use_conv_patchified_embedding: true}")
                   ->build(torch::TensorOptions().device(torch::kMeta));
  EXPECT_EQ(models::parameter_count(*model), 86'567'656);
  EXPECT_NEAR(model->forward_flops_per_token() / 2, 17.6e9, 0.1e9);  // the ViT paper's 17.6 G multiply-adds
  std::string error;
  try {
    vit_spec("{num_classes: 2, image_size: [30, 30], patch_size: [16, 16]}");
  } catch (const config::ConfigError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("patch_size: must divide image_size"), std::string::npos) << error;
  error.clear();
  try {
    vit_spec("{num_classes: 2, stochastic_depth_drop_prob: 1.0}");
  } catch (const config::ConfigError& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("stochastic_depth_drop_prob"), std::string::npos) << error;
}

// Stochastic depth, as modelzoo's StochasticDepth: in training each residual
// branch of a layer is dropped (batch mode: for the whole batch) with the
// layer's probability, kept ones scaled by 1 / (1 - p); the linear schedule
// never drops layer 0 and drops the last with the full probability; row
// mode decides per sample; eval never drops. LayerScale starts at its value.
TEST(Vit, StochasticDepthDropsWholeBranchesAtTheLayersRates) {
  auto options = [](double p, const std::string& mode, const std::string& schedule) {
    return vit_spec(
        "{num_classes: 2, image_size: [8, 8], patch_size: [4, 4], hidden_size: 8, num_hidden_layers: 3, "
        "num_heads: 2, filter_size: 16, dropout_rate: 0.0, attention_dropout_rate: 0.0, "
        "layerscale_value: 0.5, stochastic_depth_drop_prob: " +
        std::to_string(p) + ", stochastic_depth_mode: " + mode + ", stochastic_depth_drop_prob_schedule: " + schedule +
        "}");
  };
  torch::manual_seed(0);
  auto built = options(0.5, "batch", "linear")->build(torch::TensorOptions().dtype(torch::kDouble));
  auto& vit = dynamic_cast<models::VitModel&>(*built);
  auto layer = [&](int i) {
    return vit.vit_model->transformer_encoder->layers[i]->as<models::TransformerEncoderLayerImpl>();
  };
  EXPECT_TRUE(torch::equal(layer(1)->layer_scale1, torch::full({8}, 0.5, torch::kDouble)));
  const torch::Tensor x = torch::randn({4, 5, 8}, torch::kDouble);
  // The four outcomes of a norm-first layer: each branch kept (scaled) or dropped.
  auto outcomes = [&](models::TransformerEncoderLayerImpl& l, double p) {
    torch::NoGradGuard no_grad;
    l.eval();
    const torch::Tensor a = l.layer_scale1 * l.self_attn->forward(l.norm1(x), nullptr, {}, {}, {});
    auto ffn = [&](const torch::Tensor& h) { return l.layer_scale2 * l.ffn(l.norm2(h)); };
    const double k = 1.0 / (1.0 - p);
    const torch::Tensor kept_attn = x + k * a;
    return std::vector<torch::Tensor>{x, x + k * ffn(x), kept_attn, kept_attn + k * ffn(kept_attn)};
  };
  auto tally = [&](models::TransformerEncoderLayerImpl& l, double p, bool rows) {
    const std::vector<torch::Tensor> o = outcomes(l, p);
    std::vector<int> seen(4, 0);
    torch::NoGradGuard no_grad;
    l.train();
    for (int n = 0; n < 400; ++n) {
      const torch::Tensor y = l.forward(x, {});
      for (int64_t b = 0; b < (rows ? x.size(0) : 1); ++b) {
        int match = -1;
        for (int k = 0; k < 4; ++k)
          if (torch::allclose(rows ? y[b] : y, rows ? o[k][b] : o[k], 1e-12, 1e-12)) match = k;
        EXPECT_GE(match, 0) << "an output that is none of the four";
        if (match >= 0) ++seen[match];
        if (!rows && match >= 0) break;
      }
    }
    return seen;
  };
  // Layer 2 of 3 drops with 0.5: each outcome about a quarter of 400 (binomial sd ~9).
  for (int count : tally(*layer(2), 0.5, false)) EXPECT_NEAR(count, 100, 40);
  // Layer 1 drops with 0.25; layer 0 never.
  std::vector<int> middle = tally(*layer(1), 0.25, false);
  EXPECT_NEAR(middle[3], 400 * 0.75 * 0.75, 45);
  EXPECT_EQ(tally(*layer(0), 0.0, false)[3], 400);
  layer(2)->eval();
  EXPECT_TRUE(torch::allclose(layer(2)->forward(x, {}), outcomes(*layer(2), 0.0)[3], 1e-12, 1e-12));
  // Row mode: samples of one batch take different outcomes.
  torch::manual_seed(1);
  auto rows = options(0.5, "row", "constant")->build(torch::TensorOptions().dtype(torch::kDouble));
  auto& row_vit = dynamic_cast<models::VitModel&>(*rows);
  auto& first = *row_vit.vit_model->transformer_encoder->layers[0]->as<models::TransformerEncoderLayerImpl>();
  const std::vector<int> per_sample = tally(first, 0.5, true);  // constant: layer 0 drops with 0.5 too
  for (int count : per_sample) EXPECT_NEAR(count, 400, 120);
  // Forwards whose four samples do not all share one outcome: nearly all in
  // row mode (all alike has probability 1/64), none in batch mode.
  auto mixed = [&](models::TransformerEncoderLayerImpl& l, double p) {
    const std::vector<torch::Tensor> o = outcomes(l, p);
    torch::NoGradGuard no_grad;
    l.train();
    int n = 0;
    for (int i = 0; i < 50; ++i) {
      const torch::Tensor y = l.forward(x, {});
      std::set<int> kinds;
      for (int64_t b = 0; b < x.size(0); ++b)
        for (int k = 0; k < 4; ++k)
          if (torch::allclose(y[b], o[k][b], 1e-12, 1e-12)) kinds.insert(k);
      n += kinds.size() > 1 ? 1 : 0;
    }
    return n;
  };
  EXPECT_GT(mixed(first, 0.5), 35);
  EXPECT_EQ(mixed(*layer(2), 0.5), 0);
}

// `freeze` stops the parameters of matching modules from training, as modelzoo's freeze_modules.
TEST(Vit, FreezeStopsMatchingModules) {
  auto model = vit_spec(
                   "{num_classes: 2, image_size: [8, 8], patch_size: [4, 4], hidden_size: 8, "
                   "num_hidden_layers: 2, num_heads: 2, filter_size: 8, freeze: ['embedding_layer', 'layers\\.0\\.']}")
                   ->build(torch::TensorOptions());
  for (const auto& p : model->named_parameters()) {
    const bool frozen =
        p.key().find("embedding_layer") != std::string::npos || p.key().find("layers.0.") != std::string::npos;
    EXPECT_EQ(p.value().requires_grad(), !frozen) << p.key();
  }
  EXPECT_THROW(vit_spec("{num_classes: 2, image_size: [8, 8], patch_size: [4, 4], freeze: [no_such_module]}")
                   ->build(torch::TensorOptions()),
               std::invalid_argument);
}

// Resizes are torch's antialiased interpolate rounded to uint8, as
// torchvision resizes PIL images; a single size scales the shorter side.
TEST(ImageTransforms, ResizesAndCropsFollowTorchvision) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  torch::manual_seed(4);
  const torch::Tensor image = torch::randint(0, 256, {3, 40, 60}, torch::kLong).to(torch::kByte);
  const torch::Tensor bilinear = data::resize_image(image, 16, 24, "bilinear");
  const torch::Tensor bicubic = data::resize_image(image, 16, 24, "bicubic");
  TempDir dir;
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("image", image);
  d.insert("bilinear", bilinear);
  d.insert("bicubic", bicubic);
  ckpt::save_checkpoint_file(dir / "r.pt", d);
  const std::string script = zoo::testing::write_file(dir / "ref.py", zoo::testing::oracle("vit_reference_2.py"));
  const auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "r.pt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;

  data::TransformSpec resize;
  resize.name = "resize";
  resize.size = config::NumberList{{20}};
  EXPECT_EQ(data::TransformPipeline({resize}).apply(image, 1).sizes(), (std::vector<int64_t>{3, 20, 30}));
  data::TransformSpec crop;
  crop.name = "center_crop";
  crop.size = config::NumberList{{10, 20}};
  const torch::Tensor cropped = data::TransformPipeline({crop}).apply(image, 1);
  EXPECT_TRUE(torch::equal(cropped, image.narrow(1, 15, 10).narrow(2, 20, 20)));
}

// RandomResizedCrop's box lies inside the image, covers `scale` of its area
// at an aspect ratio within `ratio` (up to rounding), and varies with the seed.
TEST(ImageTransforms, RandomResizedCropBoxesFollowTheirRanges) {
  std::set<int64_t> tops;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const auto b = data::random_resized_crop_box(100, 150, {0.08, 1.0}, {0.75, 1.33}, seed);
    ASSERT_GE(b.top, 0);
    ASSERT_GE(b.left, 0);
    ASSERT_LE(b.top + b.height, 100);
    ASSERT_LE(b.left + b.width, 150);
    const double share = double(b.height * b.width) / (100.0 * 150.0);
    EXPECT_GT(share, 0.07) << seed;
    EXPECT_LE(share, 1.0) << seed;
    const double aspect = double(b.width) / double(b.height);
    EXPECT_GT(aspect, 0.75 * 0.85) << seed;
    EXPECT_LT(aspect, 1.33 * 1.15) << seed;
    tops.insert(b.top);
  }
  EXPECT_GT(tops.size(), 20u);
  // Impossible ranges fall back to the central crop clamped to the ratio.
  const auto fallback = data::random_resized_crop_box(10, 100, {0.99, 1.0}, {1.0, 1.0}, 3);
  EXPECT_EQ(fallback.height, 10);
  EXPECT_EQ(fallback.width, 10);
  EXPECT_EQ(fallback.left, 45);
}

namespace {

// An ImageFolder of 16 x 16 RGB JPEGs in two classes: "horizontal" images
// have bright rows every 4 pixels, "vertical" ones bright columns, at random
// offsets and contrast.
void write_stripes(const std::string& dir, int per_class, uint64_t seed) {
  torch::manual_seed(static_cast<int64_t>(seed));
  for (const char* cls : {"horizontal", "vertical"}) {
    std::filesystem::create_directories(dir + "/" + cls);
    for (int i = 0; i < per_class; ++i) {
      torch::Tensor img = torch::rand({3, 16, 16}) * 60 + 40;
      const int64_t offset = torch::randint(0, 4, {1}).item<int64_t>();
      const double bright = 150 + torch::rand({1}).item<double>() * 100;
      for (int64_t k = offset; k < 16; k += 4) {
        if (std::string(cls) == "horizontal") img.select(1, k).fill_(bright);
        else img.select(2, k).fill_(bright);
      }
      data::write_jpeg(dir + "/" + cls + "/img" + std::to_string(i) + ".JPEG", img.to(torch::kByte), 95);
    }
  }
}

}  // namespace

// Classes are numbered in sorted folder order; the random transforms of a
// sample are the same for the same epoch and differ between epochs.
TEST(ImageNetData, ImageFoldersNumberClassesInSortedOrder) {
  TempDir dir;
  write_stripes(dir / "d/train", 3, 1);
  data::TransformSpec flip, to_tensor;
  flip.name = "random_horizontal_flip";
  to_tensor.name = "to_tensor";
  data::ImageFolderSource source(dir / "d/train", data::TransformPipeline({flip, to_tensor}), 7);
  ASSERT_EQ(source.num_samples(), 6);
  EXPECT_EQ(source.classes(), (std::vector<std::string>{"horizontal", "vertical"}));
  const auto batch = source.read_batch({0, 1, 2, 3, 4, 5}, std::nullopt);
  EXPECT_TRUE(torch::equal(batch.at("labels"), torch::tensor({0, 0, 0, 1, 1, 1}, torch::kLong)));
  EXPECT_EQ(batch.at("input").sizes(), (std::vector<int64_t>{6, 3, 16, 16}));
  EXPECT_LE(batch.at("input").max().item<float>(), 1.0f);
  EXPECT_TRUE(torch::equal(source.read_batch({0, 1, 2, 3, 4, 5}, std::nullopt).at("input"), batch.at("input")));
  int flipped = 0;
  for (int64_t epoch = 1; epoch < 6; ++epoch)
    for (int64_t i = 0; i < 6; ++i)
      flipped += !torch::equal(source.read_batch({epoch * 6 + i}, std::nullopt).at("input")[0], batch.at("input")[i]);
  EXPECT_GT(flipped, 5);
}

// A Trainer-format file laid out as modelzoo's ViT-Base one (its CSX backend
// flag, scoped callbacks, SequentialLR) trains a small ViT to tell the
// stripes apart.
TEST(ImageNetData, VitTrainsFromAModelzooStyleTrainerConfig) {
  TempDir dir;
  write_stripes(dir / "d/train", 24, 2);
  write_stripes(dir / "d/val", 8, 3);
  const std::string params = zoo::testing::write_file(dir / "vit.yaml", R"(
trainer:
  init:
    seed: 1
    backend:
      backend_type: CPU
      csx.debug.implicit_cast_cb16_to_fp32: True
    model:
      name: vision_transformer
      num_classes: 2
      position_embedding_type: learned
      hidden_size: 32
      num_hidden_layers: 2
      layer_norm_epsilon: 1.0e-06
      num_heads: 4
      dropout_rate: 0.0
      attention_dropout_rate: 0.0
      nonlinearity: gelu
      filter_size: 64
      norm_first: true
      image_size: [16, 16]
      num_channels: 3
      patch_size: [4, 4]
      use_conv_patchified_embedding: true
      prepend_cls_token: true
    optimizer:
      Adam:
        betas: [0.9, 0.999]
        weight_decay: 0.0003
    schedulers:
    - SequentialLR:
        schedulers:
        - LinearLR: {initial_learning_rate: 0.0, end_learning_rate: 0.003, total_iters: 10}
        - CosineDecayLR: {initial_learning_rate: 0.003, end_learning_rate: 0.0, total_iters: 70}
    precision:
      max_gradient_norm: 1.0
    loop:
      max_steps: 80
      eval_frequency: 80
    checkpoint:
      steps: 40
    logging:
      log_steps: 10
    callbacks:
    - ScopedTrainFlags:
        csx.performance.micro_batch_size: 8
  fit:
    train_dataloader:
      data_processor: ImageNet1KProcessor
      data_dir: )" + (dir / "d") + R"(
      num_classes: 2
      batch_size: 8
      image_size: [16, 16]
      shuffle: true
      shuffle_seed: 42
      split: train
      transforms:
      - {name: resize, size: [18, 18]}
      - {name: random_resized_crop, size: [16, 16], scale: [0.7, 1.0], ratio: [0.9, 1.1], interpolation: bilinear}
      - {name: to_tensor}
      - {name: normalize, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}
      num_workers: 2
      use_worker_cache: true
    val_dataloader:
      data_processor: ImageNet1KProcessor
      data_dir: )" + (dir / "d") + R"(
      num_classes: 2
      batch_size: 8
      split: val
      transforms:
      - {name: resize, size: [16, 16]}
      - {name: to_tensor}
      - {name: normalize, mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}
)");
  const auto r = zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + params +
                                           " --mode train_and_eval --model_dir " + (dir / "run"));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("csx.debug.implicit_cast_cb16_to_fp32: ignored"), std::string::npos) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex("Metric: eval/accuracy_cls = ([0-9.e+-]+)"))) << r.output;
  EXPECT_GT(std::stod(m[1]), 0.9) << r.output;

  // Stopped at step 40 and resumed, the run continues exactly (random crops are drawn per sample and epoch).
  const std::vector<double> whole = zoo::testing::train_losses(r.output);
  ASSERT_EQ(whole.size(), 8u) << r.output;
  const std::string train =
      zoo::testing::zoo_binary() + " CPU --params " + params + " --mode train --model_dir " + (dir / "resumed");
  auto first = zoo::testing::run_command(train + " --max_steps 40");
  ASSERT_EQ(first.exit_code, 0) << first.output;
  auto rest = zoo::testing::run_command(train + " --max_steps 80");
  ASSERT_EQ(rest.exit_code, 0) << rest.output;
  std::vector<double> resumed = zoo::testing::train_losses(first.output);
  for (double l : zoo::testing::train_losses(rest.output)) resumed.push_back(l);
  EXPECT_EQ(resumed, whole) << first.output << rest.output;

  const std::string missing = zoo::testing::open_error(
      "{data_processor: ImageNet1KProcessor, batch_size: 2, split: val, "
      "transforms: [{name: to_tensor}], data_dir: " +
      (dir / "run") + "}");
  EXPECT_NE(missing.find("split: no directory 'val' in " + (dir / "run")), std::string::npos) << missing;
  const std::string unknown = zoo::testing::open_error(
      "{data_processor: ImageNet1KProcessor, batch_size: 2, "
      "transforms: [{name: autoaug}], data_dir: " +
      (dir / "d") + "}");
  EXPECT_NE(unknown.find("transforms.name: expected one of"), std::string::npos) << unknown;
}

namespace {

// Hugging Face's ViTForImageClassification layout with random weights, and
// its logits from the published forward (transformers cannot be installed
// here): conv patches, [CLS] first in the position table, pre-norm layers
// (layernorm_before / layernorm_after), vit.layernorm, classifier on [CLS].
const std::string kPyHfVit = zoo::testing::oracle("vit_convert_make_vit.py");

}  // namespace

// zoo convert reads HF's ViT (logits within 1e-5 of its forward), writes
// ImageNet-folder fine-tuning params, and exports back bit for bit.
TEST(ConvertVit, FromHuggingFaceMatchesTheReferenceAndRoundTrips) {
  TempDir dir;
  const std::string script =
      zoo::testing::write_file(dir / "vit.py", std::string(zoo::testing::kPySafetensors) + kPyHfVit);
  auto r = zoo::testing::run_command("/usr/bin/python3 " + script + " " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  convert::run_convert({dir / "hf", "", "hf", "zoo", std::nullopt, dir / "zoo"});
  auto model = std::dynamic_pointer_cast<models::VitModel>(zoo::testing::load_converted(dir));
  ASSERT_TRUE(model);
  model->eval();
  torch::NoGradGuard no_grad;
  const torch::Tensor images = zoo::testing::read_raw(dir / "images.bin", torch::kFloat, {2, 3, 16, 16});
  const torch::Tensor logits = zoo::testing::read_raw(dir / "logits.bin", torch::kFloat, {2, 5});
  EXPECT_LT((model->logits(images) - logits).abs().max().item<double>(), 1e-5);
  const YAML::Node params = YAML::LoadFile(dir / "zoo/params.yaml");
  EXPECT_EQ(params["train_input"]["data_processor"].as<std::string>(), "ImageNet1KProcessor");
  EXPECT_EQ(params["eval_input"]["split"].as<std::string>(), "val");
  EXPECT_EQ(params["model"]["num_classes"].as<int>(), 5);

  convert::run_convert({dir / "zoo/checkpoint_0.mdl", "vit", "zoo", "hf", std::nullopt, dir / "back"});
  zoo::testing::expect_exported_bit_for_bit(dir / "hf/model.safetensors", dir / "back/model.safetensors");
  const nlohmann::json config = nlohmann::json::parse(zoo::testing::read_file(dir / "back/config.json"));
  EXPECT_EQ(config.at("num_labels"), 5);
  EXPECT_EQ(config.at("patch_size"), 4);
}
