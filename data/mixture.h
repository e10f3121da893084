// modelzoo's `mixture` of HDF5 data sets (GptHDF5MapDataProcessor): one
// sample index space over several sources, each taking a share of it by its
// weight; an epoch is long enough to see every sample of each source weighing
// more than 5% at least once. Defines: MixtureEntry, MixtureSource.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "configs/schema/schema.h"
#include "data/loader.h"

namespace zoo::data {

// One `mixture` item: a data_dir and its weight.
struct MixtureEntry {
  config::PathList data_dir;
  double weight = 0.0;
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

}  // namespace zoo::data
