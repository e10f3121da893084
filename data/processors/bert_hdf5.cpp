// Implementation of data/processors/bert_hdf5.h.
#include "data/processors/bert_hdf5.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "data/processors/gpt_hdf5.h"

namespace zoo::data {
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
        .field("use_vsl", &O::use_vsl,
               "Packed samples: 'data' (n, 4, msl) adds attention_span and position_ids rows; each sequence then "
               "attends within itself (models with rotary positions).")
        .ignored({"vocab_size"}, "deprecated and unused in modelzoo's HDF5 processors")
        .validate([](const O& o, const auto& fail) {
          if (!o.sort_files) fail("sort_files", "zoo reads the files in sorted order only");
        });
    return sc;
  }();
  return s;
}

namespace {
constexpr int32_t kIgnoreIndex = -100;  // PyTorch's cross-entropy ignore_index, as modelzoo writes unmasked labels
}  // namespace

MlmHdf5Source::MlmHdf5Source(const std::vector<std::string>& paths, std::optional<int64_t> msl, bool vsl)
    : files_(paths, {"data", "labels"}, "BertHDF5DataProcessor reads modelzoo's masked-LM files: 'data' and 'labels'"),
      data_rows_(vsl ? 4 : 2) {
  if (msl) msl_ = *msl;
  std::vector<int64_t> counts;
  for (size_t k = 0; k < files_.size(); ++k) {
    const std::string& path = files_.path(k);
    const std::vector<int64_t> data = files_.shape(k, 0), labels = files_.shape(k, 1);
    if (data.size() != 3 || data[1] != data_rows_)
      throw std::runtime_error(path + ": dataset 'data' has shape " + Hdf5Files::shape_text(data) + ", expected " +
                               (data_rows_ == 4 ? "(n, 4, msl) rows input_ids, attention_mask, attention_span, "
                                                  "position_ids (use_vsl)"
                                                : "(n, 2, msl) rows input_ids, attention_mask" +
                                                      std::string(data.size() == 3 && data[1] == 4
                                                                      ? " (these are packed samples: set use_vsl: true)"
                                                                      : "")));
    if (msl_ == 0) msl_ = data[2];
    if (data[2] != msl_)
      throw std::runtime_error(path + ": sequence length " + std::to_string(data[2]) + " differs from " +
                               (msl ? "max_sequence_length " : files_.path(0) + "'s ") + std::to_string(msl_));
    const bool gathered = labels.size() == 3 && labels[1] == 3,
               dense = labels.size() == 3 && labels[1] == 1 && labels[2] == msl_;
    if (!gathered && !dense)
      throw std::runtime_error(path + ": dataset 'labels' has shape " + Hdf5Files::shape_text(labels) +
                               ", expected (n, 1, " + std::to_string(msl_) +
                               ") labels or (n, 3, P) labels, masked_lm_positions, masked_lm_mask");
    if (labels[0] != data[0])
      throw std::runtime_error(path + ": " + std::to_string(labels[0]) + " label rows for " + std::to_string(data[0]) +
                               " samples");
    if (label_rows_ != 0 && (label_rows_ != labels[1] || label_width_ != labels[2]))
      throw std::runtime_error(path + ": its labels are laid out unlike " + files_.path(0) + "'s");
    label_rows_ = labels[1];
    label_width_ = labels[2];
    counts.push_back(data[0]);
  }
  files_.set_counts(counts);
}

