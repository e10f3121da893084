// UNet (models/unet): logits, loss and batch-norm statistics against a
// PyTorch UNet laid out as modelzoo's (its state dict loads zoo's strictly),
// the eval metrics against the confusion-matrix formulas, config errors, and
// modelzoo's own UNet config. Its data: tests/test_segmentation_data.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "models/unet/segmentation.h"
#include "models/unet/unet.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/params/params.h"
#include "test_util.h"

using namespace zoo;
using zoo::testing::TempDir;

namespace {

// The model's state dict as it is now (model_state_dict shares CPU storage with the model).
c10::impl::GenericDict snapshot(const torch::nn::Module& model) {
  c10::impl::GenericDict copy(c10::StringType::get(), c10::TensorType::get());
  for (const auto& item : ckpt::model_state_dict(model)) copy.insert(item.key(), item.value().toTensor().clone());
  return copy;
}

std::shared_ptr<const models::ModelSpec> unet_spec(const std::string& model_yaml) {
  return models::find_model("unet").parse(YAML::Load(model_yaml), config::Context{"m.yaml", "model"});
}

// A PyTorch UNet written from modelzoo's modeling_unet.py (ConvNormActBlock is
// an nn.Sequential: conv "0", norm "1"), fed zoo's state dict with strict
// loading; it runs the batch in training mode and compares the logits, the
// loss and the updated batch-norm statistics. argv: case.pt, options JSON.
const std::string kReferenceUNet = zoo::testing::oracle("unet_reference.py");

struct ReferenceCase {
  std::string name, model_yaml, options_json;
  std::vector<int64_t> input_shape;
};

}  // namespace

