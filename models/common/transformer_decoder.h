// Pre-norm transformer decoder stack shared by decoder-only families, named as
// modelzoo's (transformer_decoder.layers.{i}.{norm1,self_attn,norm3,ffn}, .norm).
// Sequential layers (GPT-2, LLaMA) or parallel ones (GPT-J, GPT-NeoX, Falcon).
// Defines: DecoderLayerOptions, TransformerDecoderLayer, TransformerDecoder.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "models/common/attention.h"
#include "models/common/ffn.h"
#include "models/common/layers.h"
#include "models/common/moe.h"

namespace zoo::models {

class LayerHooks;

struct DecoderLayerOptions {
  AttentionOptions attention;
  FeedForwardOptions ffn;
  double layer_norm_epsilon = 1e-5;
  bool rms_norm = false;  // RMSNorm instead of LayerNorm
  bool norm_bias = true;  // LayerNorm's bias (false: MPT's biasless-layernorm)
  double dropout = 0.0;   // on each residual branch
  // Parallel attention and FFN: x + attn(norm1(x)) + ffn(n(x)), with n = norm3
  // (untied norms: GPT-NeoX, Falcon 40B) or the same norm1 output (GPT-J, Falcon 7B).
  bool parallel_residual = false;
  bool untied_norms = true;            // parallel only; a sequential layer always has norm3
  bool recompute = false;              // activation checkpointing: each layer recomputed in the backward pass
  bool scale_scores_by_layer = false;  // layer i's attention scores also times 1/(i+1) (StarCoder's option)
  // Sequential only: x + norm1_post(attn(norm1(x))), then h + norm3_post(ffn(norm3(h))) (Gemma 2's sandwich).
  bool sandwich_norms = false;
  // Which layers the attention's sliding window applies to: every one (-1),
  // or only the even (0) or the odd (1) ones (Gemma 2 alternates).
  int sliding_window_parity = -1;
  // moe.enabled(): a SparseMoeBlock of experts shaped as `ffn` in place of the FFN.
  MoeOptions moe;
  InitializerSpec moe_gate_initializer;
};

// The residual stream and a branch still to be added to it (undefined:
// none), with the bias of the projection that made the branch (undefined:
// none, or already in the branch): a layer's output left unsummed, so that
// the next norm can take the add into its own pass
// (LayerNorm::add_then_forward), and the bias's gradient from it.
struct Residual {
  torch::Tensor stream, branch, branch_bias;
  torch::Tensor summed() const;  // stream + branch + branch_bias, those defined
};

class TransformerDecoderLayerImpl : public torch::nn::Module {
 public:
  TransformerDecoderLayerImpl(const DecoderLayerOptions& options, const torch::TensorOptions& p);
  // Sequential: h = x + attn(norm1(x)), then h + ffn(norm3(h)). Parallel: see
  // DecoderLayerOptions. (norm2 is the cross-attention norm of encoder-decoder
  // models, absent here.)
  // alibi_slopes: (heads), ALiBi's per-head slopes when the model uses it.
  // moe: what an MoE layer reads and records (null: nothing recorded).
  // key_mask (B, T) bool: false hides a key from every query (LLaVA's
  // missing image); undefined: every key in causal range.
  // packed_positions (B, T): rows packing several sequences, each token's
  // position in its own (see MultiheadAttention::forward).
  torch::Tensor forward(const torch::Tensor& x, LayerKV* cache = nullptr, const torch::Tensor& alibi_slopes = {},
                        MoeContext* moe = nullptr, const torch::Tensor& key_mask = {},
                        const torch::Tensor& packed_positions = {});
  // forward() of in.stream + in.branch, returned as {stream, branch} whose
  // sum is forward()'s output (the same additions, in the same order).
  Residual forward_unsummed(const Residual& in, LayerKV* cache = nullptr, const torch::Tensor& alibi_slopes = {},
                            MoeContext* moe = nullptr, const torch::Tensor& key_mask = {},
                            const torch::Tensor& packed_positions = {});
  void reset_parameters();
  double dropout() const { return dropout_; }
  bool parallel() const { return parallel_; }

  DecoderLayerFusion fusion;  // set by apply_fusion (models/fusion.h); default: nothing fused across layers
  LayerNorm norm1{nullptr}, norm3{nullptr};            // norm3 absent in a parallel layer with tied norms
  LayerNorm norm1_post{nullptr}, norm3_post{nullptr};  // sandwich_norms only
  MultiheadAttention self_attn{nullptr};
  FeedForward ffn{nullptr};
  SparseMoeBlock moe{nullptr};  // in place of ffn (and under its name) when DecoderLayerOptions::moe is on

 private:
  torch::Tensor feed_forward(const torch::Tensor& h, MoeContext* context);
  double dropout_;
  bool parallel_;
};
TORCH_MODULE(TransformerDecoderLayer);

class TransformerDecoderImpl : public torch::nn::Module {
 public:
  TransformerDecoderImpl(int64_t num_layers, const DecoderLayerOptions& options, const torch::TensorOptions& p);
  // (B, T, C) -> (B, T, C), final norm applied. `cache`, when given, holds one
  // LayerKV per layer (resized on first use) for incremental decoding.
  // moe, key_mask, packed_positions: see TransformerDecoderLayer::forward.
  torch::Tensor forward(torch::Tensor x, std::vector<LayerKV>* cache = nullptr, const torch::Tensor& alibi_slopes = {},
                        MoeContext* moe = nullptr, const torch::Tensor& key_mask = {},
                        const torch::Tensor& packed_positions = {});
  void reset_parameters();

  torch::nn::ModuleList layers;
  LayerNorm norm{nullptr};
  // Called around each layer (models/common/layer_hooks.h); set from outside the model.
  LayerHooks* layer_hooks = nullptr;

 private:
  bool recompute_;
};
TORCH_MODULE(TransformerDecoder);

}  // namespace zoo::models
