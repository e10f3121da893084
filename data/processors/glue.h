// modelzoo's SST2DataProcessor and MNLIDataProcessor: GLUE's TSV files
// tokenized with BERT's WordPiece vocabulary as they are read. SST-2 reads
// data_dir/train.tsv (is_training) or dev.tsv, columns sentence and label;
// MNLI reads train.tsv or dev_matched.tsv + dev_mismatched.tsv, columns
// sentence1, sentence2 and gold_label. Defines: GlueOptions, GlueSource,
// sst2_processor, mnli_processor.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "data/loader.h"
#include "data/registry.h"
#include "data/text/wordpiece.h"

namespace zoo::data {

struct GlueOptions : LoaderOptions {
  std::optional<bool> is_training;  // the train split, or the dev split(s) (null: by the section, see the schema)
  std::string vocab_file;
  bool do_lower = false;
  int64_t max_sequence_length = 0;
  int64_t labels_pad_id = 0, input_pad_id = 0, attn_mask_pad_id = 0;
  static const config::Schema<GlueOptions>& schema();
};

// The rows of one task's split, encoded as [CLS] a [SEP] (b [SEP]) when read.
class GlueSource : public SampleSource {
 public:
  struct Row {
    std::string a, b;  // b empty for single-sentence tasks
    int64_t label = 0;
    int64_t matched = -1;  // MNLI dev: 1 matched, 0 mismatched; -1: no such feature
  };
  GlueSource(std::vector<Row> rows, std::shared_ptr<const text::WordPieceTokenizer> tokenizer,
             const GlueOptions& options, std::string describe);
  int64_t num_samples() const override { return static_cast<int64_t>(rows_.size()); }
  std::string describe() const override { return describe_; }
  // input_ids / attention_mask / token_type_ids (B, T), labels (B); MNLI dev
  // also is_matched / is_mismatched (B). The longer text loses its last
  // tokens first when a pair does not fit.
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  std::vector<Row> rows_;
  std::shared_ptr<const text::WordPieceTokenizer> tokenizer_;
  GlueOptions o_;
  std::string describe_;
};

// The rows of a GLUE TSV file by column name (no quoting, as GLUE's files
// and modelzoo read them); std::runtime_error naming the file and row.
std::vector<std::vector<std::string>> read_tsv(const std::string& path, const std::vector<std::string>& columns);

DataProcessor sst2_processor();
DataProcessor mnli_processor();

}  // namespace zoo::data
