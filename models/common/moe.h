// Sparse mixture of experts in place of a layer's FFN (modelzoo's
// SparseMoEBlock, Mixtral): a router picks each token's top_k experts, whose
// FFN outputs are summed weighted by the router's probabilities; shared
// experts see every token. And the load-balancing loss that keeps the router
// spreading tokens (modelzoo's LoadBalancingLoss).
// Defines: MoeOptions (modelzoo's `moe` section), MoeContext,
// SparseMoeBlock, load_balancing_loss.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>

#include "configs/schema/schema.h"
#include "models/common/ffn.h"
#include "models/common/initializers.h"
#include "models/common/layers.h"

namespace zoo::models {

// modelzoo's `moe` mapping; defaults are modelzoo's.
struct MoeOptions {
  int64_t num_experts = 0;  // routed experts; with the shared ones > 1 turns MoE on
  std::optional<int64_t> num_shared_experts;
  int64_t top_k = 1;
  double load_balancing_loss_coef = 0.0;
  std::optional<double> null_expert_bias = 0.0;
  std::string moe_implementation = "experimental";  // zoo computes the same function for each
  std::optional<bool> router_use_bias = false;
  bool router_fp32 = true;
  std::string routing_algorithm = "learned";  // learned, hash (token id % experts), uniform (position)
  std::optional<std::string> router_selection_nonlinearity = "softmax";
  std::optional<std::string> expert_weighting_nonlinearity = "softmax";
  std::optional<bool> expert_weighting_normalization = true;
  std::optional<int64_t> sinkhorn_n_iters = 1;
  std::optional<InitializerSpec> gate_initializer;
  bool probability_before_ffn = false;

  int64_t shared_experts() const { return num_shared_experts.value_or(0); }
  bool enabled() const { return num_experts + shared_experts() > 1; }
  static const config::Schema<MoeOptions>& schema();
};

// What the MoE layers of one forward pass read and, in training, record for
// the load-balancing loss.
struct MoeContext {
  torch::Tensor input_ids;     // (B, T): hash routing's key
  int64_t first_position = 0;  // uniform routing: the position of input_ids' first token (decoding with a cache)
  // (B, T): the loss mask over each row's token count. Set: each MoE layer
  // adds its statistics below.
  torch::Tensor token_weights;
  torch::Tensor tokens_per_expert;  // (B, E): the share of each row's tokens routed to each expert, summed over layers
  torch::Tensor prob_per_expert;    // (B, E): the mean router probability of each expert, summed over layers
  int64_t layers = 0;
  // Adds one layer's (B, E) statistics.
  void record(const torch::Tensor& tokens, const torch::Tensor& probs);
};

// modelzoo's load-balancing loss over the recorded layers:
// E^2 * mean over rows and experts of (token share x mean probability), both averaged over layers.
torch::Tensor load_balancing_loss(const MoeContext& context, int64_t num_experts);

class SparseMoeBlockImpl : public torch::nn::Module {
 public:
  // Every expert (routed and shared) is a FeedForward of `expert`'s shape.
  SparseMoeBlockImpl(const MoeOptions& moe, const FeedForwardOptions& expert, const InitializerSpec& gate_initializer,
                     const torch::TensorOptions& p);
  // (B, T, C) -> (B, T, C). Each expert runs on the tokens routed to it only.
  torch::Tensor forward(const torch::Tensor& x, MoeContext* context);
  void reset_parameters();

  Dense gate{nullptr};            // C -> num_experts router logits
  torch::nn::ModuleList experts;  // at experts.experts.{i}: routed, then shared (modelzoo's functional layout)

 private:
  // (B, T, E) selection probabilities and expert weights (the same tensor
  // unless the two nonlinearities differ).
  std::pair<torch::Tensor, torch::Tensor> route(const torch::Tensor& x, const MoeContext* context);

  MoeOptions options_;
  InitializerSpec gate_initializer_;
};
TORCH_MODULE(SparseMoeBlock);

}  // namespace zoo::models
