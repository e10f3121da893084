// What the runner consumes from a data processor: an endless, resumable stream
// of batches. Defines: SampleSource, LoaderOptions (+ add_loader_fields),
// LmSampleSource, DataLoader, LoaderOptionError, TaskShard, StreamLoader, MapStyleLoader.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "models/model.h"

namespace zoo::data {

using models::Features;

// Random access to a dataset's samples, read a batch at a time.
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual int64_t num_samples() const = 0;
  virtual std::string describe() const = 0;  // for messages, e.g. the data_dir
  // The samples `ids` as one batch. Throws std::runtime_error naming the
  // file and sample when the data cannot be meant (LM data: a token id
  // outside `vocab_size`, or negative). Called from reader threads: must not
  // change the source.
  virtual Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const = 0;
  // Sources whose samples change with the epoch (BERT's dynamic masking):
  // MapStyleLoader passes ids epoch * num_samples() + sample.
  virtual bool reads_epoch() const { return false; }
  // Tokens per sequence of token data (checked against the model's positions); unset for other data.
  virtual std::optional<int64_t> tokens_per_sample() const { return std::nullopt; }
};

// Fixed-length LM samples: int64 (B, T) input_ids / attention_mask (loss
// mask) / labels batches.
class LmSampleSource : public SampleSource {
 public:
  virtual int64_t sequence_length() const = 0;
  std::optional<int64_t> tokens_per_sample() const override { return sequence_length(); }
  // Writes sample i's input_ids / attention_mask (loss mask) / labels, each T int32.
  virtual void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const = 0;
  // Sources whose rows pack several sequences (modelzoo's VSL, data/packing.h):
  // also sample i's attention_span and position_ids, T int32 each.
  virtual bool packs_sequences() const { return false; }
  virtual void read_packing(int64_t i, int32_t* attention_span, int32_t* position_ids) const;
  // Where sample i comes from, for messages: the file and the sample's place in it.
  virtual std::string locate(int64_t i) const { return describe() + ", sample " + std::to_string(i); }
  // Also throws when a loss-mask value is not 0 or 1, when a counted label
  // is outside the vocabulary, or when no token of the batch counts toward
  // the loss. Uncounted labels outside it (e.g. -100 padding) become 0.
  // Packing sources add attention_span and position_ids (kPackedSequenceFeatures),
  // checked to tile each row (packed_row_problem).
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  void check_row(int64_t sample, const int32_t* ids, const int32_t* mask, int32_t* labels, int64_t T,
                 std::optional<int64_t> vocab_size) const;
};

// Keys every loader-backed processor shares (modelzoo's names and defaults).
struct LoaderOptions {
  std::string data_processor;
  config::PathList data_dir;
  int64_t batch_size = 0;
  std::optional<int64_t> micro_batch_size;
  bool shuffle = false;
  int64_t shuffle_seed = 0;
  bool drop_last = true;
  int64_t num_workers = 0;
  int64_t prefetch_factor = 10;
  bool persistent_workers = true;
};

template <class T>
config::Schema<T>& add_loader_fields(config::Schema<T>& s) {
  using L = LoaderOptions;
  return s.field("data_processor", static_cast<std::string T::*>(&L::data_processor), "Data processor name.")
      .field("data_dir", static_cast<config::PathList T::*>(&L::data_dir),
             "Directory (or list of directories) holding the data files.")
      .field("batch_size", static_cast<int64_t T::*>(&L::batch_size), "Samples per batch.", config::positive<int64_t>())
      .field("micro_batch_size", static_cast<std::optional<int64_t> T::*>(&L::micro_batch_size),
             "Split each batch into micro-batches of this size, accumulating their gradients (null: whole batches).",
             config::if_set(config::positive<int64_t>()))
      .field("shuffle", static_cast<bool T::*>(&L::shuffle), "Shuffle samples each epoch.")
      .field("shuffle_seed", static_cast<int64_t T::*>(&L::shuffle_seed), "Seed of the shuffle; epoch e uses seed + e.")
      .field("drop_last", static_cast<bool T::*>(&L::drop_last),
             "Only full batches; the remainder of an epoch is carried into the next.")
      .field("num_workers", static_cast<int64_t T::*>(&L::num_workers),
             "Background threads reading batches ahead of training (0: read on the training thread).",
             config::non_negative<int64_t>())
      .field("prefetch_factor", static_cast<int64_t T::*>(&L::prefetch_factor), "Batches each worker keeps read ahead.",
             config::non_negative<int64_t>())
      .field("persistent_workers", static_cast<bool T::*>(&L::persistent_workers),
             "Keep workers between epochs (zoo's workers always persist; accepted for modelzoo configs).")
      .validate([](const T& o, const auto& fail) {
        if (o.batch_size <= 0) fail("batch_size", "required: a positive number of samples per batch");
        if (o.micro_batch_size && *o.micro_batch_size > o.batch_size)
          fail("micro_batch_size", "expected at most batch_size (" + std::to_string(o.batch_size) + ")");
        if (o.micro_batch_size && o.batch_size % *o.micro_batch_size != 0)
          fail("micro_batch_size", "must divide batch_size (" + std::to_string(o.batch_size) + ")");
      });
}

