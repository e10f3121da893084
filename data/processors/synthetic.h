// SyntheticDataProcessor (zoo's own): random LM samples made on the fly, for
// benchmarks and smoke tests without data files. Sample i depends only on
// (seed, i), so shuffling and resuming work as for data read from files.
// Defines: SyntheticOptions, SyntheticSource, synthetic_processor.
#pragma once

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct SyntheticOptions : LoaderOptions {
  int64_t vocab_size = 0;
  int64_t max_sequence_length = 0;
  int64_t num_examples = 65536;
  int64_t seed = 0;
  static const config::Schema<SyntheticOptions>& schema();
};

// Token t of sample i is a hash of (seed, i, t) modulo vocab_size; inputs are
// the first msl of msl + 1 such tokens, labels the last msl, all counted in the loss.
class SyntheticSource : public LmSampleSource {
 public:
  explicit SyntheticSource(const SyntheticOptions& o);
  int64_t num_samples() const override { return num_examples_; }
  int64_t sequence_length() const override { return msl_; }
  void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const override;
  std::string describe() const override { return "synthetic data"; }

 private:
  int32_t token(int64_t i, int64_t t) const;
  int64_t vocab_size_, msl_, num_examples_;
  uint64_t seed_;
};

DataProcessor synthetic_processor();

}  // namespace zoo::data
