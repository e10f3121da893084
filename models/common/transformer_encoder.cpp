// Implementation of models/common/transformer_encoder.h.
#include "models/common/transformer_encoder.h"

#include "models/common/recompute.h"

namespace zoo::models {

LayerNorm encoder_layer_norm(const EncoderLayerOptions& o, const torch::TensorOptions& p) {
  return LayerNorm(o.attention.hidden_size, o.layer_norm_epsilon, p, o.rms_norm);
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const EncoderLayerOptions& o, const torch::TensorOptions& p)
    : dropout_(o.dropout), norm_first_(o.norm_first) {
  AttentionOptions attention = o.attention;
  attention.causal = false;
  self_attn = register_module("self_attn", MultiheadAttention(attention, p));
  ffn = register_module("ffn", FeedForward(o.ffn, p));
  norm1 = register_module("norm1", encoder_layer_norm(o, p));
  norm2 = register_module("norm2", encoder_layer_norm(o, p));
}

void TransformerEncoderLayerImpl::reset_parameters() {
  self_attn->reset_parameters();
  ffn->reset_parameters();
  norm1->reset_parameters();
  norm2->reset_parameters();
}

torch::Tensor TransformerEncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& key_mask,
                                                   const torch::Tensor& position_bias) {
  auto drop = [&](const torch::Tensor& t) { return dropout_ > 0 ? torch::dropout(t, dropout_, is_training()) : t; };
  if (norm_first_) {
    torch::Tensor h = x + drop(self_attn->forward(norm1(x), nullptr, {}, key_mask, position_bias));
    return h + drop(ffn(norm2(h)));
  }
  torch::Tensor h = norm1(x + drop(self_attn->forward(x, nullptr, {}, key_mask, position_bias)));
  return norm2(h + drop(ffn(h)));
}

TransformerEncoderImpl::TransformerEncoderImpl(int64_t num_layers, const EncoderLayerOptions& o,
                                               const torch::TensorOptions& p)
    : recompute_(o.recompute) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) layers->push_back(TransformerEncoderLayer(o, p));
  if (o.final_norm) norm = register_module("norm", encoder_layer_norm(o, p));
}

void TransformerEncoderImpl::reset_parameters() {
  for (auto& layer : *layers) layer->as<TransformerEncoderLayerImpl>()->reset_parameters();
  if (norm) norm->reset_parameters();
}

torch::Tensor TransformerEncoderImpl::forward(torch::Tensor x, const torch::Tensor& key_mask,
                                              const torch::Tensor& position_bias, int64_t num_layers) {
  const bool recompute = recompute_ && is_training() && torch::GradMode::is_enabled();
  const bool all = num_layers < 0;
  if (all) num_layers = static_cast<int64_t>(layers->size());
  TORCH_CHECK(num_layers <= static_cast<int64_t>(layers->size()), "TransformerEncoder: ", num_layers,
              " layers asked of ", layers->size());
  for (int64_t i = 0; i < num_layers; ++i) {
    auto* layer = layers[i]->as<TransformerEncoderLayerImpl>();
    if (!recompute) {
      x = layer->forward(x, key_mask, position_bias);
      continue;
    }
    // The bias, shared by every layer, is an input of each recomputed block: back-propagated once.
    x = recompute_with_inputs_in_backward(
        [layer, key_mask](const std::vector<torch::Tensor>& in) {
          return std::vector<torch::Tensor>{layer->forward(in[0], key_mask, in[1])};
        },
        {x, position_bias})[0];
  }
  return norm && all ? norm(x) : x;
}

}  // namespace zoo::models