class DataLoader {
 public:
  virtual ~DataLoader() = default;
  // The next batch, named as its processor documents (LM data: int64 (B, T)
  // input_ids / attention_mask / labels); wraps into the next epoch when the
  // data runs out.
  virtual Features next() = 0;
  virtual int64_t batches_per_epoch() const = 0;
  virtual int64_t batch_size() const = 0;  // samples per next() (a micro-batch when splitting)
  // How many next() batches make one configured batch (batch_size / micro_batch_size).
  virtual int64_t micro_batches() const { return 1; }
  // Moves to `samples_streamed` samples after the start of the stream.
  virtual void seek(int64_t samples_streamed) = 0;
  // What a checkpoint keeps of the stream: the position and what the order
  // depends on. resume() throws std::invalid_argument when the saved stream
  // was ordered differently (another shuffle seed, shuffling switched on or
  // off, another number of data-parallel tasks): the rest of the run would
  // silently repeat and skip samples otherwise.
  struct Position {
    int64_t samples_streamed = 0;
    std::optional<int64_t> shuffle_seed;  // unset when not shuffling
    int64_t num_tasks = 1;
  };
  virtual Position position() const = 0;
  // Whether the ranks together read one stream of global batches whatever
  // their number (map-style), so a position carries across world sizes.
  virtual bool same_stream_at_any_world_size() const { return false; }
  void resume(const Position& saved);
  // The position as checkpoints keep it ({samples_streamed, shuffle, seed,
  // num_tasks}, modelzoo's "dataloader" state) and back; load_state_dict
  // throws std::invalid_argument like resume().
  c10::impl::GenericDict state_dict() const;
  void load_state_dict(const c10::impl::GenericDict& saved);
  // From now on next() throws std::runtime_error naming the file and sample
  // when an input or label token id is not below vocab_size (or an input id is negative).
  virtual void check_token_ids(int64_t vocab_size) = 0;
  // Tokens per sample of LM data (unset for other data), and where the data
  // comes from, for messages.
  virtual std::optional<int64_t> sequence_length() const { return std::nullopt; }
  virtual std::string describe() const = 0;
};

// A loader option the data cannot be read with as given (reader threads
// that cannot start, a batch that does not split over the ranks): `key`
// names it, so that the input spec reports its file and line.
class LoaderOptionError : public std::runtime_error {
 public:
  LoaderOptionError(std::string key, const std::string& what) : std::runtime_error(what), key(std::move(key)) {}
  std::string key;
};

// This process's place among data-parallel tasks, from the environment
// torchrun and friends set (RANK, WORLD_SIZE); rank 0 of 1 when unset.
// Throws std::invalid_argument for values that are not a rank below a size.
struct TaskShard {
  int64_t rank = 0;
  int64_t num_tasks = 1;
  static TaskShard from_environment();
};

// Each rank's share of the global batch_size; LoaderOptionError when it
// (or micro_batch_size within it) does not divide evenly.
int64_t per_task_batch_size(const LoaderOptions& options, const TaskShard& shard);

class BatchReaderPool;

// A loader whose stream is a sequence of sample ids planned on the calling
// thread (cheap, deterministic) and read from a SampleSource either inline
// or, with num_workers > 0, by background threads that keep
// num_workers * prefetch_factor batches in flight and deliver them in order.
// Subclasses say which sample comes at each stream position.
class StreamLoader : public DataLoader {
 public:
  ~StreamLoader() override;
  Features next() override;
  int64_t batch_size() const override { return batch_size_; }
  int64_t micro_batches() const override { return micro_batches_; }
  void seek(int64_t samples_streamed) override;
  Position position() const override;
  void check_token_ids(int64_t vocab_size) override { vocab_size_ = vocab_size; }
  std::optional<int64_t> sequence_length() const override;
  std::string describe() const override { return source_->describe(); }

 protected:
  StreamLoader(std::shared_ptr<SampleSource> source, const LoaderOptions& options, TaskShard shard);
  // The sample id at the plan's next stream position; advances the plan.
  virtual int64_t plan_next() = 0;
  // Moves the plan to `samples_streamed` positions after the start.
  virtual void plan_seek(int64_t samples_streamed) = 0;
  const SampleSource& source() const { return *source_; }
  bool shuffle() const { return shuffle_; }
  int64_t seed() const { return seed_; }
  const TaskShard& shard() const { return shard_; }

 private:
  std::shared_ptr<SampleSource> source_;
  int64_t batch_size_;
  int64_t micro_batches_;
  bool shuffle_;
  int64_t seed_;
  TaskShard shard_;
  int64_t streamed_ = 0;
  std::optional<int64_t> vocab_size_;
  std::unique_ptr<BatchReaderPool> pool_;  // null without workers
  int64_t prefetch_ = 1;                   // batches kept in flight by the pool
};

// Map-style: the stream is epoch 0, 1, ... back to back, each a permutation
// of all samples (randperm seeded with shuffle_seed + epoch when shuffling),
// so full batches carry an epoch's remainder into the next and any position
// is restored from samples_streamed alone. With several tasks, task r takes
// batches r, r + num_tasks, ... of that stream.
class MapStyleLoader : public StreamLoader {
 public:
  MapStyleLoader(std::shared_ptr<SampleSource> source, const LoaderOptions& options,
                 TaskShard shard = TaskShard::from_environment());
  int64_t batches_per_epoch() const override;
  bool same_stream_at_any_world_size() const override { return true; }

 protected:
  int64_t plan_next() override;
  void plan_seek(int64_t samples_streamed) override { planned_ = samples_streamed; }

 private:
  int64_t planned_ = 0;
  int64_t perm_epoch_ = -1;
  torch::Tensor perm_;
};

}  // namespace zoo::data
