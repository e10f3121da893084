// Fully sharded data parallelism (ZeRO stage 3, PyTorch's FSDP) over a
// Distributed job: each rank keeps 1/N of every parameter, its gradient and
// its optimizer state. A unit's parameters (each repeated layer the model's
// stacks run through models::LayerHooks, and one root unit of all the rest:
// embeddings, head, final norm) are all-gathered just before the unit runs
// and freed after; gathered again for its backward pass (or when activation
// checkpointing runs it again), and its gradients are reduce-scattered to
// their owners as soon as that pass has made them all. The next unit's
// gather starts while this one computes. Applied from outside the model; the
// trainer calls begin_forward / begin_backward / end_backward around each
// micro-batch. Defines: FullSharding.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "models/common/layer_hooks.h"
#include "models/model.h"
#include "runner/optim/optimizer.h"
#include "runner/parallel/distributed.h"

namespace zoo {

class FullSharding final : public models::LayerHooks {
 public:
  // Shards `model`'s parameters as they are now (the same on every rank).
  // `groups`: the optimizer's groups over the model's own parameters; a
  // parameter in none of them is frozen (sharded, never updated).
  FullSharding(Distributed& distributed, torch::nn::Module& model, const std::vector<optim::ParamGroup>& groups);
  ~FullSharding() override;

  // The optimizer's groups over this rank's flat shards (same order and
  // hyper-parameters as `groups`).
  std::vector<optim::ParamGroup> sharded_groups() const;
  int64_t shard_elements() const;  // this rank's share of all parameters, in elements

  // Around each micro-batch: the root unit is gathered for the forward pass
  // and (with gradients) kept until end_backward reduces and frees it.
  void begin_forward();
  void end_forward();  // without a backward pass (evaluation): frees everything
  void begin_backward();
  void end_backward();
  // Of the last backward pass: the layers whose gradients were reduced
  // while it ran (the others waited for its end), and all layers.
  std::pair<int64_t, int64_t> last_overlap() const;

  // Global gradient norm over every rank's shards, as optim::clip_coefficient.
  torch::Tensor clip_coefficient(double max_norm);
  // Every rank's shards are finite (weights, for a checkpoint).
  bool weights_finite();

  // Checkpoints. This rank's pieces: {name: {"offset": element offset in the
  // flattened parameter, "model": values, "optimizer": {state: values or scalar}}}.
  c10::impl::GenericDict shard_pieces(const optim::Optimizer& optimizer) const;
  // The unsharded optimizer's parameter names, in state-dict index order.
  std::vector<std::string> optimizer_names() const;
  std::map<std::string, std::vector<int64_t>> shapes() const;
  // The optimizer's param_groups as the unsharded optimizer's state dict has
  // them (each group's "params": its parameters' indices in optimizer_names).
  c10::impl::GenericList optimizer_param_groups(const optim::Optimizer& optimizer) const;
  // A parameter's whole value into this rank's shard of it (checkpoint
  // loads, without gathering); false when `name` is no parameter sharded here.
  bool load_parameter(const std::string& name, const torch::Tensor& value);
  // A whole optimizer state ({index: {state: tensor}}, indices as
  // optimizer_names) into this rank's shards' state.
  void load_optimizer_state(optim::Optimizer& optimizer, const c10::impl::GenericDict& state) const;

  // models::LayerHooks
  void before(const torch::nn::Module& layer) override;
  void after(const torch::nn::Module& layer, std::vector<torch::Tensor>& outputs) override;

 private:
  struct Flat;
  struct Unit;
  void gather(size_t unit);    // waits for a prefetch, or gathers now
  void prefetch(size_t unit);  // starts the gather
  void release(size_t unit);
  void unit_gradients_done(size_t unit);
  void reduce(size_t unit);
  void finish_reductions(size_t keep_pending);
  void hook_outputs(size_t unit, const std::vector<torch::Tensor>& outputs);
  // Before a layer's backward pass: frees the finished layers after it,
  // gathers it, and starts gathering the one before it.
  void start_backward_of(size_t unit);

  Distributed& distributed_;
  torch::nn::Module& model_;  // whose layer stacks call this (it outlives this)
  int rank_, world_;
  std::vector<Flat> flats_;
  std::vector<Unit> units_;  // [0]: the root, then the hooked layers in forward order
  std::map<const torch::nn::Module*, size_t> unit_of_;
  std::map<std::string, std::pair<size_t, size_t>> where_;  // parameter name: (flat, index in it)
  std::vector<std::vector<size_t>> group_flats_;            // per optimizer group: its flats
  std::vector<std::string> optimizer_names_;
  std::vector<optim::ParamGroup> groups_;  // hyper-parameters only
  enum class Phase { idle, forward, backward } phase_ = Phase::idle;
  size_t next_reduction_ = 0;
  int64_t last_early_reductions_ = 0;  // into the layer units in backward order
  struct Pending;
  std::vector<std::shared_ptr<Pending>> pending_;
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // hooks outlive this only as no-ops
};

}  // namespace zoo
