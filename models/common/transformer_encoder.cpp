// Implementation of models/common/transformer_encoder.h.
#include "models/common/transformer_encoder.h"

#include "models/common/layer_hooks.h"
#include "models/common/recompute.h"

namespace zoo::models {

LayerNorm encoder_layer_norm(const EncoderLayerOptions& o, const torch::TensorOptions& p) {
  return LayerNorm(o.attention.hidden_size, o.layer_norm_epsilon, p, o.rms_norm);
}

TransformerEncoderLayerImpl::TransformerEncoderLayerImpl(const EncoderLayerOptions& o, const torch::TensorOptions& p)
    : options_(o) {
  AttentionOptions attention = o.attention;
  attention.causal = o.causal;
  self_attn = register_module("self_attn", MultiheadAttention(attention, p));
  ffn = register_module("ffn", FeedForward(o.ffn, p));
  norm1 = register_module("norm1", encoder_layer_norm(o, p));
  norm2 = register_module("norm2", encoder_layer_norm(o, p));
  if (o.layer_scale) {
    layer_scale1 = register_parameter("layer_scale1", torch::empty({o.attention.hidden_size}, p));
    layer_scale2 = register_parameter("layer_scale2", torch::empty({o.attention.hidden_size}, p));
  }
}

void TransformerEncoderLayerImpl::reset_parameters() {
  self_attn->reset_parameters();
  ffn->reset_parameters();
  norm1->reset_parameters();
  norm2->reset_parameters();
  if (options_.layer_scale && !layer_scale1.is_meta()) {
    torch::NoGradGuard no_grad;
    layer_scale1.fill_(*options_.layer_scale);
    layer_scale2.fill_(*options_.layer_scale);
  }
}

torch::Tensor TransformerEncoderLayerImpl::branch(torch::Tensor x, const torch::Tensor& scale) {
  if (options_.dropout > 0) x = torch::dropout(x, options_.dropout, is_training());
  if (scale.defined()) x = x * scale.to(x.scalar_type());
  const double p = options_.drop_path;
  if (p > 0 && is_training()) {
    // 0 with probability p, else 1 / (1 - p): for the whole batch, or per sample.
    std::vector<int64_t> shape(static_cast<size_t>(x.dim()), 1);
    if (options_.drop_path_rows) shape[0] = x.size(0);
    x = x * torch::dropout(torch::ones(shape, x.options()), p, true);
  }
  return x;
}

torch::Tensor TransformerEncoderLayerImpl::forward(const torch::Tensor& x, const torch::Tensor& key_mask,
                                                   const torch::Tensor& position_bias) {
  if (options_.norm_first) {
    torch::Tensor h = x + branch(self_attn->forward(norm1(x), nullptr, {}, key_mask, position_bias), layer_scale1);
    return h + branch(ffn(norm2(h)), layer_scale2);
  }
  torch::Tensor h = norm1(x + branch(self_attn->forward(x, nullptr, {}, key_mask, position_bias), layer_scale1));
  return norm2(h + branch(ffn(h), layer_scale2));
}

TransformerEncoderImpl::TransformerEncoderImpl(int64_t num_layers, const EncoderLayerOptions& o,
                                               const torch::TensorOptions& p)
    : recompute_(o.recompute) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    EncoderLayerOptions layer = o;
    if (o.drop_path_linear) layer.drop_path = num_layers > 1 ? o.drop_path * double(i) / double(num_layers - 1) : 0.0;
    layers->push_back(TransformerEncoderLayer(layer, p));
  }
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
      before_layer(layer_hooks, *layer);
      x = after_layer(layer_hooks, *layer, layer->forward(x, key_mask, position_bias));
      continue;
    }
    // The bias, shared by every layer, is an input of each recomputed block: back-propagated once.
    x = recompute_with_inputs_in_backward(
        [hooks = layer_hooks, layer, key_mask](const std::vector<torch::Tensor>& in) {
          before_layer(hooks, *layer);
          std::vector<torch::Tensor> y{layer->forward(in[0], key_mask, in[1])};
          after_layer(hooks, *layer, y);
          return y;
        },
        {x, position_bias})[0];
  }
  return norm && all ? norm(x) : x;
}

}  // namespace zoo::models
