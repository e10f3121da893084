// Implementation of StreamLoader and MapStyleLoader (data/loader.h).
#include "data/loader.h"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>

#include "data/packing.h"
#include "data/reader_pool.h"

namespace zoo::data {

TaskShard TaskShard::from_environment() {
  // torchrun's names first, then Slurm's (srun) and Open MPI's / MPICH's (mpirun).
  auto read = [](std::initializer_list<const char*> names, int64_t fallback) {
    for (const char* name : names) {
      const char* v = std::getenv(name);
      if (!v || !*v) continue;
      char* end = nullptr;
      const long long x = std::strtoll(v, &end, 10);
      if (*end != '\0')
        throw std::invalid_argument(std::string("environment variable ") + name + "='" + v + "' is not an integer");
      return static_cast<int64_t>(x);
    }
    return fallback;
  };
  TaskShard s{read({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, 0),
              read({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1)};
  if (s.num_tasks < 1 || s.rank < 0 || s.rank >= s.num_tasks)
    throw std::invalid_argument("RANK=" + std::to_string(s.rank) + " and WORLD_SIZE=" + std::to_string(s.num_tasks) +
                                ": expected 0 <= RANK < WORLD_SIZE");
  return s;
}

int64_t per_task_batch_size(const LoaderOptions& o, const TaskShard& shard) {
  if (o.batch_size % shard.num_tasks != 0)
    throw LoaderOptionError("batch_size", "batch_size " + std::to_string(o.batch_size) +
                                              " (the global batch) does not divide by the " +
                                              std::to_string(shard.num_tasks) + " data-parallel ranks (WORLD_SIZE)");
  const int64_t per_task = o.batch_size / shard.num_tasks;
  if (o.micro_batch_size && per_task % *o.micro_batch_size != 0)
    throw LoaderOptionError("micro_batch_size", "micro_batch_size " + std::to_string(*o.micro_batch_size) +
                                                    " does not divide each rank's " + std::to_string(per_task) +
                                                    " samples (batch_size / WORLD_SIZE)");
  return per_task;
}

void DataLoader::resume(const Position& saved) {
  const Position now = position();
  auto seed = [](const std::optional<int64_t>& s) {
    return s ? "shuffle_seed " + std::to_string(*s) : std::string("no shuffling");
  };
  if (saved.shuffle_seed != now.shuffle_seed)
    throw std::invalid_argument("the checkpoint's data order was made with " + seed(saved.shuffle_seed) +
                                ", this run has " + seed(now.shuffle_seed) +
                                "; resuming would repeat and skip samples (set train_input.shuffle/shuffle_seed "
                                "as they were, or leave 'dataloader' out of load_checkpoint_states)");
  if (saved.num_tasks == now.num_tasks) return seek(saved.samples_streamed);
  // Map-style: every rank takes its share of the same global batches, so
  // the position is the same stream at any number of ranks.
  const int64_t global = saved.samples_streamed * saved.num_tasks;
  if (!same_stream_at_any_world_size() || global % now.num_tasks != 0)
    throw std::invalid_argument("the checkpoint's data was split across " + std::to_string(saved.num_tasks) +
                                " task(s), this run has " + std::to_string(now.num_tasks) +
                                (same_stream_at_any_world_size() ? "" : " and this processor shards whole files") +
                                " (leave 'dataloader' out of load_checkpoint_states to start the data afresh)");
  seek(global / now.num_tasks);
}

c10::impl::GenericDict DataLoader::state_dict() const {
  c10::impl::GenericDict d(c10::StringType::get(), c10::AnyType::get());
  const Position p = position();
  d.insert("samples_streamed", p.samples_streamed);
  d.insert("shuffle", p.shuffle_seed.has_value());
  if (p.shuffle_seed) d.insert("seed", *p.shuffle_seed);
  d.insert("num_tasks", p.num_tasks);
  return d;
}

void DataLoader::load_state_dict(const c10::impl::GenericDict& saved) {
  Position p;
  p.samples_streamed = saved.at("samples_streamed").toInt();
  // Checkpoints from before zoo kept the order's inputs are taken as matching.
  if (!saved.contains("shuffle")) p.shuffle_seed = position().shuffle_seed;
  else if (saved.at("shuffle").toBool()) p.shuffle_seed = saved.at("seed").toInt();
  if (saved.contains("num_tasks")) p.num_tasks = saved.at("num_tasks").toInt();
  resume(p);
}

StreamLoader::StreamLoader(std::shared_ptr<SampleSource> source, const LoaderOptions& o, TaskShard shard)
    : source_(std::move(source)),
      batch_size_(o.micro_batch_size.value_or(per_task_batch_size(o, shard))),
      micro_batches_(per_task_batch_size(o, shard) / batch_size_),
      shuffle_(o.shuffle),
      seed_(o.shuffle_seed),
      shard_(shard) {
  if (source_->num_samples() < batch_size_)
    throw std::invalid_argument(source_->describe() + ": " + std::to_string(source_->num_samples()) +
                                " sample(s), fewer than batch_size " + std::to_string(batch_size_));
  if (o.num_workers > 0) pool_ = std::make_unique<BatchReaderPool>(o.num_workers);
  prefetch_ = std::max<int64_t>(1, o.num_workers * o.prefetch_factor);
}

StreamLoader::~StreamLoader() = default;

std::optional<int64_t> StreamLoader::sequence_length() const { return source_->tokens_per_sample(); }

DataLoader::Position StreamLoader::position() const {
  Position p;
  p.samples_streamed = streamed_;
  if (shuffle_) p.shuffle_seed = seed_;
  p.num_tasks = shard_.num_tasks;
  return p;
}

void StreamLoader::seek(int64_t samples_streamed) {
  if (pool_) pool_->clear();
  plan_seek(samples_streamed);
  streamed_ = samples_streamed;
}

Features StreamLoader::next() {
  auto plan = [this] {
    std::vector<int64_t> ids(batch_size_);
    for (auto& id : ids) id = plan_next();
    return ids;
  };
  streamed_ += batch_size_;
  if (!pool_) return source_->read_batch(plan(), vocab_size_);
  while (static_cast<int64_t>(pool_->in_flight()) < prefetch_)
    pool_->submit([this, ids = plan()] { return source_->read_batch(ids, vocab_size_); });
  return pool_->take();
}

void LmSampleSource::check_row(int64_t sample, const int32_t* ids, const int32_t* mask, int32_t* labels, int64_t T,
                               std::optional<int64_t> vocab_size) const {
  auto fail = [&](const std::string& what) { throw std::runtime_error(locate(sample) + ": " + what); };
  const int64_t V = vocab_size.value_or(std::numeric_limits<int32_t>::max() + int64_t{1});
  auto outside = [&](const char* row, int32_t id, int64_t t) {
    fail("token id " + std::to_string(id) + " in " + row + " at position " + std::to_string(t) +
         (id < 0 ? std::string(" is negative; token ids start at 0")
                 : " is outside the model's vocabulary (vocab_size " + std::to_string(V) +
                       "); was the data tokenized for another model?"));
  };
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= V) outside("input_ids", ids[t], t);
    if (mask[t] != 0 && mask[t] != 1)
      fail("attention_mask (the loss mask) is " + std::to_string(mask[t]) + " at position " + std::to_string(t) +
           ", expected 0 or 1");
    if (labels[t] >= 0 && labels[t] < V) continue;
    if (mask[t] == 1) outside("labels", labels[t], t);
    labels[t] = 0;  // not counted (mask 0), e.g. -100 padding: any id in range gives the same loss
  }
}

void LmSampleSource::read_packing(int64_t, int32_t*, int32_t*) const {
  throw std::logic_error(describe() + ": its rows pack no sequences");
}

Features LmSampleSource::read_batch(const std::vector<int64_t>& samples, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(samples.size()), T = sequence_length();
  torch::Tensor ids = torch::empty({B, T}, torch::kInt), mask = torch::empty({B, T}, torch::kInt),
                labels = torch::empty({B, T}, torch::kInt);
  const bool packed = packs_sequences();
  torch::Tensor span = packed ? torch::empty({B, T}, torch::kInt) : torch::Tensor(),
                positions = packed ? torch::empty({B, T}, torch::kInt) : torch::Tensor();
  bool any_counted = false;
  for (int64_t b = 0; b < B; ++b) {
    int32_t* row_ids = ids.data_ptr<int32_t>() + b * T;
    int32_t* row_mask = mask.data_ptr<int32_t>() + b * T;
    int32_t* row_labels = labels.data_ptr<int32_t>() + b * T;
    read(samples[b], row_ids, row_mask, row_labels);
    check_row(samples[b], row_ids, row_mask, row_labels, T, vocab_size);
    if (packed) {
      int32_t* row_span = span.data_ptr<int32_t>() + b * T;
      int32_t* row_positions = positions.data_ptr<int32_t>() + b * T;
      read_packing(samples[b], row_span, row_positions);
      if (const std::string problem = packed_row_problem(row_span, row_positions, T); !problem.empty())
        throw std::runtime_error(locate(samples[b]) + ": " + problem);
    }
    any_counted = any_counted || std::any_of(row_mask, row_mask + T, [](int32_t m) { return m != 0; });
  }
  // Such a batch has loss 0 and teaches nothing; a run of them is data written wrong.
  if (!any_counted)
    throw std::runtime_error(locate(samples.front()) + " and the rest of its batch of " + std::to_string(B) +
                             ": every attention_mask (loss mask) value is 0, so no token counts toward the loss; "
                             "expected 1 at the positions to learn");
  Features batch{{"input_ids", ids.to(torch::kLong)},
                 {"attention_mask", mask.to(torch::kLong)},
                 {"labels", labels.to(torch::kLong)}};
  if (packed) batch["attention_span"] = span.to(torch::kLong), batch["position_ids"] = positions.to(torch::kLong);
  return batch;
}

MapStyleLoader::MapStyleLoader(std::shared_ptr<SampleSource> source, const LoaderOptions& o, TaskShard shard)
    : StreamLoader(std::move(source), o, shard) {
  if (batches_per_epoch() < 1)
    throw std::invalid_argument(this->source().describe() + ": " + std::to_string(this->source().num_samples()) +
                                " sample(s), fewer than batch_size " + std::to_string(batch_size()) + " times " +
                                std::to_string(shard.num_tasks) + " data-parallel tasks");
}

int64_t MapStyleLoader::batches_per_epoch() const { return source().num_samples() / batch_size() / shard().num_tasks; }

int64_t MapStyleLoader::plan_next() {
  // This task's position p is in its batch p / B, which is batch
  // (p / B) * num_tasks + rank of the stream all tasks share.
  const int64_t B = batch_size(), p = planned_++;
  const int64_t position = ((p / B) * shard().num_tasks + shard().rank) * B + p % B;
  const int64_t n = source().num_samples();
  const int64_t epoch = position / n, offset = position % n;
  const int64_t epoch_base = source().reads_epoch() ? epoch * n : 0;
  if (!shuffle()) return epoch_base + offset;
  if (epoch != perm_epoch_) {
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed() + epoch));
    perm_ = torch::randperm(n, gen, torch::kLong);
    perm_epoch_ = epoch;
  }
  return epoch_base + perm_.data_ptr<int64_t>()[offset];
}

}  // namespace zoo::data
