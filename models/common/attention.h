// Multi-head self-attention (causal, or an encoder's) with modelzoo's projection names
// (proj_{q,k,v,output}_dense_layer) so checkpoints map one-to-one.
// Defines: ScoreOptions, reference_attention, sequence_starts, LayerKV, AttentionOptions, MultiheadAttention.
#pragma once

#include <torch/torch.h>

#include <optional>

#include "models/common/initializers.h"
#include "models/common/layers.h"
#include "models/common/rotary.h"
#include "models/fusion.h"

namespace zoo::models {

// How reference_attention turns scores q.k into probabilities.
struct ScoreOptions {
  double scale = 1.0;
  bool causal = true;              // query i sees keys up to its own position (false: an encoder's, all keys)
  int64_t sliding_window = 0;      // causal: at most this many most recent keys; 0: all
  int64_t sink_tokens = 0;         // with sliding_window: the first keys stay visible (StreamingLLM)
  torch::Tensor alibi_slopes;      // (H): add slope_h * j to the score of key j (ALiBi; causal only)
  torch::Tensor key_mask;          // (B, keys) bool: false hides a key (padding) from every query
  double logit_softcapping = 0.0;  // scores -> cap * tanh(scores / cap) before the mask; 0: none
  torch::Tensor bias;              // (H, T, keys) or broadcastable: added to the scaled scores (T5's position bias)
  torch::Tensor sequence_start;    // (B, T) int64, causal rows packing sequences: query i sees no key before it
  bool softmax_fp32 = true;
  double dropout = 0.0;  // on the probabilities
};

// Softmax attention written out op by op (the reference the fused kernels are
// tested against). q: (B, H, T, D); k, v: (B, G, past + T, D), G dividing H;
// query i sits at position past + i. ALiBi's slope_h * j is, after softmax,
// the paper's -slope_h * (i - j). Returns (B, H, T, D).
torch::Tensor reference_attention(const torch::Tensor& q, torch::Tensor k, torch::Tensor v, const ScoreOptions& o);

// Rows packing several sequences: from each token's position in its own
// sequence (B, T), the place of that sequence's first token in the row.
torch::Tensor sequence_starts(const torch::Tensor& packed_positions);

// One layer's cached keys and values, (B, positions so far, key/value heads, D).
struct LayerKV {
  torch::Tensor keys, values;
};

struct AttentionOptions {
  int64_t hidden_size = 0;
  int64_t num_heads = 1;
  int64_t num_kv_groups = 0;           // key/value heads (GQA/MQA); 0: num_heads
  int64_t inner_dim = 0;               // heads x head size of q/k/v; 0: hidden_size
  RotaryOptions rotary;                // rotary position embedding (rotary.dim 0: none)
  int64_t sliding_window = 0;          // attend to at most this many most recent positions; 0: all
  int64_t sink_tokens = 0;             // with sliding_window: the first positions stay visible (StreamingLLM)
  bool use_projection_bias = true;     // q/k/v projections
  bool use_output_bias = true;         // output projection (modelzoo: use_ffn_bias_in_attention)
  double dropout = 0.0;                // on attention probabilities
  bool scale_by_sqrt_head_dim = true;  // "scaled_dot_product" (true) or "dot_product" (false)
  bool scale_by_head_dim = false;      // with scale_by_sqrt_head_dim: 1/D instead of 1/sqrt(D) (muP)
  double logit_multiplier = 1.0;       // further factor on the scores (1/(layer+1): scale_qk_dot_by_layer_idx)
  double logit_softcapping = 0.0;      // scores -> cap * tanh(scores / cap) before the mask (Gemma 2); 0: none
  // q and k each normalized over the head's dims (q_norm, k_norm) before
  // the rotary: "" none, "rmsnorm" or "layernorm" (Qwen3, OLMo).
  std::string qk_norm;
  double qk_norm_eps = 1e-5;
  bool causal = true;                            // false: every query sees every (unpadded) key, as in an encoder
  bool softmax_fp32 = true;                      // softmax in float32 under reduced precision
  InitializerSpec initializer;                   // q/k/v
  std::optional<InitializerSpec> q_initializer;  // the query projection's, when it differs (T5)
  InitializerSpec output_initializer;            // output projection
};

class MultiheadAttentionImpl : public torch::nn::Module {
 public:
  MultiheadAttentionImpl(const AttentionOptions& options, const torch::TensorOptions& param_options);
  // x: (B, T, C) -> (B, T, C), causal unless options.causal is false. With a
  // cache, x continues the cached positions and its keys/values are appended.
  // alibi_slopes, key_mask (B, T): see ScoreOptions; position_bias (H, T,
  // past + T): ScoreOptions::bias. without_output_bias: the output
  // projection's bias (output_bias()) left for the caller to add.
  // packed_positions (B, T), for rows that pack several sequences (no
  // cache): each token's position in its own sequence, 0 at its first
  // token; a query then sees only keys of its own sequence, and rotary
  // embeddings rotate by these positions.
  torch::Tensor forward(const torch::Tensor& x, LayerKV* cache = nullptr, const torch::Tensor& alibi_slopes = {},
                        const torch::Tensor& key_mask = {}, const torch::Tensor& position_bias = {},
                        bool without_output_bias = false, const torch::Tensor& packed_positions = {});
  const torch::Tensor& output_bias() const { return proj_output_dense_layer->bias; }  // undefined: none
  // Cross-attention: queries from x (B, T, C), keys and values from memory
  // (B, S, C), which every query sees except where memory_mask (B, S) is false.
  torch::Tensor attend_to(const torch::Tensor& x, const torch::Tensor& memory, const torch::Tensor& memory_mask);
  void reset_parameters();
  const AttentionOptions& options() const { return options_; }

  AttentionPlan plan;  // which fused kernels may serve (apply_fusion); default: the reference only
  Dense proj_q_dense_layer{nullptr}, proj_k_dense_layer{nullptr}, proj_v_dense_layer{nullptr},
      proj_output_dense_layer{nullptr};
  LayerNorm q_norm{nullptr}, k_norm{nullptr};  // with options.qk_norm

 private:
  int64_t kv_heads() const { return options_.num_kv_groups > 0 ? options_.num_kv_groups : options_.num_heads; }
  int64_t inner_dim() const { return options_.inner_dim > 0 ? options_.inner_dim : options_.hidden_size; }
  double score_scale(int64_t head_dim) const;
  AttentionOptions options_;
};
TORCH_MODULE(MultiheadAttention);

}  // namespace zoo::models
