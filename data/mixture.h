// modelzoo's `mixture` of HDF5 data sets (GptHDF5MapDataProcessor): one
// sample index space over several sources, each taking a share of it by its
// weight; an epoch is long enough to see every sample of each source weighing
// more than 5% at least once; and modelzoo's `data_subset`, ranges of a data
// set's samples. Defines: MixtureEntry, MixtureSource, parse_data_subset,
// SubsetSource.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "configs/schema/schema.h"
#include "data/loader.h"

namespace zoo::data {

// One `mixture` item: a data_dir, its weight and the part of it read.
struct MixtureEntry {
  config::PathList data_dir;
  double weight = 0.0;
  std::optional<std::string> data_subset;
  static const config::Schema<MixtureEntry>& schema();
};

class MixtureSource : public LmSampleSource {
 public:
  // Weights are normalized over the sources weighing more than 0; those
  // weighing 0 are left out. interleave: the sources' samples spread over the
  // index space by a permutation from `seed`, each source's in its own order
  // (modelzoo does so when not shuffling); otherwise source after source.
  // Throws std::invalid_argument on bad weights or differing sequence lengths.
  MixtureSource(std::vector<std::shared_ptr<LmSampleSource>> sources, std::vector<double> weights, bool interleave,
                uint64_t seed);
  int64_t num_samples() const override { return boundaries_.back(); }
  int64_t sequence_length() const override { return sources_.front()->sequence_length(); }
  void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const override;
  bool packs_sequences() const override { return sources_.front()->packs_sequences(); }
  void read_packing(int64_t i, int32_t* attention_span, int32_t* position_ids) const override;
  std::string describe() const override;
  std::string locate(int64_t i) const override;
  // Source k holds indices [boundaries()[k], boundaries()[k + 1]) before interleaving.
  const std::vector<int64_t>& boundaries() const { return boundaries_; }

 private:
  std::pair<size_t, int64_t> place(int64_t i) const;  // (source, its sample) of index i
  std::vector<std::shared_ptr<LmSampleSource>> sources_;
  std::vector<int64_t> boundaries_;
  std::vector<int64_t> order_;  // interleave: index -> position in the sources' concatenation
};

// modelzoo's data_subset: comma-separated ranges "a-b" of fractions of a
// data set ("0.0-0.5", "0.1-0.3,0.7-1.0"), within [0, 1], each starting at or
// after the previous one's end. Throws std::invalid_argument saying what is wrong.
std::vector<std::pair<double, double>> parse_data_subset(const std::string& text);

// The samples of `source` in `ranges`, in order: range [a, b) of n samples
// keeps samples floor(n a) .. floor(n b) - 1 (modelzoo's _DatasetSegmenter).
class SubsetSource : public LmSampleSource {
 public:
  SubsetSource(std::shared_ptr<LmSampleSource> source, const std::vector<std::pair<double, double>>& ranges);
  int64_t num_samples() const override { return ends_.empty() ? 0 : ends_.back(); }
  int64_t sequence_length() const override { return source_->sequence_length(); }
  void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const override;
  bool packs_sequences() const override { return source_->packs_sequences(); }
  void read_packing(int64_t i, int32_t* attention_span, int32_t* position_ids) const override {
    source_->read_packing(source_index(i), attention_span, position_ids);
  }
  std::string describe() const override;
  std::string locate(int64_t i) const override { return source_->locate(source_index(i)); }

 private:
  int64_t source_index(int64_t i) const;
  std::shared_ptr<LmSampleSource> source_;
  std::vector<int64_t> firsts_, ends_;  // each range's first source sample; cumulative kept counts
  std::string text_;
};

}  // namespace zoo::data
