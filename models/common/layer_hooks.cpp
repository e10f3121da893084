// Implementation of models/common/layer_hooks.h.
#include "models/common/layer_hooks.h"

#include <algorithm>
#include <atomic>

#include "models/common/cross_decoder.h"
#include "models/common/transformer_decoder.h"
#include "models/common/transformer_encoder.h"

namespace zoo::models {

namespace {
std::atomic<LayerHooks*> g_hooks{nullptr};
}  // namespace

void set_layer_hooks(LayerHooks* hooks) { g_hooks = hooks; }

bool layer_hooks_set() { return g_hooks.load() != nullptr; }

void before_layer(const torch::nn::Module& layer) {
  if (LayerHooks* h = g_hooks.load()) h->before(layer);
}

void after_layer(const torch::nn::Module& layer, std::vector<torch::Tensor> outputs) {
  LayerHooks* h = g_hooks.load();
  if (!h) return;
  outputs.erase(std::remove_if(outputs.begin(), outputs.end(), [](const torch::Tensor& t) { return !t.defined(); }),
                outputs.end());
  h->after(layer, outputs);
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
