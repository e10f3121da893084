// Implementation of data/processors/dpr_hdf5.h.
#include "data/processors/dpr_hdf5.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "data/processors/gpt_hdf5.h"

namespace zoo::data {
const config::Schema<DprHdf5Options>& DprHdf5Options::schema() {
  using O = DprHdf5Options;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (DPRHDF5DataProcessor)",
                         "modelzoo DPR questions and contexts (*.h5, datasets data_0 and data_1).");
    add_loader_fields(sc)
        .field("shuffle_buffer", &O::shuffle_buffer, "Samples in the shuffle buffer (null: 10 * batch_size).",
               config::if_set(config::positive<int64_t>()))
        .field("use_worker_cache", &O::use_worker_cache, "Copy data to worker-local storage (Cerebras clusters).")
        .field("use_vsl", &O::use_vsl, "Variable-sequence-length rows (not for DPR; must be false).")
        .ignored({"vocab_size"}, "deprecated and unused in modelzoo's HDF5 processors")
        .validate([](const O& o, const auto& fail) {
          if (o.use_vsl) fail("use_vsl", "DPR's questions and contexts have no variable-sequence-length rows");
        });
    return sc;
  }();
  return s;
}

QuestionContextSource::QuestionContextSource(const std::vector<std::string>& paths)
    : files_(paths, {"data_0", "data_1"}, "questions and contexts, as modelzoo's DPR conversion writes them") {
  std::vector<int64_t> counts;
  for (size_t k = 0; k < files_.size(); ++k) {
    const std::string& path = files_.path(k);
    const std::vector<int64_t> q = files_.shape(k, 0), c = files_.shape(k, 1);
    if (q.size() != 3 || q[1] != 3)
      throw std::runtime_error(path + ": dataset 'data_0' has shape " + Hdf5Files::shape_text(q) +
                               ", expected (n, 3, T) question rows input_ids, attention_mask, token_type_ids");
    if (c.size() != 4 || c[1] != 3 || c[0] != q[0] || c[3] != q[2])
      throw std::runtime_error(path + ": dataset 'data_1' has shape " + Hdf5Files::shape_text(c) + ", expected (" +
                               std::to_string(q[0]) + ", 3, N, " + std::to_string(q[2]) +
                               ") context rows input_ids, attention_mask, token_type_ids");
    if (length_ == 0) length_ = q[2], contexts_ = c[2];
    if (length_ != q[2] || contexts_ != c[2])
      throw std::runtime_error(path + ": its samples are shaped unlike " + files_.path(0) + "'s");
    counts.push_back(q[0]);
  }
  files_.set_counts(counts);
}

Features QuestionContextSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = length_, N = contexts_;
  const int64_t V = vocab_size.value_or(std::numeric_limits<int32_t>::max() + int64_t{1});
  std::vector<torch::Tensor> q(3), c(3);
  for (int r = 0; r < 3; ++r) q[r] = torch::empty({B, T}, torch::kLong), c[r] = torch::empty({B, N, T}, torch::kLong);
  std::vector<int32_t> qrow(static_cast<size_t>(3 * T)), crow(static_cast<size_t>(3 * N * T));
  for (int64_t b = 0; b < B; ++b) {
    files_.read(ids[b], 0, qrow.data());
    files_.read(ids[b], 1, crow.data());
    const std::pair<size_t, int64_t> where = files_.locate(ids[b]);  // lambdas below capture plain names
    const size_t file = where.first;
    const int64_t row = where.second;
    auto check = [&](const int32_t* rows, int64_t n, const std::string& what) {
      for (int64_t k = 0; k < n; ++k) {
        auto fail = [&](const std::string& why) {
          throw std::runtime_error(files_.path(file) + ", sample " + std::to_string(row) + ", " + what + " position " +
                                   std::to_string(k % T) + ": " + why);
        };
        if (rows[k] < 0 || rows[k] >= V)
          fail("input id " + std::to_string(rows[k]) + " is outside the model's vocabulary (vocab_size " +
               std::to_string(V) + ")");
        if (rows[n + k] != 0 && rows[n + k] != 1)
          fail("attention_mask is " + std::to_string(rows[n + k]) + ", expected 0 or 1");
        if (rows[2 * n + k] < 0) fail("token_type_ids is negative");
      }
    };
    check(qrow.data(), T, "question");
    check(crow.data(), N * T, "context");
    for (int r = 0; r < 3; ++r) {
      std::copy(qrow.begin() + r * T, qrow.begin() + (r + 1) * T, q[r].data_ptr<int64_t>() + b * T);
      std::copy(crow.begin() + r * N * T, crow.begin() + (r + 1) * N * T, c[r].data_ptr<int64_t>() + b * N * T);
    }
  }
  return {{"questions_input_ids", q[0]}, {"questions_attention_mask", q[1]}, {"questions_token_type_ids", q[2]},
          {"ctx_input_ids", c[0]},       {"ctx_attention_mask", c[1]},       {"ctx_token_type_ids", c[2]}};
}

namespace {

std::unique_ptr<DataLoader> open_pairs(const DprHdf5Options& o, const config::Origin& at) {
  return open_task_hdf5(o, o.shuffle_buffer, at, "question(s)", [](const std::vector<std::string>& files) {
    auto source = std::make_shared<QuestionContextSource>(files);
    return OpenedHdf5{source, source->file_ranges()};
  });
}

}  // namespace

DataProcessor dpr_hdf5_processor() {
  return make_data_processor<DprHdf5Options>(
      "DPRHDF5DataProcessor",
      "modelzoo DPR questions, each with its positive context and hard negatives (data_0, data_1), iterable like "
      "GptHDF5DataProcessor.",
      {"questions_input_ids", "questions_attention_mask", "questions_token_type_ids", "ctx_input_ids",
       "ctx_attention_mask", "ctx_token_type_ids"},
      open_pairs);
}

}  // namespace zoo::data
