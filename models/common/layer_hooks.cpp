// Implementation of models/common/layer_hooks.h.
#include "models/common/layer_hooks.h"

#include "models/common/cross_decoder.h"
#include "models/common/transformer_decoder.h"
#include "models/common/transformer_encoder.h"

namespace zoo::models {

namespace {

// Calls visit(layers, hooks) for each layer stack of `model`: the one list
// of the kinds of stack, for setting hooks and for listing hooked layers.
template <typename Visit>
void for_each_stack(const torch::nn::Module& model, Visit visit) {
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* d = dynamic_cast<TransformerDecoderImpl*>(m.get())) visit(d->layers, d->layer_hooks);
    else if (auto* e = dynamic_cast<TransformerEncoderImpl*>(m.get())) visit(e->layers, e->layer_hooks);
    else if (auto* c = dynamic_cast<CrossDecoderImpl*>(m.get())) visit(c->layers, c->layer_hooks);
  }
}

}  // namespace

void set_layer_hooks(torch::nn::Module& model, LayerHooks* hooks) {
  for_each_stack(model, [hooks](const torch::nn::ModuleList&, LayerHooks*& stack_hooks) { stack_hooks = hooks; });
}

void before_layer(LayerHooks* hooks, const torch::nn::Module& layer) {
  if (hooks) hooks->before(layer);
}

void after_layer(LayerHooks* hooks, const torch::nn::Module& layer, std::vector<torch::Tensor>& outputs) {
  if (hooks) hooks->after(layer, outputs);
}

torch::Tensor after_layer(LayerHooks* hooks, const torch::nn::Module& layer, const torch::Tensor& output) {
  if (!hooks) return output;
  std::vector<torch::Tensor> outputs{output};
  hooks->after(layer, outputs);
  return outputs[0];
}

std::vector<std::shared_ptr<torch::nn::Module>> hooked_layers(const torch::nn::Module& model) {
  std::vector<std::shared_ptr<torch::nn::Module>> out;
  for_each_stack(model, [&](const torch::nn::ModuleList& layers, LayerHooks*&) {
    for (const auto& layer : *layers) out.push_back(layer);
  });
  return out;
}

}  // namespace zoo::models
