// Implementation of data/create_hdf5.h: the LMData mode, and what every mode checks first.
#include "data/create_hdf5.h"

#include <hdf5.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "data/create_hdf5_io.h"

namespace zoo::data {

namespace {

// Cuts token streams into chunks of msl + 1: one stream for all documents
// when packing, one per document otherwise.
class Chunker {
 public:
  Chunker(SampleWriter& writer, int64_t msl, bool pack) : writer_(writer), window_(msl + 1), pack_(pack) {}

  void add_document(const std::vector<int32_t>& tokens) {
    pending_.insert(pending_.end(), tokens.begin(), tokens.end());
    while (static_cast<int64_t>(pending_.size() - start_) >= window_) {
      writer_.add(pending_.data() + start_, window_);
      start_ += window_;
    }
    pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(start_));
    start_ = 0;
    if (!pack_) finish();
  }

  // The leftover becomes a padded sample; a lone token cannot (it has no label).
  void finish() {
    if (pending_.size() >= 2) writer_.add(pending_.data(), static_cast<int64_t>(pending_.size()));
    else discarded_ += static_cast<int64_t>(pending_.size());
    pending_.clear();
  }

  int64_t discarded() const { return discarded_; }

 private:
  SampleWriter& writer_;
  int64_t window_;
  bool pack_;
  std::vector<int32_t> pending_;
  size_t start_ = 0;
  int64_t discarded_ = 0;
};

// Calls `document` with the text of each document in `path`.
template <class F>
void for_each_document(const std::string& path, const std::string& jsonl_key, F&& document) {
  if (is_text_file(path)) {
    LineReader in(path);
    document(in.rest());
    return;
  }
  for_each_json_line(path, [&](const nlohmann::json& j, const std::string& where) {
    if (!j.contains(jsonl_key) || !j[jsonl_key].is_string())
      throw std::invalid_argument(where + ": expected a string under key '" + jsonl_key + "' (set --jsonl_key)");
    document(j[jsonl_key].get<std::string>());
  });
}

CreateHdf5Summary create_lm_data(const CreateHdf5Options& o, const text::Tokenizer& tokenizer, int64_t eos, int64_t pad,
                                 std::ostream& progress) {
  const auto files = input_files(o.input_dir, true, progress);
  refuse_existing_dataset(o);
  SampleWriter writer(o, static_cast<int32_t>(pad));
  Chunker chunker(writer, o.max_seq_length, o.pack_sequences);
  CreateHdf5Summary s;
  write_samples(
      files, writer, s, progress,
      [&](const std::string& file) {
        for_each_document(file, o.jsonl_key, [&](const std::string& doc) {
          if (doc.empty()) return;
          std::vector<int32_t> tokens = tokenizer.encode(doc);
          tokens.push_back(static_cast<int32_t>(eos));
          s.tokens += static_cast<int64_t>(tokens.size());
          ++s.documents;
          chunker.add_document(tokens);
        });
      },
      [&] { chunker.finish(); });
  s.discarded_tokens = chunker.discarded();
  return s;
}

}  // namespace

