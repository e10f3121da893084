// Implementation of data/processors/bert_qa.h.
#include "data/processors/bert_qa.h"

#include "data/csv_loader.h"

namespace zoo::data {

const config::Schema<BertQaDataOptions>& BertQaDataOptions::schema() {
  using O = BertQaDataOptions;
  static const config::Schema<O> s = [] {
    config::Schema<O> sc("train_input/eval_input (BertQADataProcessor)",
                         "SQuAD question-answering features from modelzoo's write_csv_qa.py CSV files.");
    add_loader_fields(sc)
        .field("max_sequence_length", &O::max_sequence_length, "Tokens per sample (write_csv_qa's max_seq_length).",
               config::positive<int64_t>())
        .field("shuffle_buffer", &O::shuffle_buffer,
               "modelzoo shuffles through a buffer of this many rows; zoo permutes all rows each epoch, so the "
               "value changes nothing.",
               config::if_set(config::positive<int64_t>()))
        .validate([](const O& o, const auto& fail) {
          if (o.max_sequence_length <= 0) fail("max_sequence_length", "required");
        });
    return sc;
  }();
  return s;
}

BertQaSource::BertQaSource(const BertQaDataOptions& o) : o_(o) {
  rows_ = std::make_unique<CsvTable>(
      o.data_dir.items,
      std::vector<std::string>{"input_ids", "input_mask", "segment_ids", "start_position", "end_position"});
}

Features BertQaSource::read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const {
  const int64_t B = static_cast<int64_t>(ids.size()), T = o_.max_sequence_length;
  torch::Tensor input_ids = torch::zeros({B, T}, torch::kLong), attention = torch::zeros({B, T}, torch::kLong),
                types = torch::zeros({B, T}, torch::kLong), labels = torch::zeros({B, 2}, torch::kLong);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t i = ids[static_cast<size_t>(b)];
    const CsvTable::Row row = rows_->row(i);
    auto column = [&](const char* name, torch::Tensor& into) {
      std::vector<int64_t> values;
      try {
        values = parse_python_int_list(row[name]);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(rows_->where(i) + ": " + name + ": " + e.what());
      }
      if (static_cast<int64_t>(values.size()) != T)
        throw std::runtime_error(rows_->where(i) + ": " + name + " has " + std::to_string(values.size()) +
                                 " values where max_sequence_length is " + std::to_string(T));
      into[b].copy_(torch::tensor(values, torch::kLong));
    };
    column("input_ids", input_ids);
    column("input_mask", attention);
    column("segment_ids", types);
    for (int k = 0; k < 2; ++k) {
      const char* name = k == 0 ? "start_position" : "end_position";
      try {
        labels[b][k] = static_cast<int64_t>(std::stoll(row[name]));
      } catch (const std::exception&) {
        throw std::runtime_error(rows_->where(i) + ": " + name + ": expected an integer, got '" + row[name] + "'");
      }
    }
  }
  if (vocab_size && input_ids.numel() > 0 && input_ids.max().item<int64_t>() >= *vocab_size)
    throw std::runtime_error(rows_->describe() + ": a token id " + std::to_string(input_ids.max().item<int64_t>()) +
                             " is not below the model's vocab_size " + std::to_string(*vocab_size));
  return {{"input_ids", input_ids}, {"attention_mask", attention}, {"token_type_ids", types}, {"labels", labels}};
}

DataProcessor bert_qa_processor() {
  return make_data_processor<BertQaDataOptions>(
      "BertQADataProcessor",
      "SQuAD question answering: modelzoo's write_csv_qa.py CSV rows (input_ids, input_mask, segment_ids, "
      "start_position, end_position).",
      {"input_ids", "attention_mask", "token_type_ids", "labels"}, open_csv<BertQaSource, BertQaDataOptions>);
}

}  // namespace zoo::data
