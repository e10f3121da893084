// Implementation of data/bert_hdf5.h with the HDF5 C API.
#include "data/bert_hdf5.h"

#include <hdf5.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "data/gpt_hdf5.h"

namespace zoo::data {
namespace {

// The (n, rows, width) shape of `name` in `file`, which must be an integer dataset.
std::vector<hsize_t> shape_of(hid_t dataset, const std::string& path, const std::string& name) {
  hid_t space = H5Dget_space(dataset);
  const int rank = H5Sget_simple_extent_ndims(space);
  std::vector<hsize_t> dims(std::max(rank, 1), 0);
  if (rank > 0) H5Sget_simple_extent_dims(space, dims.data(), nullptr);
  H5Sclose(space);
  hid_t type = H5Dget_type(dataset);
  const bool integer = H5Tget_class(type) == H5T_INTEGER;
  H5Tclose(type);
  if (!integer) throw std::runtime_error(path + ": dataset '" + name + "' does not hold integers");
  if (rank != 3) throw std::runtime_error(path + ": dataset '" + name + "' has rank " + std::to_string(rank) +
                                          ", expected (n, rows, length) samples");
  return dims;
}

}  // namespace

const config::Schema<BertHdf5Options>& BertHdf5Options::schema() {
  using O = BertHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertHDF5DataProcessor)",
                         "modelzoo masked-LM HDF5 samples (*.h5, datasets 'data' (n, 2, msl) and 'labels').");
    add_loader_fields(sc)
        .field("max_sequence_length", &O::max_sequence_length,
               "Tokens per sample: checked against the files' msl (null: taken from them).",
               config::if_set(config::positive<int64_t>()))
        .field("use_worker_cache", &O::use_worker_cache, "Copy data to worker-local storage (Cerebras clusters).")
        .field("sort_files", &O::sort_files, "Read the files in sorted order (must be true; modelzoo's default).")
        .field("use_vsl", &O::use_vsl, "Variable-sequence-length rows (not supported by zoo; must be false).")
        .ignored({"vocab_size"}, "deprecated and unused in modelzoo's HDF5 processors")
        .validate([](const O& o, const auto& fail) {
          if (!o.sort_files) fail("sort_files", "zoo reads the files in sorted order only");
          if (o.use_vsl) fail("use_vsl", "variable-sequence-length MLM samples are not supported by zoo yet");
        });
    return sc;
  }();
  return s;
}

MlmHdf5Source::MlmHdf5Source(const std::vector<std::string>& paths, std::optional<int64_t> msl) {
  if (msl) msl_ = *msl;
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  for (const auto& path : paths) {
    hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0) throw std::runtime_error(path + ": not a readable HDF5 file");
    File file{path, f, -1, -1, total_, 0};
    files_.push_back(file);  // closed by the destructor from here on
    for (const char* name : {"data", "labels"}) {
      hid_t d = H5Dopen2(f, name, H5P_DEFAULT);
      if (d < 0)
        throw std::runtime_error(path + ": no dataset '" + name +
                                 "' (BertHDF5DataProcessor reads modelzoo's masked-LM files: 'data' and 'labels')");
      (std::string(name) == "data" ? files_.back().data_id : files_.back().labels_id) = d;
    }
    const std::vector<hsize_t> data = shape_of(files_.back().data_id, path, "data");
    const std::vector<hsize_t> labels = shape_of(files_.back().labels_id, path, "labels");
    if (data[1] != 2)
      throw std::runtime_error(path + ": dataset 'data' has " + std::to_string(data[1]) +
                               " rows per sample, expected 2 (input_ids, attention_mask)");
    if (msl_ == 0) msl_ = static_cast<int64_t>(data[2]);
    if (static_cast<int64_t>(data[2]) != msl_)
      throw std::runtime_error(path + ": sequence length " + std::to_string(data[2]) + " differs from " +
                               (msl ? "max_sequence_length " : files_.front().path + "'s ") + std::to_string(msl_));
    if (labels[0] != data[0])
      throw std::runtime_error(path + ": " + std::to_string(labels[0]) + " label rows for " + std::to_string(data[0]) +
                               " samples");
    const bool gathered = labels[1] == 3, dense = labels[1] == 1 && static_cast<int64_t>(labels[2]) == msl_;
    if (!gathered && !dense)
      throw std::runtime_error(path + ": dataset 'labels' has shape (" + std::to_string(labels[0]) + ", " +
                               std::to_string(labels[1]) + ", " + std::to_string(labels[2]) + "), expected (n, 1, " +
                               std::to_string(msl_) + ") labels or (n, 3, P) labels, masked_lm_positions, "
                               "masked_lm_mask");
    if (label_rows_ != 0 && (label_rows_ != static_cast<int64_t>(labels[1]) || label_width_ != static_cast<int64_t>(labels[2])))
      throw std::runtime_error(path + ": its labels are laid out unlike " + files_.front().path + "'s");
    label_rows_ = static_cast<int64_t>(labels[1]);
    label_width_ = static_cast<int64_t>(labels[2]);
    files_.back().count = static_cast<int64_t>(data[0]);
    total_ += files_.back().count;
  }
}

MlmHdf5Source::~MlmHdf5Source() {
  for (auto& f : files_) {
    if (f.data_id >= 0) H5Dclose(f.data_id);
    if (f.labels_id >= 0) H5Dclose(f.labels_id);
    H5Fclose(f.file_id);
  }
}

std::string MlmHdf5Source::describe() const {
  return files_.empty() ? "HDF5 data" : files_.front().path + (files_.size() > 1 ? " and others" : "");
}

