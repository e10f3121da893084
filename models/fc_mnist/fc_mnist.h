// FC-MNIST, modelzoo's first example: an MLP over flattened 28x28 images
// (fc_layers.{i}, last_layer to 10 classes), trained with NLL of
// log-softmax. Defines: FcMnistOptions, FcMnistModel, fc_mnist_family.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "models/common/layers.h"
#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

struct FcMnistOptions {
  std::optional<std::vector<int64_t>> hidden_sizes;  // takes precedence over depth x hidden_size
  std::optional<int64_t> depth, hidden_size;
  std::optional<std::string> activation_fn;  // relu or none
  double dropout = 0.0;
  bool use_bias = true;
  bool disable_softmax = false;  // NLL of the raw logits
  bool compute_eval_metrics = false;
  bool to_float16 = false;
  static const config::Schema<FcMnistOptions>& schema();
  std::vector<int64_t> layers() const {
    return hidden_sizes ? *hidden_sizes
                        : std::vector<int64_t>(static_cast<size_t>(depth.value_or(0)), hidden_size.value_or(0));
  }
};

class FcMnistModel : public Model {
 public:
  FcMnistModel(const FcMnistOptions& options, const torch::TensorOptions& param_options);
  // batch: input (B, 1, 28, 28) float, labels (B); eval also reports accuracy with compute_eval_metrics.
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  torch::Tensor logits(const torch::Tensor& input);  // (B, 10)
  double forward_flops_per_token() const override;
  void reset_parameters() override;

  torch::nn::ModuleList fc_layers;
  Dense last_layer{nullptr};

 private:
  FcMnistOptions options_;
};

ModelFamily fc_mnist_family();

}  // namespace zoo::models
