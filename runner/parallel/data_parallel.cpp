// Data parallelism (parallelism replicate): every rank holds the whole model
// and optimizer, trains on its share of each batch, and the gradients are
// averaged over the ranks in buckets that start during the backward pass
// (runner/parallel/distributed.h). With sharding: optimizer (ZeRO stage 1)
// each rank also keeps the optimizer state of its share of the parameters
// only, updates those, and sends the new values to the others
// (runner/parallel/optimizer_sharding.h); checkpoints hold the whole state.
#include <memory>

#include "runner/log.h"
#include "runner/parallel/distributed.h"
#include "runner/parallel/optimizer_sharding.h"
#include "runner/parallel/strategy.h"

namespace zoo::parallel {

namespace {

class Replicate : public OverRanks {
 public:
  using OverRanks::OverRanks;

  void attach(optim::Optimizer& optimizer) override { distributed_.overlap_with_backward(optimizer.parameters()); }
  void before_backward(bool last_micro_batch) override {
    if (last_micro_batch) distributed_.arm();  // its backward pass starts the averaging
  }
  void finish_gradients(const std::vector<torch::Tensor>& parameters, bool first_step) override {
    distributed_.average_gradients(parameters);
    if (first_step && distributed_.is_main() && distributed_.world_size() > 1) {
      const auto [buckets, early] = distributed_.last_overlap();
      log::info(strf("Gradient averaging: %ld of %ld buckets started during the backward pass",
                     static_cast<long>(early), static_cast<long>(buckets)));
    }
  }

  // Every rank takes the main rank's weights and buffers, so that all start equal.
  void share_restored_state(models::Model& model) override {
    std::vector<torch::Tensor> state;
    for (const auto& p : model.parameters()) state.push_back(p.detach());
    for (const auto& b : model.buffers()) state.push_back(b.detach());
    distributed_.broadcast_from_main(state);
  }
};

class OptimizerSharded final : public Replicate {
 public:
  using Replicate::Replicate;

  void attach(optim::Optimizer& optimizer) override {
    sharding_ = std::make_unique<OptimizerSharding>(distributed_, optimizer.parameters());
    Replicate::attach(optimizer);
  }
  // Gradients of others' parameters are dropped, so the step skips them.
  void before_optimizer_step(const std::vector<torch::Tensor>& parameters) override {
    sharding_->keep_own_gradients(parameters);
  }
  void after_optimizer_step(const std::vector<torch::Tensor>& parameters) override {
    sharding_->share_updated(parameters);
  }
  void load_optimizer_state(optim::Optimizer& optimizer, const c10::impl::GenericDict& state) override {
    Replicate::load_optimizer_state(optimizer, state);
    sharding_->drop_others_state(optimizer);
  }

 protected:
  // Every rank sends its share (a collective).
  c10::impl::GenericDict whole_optimizer_state(const optim::Optimizer& optimizer) override {
    return sharding_->full_state_dict(optimizer);
  }

 private:
  std::unique_ptr<OptimizerSharding> sharding_;
};

}  // namespace

std::unique_ptr<ParallelStrategy> make_replicate(Distributed& distributed) {
  return std::make_unique<Replicate>(distributed);
}

std::unique_ptr<ParallelStrategy> make_optimizer_sharded(Distributed& distributed) {
  return std::make_unique<OptimizerSharded>(distributed);
}

// Weights and gradients whole, the optimizer's state 1/N.
MemoryPerDevice optimizer_sharded_memory(const ModelStateSizes& s, int64_t ranks) {
  const double weights_and_gradients = s.trained_parameters * 8;
  return {weights_and_gradients + (s.trained_state_bytes - weights_and_gradients) / double(ranks) + s.frozen_bytes,
          "weights and gradients whole, optimizer state 1/N"};
}

}  // namespace zoo::parallel
