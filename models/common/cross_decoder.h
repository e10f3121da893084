// Decoder stack of an encoder-decoder Transformer (T5's, the original
// Transformer's): causal self-attention, cross-attention to the encoder's
// output, and a feed-forward network, named as modelzoo's TransformerDecoder
// with cross-attention (layers.{i}.{self_attn, norm1, multihead_attn, norm2,
// ffn, norm3}, norm). Post-norm unless norm_first. Takes the encoder's layer
// options, which describe the same parts.
// Defines: CrossDecoderLayer, CrossDecoder.
#pragma once

#include <torch/torch.h>

#include "models/common/attention.h"
#include "models/common/ffn.h"
#include "models/common/layers.h"
#include "models/common/transformer_encoder.h"

namespace zoo::models {

class LayerHooks;

class CrossDecoderLayerImpl : public torch::nn::Module {
 public:
  CrossDecoderLayerImpl(const EncoderLayerOptions& options, const torch::TensorOptions& p);
  // x (B, T, C) attends causally to itself (plus self_bias (H, T, T) when
  // defined), then to memory (B, S, C) except where memory_mask (B, S) is false.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& memory_mask,
                        const torch::Tensor& self_bias);
  void reset_parameters();

  MultiheadAttention self_attn{nullptr}, multihead_attn{nullptr};
  LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
  FeedForward ffn{nullptr};

 private:
  double dropout_;
  bool norm_first_;
};
TORCH_MODULE(CrossDecoderLayer);

class CrossDecoderImpl : public torch::nn::Module {
 public:
  CrossDecoderImpl(int64_t num_layers, const EncoderLayerOptions& options, const torch::TensorOptions& p);
  // (B, T, C) -> (B, T, C), the final norm applied when options.final_norm.
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& memory, const torch::Tensor& memory_mask,
                        const torch::Tensor& self_bias = {});
  void reset_parameters();

  torch::nn::ModuleList layers;
  LayerNorm norm{nullptr};
  // Called around each layer (models/common/layer_hooks.h); set from outside the model.
  LayerHooks* layer_hooks = nullptr;

 private:
  bool recompute_;
};
TORCH_MODULE(CrossDecoder);

}  // namespace zoo::models