const MlmHdf5Source::File& MlmHdf5Source::file_of(int64_t i) const {
  auto it = std::upper_bound(files_.begin(), files_.end(), i, [](int64_t x, const File& f) { return x < f.first; });
  return *std::prev(it);
}

void MlmHdf5Source::read(int64_t i, int32_t* data, int32_t* labels) const {
  const File& f = file_of(i);
  auto read_sample = [&](hid_t dataset, hsize_t rows, hsize_t width, int32_t* out, const char* name) {
    hsize_t start[3] = {static_cast<hsize_t>(i - f.first), 0, 0}, count[3] = {1, rows, width};
    hid_t space = H5Dget_space(dataset);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    hid_t mem = H5Screate_simple(3, count, nullptr);
    const herr_t status = H5Dread(dataset, H5T_NATIVE_INT32, mem, space, H5P_DEFAULT, out);
    H5Sclose(mem);
    H5Sclose(space);
    if (status < 0)
      throw std::runtime_error(f.path + ": cannot read " + name + " of sample " + std::to_string(i - f.first));
  };
  read_sample(f.data_id, 2, static_cast<hsize_t>(msl_), data, "'data'");
  read_sample(f.labels_id, static_cast<hsize_t>(label_rows_), static_cast<hsize_t>(label_width_), labels, "'labels'");
}

Features MlmHdf5Source::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = msl_, P = label_width_;
  const int64_t V = vocab_size.value_or(std::numeric_limits<int32_t>::max() + int64_t{1});
  torch::Tensor input_ids = torch::empty({B, T}, torch::kLong), mask = torch::empty({B, T}, torch::kLong),
                labels = torch::empty({B, P}, torch::kLong), mlm_mask = torch::empty({B, P}, torch::kLong),
                positions = torch::empty({B, P}, torch::kLong);
  std::vector<int32_t> data(static_cast<size_t>(2 * T)), label_rows(static_cast<size_t>(label_rows_ * P));
  int64_t *ids_at = input_ids.data_ptr<int64_t>(), *mask_at = mask.data_ptr<int64_t>(),
          *labels_at = labels.data_ptr<int64_t>(), *mlm_at = mlm_mask.data_ptr<int64_t>(),
          *positions_at = positions.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    read(ids[b], data.data(), label_rows.data());
    const File& f = file_of(ids[b]);
    auto fail = [&](const std::string& what) {
      throw std::runtime_error(f.path + ", sample " + std::to_string(ids[b] - f.first) + ": " + what);
    };
    for (int64_t t = 0; t < T; ++t) {
      const int32_t id = data[t], m = data[T + t];
      if (id < 0 || id >= V)
        fail("input id " + std::to_string(id) + " at position " + std::to_string(t) + " is outside the model's "
             "vocabulary (vocab_size " + std::to_string(V) + ")");
      if (m != 0 && m != 1) fail("attention_mask is " + std::to_string(m) + " at position " + std::to_string(t) + ", expected 0 or 1");
      ids_at[b * T + t] = id;
      mask_at[b * T + t] = m;
    }
    for (int64_t k = 0; k < P; ++k) {
      int32_t label = label_rows[k];
      int64_t counted = label >= 0 ? 1 : 0;  // a negative label is ignore_index: not masked
      if (gathers()) {
        const int32_t at = label_rows[P + k], weight = label_rows[2 * P + k];
        if (weight != 0 && weight != 1) fail("masked_lm_mask is " + std::to_string(weight) + ", expected 0 or 1");
        if (at < 0 || at >= T) fail("masked_lm_positions holds " + std::to_string(at) + ", outside the sequence");
        counted = weight;
        positions_at[b * P + k] = at;
      }
      if (counted && (label < 0 || label >= V))
        fail("label " + std::to_string(label) + " of a masked token is outside the model's vocabulary (vocab_size " +
             std::to_string(V) + ")");
      labels_at[b * P + k] = counted ? label : 0;
      mlm_at[b * P + k] = counted;
    }
  }
  Features out = {{"input_ids", input_ids}, {"attention_mask", mask}, {"labels", labels}, {"masked_lm_mask", mlm_mask}};
  if (gathers()) out["masked_lm_positions"] = positions;
  return out;
}

namespace {

std::unique_ptr<DataLoader> open_mlm(const BertHdf5Options& o, const config::Origin& at) {
  std::shared_ptr<MlmHdf5Source> source;
  try {
    source = std::make_shared<MlmHdf5Source>(sorted_hdf5_files(o.data_dir, at), o.max_sequence_length);
  } catch (const std::runtime_error& e) {
    at.fail("data_dir", e.what());
  }
  if (source->num_samples() < o.batch_size)
    at.fail("data_dir", source->describe() + ": " + std::to_string(source->num_samples()) +
                            " sample(s), fewer than batch_size " + std::to_string(o.batch_size));
  return std::make_unique<MapStyleLoader>(source, o);
}

}  // namespace

DataProcessor bert_hdf5_processor() {
  return make_data_processor<BertHdf5Options>(
      "BertHDF5DataProcessor",
      "modelzoo masked-LM samples from HDF5 (its pre-training preprocessing with training_objective mlm; "
      "ESM-2's data), map-style; labels per token with ignore_index, or gathered with masked_lm_positions.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions"}, open_mlm,
      [](const BertHdf5Options&) {  // masked_lm_positions only in gathered files, known when opened
        return std::vector<std::string>{"input_ids", "attention_mask", "labels", "masked_lm_mask"};
      });
}

}  // namespace zoo::data
