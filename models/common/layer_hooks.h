// A seam for what is applied to a model's repeated layers from outside the
// model, as PyTorch's module hooks allow: the layer stacks (transformer
// decoder, encoder, cross decoder) call before_layer and after_layer around
// each layer's forward, also when activation checkpointing runs it again in
// the backward pass. The runner's full sharding gathers a layer's weights
// there and frees them after. Without hooks set, both calls do nothing.
// Defines: LayerHooks, set_layer_hooks, before_layer, after_layer, hooked_layers.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

namespace zoo::models {

class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before(const torch::nn::Module& layer) = 0;
  // `outputs`: the tensors the layer returned (undefined ones left out), so
  // that a hook can act when their gradients arrive in the backward pass.
  virtual void after(const torch::nn::Module& layer, const std::vector<torch::Tensor>& outputs) = 0;
};

// Process-wide; nullptr (the default) removes them.
void set_layer_hooks(LayerHooks* hooks);
// Hooks are set: a layer's outputs must then not be its own parameters, which
// the hooks may free once it returns.
bool layer_hooks_set();
void before_layer(const torch::nn::Module& layer);
void after_layer(const torch::nn::Module& layer, std::vector<torch::Tensor> outputs);

// The layers of `model` whose stacks call the hooks, in forward order.
std::vector<std::shared_ptr<torch::nn::Module>> hooked_layers(const torch::nn::Module& model);

}  // namespace zoo::models
