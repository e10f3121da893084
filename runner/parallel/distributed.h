// Data-parallel training on PyTorch's c10d: one process per device, started
// by a launcher (`zoo launch`, torchrun, srun, mpirun) that sets RANK,
// WORLD_SIZE and LOCAL_RANK. The ranks meet through a c10d store
// (runconfig.init_method), then gradients are averaged over
// ProcessGroupGloo (CPU) or ProcessGroupNCCL (GPU, when LibTorch has it).
// The trainer calls it; it knows nothing of models. Defines: Distributed.
#pragma once

#include <torch/torch.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "runner/params/runconfig.h"

namespace zoo {

class Distributed {
 public:
  // Joins the job's process group. RANK and WORLD_SIZE come from the
  // environment (rank 0 of 1 when unset); std::runtime_error names what is
  // missing or wrong, and a rank that does not arrive within dist_timeout.
  static std::unique_ptr<Distributed> join(const RunConfig& runconfig, const torch::Device& device);
  ~Distributed();

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  // The rank that writes checkpoints, summaries and the console log.
  bool is_main() const { return rank_ == main_rank_; }
  int main_rank() const { return main_rank_; }
  // The device this rank trains on: cuda:LOCAL_RANK on GPU.
  static torch::Device device_of(const torch::Device& requested);

  // Copies the main rank's values of `tensors` into every rank's.
  void broadcast_from_main(const std::vector<torch::Tensor>& tensors) { broadcast(tensors, main_rank_); }
  // Copies rank `root`'s values of `tensors` into every rank's.
  void broadcast(const std::vector<torch::Tensor>& tensors, int root);
  // Rank `root`'s bytes on every rank (`bytes` is read on root, replaced elsewhere).
  void broadcast_bytes(std::vector<char>& bytes, int root);
  // Replaces each parameter's gradient by its mean over the ranks, in
  // buckets of one dtype and ~25 MB (absent gradients count as zeros). After
  // an armed backward pass it waits for the buckets already under way.
  void average_gradients(const std::vector<torch::Tensor>& parameters);

  // Overlaps the averaging with the backward pass, as PyTorch's DDP does:
  // each parameter's gradient accumulator gets a hook, and once a bucket's
  // gradients are all accumulated its all-reduce starts (buckets start in
  // one fixed order, the same on every rank, as c10d needs) while the
  // backward pass goes on. Call once with the parameters average_gradients
  // will get; then arm() before each backward pass whose gradients are to be
  // averaged (a step's last micro-batch). runconfig.allreduce_bucket_mb sets the bucket size.
  void overlap_with_backward(const std::vector<torch::Tensor>& parameters);
  void arm();
  // Of the last averaged step: buckets, and those whose all-reduce started
  // before the backward pass had ended.
  std::pair<int64_t, int64_t> last_overlap() const { return last_overlap_; }
  // Sums `t` over the ranks, in place.
  void sum(torch::Tensor& t);
  // True on every rank when `value` is true on every rank.
  bool all_agree(bool value);

  // Full sharding's collectives, started now; the returned function waits.
  // `full` (1-d, world_size equal chunks) gets every rank's `shard` in rank order.
  std::function<void()> start_all_gather(const torch::Tensor& full, const torch::Tensor& shard);
  // `out` gets this rank's chunk of `full` summed over the ranks (`full` may
  // be overwritten).
  std::function<void()> start_reduce_scatter(const torch::Tensor& full, const torch::Tensor& out);

 private:
  Distributed() = default;
  // The ranks whose heartbeat (a counter each rank bumps in the store every
  // second) has stopped, e.g. "rank 1"; "" when none can be named.
  std::string ranks_gone();
  // Runs a collective and waits; a failure (a peer gone, the timeout) becomes
  // std::runtime_error saying which rank this is and what it was doing.
  void run(const char* what, const std::function<void()>& collective);
  struct Group;
  std::unique_ptr<Group> group_;
  struct Overlap;
  std::shared_ptr<Overlap> overlap_;  // the hooks hold it weakly
  std::pair<int64_t, int64_t> last_overlap_{0, 0};
  // Starts the all-reduce of every bucket that is ready, in bucket order.
  void start_ready_buckets(Overlap& o);
  std::atomic<bool> stopping_{false};
  std::thread heartbeat_;
  int rank_ = 0, world_size_ = 1, local_rank_ = 0, main_rank_ = 0;
  // Gradients travel in flat buffers of about this size (runconfig.allreduce_bucket_mb):
  // few collectives, each large enough to run at the network's speed, and the
  // first starting early in the backward pass.
  int64_t bucket_bytes_ = int64_t{25} << 20;
};

}  // namespace zoo
