// AlphabetDataProcessor: the toy task of modelzoo's layers-API tutorial
// (layers_api_demo/data.py): runs of consecutive letters of the alphabet (ids
// 0-25), each sample seq_length + 1 letters from a random start, to be
// continued one letter ahead. Sample i depends only on (seed, i). modelzoo
// names no processor (its run.py picks this loader itself), so the
// layers_api_demo family takes it by default; zoo yields modelzoo's
// target_ids as labels. Defines: AlphabetOptions, AlphabetSource, alphabet_processor.
#pragma once

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

constexpr int64_t kAlphabetLetters = 26;

struct AlphabetOptions : LoaderOptions {
  AlphabetOptions() { shuffle = true; }  // modelzoo's DataLoader always shuffles
  int64_t num_samples = 0;
  int64_t seq_length = 0;
  int64_t seed = 0;
  static const config::Schema<AlphabetOptions>& schema();
};

// Sample i: start s uniform in [0, 26 - seq_length - 1] (a hash of (seed, i)),
// input_ids s .. s + seq_length - 1, labels one letter on, all counted.
class AlphabetSource : public LmSampleSource {
 public:
  explicit AlphabetSource(const AlphabetOptions& o);
  int64_t num_samples() const override { return num_samples_; }
  int64_t sequence_length() const override { return seq_length_; }
  void read(int64_t i, int32_t* input_ids, int32_t* mask, int32_t* labels) const override;
  std::string describe() const override { return "alphabet runs"; }
  int64_t start(int64_t i) const;  // sample i's first letter

 private:
  int64_t num_samples_, seq_length_;
  uint64_t seed_;
};

DataProcessor alphabet_processor();

}  // namespace zoo::data
