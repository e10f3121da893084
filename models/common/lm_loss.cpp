// Implementation of models/common/lm_loss.h.
#include "models/common/lm_loss.h"

namespace zoo::models {

torch::Tensor smooth_cross_entropy(const torch::Tensor& per_token, const torch::Tensor& logits, int64_t vocab,
                                   double smoothing) {
  const torch::Tensor uniform = -torch::log_softmax(logits.narrow(1, 0, vocab).to(torch::kFloat), -1).mean(-1);
  return (1 - smoothing) * per_token + smoothing * uniform;
}

ModelOutput lm_loss(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& mask,
                    const LossScaling& scaling, bool with_metrics, int64_t vocab) {
  torch::Tensor flat_logits = logits.reshape({-1, logits.size(-1)});
  torch::Tensor flat_labels = labels.reshape({-1}).to(torch::kLong);
  torch::Tensor m = mask.reshape({-1}).to(torch::kFloat);
  torch::Tensor num_tokens = m.sum();
  ModelOutput out;
  // The same loss as below, the sum weighted up front: the padding columns are -inf, so whole rows are read.
  if (!with_metrics && one_pass_cross_entropy_applies(flat_logits, flat_labels)) {
    const torch::Tensor weights = scaling.mode == "batch_size" ? m * (scaling.loss_weight / double(logits.size(0)))
                                                               : m / num_tokens.clamp_min(1.0);
    out.loss = one_pass_cross_entropy(flat_logits, flat_labels, weights, flat_logits.size(1));
    return out;
  }
  torch::Tensor per_token = token_cross_entropy(flat_logits, flat_labels, vocab, PaddingColumns::neg_inf);
  torch::Tensor masked_sum = (per_token * m).sum();

  if (scaling.mode == "batch_size") {
    out.loss = masked_sum / double(logits.size(0)) * scaling.loss_weight;
  } else {
    out.loss = masked_sum / num_tokens.clamp_min(1.0);
  }
  if (with_metrics) {
    torch::NoGradGuard no_grad;
    torch::Tensor correct = (flat_logits.narrow(1, 0, vocab).argmax(-1) == flat_labels).to(torch::kFloat) * m;
    out.metrics["lm_perplexity"] = {masked_sum.detach(), num_tokens, MetricTerm::Reduce::exp_mean};
    out.metrics["accuracy"] = {correct.sum(), num_tokens, MetricTerm::Reduce::mean};
  }
  return out;
}

}  // namespace zoo::models
