// GPT-2 style byte-level BPE: text is pre-tokenized by a regex, each piece's
// UTF-8 bytes are mapped to printable characters (bytes_to_unicode), and
// the piece is merged pairwise by rank until no ranked pair is left.
// Loads GPT-2's encoder.json + vocab.bpe and Hugging Face tokenizer.json
// (model type BPE with a ByteLevel pre-tokenizer). Defines: ByteLevelBpe.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "data/text/bpe_merges.h"
#include "data/text/regex_splitter.h"
#include "data/text/tokenizer.h"

namespace zoo::text {

class ByteLevelBpe : public Tokenizer {
 public:
  struct Spec {
    std::unordered_map<std::string, int32_t> vocab;  // byte-level token text -> id
    std::vector<std::pair<std::string, std::string>> merges;  // in rank order
    std::string pattern = kGpt2Pattern;
    bool add_prefix_space = false;  // prepend " " when the text does not start with one
    std::vector<std::pair<std::string, int32_t>> added_tokens;  // matched literally before pre-tokenizing
  };
  explicit ByteLevelBpe(Spec spec);

  // GPT-2's files: encoder.json (token -> id) and vocab.bpe (merges, one "a b" per line).
  // Throws std::invalid_argument naming the file (and line) on bad input.
  static std::unique_ptr<ByteLevelBpe> from_gpt2_files(const std::string& encoder_json, const std::string& merges_file);
  // A Hugging Face tokenizer.json (parsed, read from `path`) whose model is
  // BPE over byte-level pre-tokenization.
  static std::unique_ptr<ByteLevelBpe> from_tokenizer_json(const nlohmann::json& j, const std::string& path);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(const std::string& token) const override;

 private:
  void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
  // A copy: another thread may clear the cache once the lock is released.
  std::vector<int32_t> encode_piece(std::string_view piece) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  BpeMerges merges_;
  std::unique_ptr<RegexSplitter> splitter_;
  bool add_prefix_space_;
  std::vector<std::pair<std::string, int32_t>> added_tokens_;
  std::unordered_set<int32_t> literal_ids_;  // added tokens decode to their text as is
  std::array<bool, 256> starts_added_{};     // first bytes of added tokens: the scan skips other bytes fast
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;  // piece -> ids
};

}  // namespace zoo::text
