// Implementation of data/iterable_loader.h.
#include "data/iterable_loader.h"

#include <numeric>
#include <stdexcept>

namespace zoo::data {

IterableLoader::IterableLoader(std::shared_ptr<SampleSource> source, std::vector<FileRange> files,
                               const LoaderOptions& o, int64_t shuffle_buffer, TaskShard shard)
    : StreamLoader(std::move(source), o, shard),
      files_(std::move(files)),
      buffer_size_(static_cast<size_t>(shuffle_buffer)) {
  for (const auto& f : files_) total_ += f.second;
  per_epoch_ = o.drop_last ? (total_ / batch_size()) * batch_size() : total_;
  if (per_epoch_ < 1 || buffer_size_ < 1) throw std::invalid_argument("IterableLoader: no full batch or empty buffer");
  start_epoch(0);
}

void IterableLoader::start_epoch(int64_t epoch) {
  epoch_ = epoch;
  emitted_ = 0;
  file_ = 0;
  row_ = 0;
  buffer_.clear();
  draining_ = false;
  std::seed_seq seq{static_cast<uint64_t>(seed()), static_cast<uint64_t>(epoch), static_cast<uint64_t>(shard().rank)};
  rng_.seed(seq);
  order_.resize(files_.size());
  std::iota(order_.begin(), order_.end(), size_t{0});
  if (shuffle())  // Fisher-Yates with our own draws: the same order from every standard library
    for (size_t i = order_.size(); i > 1; --i) std::swap(order_[i - 1], order_[random_below(i)]);
}

int64_t IterableLoader::next_in_epoch() {
  while (!draining_) {
    while (file_ < order_.size() && row_ == files_[order_[file_]].second) ++file_, row_ = 0;
    if (file_ == order_.size()) {
      draining_ = true;
      for (size_t i = buffer_.size(); i > 1; --i) std::swap(buffer_[i - 1], buffer_[random_below(i)]);
      break;
    }
    const int64_t id = files_[order_[file_]].first + row_++;
    if (!shuffle()) return id;
    if (buffer_.size() < buffer_size_) {
      buffer_.push_back(id);
      continue;
    }
    const size_t slot = random_below(buffer_size_);
    const int64_t out = buffer_[slot];
    buffer_[slot] = id;
    return out;
  }
  const int64_t out = buffer_.back();  // per_epoch_ <= total_, so never empty here
  buffer_.pop_back();
  return out;
}

int64_t IterableLoader::plan_next() {
  if (emitted_ == per_epoch_) start_epoch(epoch_ + 1);
  ++emitted_;
  return next_in_epoch();
}

void IterableLoader::plan_seek(int64_t samples_streamed) {
  start_epoch(samples_streamed / per_epoch_);
  for (int64_t i = samples_streamed % per_epoch_; i > 0; --i) plan_next();
}

}  // namespace zoo::data
