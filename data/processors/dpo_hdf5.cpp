// Implementation of data/processors/dpo_hdf5.h.
#include "data/processors/dpo_hdf5.h"

#include <algorithm>
#include <array>

namespace zoo::data {
namespace {

int64_t row_of(const std::vector<std::string>& rows, const std::string& feature) {
  return std::find(rows.begin(), rows.end(), feature) - rows.begin();
}

}  // namespace

const std::vector<std::string>& preference_features() {
  static const std::vector<std::string> names = {"chosen_input_ids",   "chosen_attention_mask",   "chosen_labels",
                                                 "rejected_input_ids", "rejected_attention_mask", "rejected_labels"};
  return names;
}

const config::Schema<DpoHdf5Options>& DpoHdf5Options::schema() {
  using O = DpoHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (DpoHDF5DataProcessor)",
                         "modelzoo DPO preference pairs (*.h5, dataset 'data', int32 (n, 6, msl)).");
    add_loader_fields(sc)
        .field("shuffle_buffer", &O::shuffle_buffer, "Samples in the shuffle buffer (null: 10 * batch_size).",
               config::if_set(config::positive<int64_t>()))
        .field("use_worker_cache", &O::use_worker_cache, "Copy data to worker-local storage (Cerebras clusters).")
        .field("features_list", &O::features_list,
               "The names of each sample's six rows, in the files' order (default: modelzoo's DPO preprocessing "
               "order, chosen_input_ids, chosen_attention_mask, chosen_labels, then the same for rejected_).")
        .field("use_vsl", &O::use_vsl, "Variable-sequence-length rows (not for preference pairs; must be false).")
        .ignored({"vocab_size"}, "deprecated and unused in modelzoo's HDF5 processors")
        .validate([](const O& o, const auto& fail) {
          if (o.use_vsl) fail("use_vsl", "DPO's preference pairs have no variable-sequence-length rows");
          std::vector<std::string> given = o.features_list, wanted = preference_features();
          std::sort(given.begin(), given.end());
          std::sort(wanted.begin(), wanted.end());
          if (given != wanted)
            fail("features_list",
                 "expected the six names chosen_input_ids, chosen_attention_mask, chosen_labels, "
                 "rejected_input_ids, rejected_attention_mask, rejected_labels, each once, in the "
                 "files' row order");
        });
    return sc;
  }();
  return s;
}

PreferenceSampleSource::PreferenceSampleSource(const std::vector<std::string>& files,
                                               const std::vector<std::string>& rows)
    : file_(std::make_shared<Hdf5SampleSource>(files, std::nullopt, std::nullopt, rows)) {
  auto response = [&](const std::string& which) {
    return std::make_shared<Hdf5RowView>(
        file_,
        std::array<int64_t, 3>{row_of(rows, which + "_input_ids"), row_of(rows, which + "_attention_mask"),
                               row_of(rows, which + "_labels")},
        which + " response");
  };
  chosen_ = response("chosen");
  rejected_ = response("rejected");
}

Features PreferenceSampleSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  Features out;
  for (const auto& [name, response] : {std::make_pair("chosen_", chosen_), std::make_pair("rejected_", rejected_)})
    for (auto& [feature, tensor] : response->read_batch(ids, vocab_size)) out[name + feature] = std::move(tensor);
  return out;
}

namespace {

std::unique_ptr<DataLoader> open_pairs(const DpoHdf5Options& o, const config::Origin& at) {
  return open_task_hdf5(o, o.shuffle_buffer, at, "preference pair(s)", [&](const std::vector<std::string>& files) {
    auto source = std::make_shared<PreferenceSampleSource>(files, o.features_list);
    return OpenedHdf5{source, source->file_ranges()};
  });
}

}  // namespace

DataProcessor dpo_hdf5_processor() {
  return make_data_processor<DpoHdf5Options>(
      "DpoHDF5DataProcessor",
      "modelzoo DPO preference pairs (chosen and rejected responses), iterable like GptHDF5DataProcessor: each "
      "data-parallel task reads the files sorted[rank::WORLD_SIZE], shuffled through a shuffle_buffer.",
      preference_features(), open_pairs);
}

}  // namespace zoo::data
