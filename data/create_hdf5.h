// `zoo data create-hdf5 MODE`: text -> tokens -> modelzoo HDF5 samples, like
// modelzoo's create_hdf5_dataset.py. Modes: LMData (.txt, one document per
// file; .jsonl, one document per line under jsonl_key), Summarization
// (prompt/completion pairs in .jsonl, loss on the completion) and Chat
// (conversations in .jsonl rendered with the tokenizer's chat template,
// loss on the assistant turns); inputs gzipped or not. Defines:
// CreateHdf5Options, CreateHdf5Summary, create_hdf5.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "data/text/tokenizer.h"

namespace zoo::data {

struct CreateHdf5Options {
  std::string mode = "LMData";  // LMData, Summarization or Chat
  std::string input_dir;
  std::string output_dir;
  text::TokenizerSpec tokenizer;
  int64_t max_seq_length = 2048;
  std::optional<int64_t> eos_id;  // default: the tokenizer's eos_token, else its <|endoftext|>
  std::optional<int64_t> pad_id;  // default: eos_id
  std::string jsonl_key = "text";
  int64_t files_per_record = 50000;  // samples per output file
  std::string output_name = "examples";
  bool pack_sequences = true;
  // Summarization
  std::string prompt_key = "prompt", completion_key = "completion";
  std::string sep_token;  // between prompt and completion when set; must be in the vocabulary
  // Chat (modelzoo 2.x's chat_read_hook keys)
  std::string multi_turn_key = "messages", multi_turn_role_key = "role", multi_turn_content_key = "content";
  std::string chat_template_file;  // instead of the tokenizer's chat_template
  // Summarization and Chat: a sample over max_seq_length + 1 tokens is dropped
  // (modelzoo's behaviour), or with truncate cut to its first max_seq_length + 1
  // tokens (dropped still when no loss token is left).
  bool truncate = false;
  // Summarization and Chat: several samples per row in modelzoo's
  // variable-sequence-length layout (see create_hdf5), for use_vsl: true.
  bool pack = false;
};

constexpr int64_t kPackWindow = 100000;  // samples packed together (bounds the memory packing takes)

struct CreateHdf5Summary {
  int64_t documents = 0;  // documents, pairs or conversations read
  int64_t samples = 0;
  int64_t files = 0;
  int64_t tokens = 0;                  // tokens read, eos included
  int64_t loss_tokens = 0;             // labels in the loss (attention_mask 1)
  int64_t discarded_tokens = 0;        // LMData: leftovers too short for a sample (a single token)
  int64_t truncated = 0, dropped = 0;  // Summarization / Chat samples over max_seq_length
  int64_t turns_cut = 0;               // Chat: assistant turns learned only as far as their two renderings agree
  int64_t sequences = 0;       // Summarization / Chat: pairs or conversations written (several per row with pack)
  int64_t columns_filled = 0;  // Summarization / Chat: input columns that are not padding
};

// LMData: each document is tokenized and ends with eos_id. With
// pack_sequences the documents form one stream cut into consecutive chunks
// of max_seq_length + 1 tokens; without, each document is chunked on its
// own. A chunk's input_ids are its first tokens and labels the next ones;
// a short final chunk is padded with pad_id, its attention_mask (the loss
// mask) 0 there.
// Summarization: [bos] prompt [sep] completion eos, one pair per sample; the
// mask is 1 where the label is a completion token or that eos.
// Chat: the conversation rendered by the chat template, one per sample; the
// mask is 1 where the label belongs to an assistant turn (its text and the
// end-of-turn tokens the template puts after it).
// Summarization and Chat with pack: the samples (each shifted on its own:
// length - 1 columns) are packed by best-fit decreasing over up to
// kPackWindow of them at a time into rows of msl columns, padding after;
// rows 4 and 5 of each sample hold attention_span and position_ids
// (data/packing.h), "data" being (k, 5, msl).
// Output: <output_name>_<n>.h5 (dataset "data", int32 (k, 3, msl), gzip,
// chunks (1, 3, msl), file attribute n_examples) and data_params.json. Every file
// is written under a temporary name and renamed when complete; a failed run
// removes the files it wrote. Refuses an output_dir that already holds such files. Progress goes to `progress`.
// Throws std::invalid_argument / std::runtime_error naming the file (and line).
CreateHdf5Summary create_hdf5(const CreateHdf5Options& options, std::ostream& progress);

// The summary as printed at the end of a run: samples, tokens, the share of
// tokens in the loss, truncated and dropped samples.
std::string describe(const CreateHdf5Summary& s, const CreateHdf5Options& o);

}  // namespace zoo::data
