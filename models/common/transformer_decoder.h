// Pre-norm transformer decoder stack shared by decoder-only families, named as
// modelzoo's (transformer_decoder.layers.{i}.{norm1,self_attn,norm3,ffn}, .norm).
// Defines: DecoderLayerOptions, TransformerDecoderLayer, TransformerDecoder.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/common/attention.h"
#include "models/common/ffn.h"
#include "models/common/layers.h"

namespace zoo::models {

struct DecoderLayerOptions {
  AttentionOptions attention;
  FeedForwardOptions ffn;
  double layer_norm_epsilon = 1e-5;
  bool rms_norm = false;  // RMSNorm instead of LayerNorm
  double dropout = 0.0;  // on each residual branch
  bool recompute = false;  // activation checkpointing: each layer recomputed in the backward pass
};

class TransformerDecoderLayerImpl : public torch::nn::Module {
 public:
  TransformerDecoderLayerImpl(const DecoderLayerOptions& options, const torch::TensorOptions& p);
  // x + attn(norm1(x)), then + ffn(norm3(x)). (norm2 is the cross-attention norm
  // of encoder-decoder models, absent here.)
  torch::Tensor forward(const torch::Tensor& x, LayerKV* cache = nullptr);
  void reset_parameters();

  LayerNorm norm1{nullptr}, norm3{nullptr};
  MultiheadAttention self_attn{nullptr};
  FeedForward ffn{nullptr};

 private:
  double dropout_;
};
TORCH_MODULE(TransformerDecoderLayer);

class TransformerDecoderImpl : public torch::nn::Module {
 public:
  TransformerDecoderImpl(int64_t num_layers, const DecoderLayerOptions& options, const torch::TensorOptions& p);
  // (B, T, C) -> (B, T, C), final norm applied. `cache`, when given, holds one
  // LayerKV per layer (resized on first use) for incremental decoding.
  torch::Tensor forward(torch::Tensor x, std::vector<LayerKV>* cache = nullptr);
  void reset_parameters();

  torch::nn::ModuleList layers;
  LayerNorm norm{nullptr};

 private:
  bool recompute_;
};
TORCH_MODULE(TransformerDecoder);

}  // namespace zoo::models
