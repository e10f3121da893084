// BERT's WordPiece tokenizer (modelzoo's FullTokenizer, Google's BERT
// tokenization): clean the text, space out CJK characters, lower-case,
// strip accents, split on whitespace and punctuation, then split each word
// greedily into the longest vocabulary pieces ("un", "##aff", "##able").
// Defines: WordPieceTokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace zoo::text {

class WordPieceTokenizer {
 public:
  // vocab_file: one token per line, line k is id k. Throws std::runtime_error
  // naming the file when it cannot be read or lacks unknown_token.
  WordPieceTokenizer(const std::string& vocab_file, bool do_lower, const std::string& unknown_token = "[UNK]");
  // The word pieces of `text` (UTF-8).
  std::vector<std::string> tokenize(const std::string& text) const;
  // A vocabulary token's id (lower-cased with do_lower); unknown_token's id when absent.
  int64_t id(const std::string& token) const;
  bool contains(const std::string& token) const;
  int64_t vocab_size() const { return vocab_size_; }

 private:
  std::vector<std::string> basic_tokens(const std::string& text) const;
  std::unordered_map<std::string, int64_t> vocab_;
  int64_t vocab_size_ = 0;
  int64_t unknown_id_ = 0;
  std::string unknown_;
  bool do_lower_;
};

}  // namespace zoo::text
