// A seam for what is applied to a model's repeated layers from outside the
// model, as PyTorch's forward pre- and post-hooks allow: the layer stacks
// (transformer decoder, encoder, cross decoder) call before_layer and
// after_layer around each layer's forward, also when activation
// checkpointing runs it again in the backward pass. Hooks are set on one
// model's stacks (set_layer_hooks); a post-hook may replace what the layer
// returned, as PyTorch's may. Without hooks, both calls do nothing.
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
  // `outputs`: the tensors the layer returned (some may be undefined), which
  // the hook may replace; it may also act when their gradients arrive in
  // the backward pass.
  virtual void after(const torch::nn::Module& layer, std::vector<torch::Tensor>& outputs) = 0;
};

// Sets `hooks` on every layer stack of `model`; nullptr removes them.
void set_layer_hooks(torch::nn::Module& model, LayerHooks* hooks);
// What a stack calls around a layer with its hooks (null: none).
void before_layer(LayerHooks* hooks, const torch::nn::Module& layer);
void after_layer(LayerHooks* hooks, const torch::nn::Module& layer, std::vector<torch::Tensor>& outputs);
// For a layer with one output: the output, or what the hook replaced it by.
torch::Tensor after_layer(LayerHooks* hooks, const torch::nn::Module& layer, const torch::Tensor& output);

// The layers of `model` whose stacks call the hooks, in forward order.
std::vector<std::shared_ptr<torch::nn::Module>> hooked_layers(const torch::nn::Module& model);

}  // namespace zoo::models
