// modelzoo's FeedForwardNetwork as the multimodal models configure it on its
// own (LLaVA's projector, multimodal_simple's per-tower and global
// projections): a stack of dense layers ffn.{i}.linear_layer, each followed
// by its activation (none for null) and dropout.
// Defines: ProjectorOptions, ProjectorInit, Projector.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "models/common/initializers.h"

namespace zoo::models {

struct ProjectorOptions {
  std::string name = "FeedForwardNetwork";
  int64_t input_unit = 0;
  std::vector<int64_t> layers_units;
  std::optional<std::vector<std::optional<std::string>>> layers_activation;  // null entries: no activation
  std::optional<std::vector<std::optional<double>>> layers_dropout_rates;
  bool use_bias = false;
  std::optional<InitializerSpec> kernel_initializer, bias_initializer;  // null: xavier_uniform, zeros
  std::optional<InitializerSpec> output_layer_initializer;              // the last layer's weights, when set
  std::optional<std::string> device;
  bool static_dual_expert = false;
  static const config::Schema<ProjectorOptions>& schema();
  int64_t output_unit() const { return layers_units.back(); }
};

// How reset_parameters initializes the layers: as the options say
// (modelzoo's FeedForwardNetwork), or as torch.nn.Linear does (modelzoo's
// LLaVA replaces its projectors' initialization so).
enum class ProjectorInit { kConfigured, kTorchLinear };

class ProjectorImpl : public torch::nn::Module {
 public:
  ProjectorImpl(const ProjectorOptions& options, const torch::TensorOptions& param_options,
                ProjectorInit init = ProjectorInit::kConfigured);
  torch::Tensor forward(torch::Tensor x);
  void reset_parameters();
  double flops_per_vector() const;  // 2 per weight
  torch::nn::ModuleList ffn;

 private:
  ProjectorOptions options_;
  ProjectorInit init_;
};
TORCH_MODULE(Projector);

}  // namespace zoo::models
