// UNet, modelzoo's image segmentation model (vision/pytorch/unet, R1.x-2.0):
// an encoder of conv blocks that downscale (max pool or strided conv), a
// bottleneck, and a decoder that upsamples with transposed convs and
// concatenates the encoder's outputs (skip connections), then a 1x1 conv to
// the class logits. 2D or 3D. Checkpoint keys are modelzoo's
// (model.encoder.unet_blocks.{i}.layers.{j}.0.weight, ...).
// Defines: UNetOptions, UNetBlock, UNetModel, unet_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/common/conv_block.h"
#include "models/common/initializers.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// modelzoo's norm_kwargs: num_groups is a number or "all" (one group per channel).
struct UNetNormKwargs {
  std::optional<std::string> num_groups;
  double eps = 1e-5;
  double momentum = 0.1;
  static const config::Schema<UNetNormKwargs>& schema();
};

// A bool, or one bool per encoder block (downscale_encoder_blocks).
struct BlockFlags {
  std::vector<bool> values;  // one value: every block
  bool at(size_t i) const { return values.size() == 1 ? values[0] : values.at(i); }
};

struct UNetOptions {
  int64_t num_classes = 0;                // from train_input when the model section lacks it
  std::vector<int64_t> image_shape;       // (H, W, C) or (D, H, W, C), from the input section
  std::optional<int64_t> input_channels;  // default: image_shape's last entry
  std::vector<int64_t> encoder_filters, decoder_filters;
  std::vector<std::string> convs_per_block = {"3x3_conv", "3x3_conv"};
  std::optional<int64_t> initial_conv_filters;
  std::string nonlinearity = "relu";
  std::optional<std::string> norm_layer;
  UNetNormKwargs norm_kwargs;
  std::optional<bool> enable_bias;  // default: no norm layer
  bool skip_connect = true;
  std::string downscale_method = "max_pool";
  bool residual_blocks = false;
  bool use_conv3d = false;
  bool downscale_first_conv = false;
  std::optional<BlockFlags> downscale_encoder_blocks;  // default: strided_conv only
  bool downscale_bottleneck = false;
  double dropout_rate = 0.0;
  std::optional<std::string> loss;  // default: bce with 2 classes, else ssce
  bool ignore_background_class = true;
  InitializerSpec initializer{"xavier_uniform"};
  InitializerSpec bias_initializer{"zeros"};
  InitializerSpec norm_weight_initializer{"ones"};
  bool compute_eval_metrics = true;
  std::vector<std::string> eval_metrics = {"mIOU", "DSC", "Acc"};
  std::vector<int64_t> eval_ignore_classes;
  static const config::Schema<UNetOptions>& schema();

  std::string loss_type() const { return loss ? *loss : num_classes <= 2 ? "bce" : "ssce"; }
  // One logit map for bce (two classes), else one per class.
  int64_t output_channels() const { return loss_type() == "bce" ? 1 : num_classes; }
  int64_t image_channels() const {
    return input_channels ? *input_channels : image_shape.empty() ? 1 : image_shape.back();
  }
  bool bias() const { return enable_bias.value_or(!norm_layer); }
};

// modelzoo's UNetBlock: `layers` of ConvNormAct, the one at downscale_conv
// strided for strided_conv, a residual from the first layer's output to the
// last's with residual_blocks.
class UNetBlockImpl : public torch::nn::Module {
 public:
  UNetBlockImpl(int64_t in, int64_t out, bool downscale, const UNetOptions& o, const torch::TensorOptions& p);
  // The block's output, and the skip connection the decoder concatenates
  // (its output for max_pool; the output before the strided conv for strided_conv).
  std::pair<torch::Tensor, torch::Tensor> forward(const torch::Tensor& x);
  torch::nn::ModuleList layers;
  int64_t out_channels = 0;  // of its last layer (a depthwise conv keeps its input's)

 private:
  bool residual_, strided_skip_;
};
TORCH_MODULE(UNetBlock);

class UNetModel : public Model {
 public:
  UNetModel(const UNetOptions& options, const torch::TensorOptions& param_options);
  // batch: input (B, C, [D,] H, W) float; labels (B, 1, ...) float for bce,
  // (B, num_classes, ...) one-hot for multilabel_bce, (B, ...) class ids for
  // ssce. Eval reports mean_iou, dice_coefficient and accuracy (eval_metrics).
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input);  // (B, output_channels, ...)
  double forward_flops_per_token() const override;   // per image
  void reset_parameters() override;

  ConvNormAct initial_conv{nullptr};
  torch::nn::Module* encoder = nullptr;  // "encoder": unet_blocks, pooling/dropout without parameters
  torch::nn::ModuleList encoder_blocks{nullptr};
  UNetBlock bottleneck{nullptr};
  torch::nn::ModuleList transpose_layers{nullptr}, decoder_blocks{nullptr};
  ConvNormAct final_conv{nullptr};

 private:
  UNetOptions options_;
};

ModelFamily unet_family();

}  // namespace zoo::models
