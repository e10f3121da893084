// How a training run spreads over processes, applied from outside the model
// (torchtitan's "parallelize" step): the trainer builds the model, hands it to
// a ParallelStrategy, and from then on calls the strategy's hooks at fixed
// points of every step, the same calls whatever the strategy. One strategy per
// RunConfig::parallelism():
//   none       one process (this base class; every hook is the plain thing)
//   replicate  data parallel: gradients averaged over the ranks (data_parallel.cpp)
//   optimizer  replicate, each rank keeping its share of the optimizer state
//              (ZeRO stage 1; data_parallel.cpp)
//   full       1/N of every parameter, gradient and optimizer state
//              (ZeRO stage 3; full_shard.cpp over full_sharding.h)
// Each also writes its checkpoints and says what its model state costs per
// device. Defines: ParallelStrategy, CheckpointWrite, OverRanks, make_parallel_strategy,
// ModelStateSizes, MemoryPerDevice, memory_per_device, memory_text.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "models/model.h"
#include "runner/checkpoint/checkpoint.h"
#include "runner/optim/optimizer.h"
#include "runner/params/checkpoint_naming.h"
#include "runner/params/runconfig.h"

namespace zoo {
class Distributed;
}

namespace zoo::parallel {

// What the trainer hands a strategy to write a checkpoint.
struct CheckpointWrite {
  const models::Model& model;
  const optim::Optimizer& optimizer;
  // The trainer's other states (schedule, data, step, RNG, metadata); called
  // on the rank that writes them.
  std::function<c10::impl::GenericDict()> run_state;
  std::string dir;
  int64_t global_step = 0;
  ckpt::CheckpointNaming naming;
};

class ParallelStrategy {
 public:
  virtual ~ParallelStrategy() = default;

  virtual int rank() const { return 0; }
  virtual int ranks() const { return 1; }
  // The rank that writes checkpoints and summaries.
  virtual bool is_main() const { return true; }
  // Before a rank's own log lines ("rank 1: "); "" for one process.
  virtual std::string log_prefix() const { return ""; }

  // Set-up. wrap: before the optimizer is built, with its groups over the
  // model's parameters; returns the groups the optimizer is to update.
  virtual std::vector<optim::ParamGroup> wrap(models::Model& model, std::vector<optim::ParamGroup> groups);
  // Once the optimizer is built over those groups.
  virtual void attach(optim::Optimizer& optimizer);

  // Around each micro-batch's forward and backward pass.
  virtual void before_forward() {}
  virtual void after_forward_without_backward() {}  // evaluation
  // last_micro_batch: the step's last, whose gradients complete the step.
  virtual void before_backward(bool last_micro_batch) {}
  virtual void after_backward() {}
  // After a step's backward passes: the gradients as the optimizer is to
  // read them. first_step: the run's first, which logs how the overlap went.
  virtual void finish_gradients(const std::vector<torch::Tensor>& parameters, bool first_step) {}
  // Whether every rank's (unscaled) gradients are finite, from this rank's.
  virtual bool gradients_finite_everywhere(bool finite_here) { return finite_here; }
  // Whether the optimizer's parameters are whole tensors (per-tensor norms,
  // LoRA merging), not flat shards.
  virtual bool holds_whole_tensors() const { return true; }
  // Clipping by global norm: the coefficient over every rank's gradients.
  virtual torch::Tensor clip_coefficient(const std::vector<torch::Tensor>& parameters, double max_norm);
  virtual void before_optimizer_step(const std::vector<torch::Tensor>& parameters) {}
  virtual void after_optimizer_step(const std::vector<torch::Tensor>& parameters) {}

  // Metrics: `t` summed over the ranks, or its mean over them, in place.
  virtual void sum_over_ranks(torch::Tensor& t) {}
  virtual void average_over_ranks(torch::Tensor& t) {}

  // Checkpoints. The weights that are not finite (names), from every rank.
  virtual std::vector<std::string> non_finite_weights(const models::Model& model);
  // How a saved weight reaches the model (empty: copied whole).
  virtual ckpt::CopyIntoModel copy_into_model() { return {}; }
  // A whole optimizer state dict ({"state", "param_groups"}) into the optimizer.
  virtual void load_optimizer_state(optim::Optimizer& optimizer, const c10::impl::GenericDict& state);
  // After a checkpoint is loaded (or none was): every rank starts equal.
  virtual void share_restored_state(models::Model& model) {}
  // Writes the checkpoint of this step; returns its path on the rank that
  // wrote it, "" on the others. Every rank calls it.
  virtual std::string save_checkpoint(const CheckpointWrite& write);
  // "Saved" or, e.g., "Saved 4-shard", for the log line.
  virtual std::string saved_what() const { return "Saved"; }

 protected:
  // The optimizer state as an unsharded run saves it (a collective for ZeRO 1).
  virtual c10::impl::GenericDict whole_optimizer_state(const optim::Optimizer& optimizer);
};

// The base of the strategies over a Distributed job (replicate, optimizer,
// full): who this rank is, and metrics summed or averaged over the ranks.
class OverRanks : public ParallelStrategy {
 public:
  explicit OverRanks(Distributed& distributed) : distributed_(distributed) {}
  int rank() const override;
  int ranks() const override;
  bool is_main() const override;
  std::string log_prefix() const override;
  void sum_over_ranks(torch::Tensor& t) override;
  void average_over_ranks(torch::Tensor& t) override;

 protected:
  Distributed& distributed_;
};

// The strategy of runconfig.parallelism() over `distributed` (null exactly
// when parallelism is none). Evaluation-only trainers (for_training false)
// hold whole weights on every rank: replicate, whatever the sharding.
std::unique_ptr<ParallelStrategy> make_parallel_strategy(const RunConfig& runconfig, Distributed* distributed,
                                                         bool for_training);

// The strategies' constructors, each in its own file.
std::unique_ptr<ParallelStrategy> make_replicate(Distributed& distributed);
std::unique_ptr<ParallelStrategy> make_optimizer_sharded(Distributed& distributed);
std::unique_ptr<ParallelStrategy> make_full_shard(Distributed& distributed);

// The model's state as validate_only counts it.
struct ModelStateSizes {
  double trained_parameters = 0;
  double trained_state_bytes = 0;  // weights, gradients and optimizer state of the trained parameters
  double frozen_bytes = 0;
  // Full sharding's units, in parameters: everything outside the repeated
  // layers, and the largest layer.
  int64_t root_unit_parameters = 0, largest_layer_parameters = 0;
};
struct MemoryPerDevice {
  double bytes = 0;
  std::string what;  // how it is made up, for the reader
};
// Model state per device at `ranks` ranks under `parallelism`, before activations.
MemoryPerDevice memory_per_device(Parallelism parallelism, const ModelStateSizes& sizes, int64_t ranks);
// Each strategy's own figure.
MemoryPerDevice optimizer_sharded_memory(const ModelStateSizes& sizes, int64_t ranks);
MemoryPerDevice full_shard_memory(const ModelStateSizes& sizes, int64_t ranks);
// "12.50 MiB" or "3.25 GiB".
std::string memory_text(double bytes);

}  // namespace zoo::parallel
