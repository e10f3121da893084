// modelzoo's T5DynamicDataProcessor and TransformerDynamicDataProcessor:
// text files of space-separated tokens (sentencepiece or BPE pieces), listed
// in each src_data_dir's meta.dat and looked up in src_vocab_file.
//  - T5: each line a document, cut into pieces that span corruption turns
//    into at most src_max_sequence_length source tokens, corrupted as read
//    (Raffel et al., 2020: 15% of the tokens, in spans of mean length 3,
//    each span one sentinel id counting down from the vocabulary's end).
//  - Transformer: meta.dat pairs a source and a target file line by line;
//    pairs that do not fit the lengths are skipped, as modelzoo skips them.
// Both yield input_ids, attention_mask, decoder_input_ids (<s> + target),
// decoder_attention_mask and labels (target + </s>).
// Defines: Seq2SeqTextOptions, random_spans_noise_mask, DenoisingSample,
// span_corruption, raw_sequence_lengths, T5TextSource, TransformerTextSource,
// t5_text_processor, transformer_text_processor.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "data/line_vocab.h"
#include "data/loader.h"
#include "data/registry.h"
#include "data/splitmix.h"

namespace zoo::data {

struct Seq2SeqTextOptions : LoaderOptions {
  std::string src_vocab_file;
  config::PathList src_data_dir;
  int64_t src_max_sequence_length = 0;
  int64_t tgt_max_sequence_length = 0;
  int64_t extra_ids = 0;  // sentinels after the vocabulary file's tokens (T5)
  bool do_lower = false;
  bool dynamic_loss_weight = false;  // also yield loss_weight = batch_size / target tokens of the batch
  std::string oov_token = "<unk>", sos_token = "<s>", eos_token = "</s>", pad_token = "<pad>";
  std::optional<int64_t> labels_pad_id, input_pad_id;  // null: pad_token's id
  std::optional<int64_t> shuffle_buffer;               // modelzoo's streaming shuffle; zoo shuffles all samples
  static const config::Schema<Seq2SeqTextOptions>& schema();
};

// modelzoo's random_spans_noise_mask: round(15%) of `length` tokens (at
// least 1, at most length - 1) are noise, in round(noise / 3) spans (at
// least 1); spans alternate non-noise, noise, starting with non-noise, every
// split equally likely.
std::vector<bool> random_spans_noise_mask(int64_t length, SplitMix64& rng, double noise_density = 0.15,
                                          double mean_noise_span_length = 3.0);

struct DenoisingSample {
  std::vector<int64_t> input_ids;          // tokens, each noise span one sentinel
  std::vector<int64_t> decoder_input_ids;  // sos, then the noise spans each after its sentinel
  std::vector<int64_t> labels;             // the same without sos, then eos
};
// The sentinels are vocab_size - 1, vocab_size - 2, ... in order of the spans.
DenoisingSample span_corruption(const std::vector<int64_t>& tokens, const std::vector<bool>& noise, int64_t vocab_size,
                                int64_t sos, int64_t eos);

// modelzoo's get_raw_sequence_lengths: the most tokens a piece may have so
// that, corrupted, it fills at most max_source_length source tokens; and the
// longest target such a piece can give.
std::pair<int64_t, int64_t> raw_sequence_lengths(int64_t max_source_length);

// A place in a text file: the file and a byte offset (a line's start, or a piece's first token).
struct TextLineRef {
  int32_t file = 0;
  int64_t at = 0;
};

// Ids and special tokens both processors read, from src_vocab_file.
struct Seq2SeqVocabulary {
  explicit Seq2SeqVocabulary(const Seq2SeqTextOptions& o);  // LoaderOptionError naming the key
  LineVocabulary words;
  int64_t size = 0;  // the file's lines + extra_ids
  int64_t oov = 0, sos = 0, eos = 0, input_pad = 0, labels_pad = 0;
  std::vector<int64_t> ids(const std::vector<std::string>& tokens) const;
};

class T5TextSource : public SampleSource {
 public:
  // Throws LoaderOptionError naming a key, std::runtime_error naming the file.
  explicit T5TextSource(const Seq2SeqTextOptions& options);
  int64_t num_samples() const override { return static_cast<int64_t>(pieces_.size()); }
  std::string describe() const override;
  bool reads_epoch() const override { return true; }  // each epoch corrupts a piece anew
  // Sample i of epoch e is corrupted with draws from (shuffle_seed, e, i).
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  int64_t raw_length() const { return raw_length_; }

 private:
  struct Piece {  // its tokens' bytes within a line: read without the rest of a long document
    TextLineRef start;
    int64_t bytes = 0;
  };
  Seq2SeqTextOptions o_;
  Seq2SeqVocabulary vocab_;
  std::vector<std::string> files_;
  std::vector<Piece> pieces_;
  int64_t raw_length_ = 0;
};

class TransformerTextSource : public SampleSource {
 public:
  explicit TransformerTextSource(const Seq2SeqTextOptions& options);
  int64_t num_samples() const override { return static_cast<int64_t>(pairs_.size()); }
  std::string describe() const override;
  Features read_batch(const std::vector<int64_t>& ids, std::optional<int64_t> vocab_size) const override;
  int64_t skipped() const { return skipped_; }  // pairs too long (or empty) for the lengths

 private:
  Seq2SeqTextOptions o_;
  Seq2SeqVocabulary vocab_;
  std::vector<std::string> files_;
  std::vector<std::pair<TextLineRef, TextLineRef>> pairs_;
  int64_t skipped_ = 0;
};

DataProcessor t5_text_processor();
DataProcessor transformer_text_processor();

}  // namespace zoo::data
