// Implementation of models/common/layer_hooks.h.
#include "models/common/layer_hooks.h"

#include "models/common/cross_decoder.h"
#include "models/common/transformer_decoder.h"
#include "models/common/transformer_encoder.h"

namespace zoo::models {

void set_layer_hooks(torch::nn::Module& model, LayerHooks* hooks) {
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (auto* d = dynamic_cast<TransformerDecoderImpl*>(m.get())) d->layer_hooks = hooks;
    else if (auto* e = dynamic_cast<TransformerEncoderImpl*>(m.get())) e->layer_hooks = hooks;
    else if (auto* c = dynamic_cast<CrossDecoderImpl*>(m.get())) c->layer_hooks = hooks;
  }
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
  auto take = [&](const torch::nn::ModuleList& layers) {
    for (const auto& layer : *layers) out.push_back(layer);
  };
  for (const auto& m : model.modules(/*include_self=*/true)) {
    if (const auto* d = dynamic_cast<const TransformerDecoderImpl*>(m.get())) take(d->layers);
    else if (const auto* e = dynamic_cast<const TransformerEncoderImpl*>(m.get())) take(e->layers);
    else if (const auto* c = dynamic_cast<const CrossDecoderImpl*>(m.get())) take(c->layers);
  }
  return out;
}

}  // namespace zoo::models
