// Implementation of runner/parallel/strategy.h: the single-process strategy
// (the base class's hooks) and the choice of strategy.
#include "runner/parallel/strategy.h"

#include <filesystem>
#include <stdexcept>

#include "runner/log.h"
#include "runner/model_guards.h"
#include "runner/parallel/distributed.h"

namespace zoo::parallel {

namespace fs = std::filesystem;

std::vector<optim::ParamGroup> ParallelStrategy::wrap(models::Model&, std::vector<optim::ParamGroup> groups) {
  return groups;
}

void ParallelStrategy::attach(optim::Optimizer&) {}

torch::Tensor ParallelStrategy::clip_coefficient(const std::vector<torch::Tensor>& parameters, double max_norm) {
  return optim::clip_coefficient(parameters, max_norm);
}

std::vector<std::string> ParallelStrategy::non_finite_weights(const models::Model& model) {
  return non_finite_parameters(model);
}

void ParallelStrategy::load_optimizer_state(optim::Optimizer& optimizer, const c10::impl::GenericDict& state) {
  optimizer.load_state_dict(state);
}

c10::impl::GenericDict ParallelStrategy::whole_optimizer_state(const optim::Optimizer& optimizer) {
  return optimizer.state_dict();
}

// One file with modelzoo's keys: model, optimizer, and the run's other states.
std::string ParallelStrategy::save_checkpoint(const CheckpointWrite& write) {
  c10::impl::GenericDict optimizer_state = whole_optimizer_state(write.optimizer);
  if (!is_main()) return "";  // the ranks hold the same state
  fs::create_directories(write.dir);
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  d.insert("model", ckpt::model_state_dict(write.model));
  d.insert("optimizer", optimizer_state);
  for (const auto& kv : write.run_state()) d.insert(kv.key(), kv.value());
  const std::string path = ckpt::new_checkpoint_path(write.dir, write.global_step, write.naming);
  ckpt::save_checkpoint_file(path, d);
  return path;
}

int OverRanks::rank() const { return distributed_.rank(); }
int OverRanks::ranks() const { return distributed_.world_size(); }
bool OverRanks::is_main() const { return distributed_.is_main(); }
std::string OverRanks::log_prefix() const { return strf("rank %d: ", distributed_.rank()); }
void OverRanks::sum_over_ranks(torch::Tensor& t) { distributed_.sum(t); }

// Each rank's mean over its share of the batch, averaged.
void OverRanks::average_over_ranks(torch::Tensor& t) {
  distributed_.sum(t);
  t.div_(distributed_.world_size());
}

std::unique_ptr<ParallelStrategy> make_parallel_strategy(const RunConfig& runconfig, Distributed* distributed,
                                                         bool for_training) {
  const Parallelism parallelism = runconfig.parallelism();
  if ((parallelism == Parallelism::none) != (distributed == nullptr))
    throw std::logic_error(std::string("parallelism ") + parallelism_name(parallelism) +
                           (distributed ? " with" : " without") + " a process group");
  if (!for_training && distributed) return make_replicate(*distributed);  // evaluation holds whole weights
  switch (parallelism) {
    case Parallelism::none: return std::make_unique<ParallelStrategy>();
    case Parallelism::replicate: return make_replicate(*distributed);
    case Parallelism::optimizer: return make_optimizer_sharded(*distributed);
    case Parallelism::full: return make_full_shard(*distributed);
  }
  throw std::logic_error("unknown parallelism");
}

MemoryPerDevice memory_per_device(Parallelism parallelism, const ModelStateSizes& sizes, int64_t ranks) {
  switch (parallelism) {
    case Parallelism::optimizer: return optimizer_sharded_memory(sizes, ranks);
    case Parallelism::full: return full_shard_memory(sizes, ranks);
    case Parallelism::none:
    case Parallelism::replicate: break;
  }
  return {sizes.trained_state_bytes + sizes.frozen_bytes, "everything on every device"};
}

std::string memory_text(double bytes) {
  return bytes >= double(1 << 30) ? strf("%.2f GiB", bytes / double(1 << 30))
                                  : strf("%.2f MiB", bytes / double(1 << 20));
}

}  // namespace zoo::parallel
