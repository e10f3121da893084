// modelzoo's BertSumCSVDataProcessor (BERTSUM, extractive summarization):
// CSV rows listed in meta.dat (data/csv_table.h) of token ids
// `input_token_ids`, `segment_ids`, the positions of each sentence's [CLS]
// `cls_indices` and their `labels`, as modelzoo's data preparation writes
// them. Defines: BertSumOptions, BertSumSource, bertsum_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "data/csv_table.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct BertSumOptions : LoaderOptions {
  std::string vocab_file;  // its [PAD] is the padding id
  int64_t max_sequence_length = 0;
  int64_t max_cls_tokens = 0;
  std::optional<int64_t> pad_id;  // null: [PAD]'s id in vocab_file
  bool do_lower = false;          // the vocabulary's special tokens are lower case
  std::optional<int64_t> shuffle_buffer;
  static const config::Schema<BertSumOptions>& schema();
};

class BertSumSource : public SampleSource {
 public:
  BertSumSource(const BertSumOptions& options);  // std::runtime_error naming the file
  int64_t num_samples() const override { return rows_->size(); }
  std::string describe() const override { return rows_->describe(); }
  // As modelzoo's create_bertsum_feature: input_ids, token_type_ids (B, T)
  // and labels, cls_indices (B, max_cls_tokens) padded with pad_id;
  // attention_mask = input_ids != pad_id; cls_weights = cls_indices != pad_id.
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  BertSumOptions o_;
  std::unique_ptr<CsvTable> rows_;
  int64_t pad_id_ = 0;
};

DataProcessor bertsum_processor();

}  // namespace zoo::data
