// modelzoo's BertQADataProcessor: SQuAD features as modelzoo's
// write_csv_qa.py writes them (meta.dat listing "file.csv rows"; columns
// input_ids, input_mask and segment_ids as Python lists of max_seq_length
// integers, start_position and end_position as integers). Features:
// input_ids, attention_mask, token_type_ids (B, T) and labels (B, 2), the
// answer's start and end token. Defines: BertQaDataOptions, BertQaSource,
// bert_qa_processor.
#pragma once

#include <memory>
#include <optional>

#include "data/csv_table.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct BertQaDataOptions : LoaderOptions {
  int64_t max_sequence_length = 0;
  std::optional<int64_t> shuffle_buffer;  // modelzoo's streaming shuffle; zoo shuffles all rows
  static const config::Schema<BertQaDataOptions>& schema();
};

class BertQaSource : public SampleSource {
 public:
  explicit BertQaSource(const BertQaDataOptions& options);  // std::runtime_error naming the file
  int64_t num_samples() const override { return rows_->size(); }
  std::string describe() const override { return rows_->describe(); }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  BertQaDataOptions o_;
  std::unique_ptr<CsvTable> rows_;
};

DataProcessor bert_qa_processor();

}  // namespace zoo::data
