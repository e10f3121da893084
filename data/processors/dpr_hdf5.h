// modelzoo's DPRHDF5DataProcessor: questions with their contexts, as
// modelzoo's DPR conversion writes them: per `*.h5` file, dataset "data_0"
// int32 (n, 3, T) question rows input_ids, attention_mask, token_type_ids
// and "data_1" (n, 3, N, T) the same rows for N contexts, the positive first
// then hard negatives; streamed as modelzoo's iterable HDF5 processor
// streams. Defines: DprHdf5Options, QuestionContextSource, dpr_hdf5_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/hdf5_files.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct DprHdf5Options : LoaderOptions {
  std::optional<int64_t> shuffle_buffer;
  bool use_worker_cache = false;
  bool use_vsl = false;
  static const config::Schema<DprHdf5Options>& schema();
};

// Batches of int64 questions_{input_ids, attention_mask, token_type_ids}
// (B, T) and ctx_{input_ids, attention_mask, token_type_ids} (B, N, T);
// ids are checked against the vocabulary and masks for 0/1, errors naming
// the file and sample.
class QuestionContextSource : public SampleSource {
 public:
  explicit QuestionContextSource(const std::vector<std::string>& files);
  int64_t num_samples() const override { return files_.num_samples(); }
  std::string describe() const override { return files_.describe(); }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  std::optional<int64_t> tokens_per_sample() const override { return length_; }
  std::vector<std::pair<int64_t, int64_t>> file_ranges() const { return files_.ranges(); }

 private:
  Hdf5Files files_;  // datasets 0: "data_0" (questions), 1: "data_1" (contexts)
  int64_t length_ = 0, contexts_ = 0;
};

DataProcessor dpr_hdf5_processor();

}  // namespace zoo::data
