// Sharded optimizer state (ZeRO stage 1) over a Distributed job: each rank
// owns a share of the parameters, keeps the optimizer state of those alone
// and updates them; the updated values then go from each owner to every
// rank. Gradients are still averaged whole, so the result equals the
// unsharded run. Checkpoints hold the full state, gathered on the main rank,
// and load at any world size. Defines: OptimizerSharding.
#pragma once

#include <torch/torch.h>

#include <vector>

#include "runner/optim/optimizer.h"
#include "runner/parallel/distributed.h"

namespace zoo {

class OptimizerSharding {
 public:
  // Owners by size, largest parameters first, each to the least loaded rank
  // (the same on every rank).
  OptimizerSharding(Distributed& distributed, const std::vector<torch::Tensor>& parameters);
  bool owns(size_t parameter) const { return owner_[parameter] == distributed_.rank(); }
  // Before the optimizer step: gradients of others' parameters are dropped,
  // so the step skips them and never creates their state.
  void keep_own_gradients(const std::vector<torch::Tensor>& parameters) const;
  // After the step: each parameter's new value from its owner.
  void share_updated(const std::vector<torch::Tensor>& parameters);
  // After loading a full optimizer state: forget the others' share.
  void drop_others_state(optim::Optimizer& optimizer) const;
  // The full state_dict() of the optimizer, gathered from every rank. A
  // collective: every rank calls it; all get the whole.
  c10::impl::GenericDict full_state_dict(const optim::Optimizer& optimizer);

 private:
  Distributed& distributed_;
  std::vector<int> owner_;  // per parameter (flat index)
};

}  // namespace zoo
