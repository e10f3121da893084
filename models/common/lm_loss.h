// Masked next-token cross-entropy and the LM eval metrics (modelzoo's
// GPTLMHeadModelLoss, lm_perplexity, accuracy). Defines: LossScaling, lm_loss.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/model.h"

namespace zoo::models {

struct LossScaling {
  std::string mode = "num_tokens";  // "num_tokens": sum / sum(mask); "batch_size": sum / B * weight
  double loss_weight = 1.0;
};

// logits (B, T, V), labels (B, T) int, mask (B, T) 0/1. Fills loss and, with
// with_metrics, the "lm_perplexity" and "accuracy" terms over masked tokens.
ModelOutput lm_loss(const torch::Tensor& logits, const torch::Tensor& labels, const torch::Tensor& mask,
                    const LossScaling& scaling, bool with_metrics);

}  // namespace zoo::models
