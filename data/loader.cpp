// Implementation of MapStyleLoader (data/loader.h).
#include "data/loader.h"

#include <stdexcept>

namespace zoo::data {

MapStyleLoader::MapStyleLoader(std::shared_ptr<SampleSource> source, const LoaderOptions& o)
    : source_(std::move(source)),
      batch_size_(o.micro_batch_size.value_or(o.batch_size)),
      micro_batches_(o.batch_size / o.micro_batch_size.value_or(o.batch_size)),
      shuffle_(o.shuffle),
      seed_(o.shuffle_seed) {
  if (source_->num_samples() < batch_size_)
    throw std::invalid_argument(source_->describe() + ": " + std::to_string(source_->num_samples()) +
                                " sample(s), fewer than batch_size " + std::to_string(batch_size_));
}

void DataLoader::resume(const Position& saved) {
  const Position now = position();
  auto seed = [](const std::optional<int64_t>& s) { return s ? "shuffle_seed " + std::to_string(*s) : std::string("no shuffling"); };
  if (saved.shuffle_seed != now.shuffle_seed)
    throw std::invalid_argument("the checkpoint's data order was made with " + seed(saved.shuffle_seed) +
                                ", this run has " + seed(now.shuffle_seed) +
                                "; resuming would repeat and skip samples (set train_input.shuffle/shuffle_seed "
                                "as they were, or leave 'dataloader' out of load_checkpoint_states)");
  if (saved.num_tasks != now.num_tasks)
    throw std::invalid_argument("the checkpoint's data was split across " + std::to_string(saved.num_tasks) +
                                " task(s), this run has " + std::to_string(now.num_tasks) +
                                " (leave 'dataloader' out of load_checkpoint_states to start the data afresh)");
  seek(saved.samples_streamed);
}

DataLoader::Position MapStyleLoader::position() const {
  Position p;
  p.samples_streamed = streamed_;
  if (shuffle_) p.shuffle_seed = seed_;
  return p;
}

int64_t MapStyleLoader::batches_per_epoch() const { return source_->num_samples() / batch_size_; }

int64_t MapStyleLoader::sample_at(int64_t position) {
  const int64_t n = source_->num_samples();
  const int64_t epoch = position / n, offset = position % n;
  if (!shuffle_) return offset;
  if (epoch != perm_epoch_) {
    auto gen = at::detail::createCPUGenerator(static_cast<uint64_t>(seed_ + epoch));
    perm_ = torch::randperm(n, gen, torch::kLong);
    perm_epoch_ = epoch;
  }
  return perm_.data_ptr<int64_t>()[offset];
}

void MapStyleLoader::check_row(int64_t sample, const int32_t* ids, const int32_t* labels, int64_t T) const {
  const int64_t V = *vocab_size_;
  auto fail = [&](const char* row, int32_t id, int64_t t) {
    throw std::runtime_error(source_->locate(sample) + ": token id " + std::to_string(id) + " in " + row +
                             " at position " + std::to_string(t) + " is outside the model's vocabulary (vocab_size " +
                             std::to_string(V) + "); was the data tokenized for another model?");
  };
  for (int64_t t = 0; t < T; ++t) {
    if (ids[t] < 0 || ids[t] >= V) fail("input_ids", ids[t], t);
    if (labels[t] >= V) fail("labels", labels[t], t);
  }
}

Features MapStyleLoader::next() {
  const int64_t B = batch_size_, T = source_->sequence_length();
  torch::Tensor ids = torch::empty({B, T}, torch::kInt), mask = torch::empty({B, T}, torch::kInt),
                labels = torch::empty({B, T}, torch::kInt);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t sample = sample_at(streamed_ + b);
    int32_t* row_ids = ids.data_ptr<int32_t>() + b * T;
    int32_t* row_labels = labels.data_ptr<int32_t>() + b * T;
    source_->read(sample, row_ids, mask.data_ptr<int32_t>() + b * T, row_labels);
    if (vocab_size_) check_row(sample, row_ids, row_labels, T);
  }
  streamed_ += B;
  return {{"input_ids", ids.to(torch::kLong)},
          {"attention_mask", mask.to(torch::kLong)},
          {"labels", labels.to(torch::kLong)}};
}

}  // namespace zoo::data
