// modelzoo's DpoHDF5DataProcessor: preference pairs for DPO from `*.h5` files
// holding dataset "data", int32 (n, 6, msl), one row per feature of
// features_list (modelzoo's DPO preprocessing writes chosen_input_ids,
// chosen_attention_mask, chosen_labels, rejected_input_ids,
// rejected_attention_mask, rejected_labels), streamed as modelzoo's iterable
// HDF5 processor streams them. Defines: DpoHdf5Options, PreferenceSampleSource,
// dpo_hdf5_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/processors/gpt_hdf5.h"
#include "data/registry.h"

namespace zoo::data {

// The six feature names in modelzoo's DPO preprocessing order.
const std::vector<std::string>& preference_features();

struct DpoHdf5Options : LoaderOptions {
  std::optional<int64_t> shuffle_buffer;
  bool use_worker_cache = false;
  std::vector<std::string> features_list = preference_features();  // the rows' names in file order
  bool use_vsl = false;
  static const config::Schema<DpoHdf5Options>& schema();
};

// Both responses of each pair: batches of int64 (B, T) chosen_input_ids,
// chosen_attention_mask (loss mask), chosen_labels and the same for
// rejected_, each response checked as LM samples are (ids in the
// vocabulary, mask 0 or 1, some token counted per batch).
class PreferenceSampleSource : public SampleSource {
 public:
  // `rows`: features_list, a permutation of the six feature names.
  PreferenceSampleSource(const std::vector<std::string>& files, const std::vector<std::string>& rows);
  int64_t num_samples() const override { return file_->num_samples(); }
  std::string describe() const override { return file_->describe(); }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  std::optional<int64_t> tokens_per_sample() const override { return file_->sequence_length(); }
  std::vector<std::pair<int64_t, int64_t>> file_ranges() const { return file_->file_ranges(); }

 private:
  std::shared_ptr<Hdf5SampleSource> file_;
  std::shared_ptr<LmSampleSource> chosen_, rejected_;  // views of file_'s rows
};

DataProcessor dpo_hdf5_processor();

}  // namespace zoo::data
