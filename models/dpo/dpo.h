// DPO (direct preference optimization, Rafailov et al. 2023) as modelzoo's
// `dpo` model runs it: a policy decoder of any causal-LM family, trained so
// that it prefers each pair's chosen response over its rejected one more than
// a frozen reference copy of itself does. Defines: DpoParameters, DpoOptions,
// dpo_losses, DpoModel, dpo_family.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>

#include "models/model.h"
#include "models/registry.h"

namespace zoo::models {

// The `dpo:` keys; defaults are modelzoo's.
struct DpoParameters {
  double beta = 0.1;            // the inverse temperature of the implicit reward
  bool reference_free = false;  // no reference model: its log-ratio is taken as 0
  std::string loss_type = "sigmoid";
  bool disable_dropout = true;       // the policy (and reference) run without dropout
  double dpop_penalty_weight = 5.0;  // DPOP's lambda (loss_type dpop)
  static const config::Schema<DpoParameters>& schema();
};

// The dpo model's own keys (its policy_model is parsed by the policy's family).
struct DpoOptions {
  DpoParameters dpo;
  bool compute_eval_metrics = true;
  static const config::Schema<DpoOptions>& schema();
};

// Per-pair losses (B) from each response's summed (ipo: averaged) label
// log-likelihood under the policy and the reference (undefined tensors when
// reference_free), as modelzoo's DPOLoss computes them:
//   z = (policy_chosen - policy_rejected) - (reference_chosen - reference_rejected)
//   sigmoid: -log sigmoid(beta z)      hinge: max(0, 1 - beta z)
//   ipo: (z - 1 / (2 beta))^2          dpop: sigmoid's with z - lambda max(0, reference_chosen - policy_chosen)
torch::Tensor dpo_losses(const torch::Tensor& policy_chosen, const torch::Tensor& policy_rejected,
                         const torch::Tensor& reference_chosen, const torch::Tensor& reference_rejected,
                         const DpoParameters& p);

// State dict keys as modelzoo's: policy_model.model.<decoder key> and
// ref_model.model.<decoder key> (checkpoint_key_prefix ""). Batches hold
// chosen_/rejected_ input_ids, attention_mask (loss mask) and labels; both
// responses run through each model as one batch of 2B. The loss is the mean
// of dpo_losses over the pairs; eval metrics (compute_eval_metrics) are
// modelzoo's rewards_chosen, rewards_rejected, rewards_accuracies,
// rewards_margins (with a reference), logps_chosen and logps_rejected, each
// the mean over batches of the batch mean.
class DpoModel : public Model {
 public:
  // `reference` is null when reference_free; it starts as a copy of the
  // policy and never trains (no gradient, always in eval mode).
  DpoModel(const DpoOptions& options, std::shared_ptr<Model> policy, std::shared_ptr<Model> reference);
  ModelOutput forward(const Features& batch, bool with_metrics) override;
  // Per token of a pair: both responses forward through the policy and the
  // reference; the runner's 3x for training counts the reference's forward once.
  double forward_flops_per_token() const override;
  void reset_parameters() override;
  std::optional<int64_t> vocab_size() const override { return policy_->vocab_size(); }
  int64_t max_positions() const override { return policy_->max_positions(); }
  // Generation runs the policy.
  bool is_causal_lm() const override { return policy_->is_causal_lm(); }
  torch::Tensor next_logits(const torch::Tensor& input_ids, GenerationCache& cache) override {
    return policy_->next_logits(input_ids, cache);
  }
  std::map<std::string, LrAdjustmentGroup> lr_adjustment_groups() const override {
    return policy_->lr_adjustment_groups();  // its globs start with '*': they match under policy_model.model.
  }
  void train(bool on = true) override;
  std::string checkpoint_key_prefix() const override { return ""; }
  // A plain decoder checkpoint (no policy_model.* key; e.g. the fine-tuned
  // model DPO starts from) loads into the policy and the reference alike.
  std::map<std::string, torch::Tensor> adapt_loaded_state(std::map<std::string, torch::Tensor> saved) const override;

  Model& policy() { return *policy_; }
  Model* reference() { return reference_.get(); }

 private:
  void copy_policy_to_reference();

  DpoOptions options_;
  std::shared_ptr<Model> policy_, reference_;
};

ModelFamily dpo_family();

}  // namespace zoo::models