Features MlmHdf5Source::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = msl_, P = label_width_;
  const int64_t V = vocab_size.value_or(std::numeric_limits<int32_t>::max() + int64_t{1});
  torch::Tensor input_ids = torch::empty({B, T}, torch::kLong), mask = torch::empty({B, T}, torch::kLong),
                labels = torch::empty({B, P}, torch::kLong), mlm_mask = torch::empty({B, P}, torch::kLong),
                positions = torch::empty({B, P}, torch::kLong);
  torch::Tensor span = torch::empty({B, T}, torch::kLong), position_ids = torch::empty({B, T}, torch::kLong);
  std::vector<int32_t> data(static_cast<size_t>(data_rows_ * T)), label_rows(static_cast<size_t>(label_rows_ * P));
  int64_t *ids_at = input_ids.data_ptr<int64_t>(), *mask_at = mask.data_ptr<int64_t>(),
          *labels_at = labels.data_ptr<int64_t>(), *mlm_at = mlm_mask.data_ptr<int64_t>(),
          *positions_at = positions.data_ptr<int64_t>();
  for (int64_t b = 0; b < B; ++b) {
    files_.read(ids[b], 0, data.data());
    files_.read(ids[b], 1, label_rows.data());
    const std::pair<size_t, int64_t> where = files_.locate(ids[b]);  // lambdas below capture plain names
    const size_t file = where.first;
    const int64_t row = where.second;
    auto fail = [&](const std::string& what) {
      throw std::runtime_error(files_.path(file) + ", sample " + std::to_string(row) + ": " + what);
    };
    for (int64_t t = 0; t < T; ++t) {
      const int32_t id = data[t], m = data[T + t];
      if (id < 0 || id >= V)
        fail("input id " + std::to_string(id) + " at position " + std::to_string(t) +
             " is outside the model's "
             "vocabulary (vocab_size " +
             std::to_string(V) + ")");
      if (m != 0 && m != 1)
        fail("attention_mask is " + std::to_string(m) + " at position " + std::to_string(t) + ", expected 0 or 1");
      ids_at[b * T + t] = id;
      mask_at[b * T + t] = m;
      if (data_rows_ == 4) {
        if (data[2 * T + t] < 0 || data[3 * T + t] < 0 || data[2 * T + t] >= T || data[3 * T + t] >= T)
          fail("attention_span " + std::to_string(data[2 * T + t]) + " / position_ids " +
               std::to_string(data[3 * T + t]) + " at position " + std::to_string(t) +
               " do not describe a sequence within the sample");
        span.data_ptr<int64_t>()[b * T + t] = data[2 * T + t];
        position_ids.data_ptr<int64_t>()[b * T + t] = data[3 * T + t];
      }
    }
    for (int64_t k = 0; k < P; ++k) {
      int32_t label = label_rows[k];
      if (label < 0 && label != kIgnoreIndex)
        fail("label " + std::to_string(label) + " at slot " + std::to_string(k) + ": expected a token id, or " +
             std::to_string(kIgnoreIndex) + " (ignore_index) where no token is masked");
      int64_t counted = label >= 0 ? 1 : 0;  // ignore_index: not masked
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
  // Such a batch has loss 0 and teaches nothing; a run of them is data written wrong.
  if (mlm_mask.sum().item<int64_t>() == 0) {
    const auto first = files_.locate(ids.front());
    throw std::runtime_error(
        files_.path(first.first) + ", sample " + std::to_string(first.second) + " and the rest of its batch of " +
        std::to_string(B) + ": no token is masked (every label is " + std::to_string(kIgnoreIndex) +
        (gathers() ? " or its masked_lm_mask 0" : "") + "), so nothing counts toward the masked-LM loss");
  }
  Features out = {{"input_ids", input_ids}, {"attention_mask", mask}, {"labels", labels}, {"masked_lm_mask", mlm_mask}};
  if (gathers()) out["masked_lm_positions"] = positions;
  if (data_rows_ == 4) out["attention_span"] = span, out["position_ids"] = position_ids;
  return out;
}

namespace {

std::unique_ptr<DataLoader> open_mlm(const BertHdf5Options& o, const config::Origin& at) {
  return open_map_hdf5(o, at, [&] {
    return std::make_shared<MlmHdf5Source>(sorted_hdf5_files(o.data_dir, at), o.max_sequence_length, o.use_vsl);
  });
}

}  // namespace

DataProcessor bert_hdf5_processor() {
  return make_data_processor<BertHdf5Options>(
      "BertHDF5DataProcessor",
      "modelzoo masked-LM samples from HDF5 (its pre-training preprocessing with training_objective mlm; "
      "ESM-2's data), map-style; labels per token with ignore_index, or gathered with masked_lm_positions.",
      {"input_ids", "attention_mask", "labels", "masked_lm_mask", "masked_lm_positions", "attention_span",
       "position_ids"},
      open_mlm,
      [](const BertHdf5Options& o) {  // masked_lm_positions only in gathered files, known when opened
        std::vector<std::string> f = {"input_ids", "attention_mask", "labels", "masked_lm_mask"};
        if (o.use_vsl) f.insert(f.end(), {"attention_span", "position_ids"});
        return f;
      });
}

}  // namespace zoo::data
