// BertMlmDataProcessor (zoo's own): BERT pre-training samples made from
// tokenized data, i.e. HDF5 token windows (modelzoo's sample or corpus
// format, as `zoo data create-hdf5` writes): sentence pairs for next-sentence
// prediction and masked-LM positions. Defines: BertMlmOptions, BertMlmSource,
// bert_mlm_processor.
#pragma once

#include <memory>

#include "data/loader.h"
#include "data/registry.h"

namespace zoo::data {

struct BertMlmOptions : LoaderOptions {
  int64_t max_sequence_length = 0;
  int64_t max_predictions_per_seq = 20;
  double masked_lm_prob = 0.15;
  bool disable_nsp = false;
  int64_t vocab_size = 0;
  // BERT-base uncased's ids by default.
  int64_t cls_id = 101;
  int64_t sep_id = 102;
  int64_t mask_id = 103;
  int64_t pad_id = 0;
  static const config::Schema<BertMlmOptions>& schema();
};

// Sample i, from the tokens of window i (its loss-masked positions, at most
// max_sequence_length - 3 of them), with random draws seeded by
// (shuffle_seed, i) so a sample is the same whenever it is read:
//  - NSP: the tokens are cut at a random point into A and B; half of the
//    time B is replaced by as many tokens from a random other window
//    (next_sentence_label 1, "not next"; 0 when B follows A).
//    Without NSP: A is all tokens and there is no B.
//  - [CLS] A [SEP] B [SEP], token_type_ids 0 up to the first [SEP], 1 after.
//  - masked LM: min(max_predictions_per_seq, max(1, round(masked_lm_prob * n)))
//    of the n non-special positions; each becomes [MASK] 80%, a random id
//    10%, itself 10% of the time.
// Batches: input_ids, attention_mask, token_type_ids (B, msl);
// masked_lm_positions, labels, masked_lm_mask (B, max_predictions_per_seq),
// padded with 0; next_sentence_label (B).
class BertMlmSource : public SampleSource {
 public:
  BertMlmSource(std::shared_ptr<LmSampleSource> windows, const BertMlmOptions& options);
  int64_t num_samples() const override { return windows_->num_samples(); }
  std::string describe() const override { return windows_->describe(); }
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;

 private:
  std::vector<int32_t> tokens(int64_t window) const;
  std::shared_ptr<LmSampleSource> windows_;
  BertMlmOptions o_;
};

DataProcessor bert_mlm_processor();

}  // namespace zoo::data
