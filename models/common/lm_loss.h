// Masked next-token cross-entropy and the LM eval metrics (modelzoo's
// GPTLMHeadModelLoss, lm_perplexity, accuracy), on the cross-entropy kernels
// of models/kernels/cross_entropy_kernel.h. Defines: LossScaling,
// smooth_cross_entropy, lm_loss.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/kernels/cross_entropy_kernel.h"
#include "models/model.h"

namespace zoo::models {

struct LossScaling {
  std::string mode = "num_tokens";  // "num_tokens": sum / sum(mask); "batch_size": sum / B * weight
  double loss_weight = 1.0;
};

// modelzoo's label smoothing (smooth_loss): (1 - s) * per_token + s * the
// mean over the vocab classes of -log softmax(logits (N, >= vocab)).
torch::Tensor smooth_cross_entropy(const torch::Tensor& per_token, const torch::Tensor& logits, int64_t vocab,
                                   double smoothing);

// logits (B, T, >= V; columns from V on are OutputHead's -inf padding), labels
// (B, T) int, mask (B, T) 0/1. Fills loss and, with with_metrics, the
// "lm_perplexity" and "accuracy" terms over masked tokens. A loss to train on
// without metrics goes through one_pass_cross_entropy where it applies (the
// mask's weights are known up front).
ModelOutput lm_loss(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& mask,
                    const LossScaling& scaling, bool with_metrics, int64_t vocab);

}  // namespace zoo::models
