// Implementation of models/common/cross_decoder.h.
#include "models/common/cross_decoder.h"

#include "models/common/layer_hooks.h"
#include "models/common/recompute.h"

namespace zoo::models {

CrossDecoderLayerImpl::CrossDecoderLayerImpl(const EncoderLayerOptions& o, const torch::TensorOptions& p)
    : dropout_(o.dropout), norm_first_(o.norm_first) {
  AttentionOptions causal = o.attention, cross = o.attention;
  causal.causal = true;
  cross.causal = false;
  self_attn = register_module("self_attn", MultiheadAttention(causal, p));
  norm1 = register_module("norm1", encoder_layer_norm(o, p));
  multihead_attn = register_module("multihead_attn", MultiheadAttention(cross, p));
  norm2 = register_module("norm2", encoder_layer_norm(o, p));
  ffn = register_module("ffn", FeedForward(o.ffn, p));
  norm3 = register_module("norm3", encoder_layer_norm(o, p));
}

void CrossDecoderLayerImpl::reset_parameters() {
  self_attn->reset_parameters();
  multihead_attn->reset_parameters();
  ffn->reset_parameters();
  norm1->reset_parameters();
  norm2->reset_parameters();
  norm3->reset_parameters();
}

torch::Tensor CrossDecoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& memory,
                                             const torch::Tensor& memory_mask, const torch::Tensor& self_bias) {
  auto drop = [&](const torch::Tensor& t) { return dropout_ > 0 ? torch::dropout(t, dropout_, is_training()) : t; };
  auto attend_self = [&](const torch::Tensor& h) { return self_attn->forward(h, nullptr, {}, {}, self_bias); };
  auto attend_memory = [&](const torch::Tensor& h) { return multihead_attn->attend_to(h, memory, memory_mask); };
  if (norm_first_) {
    torch::Tensor h = x + drop(attend_self(norm1(x)));
    h = h + drop(attend_memory(norm2(h)));
    return h + drop(ffn(norm3(h)));
  }
  torch::Tensor h = norm1(x + drop(attend_self(x)));
  h = norm2(h + drop(attend_memory(h)));
  return norm3(h + drop(ffn(h)));
}

CrossDecoderImpl::CrossDecoderImpl(int64_t num_layers, const EncoderLayerOptions& o, const torch::TensorOptions& p)
    : recompute_(o.recompute) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(CrossDecoderLayer(o, p));
  if (o.final_norm) norm = register_module("norm", encoder_layer_norm(o, p));
}

void CrossDecoderImpl::reset_parameters() {
  for (auto& layer : *layers) layer->as<CrossDecoderLayerImpl>()->reset_parameters();
  if (norm) norm->reset_parameters();
}

torch::Tensor CrossDecoderImpl::forward(torch::Tensor x, const torch::Tensor& memory, const torch::Tensor& memory_mask,
                                        const torch::Tensor& self_bias) {
  const bool recompute = recompute_ && is_training() && torch::GradMode::is_enabled();
  for (auto& module : *layers) {
    auto* layer = module->as<CrossDecoderLayerImpl>();
    if (!recompute) {
      before_layer(layer_hooks, *layer);
      x = after_layer(layer_hooks, *layer, layer->forward(x, memory, memory_mask, self_bias));
      continue;
    }
    // The encoder's output and the bias feed every layer: inputs of each recomputed block, back-propagated once.
    x = recompute_with_inputs_in_backward(
        [hooks = layer_hooks, layer, memory_mask](const std::vector<torch::Tensor>& in) {
          before_layer(hooks, *layer);
          std::vector<torch::Tensor> y{layer->forward(in[0], in[1], memory_mask, in[2])};
          after_layer(hooks, *layer, y);
          return y;
        },
        {x, memory, self_bias})[0];
  }
  return norm ? norm(x) : x;
}

}  // namespace zoo::models
