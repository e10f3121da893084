// modelzoo's BertCSVDynamicMaskDataProcessor: BERT pre-training samples from
// the CSV files modelzoo's create_csv*.py scripts write (a data_dir with
// meta.dat listing "file.csv rows"; columns `tokens`, a Python list of
// WordPiece strings, and for NSP `segment_ids` and `is_random_next`), masked
// as each sample is read; and its BertCSVDataProcessor (masked ahead of
// time). Defines: BertCsvOptions, BertCsvSource, bert_csv_processor,
// BertCsvStaticOptions, BertCsvStaticSource, bert_csv_static_processor.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "data/csv_table.h"
#include "data/line_vocab.h"
#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct BertCsvOptions : LoaderOptions {
  std::string vocab_file;
  int64_t max_sequence_length = 0;
  int64_t max_predictions_per_seq = 0;
  double masked_lm_prob = 0.15;
  bool disable_nsp = false;
  bool do_lower = false;
  bool mask_whole_word = false;
  bool gather_mlm_labels = true;
  std::string oov_token = "[UNK]";
  std::string mask_token = "[MASK]";
  std::string document_separator_token = "[SEP]";
  std::vector<std::string> exclude_from_masking = {"[CLS]", "[SEP]", "[PAD]", "[MASK]"};
  int64_t labels_pad_id = 0, input_pad_id = 0, attn_mask_pad_id = 0, segment_pad_id = 0;
  std::optional<int64_t> shuffle_buffer;  // modelzoo's streaming shuffle; zoo shuffles all rows
  static const config::Schema<BertCsvOptions>& schema();
};

// Sample i of the rows listed in meta.dat, read from its file when asked
// (an index of row offsets is all that is kept in memory). The masks are
// drawn from (shuffle_seed, epoch, i): each epoch masks a row anew, as
// modelzoo's dynamic masking does, and a resumed run draws the same ones.
class BertCsvSource : public SampleSource {
 public:
  // Throws LoaderOptionError naming a vocabulary key, std::runtime_error naming the file.
  explicit BertCsvSource(const BertCsvOptions& options);
  int64_t num_samples() const override { return rows_->size(); }
  std::string describe() const override { return rows_->describe(); }
  bool reads_epoch() const override { return true; }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  struct Sample {
    std::vector<std::string> tokens;
    std::vector<int64_t> segments;
    int64_t is_random_next = 0;
  };
  Sample read_row(int64_t i) const;

  BertCsvOptions o_;
  std::unique_ptr<CsvTable> rows_;
  LineVocabulary vocab_;
  int64_t oov_id_ = 0, mask_id_ = 0;
  std::unordered_set<std::string> excluded_tokens_;  // exclude_from_masking (lower-cased with do_lower)
  std::vector<int64_t> replacement_pool_;            // ids a masked token may become: all but exclude_from_masking
};

// modelzoo's BertCSVDataProcessor: samples masked ahead of time, one per CSV
// row of integer lists (input_ids, attention_mask, labels; optionally
// masked_lm_positions, masked_lm_weights; with NSP token_type_ids and
// next_sentence_label), rows listed in meta.dat as above.
struct BertCsvStaticOptions : LoaderOptions {
  bool disable_nsp = false;
  bool dynamic_mlm_scale = false;
  std::optional<int64_t> shuffle_buffer;  // modelzoo's streaming shuffle; zoo shuffles all rows
  static const config::Schema<BertCsvStaticOptions>& schema();
};

class BertCsvStaticSource : public SampleSource {
 public:
  explicit BertCsvStaticSource(const BertCsvStaticOptions& options);  // std::runtime_error naming the file
  int64_t num_samples() const override { return rows_->size(); }
  std::string describe() const override { return rows_->describe(); }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  BertCsvStaticOptions o_;
  std::unique_ptr<CsvTable> rows_;
};

DataProcessor bert_csv_processor();
DataProcessor bert_csv_static_processor();

}  // namespace zoo::data