// Three layouts: max_pool + batch norm + residual blocks + bce (the Severstal
// file's); strided_conv + group norm + ssce over 3 classes; 3D with
// group_instance, downscale_first_conv, per-block downscaling and ssce_dice.
TEST(UNet, MatchesAPyTorchUNetLaidOutAsModelzoos) {
  if (!zoo::testing::have_python_torch())
    ZOO_SKIP_UNLESS_CI() << "/usr/bin/python3 with python3-torch is not installed";
  const std::vector<ReferenceCase> cases = {
      {"max_pool",
       "{num_classes: 2, image_shape: [16, 16, 1], encoder_filters: [4, 8, 16], decoder_filters: [8, 4], "
       "nonlinearity: ReLU, norm_layer: batchnorm2d, enable_bias: false, residual_blocks: true, loss: bce}",
       R"({"use_conv3d": false, "norm_layer": "batchnorm2d", "bias": false, "convs_per_block": ["3x3_conv", "3x3_conv"],
           "downscale_first_conv": false, "downscale_method": "max_pool", "residual_blocks": true, "skip_connect": true,
           "encoder_filters": [4, 8, 16], "decoder_filters": [8, 4], "downscale_encoder_blocks": [false, false],
           "downscale_bottleneck": false, "channels": 1, "outputs": 1, "loss": "bce", "num_classes": 2})",
       {2, 1, 16, 16}},
      {"strided",
       "{num_classes: 3, image_shape: [16, 16, 3], encoder_filters: [4, 8, 8], decoder_filters: [8, 4], "
       "nonlinearity: relu, norm_layer: group, norm_kwargs: {num_groups: 2}, downscale_method: strided_conv, "
       "loss: ssce}",
       R"({"use_conv3d": false, "norm_layer": "group", "num_groups": 2, "bias": false,
           "convs_per_block": ["3x3_conv", "3x3_conv"], "downscale_first_conv": false, "downscale_method": "strided_conv",
           "residual_blocks": false, "skip_connect": true, "encoder_filters": [4, 8, 8], "decoder_filters": [8, 4],
           "downscale_encoder_blocks": [true, true], "downscale_bottleneck": false, "channels": 3, "outputs": 3,
           "loss": "ssce", "num_classes": 3})",
       {2, 3, 16, 16}},
      {"3d",
       "{num_classes: 3, image_shape: [8, 8, 8], input_channels: 1, use_conv3d: true, encoder_filters: [4, 4, 8, 8], "
       "decoder_filters: [8, 4, 4], norm_layer: group_instance, downscale_method: strided_conv, "
       "downscale_first_conv: true, downscale_encoder_blocks: [false, true, true], downscale_bottleneck: true, "
       "loss: ssce_dice}",
       R"({"use_conv3d": true, "norm_layer": "group_instance", "bias": false, "convs_per_block": ["3x3_conv", "3x3_conv"],
           "downscale_first_conv": true, "downscale_method": "strided_conv", "residual_blocks": false,
           "skip_connect": true, "encoder_filters": [4, 4, 8, 8], "decoder_filters": [8, 4, 4],
           "downscale_encoder_blocks": [false, true, true], "downscale_bottleneck": true, "channels": 1, "outputs": 3,
           "loss": "ssce_dice", "num_classes": 3})",
       {2, 1, 8, 8, 8}},
  };
  for (const auto& c : cases) {
    torch::manual_seed(3);
    auto built = unet_spec(c.model_yaml)->build(torch::TensorOptions().dtype(torch::kDouble));
    auto& model = dynamic_cast<models::UNetModel&>(*built);
    {  // non-trivial norms and biases, so that each is checked
      torch::NoGradGuard no_grad;
      for (auto& p : model.parameters()) p.add_(torch::randn_like(p) * 0.1);
    }
    model.train();
    const torch::Tensor input = torch::randn(c.input_shape, torch::kDouble);
    std::vector<int64_t> label_shape = c.input_shape;
    label_shape.erase(label_shape.begin() + 1);
    const int64_t classes = c.name == "max_pool" ? 2 : 3;
    torch::Tensor labels = torch::randint(0, classes, label_shape, torch::kLong);
    if (c.name == "max_pool") labels = labels.unsqueeze(1).to(torch::kDouble);
    c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
    d.insert("state", snapshot(model));  // before the forward updates the statistics
    const models::ModelOutput out = model.forward({{"input", input}, {"labels", labels}}, false);
    d.insert("after", snapshot(model));  // the statistics after one forward, as the reference's
    d.insert("input", input);
    d.insert("labels", labels);
    d.insert("logits", model.logits(input).detach());  // batch statistics again: the same logits
    d.insert("loss", out.loss.detach().to(torch::kDouble));
    TempDir dir;
    ckpt::save_checkpoint_file(dir / "case.pt", d);
    const std::string script = zoo::testing::write_file(dir / "ref.py", kReferenceUNet);
    const auto r =
        zoo::testing::run_command("/usr/bin/python3 " + script + " " + (dir / "case.pt") + " '" + c.options_json + "'");
    EXPECT_EQ(r.exit_code, 0) << c.name << ": " << r.output;
  }
}

