// Implementation of models/common/conv_block.h.
#include "models/common/conv_block.h"

#include <stdexcept>

#include "models/common/ffn.h"

namespace zoo::models {

const std::vector<std::string> kNormLayerNames = {"batchnorm2d",    "batchnorm3d", "group",
                                                  "group_instance", "instance2d",  "instance3d"};

namespace {
bool is_batchnorm(const std::string& kind) { return kind.rfind("batchnorm", 0) == 0; }
}  // namespace

NormLayerImpl::NormLayerImpl(NormLayerOptions o, const torch::TensorOptions& p) : options_(std::move(o)) {
  const int64_t C = options_.channels;
  if (options_.kind == "group_instance") {
    NormLayerOptions inner = options_;
    inner.kind = "group";
    inner.num_groups = C;
    instancenorm_ = register_module("instancenorm", std::make_shared<NormLayerImpl>(inner, p));
    return;
  }
  if (std::find(kNormLayerNames.begin(), kNormLayerNames.end(), options_.kind) == kNormLayerNames.end())
    throw std::invalid_argument("unknown norm_layer '" + options_.kind + "'");
  if (options_.kind == "group" && (options_.num_groups <= 0 || C % options_.num_groups != 0))
    throw std::invalid_argument("norm_kwargs.num_groups (" + std::to_string(options_.num_groups) +
                                ") must divide the channels (" + std::to_string(C) + ")");
  weight = register_parameter("weight", torch::ones({C}, p));
  bias = register_parameter("bias", torch::zeros({C}, p));
  if (is_batchnorm(options_.kind)) {
    running_mean = register_buffer("running_mean", torch::zeros({C}, p));
    running_var = register_buffer("running_var", torch::ones({C}, p));
    num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, p.dtype(torch::kLong)));
  }
}

void NormLayerImpl::reset_parameters(const InitializerSpec& weight_init, const InitializerSpec& bias_init) {
  if (instancenorm_) return instancenorm_->reset_parameters(weight_init, bias_init);
  apply_initializer(weight_init, weight);
  apply_initializer(bias_init, bias);
  if (running_mean.defined() && !running_mean.is_meta()) {
    torch::NoGradGuard no_grad;
    running_mean.zero_(), running_var.fill_(1.0), num_batches_tracked.zero_();
  }
}

torch::Tensor NormLayerImpl::forward(const torch::Tensor& x) {
  if (instancenorm_) return instancenorm_->forward(x);
  const std::string& kind = options_.kind;
  if (kind == "group") return torch::group_norm(x, options_.num_groups, weight, bias, options_.eps);
  if (kind.rfind("instance", 0) == 0)  // affine, no running statistics (modelzoo sets affine=True)
    return torch::instance_norm(x, weight, bias, {}, {}, true, 0.0, options_.eps, false);
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  // Statistics in float32 under autocast, as torch.nn.BatchNorm's.
  return torch::batch_norm(x, weight, bias, running_mean, running_var, is_training(), options_.momentum, options_.eps,
                           at::globalContext().userEnabledCuDNN());
}

ConvLayerImpl::ConvLayerImpl(int64_t in, int64_t out, int64_t kernel, int64_t stride_, int64_t padding_,
                             int64_t groups_, bool with_bias, bool conv3d_, const torch::TensorOptions& p)
    : stride(stride_), padding(padding_), groups(groups_), conv3d(conv3d_) {
  if (in % groups != 0 || out % groups != 0)
    throw std::invalid_argument("a convolution's groups must divide its channels");
  std::vector<int64_t> shape = {out, in / groups, kernel, kernel};
  if (conv3d) shape.push_back(kernel);
  weight = register_parameter("weight", torch::empty(shape, p));
  if (with_bias) bias = register_parameter("bias", torch::zeros({out}, p));
}

torch::Tensor ConvLayerImpl::forward(const torch::Tensor& x) {
  if (conv3d) return torch::conv3d(x, weight, bias, stride, padding, 1, groups);
  return torch::conv2d(x, weight, bias, stride, padding, 1, groups);
}

ConvTransposeLayerImpl::ConvTransposeLayerImpl(int64_t in, int64_t out, int64_t kernel_, bool with_bias, bool conv3d_,
                                               const torch::TensorOptions& p)
    : kernel(kernel_), conv3d(conv3d_) {
  std::vector<int64_t> shape = {in, out, kernel, kernel};
  if (conv3d) shape.push_back(kernel);
  weight = register_parameter("weight", torch::empty(shape, p));
  if (with_bias) bias = register_parameter("bias", torch::zeros({out}, p));
}

torch::Tensor ConvTransposeLayerImpl::forward(const torch::Tensor& x) {
  if (conv3d) return torch::conv_transpose3d(x, weight, bias, kernel);
  return torch::conv_transpose2d(x, weight, bias, kernel);
}

ConvNormActImpl::ConvNormActImpl(const ConvNormActOptions& o, const torch::TensorOptions& p)
    : activation_(o.activation) {
  const int64_t padding = (o.stride - 1 + o.kernel_size - 1) / 2;
  conv = register_module(
      "0", ConvLayer(o.in_channels, o.out_channels, o.kernel_size, o.stride, padding, o.groups, o.bias, o.conv3d, p));
  if (o.norm) {
    NormLayerOptions n = *o.norm;
    n.channels = o.out_channels;
    norm = register_module("1", NormLayer(n, p));
  }
}

torch::Tensor ConvNormActImpl::forward(const torch::Tensor& x) {
  torch::Tensor y = conv(x);
  if (norm) y = norm(y);
  return activation_ == "linear" ? y : activation(activation_, y);
}

}  // namespace zoo::models
