// What the `zoo data create-hdf5` modes share: reading .txt / .jsonl inputs
// (gzipped or not) and writing modelzoo's (n, 3, msl) HDF5 sample files.
// Defines: SampleWriter, LineReader, input_files, for_each_json_line,
// refuse_existing_dataset, write_data_params.
#pragma once

#include <zlib.h>

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "data/create_hdf5.h"

namespace zoo::data {

// Collects samples and writes <output_name>_<n>.h5 every files_per_record of them.
class SampleWriter {
 public:
  SampleWriter(const CreateHdf5Options& o, int32_t pad_id) : o_(o), pad_(pad_id) {}

  // One sample from 2 .. msl + 1 tokens: input_ids the first length - 1,
  // labels the next ones. Without `in_loss` every label is in the loss;
  // with it, label j is where in_loss[j + 1] is set. Padding is never in the loss.
  void add(const int32_t* tokens, int64_t length, const uint8_t* in_loss = nullptr);
  // With o.pack: several such samples side by side in one row (their
  // length - 1 columns add up to at most msl), with attention_span and
  // position_ids rows (modelzoo's VSL layout).
  struct Sequence {
    const int32_t* tokens;
    int64_t length;
    const uint8_t* in_loss;
  };
  void add_packed(const std::vector<Sequence>& sequences);
  void flush();
  int64_t samples() const;
  int64_t files() const { return files_; }
  int64_t loss_tokens() const { return loss_tokens_; }
  // After a failure: the run's files go, so a corrected re-run finds the directory as it was.
  void remove_written();

 private:
  const CreateHdf5Options& o_;
  int64_t rows_per_sample() const { return o_.pack ? 5 : 3; }
  int32_t* new_sample();  // a padded sample appended to rows_: its first row
  void sample_added();
  int32_t pad_;
  std::vector<int32_t> rows_;
  std::vector<std::string> written_;
  int64_t samples_ = 0, files_ = 0, loss_tokens_ = 0;
};

// Lines of a file, gzipped or not; a damaged or truncated .gz is an error.
class LineReader {
 public:
  explicit LineReader(const std::string& path);
  ~LineReader();
  LineReader(const LineReader&) = delete;
  LineReader& operator=(const LineReader&) = delete;
  // The next line without its '\n'; false at the end.
  bool next(std::string& line);
  // All that is left, byte for byte.
  std::string rest();

 private:
  void check_error();
  std::string path_;
  gzFile file_;
};

bool is_text_file(const std::string& path);   // .txt, .txt.gz
bool is_jsonl_file(const std::string& path);  // .jsonl, .jsonl.gz

// The input files under --input_dir, sorted; others are reported to `progress` and skipped.
std::vector<std::string> input_files(const std::string& input_dir, bool text_too, std::ostream& progress);

// Calls `line` with each non-blank line of a .jsonl file parsed, and
// "path:n" for errors; a line that is not a JSON object is an error naming it.
void for_each_json_line(const std::string& path,
                        const std::function<void(const nlohmann::json&, const std::string& where)>& line);

// One line of progress after each input file, rewritten in place.
void show_progress(std::ostream& out, size_t done, size_t total, const SampleWriter& w, int64_t tokens, double seconds);

// Calls `read` with each input file in turn, showing progress after each,
// then `finish` (may be empty) and flushes the writer; on any error removes
// what was written and rethrows. Sets the summary's samples, files and loss_tokens.
void write_samples(const std::vector<std::string>& files, SampleWriter& writer, CreateHdf5Summary& s,
                   std::ostream& progress, const std::function<void(const std::string& file)>& read,
                   const std::function<void()>& finish = {});

// Refuses an output_dir that already holds a dataset (zoo never overwrites one); creates it otherwise.
void refuse_existing_dataset(const CreateHdf5Options& o);

// data_params.json, written under a temporary name and renamed.
void write_data_params(const CreateHdf5Options& o, const nlohmann::json& params);

}  // namespace zoo::data

namespace zoo::data {
// The Summarization and Chat modes (data/create_hdf5_finetuning.cpp), after
// create_hdf5 has checked the options and made the tokenizer.
CreateHdf5Summary create_finetuning_data(const CreateHdf5Options& o, const text::Tokenizer& tokenizer, int64_t eos,
                                         int64_t pad, std::ostream& progress);
}  // namespace zoo::data