// mIOU and DSC average over the classes that occur (in labels or
// predictions) and are not ignored; accuracy counts pixels.
TEST(UNet, EvalMetricsFollowTheConfusionMatrix) {
  // 3 classes over 8 pixels; class 2 is never true nor predicted.
  const torch::Tensor truth = torch::tensor({0, 0, 0, 1, 1, 1, 0, 1}, torch::kLong).view({1, 2, 4});
  const torch::Tensor predicted = torch::tensor({0, 0, 1, 1, 1, 0, 0, 1}, torch::kLong).view({1, 2, 4});
  const torch::Tensor logits = torch::one_hot(predicted, 3).permute({0, 3, 1, 2}).to(torch::kFloat);
  auto reduce = [](const models::MetricTerm& t) {
    const torch::Tensor seen = t.count > 0;
    return (t.sum.index({seen}) / t.count.index({seen})).mean().item<double>();
  };
  auto m = models::segmentation_metrics(logits, truth, "ssce", 3, {"mIOU", "DSC", "Acc"}, {});
  // class 0: tp 3, fp 1, fn 1 -> IoU 3/5, dice 6/8; class 1: tp 3, fp 1, fn 1 -> the same.
  EXPECT_NEAR(reduce(m.at("mean_iou")), 0.6, 1e-12);
  EXPECT_NEAR(reduce(m.at("dice_coefficient")), 0.75, 1e-12);
  EXPECT_NEAR(m.at("accuracy").sum.item<double>() / m.at("accuracy").count.item<double>(), 6.0 / 8.0, 1e-12);
  m = models::segmentation_metrics(logits, truth, "ssce", 3, {"mIOU"}, {0});
  EXPECT_EQ(m.count("accuracy"), 0u);
  EXPECT_NEAR(reduce(m.at("mean_iou")), 0.6, 1e-12);  // class 1 alone
  // One logit map (bce): a pixel is predicted 1 where its logit is above 0.
  const torch::Tensor binary = torch::tensor({-1.0, 0.3, 2.0, -0.2}).view({1, 1, 2, 2});
  const torch::Tensor mask = torch::tensor({0.0, 1.0, 0.0, 0.0}).view({1, 1, 2, 2});
  m = models::segmentation_metrics(binary, mask, "bce", 2, {"mIOU", "Acc"}, {});
  // class 0: tp 2 fp 0 fn 1 -> 2/3; class 1: tp 1 fp 1 fn 0 -> 1/2.
  EXPECT_NEAR(reduce(m.at("mean_iou")), (2.0 / 3.0 + 0.5) / 2, 1e-12);
  EXPECT_NEAR(m.at("accuracy").sum.item<double>(), 3.0, 1e-12);
}

TEST(UNet, ConfigErrorsNameTheKey) {
  auto error_of = [](const std::string& yaml) {
    try {
      unet_spec(yaml);
    } catch (const config::ConfigError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const std::string base = "num_classes: 2, encoder_filters: [4, 8, 16], decoder_filters: [8, 4]";
  EXPECT_NE(error_of("{num_classes: 2, encoder_filters: [4, 8, 16], decoder_filters: [8]}")
                .find("decoder_filters: expected one entry fewer than encoder_filters (3)"),
            std::string::npos);
  EXPECT_NE(error_of("{num_classes: 3, encoder_filters: [4, 8, 16], decoder_filters: [8, 4], loss: bce}")
                .find("loss: bce takes exactly two classes, got num_classes 3"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + ", norm_layer: group}").find("norm_layer group needs norm_kwargs.num_groups"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + ", norm_layer: layernorm}").find("norm_layer: expected one of"), std::string::npos);
  EXPECT_NE(error_of("{" + base + ", convs_per_block: [5x5_conv]}").find("unknown conv '5x5_conv'"), std::string::npos);
  EXPECT_NE(error_of("{" + base + ", downscale_method: strided_conv, convs_per_block: [3x3_conv]}")
                .find("skip_connect: cannot be true with strided_conv and one conv per block"),
            std::string::npos);
  EXPECT_NE(error_of("{" + base + ", bias_initializer: zeroes}").find("bias_initializer.name: expected one of"),
            std::string::npos);
  // A name alone is an initializer, as modelzoo's create_initializer takes it.
  EXPECT_EQ(error_of("{" + base + ", bias_initializer: zeros, initializer: {name: glorot_uniform, gain: 1.0}}"), "");
}

// modelzoo's UNet files (R1.x-2.0) validate unchanged.
TEST(UNet, ModelzoosSeverstalConfigValidates) {
  const std::string file = zoo::testing::modelzoo_configs_dir() + "/vision_pytorch_unet_params_severstal_binary.yaml";
  const Params p = load_params(file, YAML::Node());
  EXPECT_EQ(p.model_name, "unet");
  auto model = p.model->build(torch::TensorOptions().device(torch::kMeta));
  // encoder 32-64-128, bottleneck 256, decoder 128-64-32, 3x3 convs without bias, batch norm, a 1x1 head.
  EXPECT_EQ(models::parameter_count(*model), 1'926'209);
  const auto r =
      zoo::testing::run_command(zoo::testing::zoo_binary() + " CPU --params " + file + " --mode train --validate_only");
  EXPECT_EQ(r.exit_code, 0) << r.output;
}
