// Which of zoo's fused kernels each layer of a built model runs, decided in
// one place: apply_fusion, which the runner calls once the model is built on
// its device and the run's kernel policy (models/kernels/policy.h) is set, as
// torchtitan applies parallelism from outside the model. Layers compute
// their math; the plans set here only say where a fused kernel may take a
// step of it. A layer nobody planned takes LibTorch's ops throughout (the
// reference the fused paths are tested against: tests/test_fusion.cpp).
// Defines: AttentionKernel, AttentionCall, AttentionPlan, DecoderLayerFusion, apply_fusion.
#pragma once

#include <torch/torch.h>

namespace zoo::models {

enum class AttentionKernel {
  reference,   // reference_attention: softmax attention op by op (models/common/attention.h)
  sdpa,        // at::scaled_dot_product_attention (LibTorch >= 2.1)
  cpu_causal,  // zoo's CPU causal attention (models/kernels/cpu/causal_attention.h)
};

// What one call of the attention brings that no plan can know ahead.
struct AttentionCall {
  int64_t past = 0;            // positions already in the cache
  int64_t positions = 0;       // new positions (T)
  bool key_mask = false;       // padding hidden from every query
  bool dropout = false;        // probabilities dropped (training with attention dropout)
  bool position_bias = false;  // added to the scores (T5)
  bool alibi = false;          // ALiBi slopes given
  bool trained_alibi = false;  // ... that need their gradient (only the reference gives it)
  bool packed = false;         // rows pack several sequences, each attending only within itself
  torch::Tensor packed_qkv;    // q, k and v side by side, as the CPU kernel reads them; undefined: not packed
};

// A self-attention layer's plan: which fused kernels its options leave it
// (a causal mask, its window, sinks, soft-capping), on its device.
struct AttentionPlan {
  bool sdpa = false;
  bool cpu_causal = false;
  bool cross_sdpa = false;  // attend_to (cross-attention) through SDPA
  bool causal = true;
  AttentionKernel kernel_for(const AttentionCall& call) const;
};

// A decoder layer's plan.
struct DecoderLayerFusion {
  // The attention's and the FFN's output biases are added by the norm after
  // each residual add (norm3's, then the next layer's norm1 or the final
  // norm), whose kernel also sums their gradients in its own pass.
  bool output_biases_in_norms = false;
};

// Plans every attention module and decoder layer of `model` (its parameters
// on the device they run on) for the current kernel policy.
void apply_fusion(torch::nn::Module& model);

}  // namespace zoo::models
