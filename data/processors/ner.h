// modelzoo's BertTokenClassifierDataProcessor (NER): CSV rows listed in
// meta.dat (data/csv_table.h) with space-separated, already split
// `tokens` and their `labels`, looked up in vocab_file and label_vocab_file
// (JSON label -> class id). Defines: NerOptions, NerSource, ner_processor.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "data/csv_table.h"
#include "data/loader.h"
#include "data/registry.h"
#include "data/text/wordpiece.h"

namespace zoo::data {

struct NerOptions : LoaderOptions {
  std::string vocab_file;
  std::string label_vocab_file;
  bool do_lower = false;
  int64_t max_sequence_length = 0;
  bool include_padding_in_loss = false;
  std::optional<int64_t> labels_pad_id, input_pad_id, attn_mask_pad_id;  // null: [PAD]'s id
  std::optional<int64_t> shuffle_buffer;  // modelzoo's streaming shuffle; zoo shuffles all rows
  static const config::Schema<NerOptions>& schema();
};

class NerSource : public SampleSource {
 public:
  NerSource(const NerOptions& options);  // std::runtime_error naming the file
  int64_t num_samples() const override { return rows_->size(); }
  std::string describe() const override { return rows_->describe(); }
  // input_ids, attention_mask, loss_mask (attention_mask, or all ones with
  // include_padding_in_loss), token_type_ids (zeros) and labels, (B, T).
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  NerOptions o_;
  std::unique_ptr<CsvTable> rows_;
  std::unique_ptr<text::WordPieceTokenizer> vocab_;
  std::map<std::string, int64_t> labels_;
  int64_t pad_id_ = 0;
};

DataProcessor ner_processor();

}  // namespace zoo::data
