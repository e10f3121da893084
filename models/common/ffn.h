// Position-wise feed-forward network with modelzoo's layout
// (ffn.{i}.linear_layer), and the named activations the configs use.
// Defines: kActivationNames, activation, is_glu, glu, FeedForwardOptions, FeedForward, one_layer_network.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

#include "models/common/initializers.h"
#include "models/common/layers.h"

namespace zoo::models {

extern const std::vector<std::string> kActivationNames;
// Applies the named activation ("gelu", "relu", "gelu_new", "silu", ...).
torch::Tensor activation(const std::string& name, const torch::Tensor& x);

// True for gated activations (swiglu, geglu, reglu, liglu, swiglu_clamped, and zoo's geglu_tanh):
// act(gate(x)) * up(x).
bool is_glu(const std::string& nonlinearity);
// A gated activation of up(x) and gate(x), as modelzoo's bivariate GLUs: act(gate) * up, and
// swiglu_clamped's (clamp(up, -7, 7) + 1) * quick_gelu(min(gate, 7)) (gpt-oss).
torch::Tensor glu(const std::string& nonlinearity, const torch::Tensor& up, const torch::Tensor& gate);

class FFNLayerImpl : public torch::nn::Module {
 public:
  FFNLayerImpl(int64_t in, int64_t out, bool bias, const torch::TensorOptions& p, bool glu = false);
  Dense linear_layer{nullptr};
  Dense linear_layer_for_glu{nullptr};  // the gate of a GLU layer (modelzoo's name)
};
TORCH_MODULE(FFNLayer);

struct FeedForwardOptions {
  int64_t input_size = 0;
  int64_t filter_size = 0;            // hidden units
  std::string nonlinearity = "gelu";  // after the first layer
  bool use_bias = true;
  double dropout = 0.0;                // after the activation, as modelzoo's FeedForwardNetwork
  InitializerSpec initializer;         // first layer
  InitializerSpec output_initializer;  // last layer
};

class FeedForwardImpl : public torch::nn::Module {
 public:
  FeedForwardImpl(const FeedForwardOptions& options, const torch::TensorOptions& param_options);
  // (B, T, C) -> (B, T, C); without_output_bias: the last layer's bias
  // (output_bias()) left for the caller to add.
  torch::Tensor forward(const torch::Tensor& x, bool without_output_bias = false);
  const torch::Tensor& output_bias() const;  // undefined: none
  void reset_parameters();
  torch::nn::ModuleList ffn;  // [0]: C -> filter_size, [1]: filter_size -> C

 private:
  FeedForwardOptions options_;
};
TORCH_MODULE(FeedForward);

// modelzoo's FeedForwardNetwork of one layer (poolers, classifier heads): a
// module whose only layer, `layer` (a Dense, an OutputHead), sits at ffn.0.linear_layer.
std::shared_ptr<torch::nn::Module> one_layer_network(const std::shared_ptr<torch::nn::Module>& layer);

}  // namespace zoo::models
