// Implementation of models/common/transformer_decoder.h.
#include "models/common/transformer_decoder.h"

#include "models/common/layer_hooks.h"
#include "models/common/recompute.h"

namespace zoo::models {
namespace {
LayerNorm make_norm(const DecoderLayerOptions& o, const torch::TensorOptions& p) {
  return LayerNorm(o.attention.hidden_size, o.layer_norm_epsilon, p, o.rms_norm, o.norm_bias);
}
}  // namespace

torch::Tensor Residual::summed() const { return residual_sum(stream, branch, branch_bias); }

TransformerDecoderLayerImpl::TransformerDecoderLayerImpl(const DecoderLayerOptions& o, const torch::TensorOptions& p)
    : dropout_(o.dropout), parallel_(o.parallel_residual) {
  const int64_t C = o.attention.hidden_size;
  norm1 = register_module("norm1", make_norm(o, p));
  self_attn = register_module("self_attn", MultiheadAttention(o.attention, p));
  if (!o.parallel_residual || o.untied_norms) norm3 = register_module("norm3", make_norm(o, p));
  if (o.moe.enabled()) moe = register_module("ffn", SparseMoeBlock(o.moe, o.ffn, o.moe_gate_initializer, p));
  else ffn = register_module("ffn", FeedForward(o.ffn, p));
  // Under autocast norm1 and norm3 hand the attention's and the FFN's
  // projections their input in the autocast type (see LayerNorm). An MoE
  // block first scales its input by routing weights, so its input stays.
  const bool moe_input = o.moe.enabled();
  norm1->autocast_output = !(moe_input && o.parallel_residual && !norm3);
  if (norm3) norm3->autocast_output = !moe_input;
  if (o.sandwich_norms) {
    norm1_post = register_module("norm1_post", make_norm(o, p));
    norm3_post = register_module("norm3_post", make_norm(o, p));
  }
}

void TransformerDecoderLayerImpl::reset_parameters() {
  norm1->reset_parameters();
  self_attn->reset_parameters();
  if (norm3) norm3->reset_parameters();
  if (moe) moe->reset_parameters();
  else ffn->reset_parameters();
  if (norm1_post) norm1_post->reset_parameters(), norm3_post->reset_parameters();
}

torch::Tensor TransformerDecoderLayerImpl::feed_forward(const torch::Tensor& h, MoeContext* context) {
  return moe ? moe->forward(h, context) : ffn(h);
}

torch::Tensor TransformerDecoderLayerImpl::forward(const torch::Tensor& x, LayerKV* cache,
                                                   const torch::Tensor& alibi_slopes, MoeContext* moe_context,
                                                   const torch::Tensor& key_mask,
                                                   const torch::Tensor& packed_positions) {
  return forward_unsummed({x, torch::Tensor()}, cache, alibi_slopes, moe_context, key_mask, packed_positions).summed();
}

// x = in.stream + in.branch; a = attn(norm1(x)); h = x + a; f = ffn(norm3(h));
// the layer's output h + f is left unsummed for the next norm, which adds it
// in its own pass (add_then_forward). fusion.output_biases_in_norms hands
// the norms the attention's and the FFN's output biases as well.
Residual TransformerDecoderLayerImpl::forward_unsummed(const Residual& in, LayerKV* cache,
                                                       const torch::Tensor& alibi_slopes, MoeContext* moe_context,
                                                       const torch::Tensor& key_mask,
                                                       const torch::Tensor& packed_positions) {
  const bool drop = dropout_ > 0 && is_training();
  const SumAndNorm pre = norm1->add_then_forward(in.stream, in.branch, in.branch_bias);
  const torch::Tensor& x = pre.sum;
  const bool biases_in_norms = fusion.output_biases_in_norms;
  const torch::Tensor attention_bias = biases_in_norms ? self_attn->output_bias() : torch::Tensor();
  const torch::Tensor ffn_bias = biases_in_norms ? ffn->output_bias() : torch::Tensor();
  torch::Tensor a =
      self_attn->forward(pre.normed, cache, alibi_slopes, key_mask, {}, attention_bias.defined(), packed_positions);
  if (drop) a = torch::dropout(a, dropout_, true);
  if (parallel_) {
    torch::Tensor f = feed_forward(norm3 ? norm3(x) : pre.normed, moe_context);
    return {x + a, drop ? torch::dropout(f, dropout_, true) : f};
  }
  if (norm1_post) a = norm1_post(a);
  const SumAndNorm h = norm3->add_then_forward(x, a, attention_bias);
  if (ffn_bias.defined()) return {h.sum, ffn->forward(h.normed, /*without_output_bias=*/true), ffn_bias};
  torch::Tensor f = feed_forward(h.normed, moe_context);
  if (drop) f = torch::dropout(f, dropout_, true);
  return {h.sum, norm3_post ? norm3_post(f) : f};
}

TransformerDecoderImpl::TransformerDecoderImpl(int64_t num_layers, const DecoderLayerOptions& o,
                                               const torch::TensorOptions& p)
    : recompute_(o.recompute) {
  layers = register_module("layers", torch::nn::ModuleList());
  for (int64_t i = 0; i < num_layers; ++i) {
    DecoderLayerOptions layer = o;
    if (o.scale_scores_by_layer) layer.attention.logit_multiplier /= double(i + 1);
    if (o.sliding_window_parity >= 0 && i % 2 != o.sliding_window_parity) layer.attention.sliding_window = 0;
    layers->push_back(TransformerDecoderLayer(layer, p));
  }
  norm = register_module("norm", make_norm(o, p));
}

void TransformerDecoderImpl::reset_parameters() {
  for (auto& layer : *layers) layer->as<TransformerDecoderLayerImpl>()->reset_parameters();
  norm->reset_parameters();
}

torch::Tensor TransformerDecoderImpl::forward(torch::Tensor x, std::vector<LayerKV>* cache,
                                              const torch::Tensor& alibi_slopes, MoeContext* moe,
                                              const torch::Tensor& key_mask, const torch::Tensor& packed_positions) {
  if (cache) cache->resize(layers->size());
  // Only a training step has a backward pass to recompute in.
  const bool recompute = recompute_ && is_training() && !cache && torch::GradMode::is_enabled();
  // Each layer's last residual add is left to the next norm (the final one after the last layer).
  Residual pending{x};
  for (size_t i = 0; i < layers->size(); ++i) {
    auto* layer = layers[i]->as<TransformerDecoderLayerImpl>();
    if (!recompute) {
      before_layer(layer_hooks, *layer);
      pending = layer->forward_unsummed(pending, cache ? &(*cache)[i] : nullptr, alibi_slopes, moe, key_mask,
                                        packed_positions);
      std::vector<torch::Tensor> outputs{pending.stream, pending.branch, pending.branch_bias};
      after_layer(layer_hooks, *layer, outputs);
      pending = Residual{outputs[0], outputs[1], outputs[2]};
      continue;
    }
    x = pending.summed();  // a recomputed layer takes one tensor
    if (moe && layer->moe) {
      // The router statistics come out of the recomputed block as outputs, so
      // the load-balancing loss's gradient reaches the router.
      MoeContext reads{moe->input_ids, moe->first_position, moe->token_weights};  // by value: backward runs later
      auto outs = recompute_outputs_in_backward(
          [hooks = layer_hooks, layer, alibi_slopes, reads, key_mask, packed_positions](const torch::Tensor& h) {
            MoeContext c = reads;
            before_layer(hooks, *layer);
            torch::Tensor y = layer->forward(h, nullptr, alibi_slopes, &c, key_mask, packed_positions);
            auto outs = c.layers ? std::vector<torch::Tensor>{y, c.tokens_per_expert, c.prob_per_expert}
                                 : std::vector<torch::Tensor>{y};
            after_layer(hooks, *layer, outs);
            return outs;
          },
          x);
      x = outs[0];
      if (outs.size() == 3) moe->record(outs[1], outs[2]);
    } else {
      x = recompute_in_backward(
          [hooks = layer_hooks, layer, alibi_slopes, key_mask, packed_positions](const torch::Tensor& h) {
            before_layer(hooks, *layer);
            torch::Tensor y = layer->forward(h, nullptr, alibi_slopes, nullptr, key_mask, packed_positions);
            return after_layer(hooks, *layer, y);
          },
          x);
    }
    pending = Residual{x};
  }
  return norm->add_then_forward(pending.stream, pending.branch, pending.branch_bias).normed;
}

}  // namespace zoo::models
