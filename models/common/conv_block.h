// Convolution layers for image models, laid out as modelzoo's
// ConvNormActBlock: a torch.nn.Sequential whose children are "0" (the conv)
// and "1" (the norm), so checkpoint keys read `...0.weight`, `...1.running_mean`.
// Parameters are explicit tensors, so a model builds on the meta device too.
// 2D or 3D (use_conv3d). Defines: kNormLayerNames, NormLayerOptions, NormLayer,
// ConvLayer, ConvTransposeLayer, ConvNormActOptions, ConvNormAct.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/common/initializers.h"

namespace zoo::models {

// The norm_layer names zoo builds (modelzoo's get_norm names, lowercased).
extern const std::vector<std::string> kNormLayerNames;

struct NormLayerOptions {
  std::string kind;  // batchnorm2d, batchnorm3d, group, group_instance, instance2d, instance3d
  int64_t channels = 0;
  int64_t num_groups = 1;  // group
  double eps = 1e-5;
  double momentum = 0.1;  // batchnorm running statistics
};

// batchnorm*: weight, bias, running_mean, running_var, num_batches_tracked
// (torch.nn.BatchNorm*d); group / instance*: weight, bias; group_instance: a
// child "instancenorm" GroupNorm with one group per channel (modelzoo's GroupInstanceNorm).
class NormLayerImpl : public torch::nn::Module {
 public:
  NormLayerImpl(NormLayerOptions options, const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& x);
  // weight and bias as given (the running statistics restart at 0 and 1).
  void reset_parameters(const InitializerSpec& weight_init, const InitializerSpec& bias_init);
  const NormLayerOptions& options() const { return options_; }
  torch::Tensor weight, bias, running_mean, running_var, num_batches_tracked;

 private:
  NormLayerOptions options_;
  std::shared_ptr<NormLayerImpl> instancenorm_;  // group_instance
};
TORCH_MODULE(NormLayer);

// torch.nn.Conv2d / Conv3d: weight (out, in / groups, k, k[, k]) and optional bias.
class ConvLayerImpl : public torch::nn::Module {
 public:
  ConvLayerImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride, int64_t padding, int64_t groups, bool bias,
                bool conv3d, const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
  int64_t stride, padding, groups;
  bool conv3d;
};
TORCH_MODULE(ConvLayer);

// torch.nn.ConvTranspose2d / 3d with kernel = stride (UNet's upsampling):
// weight (in, out, k, k[, k]).
class ConvTransposeLayerImpl : public torch::nn::Module {
 public:
  ConvTransposeLayerImpl(int64_t in, int64_t out, int64_t kernel, bool bias, bool conv3d,
                         const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& x);
  torch::Tensor weight, bias;
  int64_t kernel;
  bool conv3d;
};
TORCH_MODULE(ConvTransposeLayer);

struct ConvNormActOptions {
  int64_t in_channels = 0, out_channels = 0, kernel_size = 3, stride = 1, groups = 1;
  bool bias = false;
  bool conv3d = false;
  std::optional<NormLayerOptions> norm;  // channels are filled from out_channels
  std::string activation = "relu";       // a models/common/ffn.h name; "linear": none
};

// conv ("0", padded "same" as modelzoo: (stride - 1 + kernel - 1) / 2), then
// the norm ("1"), then the activation.
class ConvNormActImpl : public torch::nn::Module {
 public:
  ConvNormActImpl(const ConvNormActOptions& options, const torch::TensorOptions& p);
  torch::Tensor forward(const torch::Tensor& x);
  ConvLayer conv{nullptr};
  NormLayer norm{nullptr};  // null without a norm

 private:
  std::string activation_;
};
TORCH_MODULE(ConvNormAct);

}  // namespace zoo::models