CreateHdf5Summary create_hdf5(const CreateHdf5Options& o, std::ostream& progress) {
  if (o.mode != "LMData" && o.mode != "Summarization" && o.mode != "Chat")
    throw std::invalid_argument("create-hdf5: unknown mode '" + o.mode + "' (expected LMData, Summarization or Chat)");
  if (o.max_seq_length < 1) throw std::invalid_argument("--max_seq_length must be positive");
  constexpr int64_t kMaxSequenceLength = int64_t{1} << 20;  // past any model's context; the buffers are sized by it
  if (o.max_seq_length > kMaxSequenceLength)
    throw std::invalid_argument("--max_seq_length " + std::to_string(o.max_seq_length) + " is over " +
                                std::to_string(kMaxSequenceLength) + " tokens per sample");
  if (o.files_per_record < 1) throw std::invalid_argument("--files_per_record must be positive");
  auto tokenizer = text::make_tokenizer(o.tokenizer);
  const int64_t vocab = tokenizer->vocab_size();
  int64_t eos = -1;
  if (o.eos_id) eos = *o.eos_id;
  else if (auto id = tokenizer->special_tokens().eos) eos = *id;
  else if (auto id = tokenizer->token_to_id("<|endoftext|>")) eos = *id;
  else
    throw std::invalid_argument("--eos_id is required: tokenizer " + o.tokenizer.type +
                                " has no eos_token and no <|endoftext|>");
  const int64_t pad = o.pad_id.value_or(eos);
  for (auto [flag, id] : {std::pair<const char*, int64_t>{"--eos_id", eos}, {"--pad_id", pad}})
    if (id < 0 || id >= vocab)
      throw std::invalid_argument(std::string(flag) + " " + std::to_string(id) +
                                  " is outside the tokenizer's vocabulary (size " + std::to_string(vocab) + ")");

  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  const CreateHdf5Summary s = o.mode == "LMData" ? create_lm_data(o, *tokenizer, eos, pad, progress)
                                                 : create_finetuning_data(o, *tokenizer, eos, pad, progress);
  nlohmann::json params;
  params["processing"] = {{"mode", o.mode},
                          {"input_dir", o.input_dir},
                          {"output_dir", o.output_dir},
                          {"tokenizer_type", o.tokenizer.type},
                          {"vocab_file", o.tokenizer.vocab_file},
                          {"encoder_file", o.tokenizer.encoder_file},
                          {"huggingface_tokenizer", o.tokenizer.huggingface_tokenizer},
                          {"max_seq_length", o.max_seq_length},
                          {"eos_id", eos},
                          {"pad_id", pad},
                          {"files_per_record", o.files_per_record},
                          {"output_name", o.output_name}};
  if (o.mode == "LMData") {
    params["processing"]["pack_sequences"] = o.pack_sequences;
    params["processing"]["jsonl_key"] = o.jsonl_key;
  } else if (o.mode == "Summarization") {
    params["processing"].update({{"prompt_key", o.prompt_key},
                                 {"completion_key", o.completion_key},
                                 {"sep_token", o.sep_token},
                                 {"truncate", o.truncate},
                                 {"use_vsl", o.pack}});
  } else {
    params["processing"].update({{"multi_turn_key", o.multi_turn_key},
                                 {"multi_turn_role_key", o.multi_turn_role_key},
                                 {"multi_turn_content_key", o.multi_turn_content_key},
                                 {"chat_template_file", o.chat_template_file},
                                 {"truncate", o.truncate},
                                 {"use_vsl", o.pack}});
  }
  params["post-process"] = {{"n_examples", s.samples},
                            {"n_files", s.files},
                            {"n_documents", s.documents},
                            {"n_tokens", s.tokens},
                            {"n_loss_tokens", s.loss_tokens},
                            {"discarded_tokens", s.discarded_tokens},
                            {"n_truncated", s.truncated},
                            {"n_dropped", s.dropped},
                            {"vocab_size", vocab},
                            {"eos_id", eos},
                            {"pad_id", pad}};
  if (o.mode != "LMData") {
    params["post-process"]["n_sequences"] = s.sequences;
    params["post-process"]["n_filled_columns"] = s.columns_filled;
  }
  if (o.pack && s.samples > 0) {  // modelzoo's VSL processors' names for the same
    params["post-process"]["num_sequences_before_packing"] = s.sequences;
    params["post-process"]["vsl_packing_factor"] =
        std::round(100.0 * static_cast<double>(s.sequences) / static_cast<double>(s.samples)) / 100.0;
  }
  write_data_params(o, params);
  return s;
}

std::string describe(const CreateHdf5Summary& s, const CreateHdf5Options& o) {
  std::ostringstream out;
  const char* unit = o.mode == "LMData" ? "documents" : o.mode == "Chat" ? "conversations" : "prompt/completion pairs";
  out << "Wrote " << s.samples << " samples (" << s.tokens << " tokens from " << s.documents << " " << unit << ") in "
      << s.files << " file(s) to " << o.output_dir << "\n";
  out << std::fixed << std::setprecision(1) << "Tokens in the loss: " << s.loss_tokens << " ("
      << (s.tokens > 0 ? 100.0 * static_cast<double>(s.loss_tokens) / static_cast<double>(s.tokens) : 0.0) << "%)";
  if (o.mode == "LMData") out << "; discarded leftover tokens: " << s.discarded_tokens << "\n";
  else
    out << "; over --max_seq_length " << o.max_seq_length << ": " << s.truncated << " truncated, " << s.dropped
        << " dropped" << (o.truncate ? "" : " (--truncate keeps their beginning instead)") << "\n";
  if (o.mode != "LMData" && s.sequences > 0) {
    const double columns = static_cast<double>(s.columns_filled);
    const double unpacked = static_cast<double>(s.sequences * o.max_seq_length);
    const double rows = static_cast<double>(std::max<int64_t>(s.samples, 1) * o.max_seq_length);
    if (o.pack)
      out << "Packed " << s.sequences << " sequences into " << s.samples << " rows (" << std::setprecision(2)
          << static_cast<double>(s.sequences) / std::max<int64_t>(s.samples, 1) << " per row): tokens that are not "
          << "padding " << std::setprecision(1) << 100.0 * columns / unpacked << "% of the columns one per row would "
          << "take, " << 100.0 * columns / rows << "% packed\n";
    else
      out << "Tokens that are not padding: " << 100.0 * columns / unpacked << "% of the columns (--pack true would "
          << "put several samples in a row)\n";
  }
  if (s.turns_cut > 0)
    out << s.turns_cut << " assistant turns render otherwise inside a conversation than as its last message (a "
        << "template's reasoning block, say): each is learned as far as both renderings agree\n";
  return out.str();
}

}  // namespace zoo::data
