// Implementation of models/common/lm_loss.h.
#include "models/common/lm_loss.h"

namespace zoo::models {

ModelOutput lm_loss(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& mask,
                    const LossScaling& scaling, bool with_metrics) {
  const int64_t V = logits.size(-1);
  torch::Tensor flat_logits = logits.reshape({-1, V}).to(torch::kFloat);
  torch::Tensor flat_labels = labels.reshape({-1}).to(torch::kLong);
  torch::Tensor m = mask.reshape({-1}).to(torch::kFloat);
  torch::Tensor per_token = torch::nn::functional::cross_entropy(
      flat_logits, flat_labels, torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
  torch::Tensor masked_sum = (per_token * m).sum();
  torch::Tensor num_tokens = m.sum();

  ModelOutput out;
  if (scaling.mode == "batch_size") {
    out.loss = masked_sum / double(logits.size(0)) * scaling.loss_weight;
  } else {
    out.loss = masked_sum / num_tokens.clamp_min(1.0);
  }
  if (with_metrics) {
    torch::NoGradGuard no_grad;
    torch::Tensor correct = (flat_logits.argmax(-1) == flat_labels).to(torch::kFloat) * m;
    out.metrics["lm_perplexity"] = {masked_sum.detach(), num_tokens, MetricTerm::Reduce::exp_mean};
    out.metrics["accuracy"] = {correct.sum(), num_tokens, MetricTerm::Reduce::mean};
  }
  return out;
}

}  // namespace zoo::models
