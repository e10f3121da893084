// Implementation of models/fusion.h: every condition under which a fused
// kernel takes a step of a layer's math.
#include "models/fusion.h"

#include "models/common/attention.h"
#include "models/common/transformer_decoder.h"
#include "models/kernels/cpu/causal_attention.h"
#include "models/kernels/policy.h"
#include "models/kernels/torch_version.h"

namespace zoo::models {
namespace {

constexpr bool kHaveSdpa = ZOO_TORCH_AT_LEAST(2, 1);  // SDPA's `scale` arrived in 2.1

// SDPA computes plain softmax attention, causal aligned top-left, or with a
// boolean key mask: no windows, soft-capping, ALiBi or added biases.
AttentionPlan plan_attention(const AttentionOptions& o, const torch::Tensor& weight) {
  AttentionPlan plan;
  const bool plain_scores = o.logit_softcapping == 0;
  plan.sdpa = kHaveSdpa && plain_scores && o.sliding_window == 0;
  plan.cross_sdpa = kHaveSdpa && plain_scores;
  // zoo's CPU kernel: causal (a window and ALiBi slopes included), no sinks;
  // float32 on the CPU (checked again per call: autocast changes the type).
  plan.causal = o.causal;
  plan.cpu_causal = o.causal && o.sink_tokens == 0 && plain_scores && weight.device().is_cpu() &&
                    weight.scalar_type() == torch::kFloat && kernel_policy().cpu_kernels;
  return plan;
}

// The biases are handed on only where nothing else touches the branch first
// (dropout, a norm of the branch), where the branch is one tensor (not the
// parallel layer's two, not experts'), and where norm3's kernel sums the
// bias gradient in its own pass (takes_branch_bias: zoo's CPU loops, or the
// CUDA kernels for rows they hold).
DecoderLayerFusion plan_decoder_layer(TransformerDecoderLayerImpl& layer) {
  DecoderLayerFusion f;
  if (layer.dropout() > 0 || layer.parallel() || layer.norm1_post || layer.moe || !layer.norm3) return f;
  if (!layer.self_attn->output_bias().defined() && !layer.ffn->output_bias().defined()) return f;  // none to hand on
  const torch::Tensor& w = layer.norm3->weight;
  if (w.is_meta()) return f;
  f.output_biases_in_norms = layer.norm3->takes_branch_bias(torch::empty({1, w.size(0)}, w.options()));
  return f;
}

}  // namespace

AttentionKernel AttentionPlan::kernel_for(const AttentionCall& c) const {
  const bool whole_sequence = c.past == 0;  // causal masks align top-left: right only without a cache
  // Packed rows reach SDPA as an explicit mask, which then holds no padding too.
  if (sdpa && (whole_sequence || c.positions == 1) && !c.alibi && !c.position_bias &&
      !(causal && whole_sequence && c.positions > 1 && c.key_mask) && !(c.packed && c.key_mask))
    return AttentionKernel::sdpa;
  if (cpu_causal && whole_sequence && !c.key_mask && !c.position_bias && !c.dropout && !c.trained_alibi &&
      c.packed_qkv.defined() && causal_attention_available(c.packed_qkv))
    return AttentionKernel::cpu_causal;
  return AttentionKernel::reference;
}

void apply_fusion(torch::nn::Module& model) {
  for (const auto& item : model.named_modules()) {
    torch::nn::Module* m = item.value().get();
    if (auto* attention = dynamic_cast<MultiheadAttentionImpl*>(m))
      attention->plan = plan_attention(attention->options(), attention->proj_q_dense_layer->weight);
    else if (auto* layer = dynamic_cast<TransformerDecoderLayerImpl*>(m)) layer->fusion = plan_decoder_layer(*layer);
  }
}

}  // namespace zoo::models
