// The stream of modelzoo's iterable HDF5 processor: this task's files (a
// shard of the sorted list) read one after another, the file order shuffled
// each epoch and samples mixed through a shuffle buffer when shuffling.
// Defines: IterableLoader.
#pragma once

#include <random>
#include <utility>
#include <vector>

#include "data/loader.h"

namespace zoo::data {

// Epoch e (seeded with shuffle_seed, e and the task's rank):
//  1. the files in sorted order, or in a seeded random order when shuffling;
//  2. each file's samples in order;
//  3. when shuffling, through a buffer of shuffle_buffer samples: once it is
//     full each new sample replaces a random one, which is emitted; at the
//     end of the epoch the rest comes out in random order.
// With drop_last an epoch ends after its last full batch (the remainder is
// dropped, as a PyTorch DataLoader does); without, the next epoch's samples
// fill the batch. The random choices never depend on the data, so any
// position is replayed exactly from samples_streamed (at most one epoch of
// id arithmetic, no reads).
class IterableLoader : public StreamLoader {
 public:
  using FileRange = std::pair<int64_t, int64_t>;  // first sample id in `source`, sample count
  IterableLoader(std::shared_ptr<SampleSource> source, std::vector<FileRange> files, const LoaderOptions& options,
                 int64_t shuffle_buffer, TaskShard shard);
  int64_t batches_per_epoch() const override { return total_ / batch_size(); }

 protected:
  int64_t plan_next() override;
  void plan_seek(int64_t samples_streamed) override;

 private:
  void start_epoch(int64_t epoch);
  int64_t next_in_epoch();
  uint64_t random_below(uint64_t n) { return rng_() % n; }

  std::vector<FileRange> files_;
  int64_t total_ = 0;
  int64_t per_epoch_ = 0;  // samples emitted per epoch
  size_t buffer_size_;
  // Where the plan is.
  int64_t epoch_ = 0;
  int64_t emitted_ = 0;  // in this epoch
  std::vector<size_t> order_;
  size_t file_ = 0;
  int64_t row_ = 0;
  std::vector<int64_t> buffer_;
  bool draining_ = false;
  std::mt19937_64 rng_;
};

}  // namespace zoo::data
