// `zoo data create-hdf5 LMData`: text (.txt, one document per file; .jsonl,
// one document per line under jsonl_key; either gzipped as .gz) -> tokens -> modelzoo HDF5 samples,
// like modelzoo's create_hdf5_dataset.py LMData. Defines: CreateHdf5Options,
// CreateHdf5Summary, create_hdf5.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "data/text/tokenizer.h"

namespace zoo::data {

struct CreateHdf5Options {
  std::string input_dir;
  std::string output_dir;
  text::TokenizerSpec tokenizer;
  int64_t max_seq_length = 2048;
  std::optional<int64_t> eos_id;  // default: the tokenizer's <|endoftext|>
  std::optional<int64_t> pad_id;  // default: eos_id
  std::string jsonl_key = "text";
  int64_t files_per_record = 50000;  // samples per output file
  std::string output_name = "examples";
  bool pack_sequences = true;
};

struct CreateHdf5Summary {
  int64_t documents = 0;
  int64_t samples = 0;
  int64_t files = 0;
  int64_t tokens = 0;            // tokens read, eos included
  int64_t discarded_tokens = 0;  // leftovers too short for a sample (a single token)
};

// Each document is tokenized and ends with eos_id. With pack_sequences the
// documents form one stream cut into consecutive chunks of max_seq_length + 1
// tokens; without, each document is chunked on its own. A chunk's input_ids
// are its first tokens and labels the next ones; a short final chunk is
// padded with pad_id, its attention_mask (the loss mask) 0 there.
// Output: <output_name>_<n>.h5 (dataset "data", int32 (k, 3, msl), gzip,
// chunks (1, 3, msl), file attribute n_examples) and data_params.json. Every file
// is written under a temporary name and renamed when complete; a failed run
// removes the files it wrote. Refuses an output_dir that already holds such files. Progress goes to `progress`.
// Throws std::invalid_argument / std::runtime_error naming the file (and line).
CreateHdf5Summary create_hdf5(const CreateHdf5Options& options, std::ostream& progress);

}  // namespace zoo::data
