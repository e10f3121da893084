// The stages of a Hugging Face tokenizer.json, each built from its JSON
// node as the tokenizers library's schema defines it: normalizer ->
// pre-tokenizer -> model -> (post-processor) -> decoder. A component zoo
// cannot apply exactly is refused, naming its key and type, never
// approximated. `where` names the file and key in every error.
// Defines: Normalizer, Piece, PreTokenizer, Model, Decoder and their make_*.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

namespace zoo::text::hf {

// Text -> text. Empty when the file has no normalizer.
using Normalizer = std::function<std::string(std::string)>;
Normalizer make_normalizer(const nlohmann::json& node, const std::string& where);

// The [start, end) ranges of `needle` in `text`, non-overlapping, left to right (none for an empty needle).
std::vector<std::pair<size_t, size_t>> literal_matches(const std::string& text, const std::string& needle);

// A Replace step's {"pattern": {"String": s} or {"Regex": r}, "content": c}: every match of the pattern becomes c,
// in one pass. Throws std::length_error once the result passes max_growth times the input (+4 KiB); 0: no bound.
using Replacer = std::function<std::string(const std::string&)>;
Replacer make_replacer(const nlohmann::json& node, const std::string& where, size_t max_growth);

// A stretch of text the pre-tokenizer cut; `at_start`: it begins the text
// (Metaspace's prepend_scheme "first").
struct Piece {
  std::string text;
  bool at_start = false;
};
// Cuts each piece further. Empty when the file has no pre-tokenizer.
using PreTokenizer = std::function<void(std::vector<Piece>&)>;
PreTokenizer make_pre_tokenizer(const nlohmann::json& node, const std::string& where);

// A piece -> ids: BPE, WordPiece, WordLevel or Unigram.
class Model {
 public:
  virtual ~Model() = default;
  virtual void encode(const std::string& piece, std::vector<int32_t>& out) const = 0;
  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 protected:
  std::unordered_map<std::string, int32_t> vocab_;
};
std::unique_ptr<Model> make_model(const nlohmann::json& node, const std::string& where);

// Token texts -> texts (concatenated at the end). `literal` holds the added
// tokens, which byte-level decoding leaves as they are. Empty when the file
// has no decoder: tokens are then joined with spaces, as the library does.
using Decoder = std::function<void(std::vector<std::string>&)>;
Decoder make_decoder(const nlohmann::json& node, const std::string& where,
                     std::shared_ptr<const std::unordered_set<std::string>> literal);

// The "<0xAB>" token of a byte (byte fallback), and the byte of such a token (hex digits in either case) or -1.
std::string byte_token(unsigned char b);
int byte_of_token(const std::string& token);
// GPT-2's bytes_to_unicode: each byte as the printable character that stands for it.
const std::string& byte_level_char(unsigned char b);

}  // namespace zoo::text::hf
