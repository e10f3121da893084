// modelzoo's BertHDF5DataProcessor: masked-LM samples as modelzoo's
// pre-training preprocessing writes them (training_objective mlm; ESM-2's
// data): per `*.h5` file, dataset "data" int32 (n, 2, msl) rows input_ids,
// attention_mask, and dataset "labels", either (n, 1, msl) labels with
// ignore_index (negative) where nothing was masked, or, with
// mlm_with_gather, (n, 3, P) rows labels, masked_lm_positions,
// masked_lm_mask; with use_vsl, 'data' (n, 4, msl) adds attention_span and
// position_ids of packed sequences. Map-style, as modelzoo's. Defines: BertHdf5Options,
// MlmHdf5Source, bert_hdf5_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/hdf5_files.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct BertHdf5Options : LoaderOptions {
  std::optional<int64_t> max_sequence_length;  // checked against the files' msl when set
  bool use_worker_cache = false;
  bool sort_files = true;
  bool use_vsl = false;
  static const config::Schema<BertHdf5Options>& schema();
};

// Batches of int64 input_ids, attention_mask (B, T) and labels,
// masked_lm_mask (B, T), or with gathered labels (B, P) plus
// masked_lm_positions. Without gathering, a negative label (ignore_index)
// has masked_lm_mask 0 and becomes 0. Token ids are checked against the
// vocabulary, masks for 0/1 and positions for < T; errors name file and sample.
class MlmHdf5Source : public SampleSource {
 public:
  // vsl: 'data' has 4 rows, the last attention_span and position_ids of
  // packed sequences, which batches then hold too.
  MlmHdf5Source(const std::vector<std::string>& files, std::optional<int64_t> msl, bool vsl = false);
  int64_t num_samples() const override { return files_.num_samples(); }
  std::string describe() const override { return files_.describe(); }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  std::optional<int64_t> tokens_per_sample() const override { return msl_; }
  bool gathers() const { return label_rows_ == 3; }

 private:
  Hdf5Files files_;  // datasets 0: "data", 1: "labels"
  int64_t data_rows_ = 2, msl_ = 0, label_rows_ = 0, label_width_ = 0;
};

DataProcessor bert_hdf5_processor();

}  // namespace zoo::data
