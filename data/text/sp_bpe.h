// SentencePiece-style BPE from a Hugging Face tokenizer.json: Llama 2,
// Mistral, Gemma, Code Llama. Text is split at added tokens; each stretch
// between them is normalized (Prepend / Replace " " -> "▁") or cut by a
// Metaspace pre-tokenizer, split into characters, characters missing from
// the vocabulary fall back to their UTF-8 bytes (<0xXX>), and the symbols are
// merged by rank. Decoding runs the file's decoder chain (Replace,
// ByteFallback, Fuse, Strip, Metaspace). Defines: SentencePieceBpe.
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "data/text/bpe_merges.h"
#include "data/text/tokenizer.h"
#include "data/text/tokenizer_json.h"

namespace zoo::text {

class SentencePieceBpe : public Tokenizer {
 public:
  // Whether a tokenizer.json is of this kind (byte fallback, or "▁" for spaces).
  static bool describes(const nlohmann::json& tokenizer_json);
  // Throws std::invalid_argument naming `path` and the key it cannot use.
  static std::unique_ptr<SentencePieceBpe> from_tokenizer_json(const nlohmann::json& j, const std::string& path);

  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(id_to_token_.size()); }
  std::optional<int32_t> token_to_id(const std::string& token) const override;

  struct TextStep {  // a normalizer step
    enum Kind { kPrepend, kReplace } kind;
    std::string from, to;  // Prepend: `to` is prepended
  };
  struct DecodeStep {
    enum Kind { kReplace, kByteFallback, kFuse, kStrip, kMetaspace } kind;
    std::string from, to;  // Replace; Metaspace: from = the replacement
    size_t strip_start = 0, strip_stop = 0;
    bool strip_first = false;  // Metaspace: the first token loses a leading space
  };
  enum class Prepend { kAlways, kFirst, kNever };

 private:
  SentencePieceBpe() = default;
  void encode_stretch(std::string_view text, bool at_start, std::vector<int32_t>& out) const;
  void encode_word(const std::string& word, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  BpeMerges merges_;
  std::vector<TextStep> normalizer_;
  bool metaspace_ = false;  // a Metaspace pre-tokenizer
  std::string metaspace_replacement_;
  Prepend metaspace_prepend_ = Prepend::kAlways;
  bool metaspace_split_ = false;
  bool byte_fallback_ = false;
  bool fuse_unk_ = false;
  std::optional<int32_t> unk_id_;
  std::vector<AddedToken> added_tokens_;  // longest first
  std::unordered_set<int32_t> added_ids_;
  std::vector<DecodeStep> decoder_;
};

}  // namespace zoo::text
