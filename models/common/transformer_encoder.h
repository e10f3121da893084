// Bidirectional transformer encoder stack (BERT's), named as modelzoo's
// TransformerEncoder (transformer_encoder.layers.{i}.{self_attn,norm1,ffn,norm2},
// .norm). Post-norm as in the original Transformer unless norm_first.
// Defines: EncoderLayerOptions, TransformerEncoderLayer, TransformerEncoder.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "models/common/attention.h"
#include "models/common/ffn.h"
#include "models/common/layers.h"

namespace zoo::models {

class LayerHooks;

struct EncoderLayerOptions {
  AttentionOptions attention;  // attention.causal is not read: see causal
  bool causal = false;         // a causal mask (the layers-API tutorial's); else every key is seen
  FeedForwardOptions ffn;      // its dropout follows the activation
  double layer_norm_epsilon = 1e-5;
  bool rms_norm = false;    // RMSNorm instead of LayerNorm (T5's)
  double dropout = 0.0;     // on the attention output and the FFN output
  bool norm_first = false;  // pre-norm: x + attn(norm1(x)), then h + ffn(norm2(h))
  bool final_norm = false;  // a norm after the last layer (modelzoo's use_final_layer_norm)
  bool recompute = false;   // activation checkpointing: each layer recomputed in the backward pass
  // LayerScale (CaiT, DINOv2): per-channel factors layer_scale1 / layer_scale2,
  // starting at this value, on the attention and FFN outputs.
  std::optional<double> layer_scale;
  // Stochastic depth (modelzoo's StochasticDepth): in training each residual
  // branch is dropped with this probability, for the whole batch at once or
  // (drop_path_rows) per sample, and kept ones scaled by 1 / (1 - p). The
  // stack gives layer i of L the probability drop_path * i / (L - 1) when
  // drop_path_linear (modelzoo's linear schedule), else drop_path.
  double drop_path = 0.0;
  bool drop_path_rows = false;
  bool drop_path_linear = true;
};

// The norm these options describe (LayerNorm or RMSNorm over the hidden size).
LayerNorm encoder_layer_norm(const EncoderLayerOptions& options, const torch::TensorOptions& p);

class TransformerEncoderLayerImpl : public torch::nn::Module {
 public:
  TransformerEncoderLayerImpl(const EncoderLayerOptions& options, const torch::TensorOptions& p);
  // Post-norm: h = norm1(x + attn(x)), then norm2(h + ffn(h)). key_mask (B, T)
  // bool: false for padding, which no position attends to. position_bias
  // (H, T, T), when defined, is added to the attention scores (T5's).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& key_mask, const torch::Tensor& position_bias = {});
  void reset_parameters();

  MultiheadAttention self_attn{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr};
  FeedForward ffn{nullptr};
  torch::Tensor layer_scale1, layer_scale2;  // layer_scale only

 private:
  // A residual branch's output after dropout, layer scale and stochastic depth.
  torch::Tensor branch(torch::Tensor x, const torch::Tensor& scale);
  EncoderLayerOptions options_;
};
TORCH_MODULE(TransformerEncoderLayer);

class TransformerEncoderImpl : public torch::nn::Module {
 public:
  TransformerEncoderImpl(int64_t num_layers, const EncoderLayerOptions& options, const torch::TensorOptions& p);
  // (B, T, C) -> (B, T, C); position_bias as the layers take it, the same for each.
  // num_layers >= 0: only the first num_layers layers and no final norm
  // (modelzoo's extract_layer_idx + 1: features from inside the stack).
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& key_mask, const torch::Tensor& position_bias = {},
                        int64_t num_layers = -1);
  void reset_parameters();

  torch::nn::ModuleList layers;
  LayerNorm norm{nullptr};  // final_norm only
  // Called around each layer (models/common/layer_hooks.h); set from outside the model.
  LayerHooks* layer_hooks = nullptr;

 private:
  bool recompute_;
};
TORCH_MODULE(TransformerEncoder);

}  // namespace zoo::models
