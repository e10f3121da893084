// Full sharding (parallelism full, ZeRO stage 3) as a strategy: the model's
// parameters, gradients and optimizer state split over the ranks by
// FullSharding (runner/parallel/full_sharding.h), the optimizer updating
// this rank's flat shards; checkpoints written as one shard per rank plus an
// index (runner/checkpoint/sharded_checkpoint.h, beside their reader).
#include <chrono>
#include <filesystem>
#include <memory>

#include "runner/checkpoint/sharded_checkpoint.h"
#include "runner/log.h"
#include "runner/parallel/distributed.h"
#include "runner/parallel/full_sharding.h"
#include "runner/parallel/strategy.h"

namespace zoo::parallel {

namespace {

class FullShard final : public OverRanks {
 public:
  using OverRanks::OverRanks;

  std::vector<optim::ParamGroup> wrap(models::Model& model, std::vector<optim::ParamGroup> groups) override {
    {  // every rank shards the main rank's initial weights
      std::vector<torch::Tensor> initial;
      for (const auto& p : model.parameters()) initial.push_back(p.detach());
      distributed_.broadcast_from_main(initial);
    }  // (their aliases gone, the whole weights are freed as they are sharded)
    sharding_ = std::make_unique<FullSharding>(distributed_, model, groups);
    return sharding_->sharded_groups();
  }

  // The root unit is gathered for the forward pass and, with a backward pass
  // to come, kept until after_backward reduces and frees it.
  void before_forward() override { sharding_->begin_forward(); }
  void after_forward_without_backward() override { sharding_->end_forward(); }
  void before_backward(bool) override { sharding_->begin_backward(); }
  void after_backward() override { sharding_->end_backward(); }  // every gradient reduced to its owner
  void finish_gradients(const std::vector<torch::Tensor>&, bool first_step) override {
    if (!first_step) return;
    const auto [early, layers] = sharding_->last_overlap();
    log::info(strf("Full sharding: %ld of %ld layers' gradients reduce-scattered during the backward pass",
                   static_cast<long>(early), static_cast<long>(layers)));
  }
  bool gradients_finite_everywhere(bool finite_here) override {  // each rank saw only its shards
    return distributed_.all_agree(finite_here);
  }
  bool holds_whole_tensors() const override { return false; }
  torch::Tensor clip_coefficient(const std::vector<torch::Tensor>&, double max_norm) override {
    return sharding_->clip_coefficient(max_norm);  // the norm over every rank's shards
  }

  std::vector<std::string> non_finite_weights(const models::Model&) override {
    return sharding_->weights_finite() ? std::vector<std::string>{} : std::vector<std::string>{"a rank's shard"};
  }
  // Each rank copies its shard of each parameter, never holding the whole model.
  ckpt::CopyIntoModel copy_into_model() override {
    return [this](const std::string& name, torch::Tensor& target, const torch::Tensor& saved) {
      if (!sharding_->load_parameter(name, saved)) target.copy_(saved);  // a buffer: whole on every rank
    };
  }
  void load_optimizer_state(optim::Optimizer& optimizer, const c10::impl::GenericDict& state) override {
    sharding_->load_optimizer_state(optimizer, state.at("state").toGenericDict());
  }
  // Parameters are equal by construction (wrap); buffers come from the main rank.
  void share_restored_state(models::Model& model) override {
    std::vector<torch::Tensor> state;
    for (const auto& b : model.buffers()) state.push_back(b.detach());
    distributed_.broadcast_from_main(state);
  }
  std::string save_checkpoint(const CheckpointWrite& write) override;
  std::string saved_what() const override { return strf("Saved %d-shard", distributed_.world_size()); }

 private:
  std::unique_ptr<FullSharding> sharding_;
};

// Every rank writes its shard at once; the main rank then writes the index,
// and only once all shards are on disk.
std::string FullShard::save_checkpoint(const CheckpointWrite& write) {
  const int rank = distributed_.rank(), world = distributed_.world_size();
  // The main rank names the checkpoint, and this write of it: shards of an
  // earlier, interrupted write of the same step never pass for this one's.
  std::vector<char> named;
  if (distributed_.is_main()) {
    std::filesystem::create_directories(write.dir);
    const std::string text = ckpt::new_checkpoint_path(write.dir, write.global_step, write.naming) + "\n" +
                             std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
    named.assign(text.begin(), text.end());
  }
  distributed_.broadcast_bytes(named, distributed_.main_rank());
  const std::string id(named.begin(), named.end()), path = id.substr(0, id.find('\n'));
  std::string failure;
  try {
    ckpt::save_shard(path, rank, world, id, sharding_->shard_pieces(write.optimizer));
  } catch (const std::exception& e) {
    failure = e.what();
  }
  if (!distributed_.all_agree(failure.empty()))
    throw std::runtime_error(strf("rank %d of %d: ", rank, world) +
                             (failure.empty()
                                  ? "another rank could not write its shard of " + path + " (its log says why)"
                                  : "could not write its shard of " + path + ": " + failure) +
                             "; that checkpoint is incomplete and nothing will load it");
  if (!distributed_.is_main()) return "";
  ckpt::ShardedIndex index;
  index.id = id;
  index.world_size = world;
  index.shapes = sharding_->shapes();
  index.optimizer_names = sharding_->optimizer_names();
  index.optimizer_param_groups = sharding_->optimizer_param_groups(write.optimizer);
  ckpt::save_sharded_index(path, index, write.model, write.run_state());
  return path;
}

}  // namespace

std::unique_ptr<ParallelStrategy> make_full_shard(Distributed& distributed) {
  return std::make_unique<FullShard>(distributed);
}

// 1/N of everything, plus the units gathered at once (docs/distributed.md):
// the root's weights and gradients, two layers' weights (one running, one
// prefetched), a layer's gradients three times (autograd's, the flat buffer,
// the reduction in flight), and with several ranks the collectives' own
// layer-sized buffers (all-gather's output, reduce's scratch).
MemoryPerDevice full_shard_memory(const ModelStateSizes& s, int64_t ranks) {
  const double gathered =
      4.0 * (2.0 * double(s.root_unit_parameters) + (ranks > 1 ? 7.0 : 5.0) * double(s.largest_layer_parameters));
  return {(s.trained_state_bytes + s.frozen_bytes) / double(ranks) + gathered,
          "1/N of it, plus " + memory_text(gathered) + " for the units gathered at once (docs/distributed.md)"};
}

}  // namespace zoo::parallel
