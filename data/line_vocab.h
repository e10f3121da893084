// A vocabulary file of one token per line, line k being id k, as modelzoo's
// build_vocab reads it (BERT's WordPiece vocab.txt, T5's and the
// Transformer's vocabularies): lines are stripped, lower-cased with
// do_lower, and a token listed twice keeps its last line.
// Defines: lower_ascii, strip_whitespace, LineVocabulary.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace zoo::data {

std::string lower_ascii(std::string s);
// As Python's str.strip().
std::string strip_whitespace(const std::string& s);

class LineVocabulary {
 public:
  LineVocabulary() = default;  // empty
  // Throws std::runtime_error naming the file when it cannot be read.
  LineVocabulary(const std::string& file, bool do_lower);
  int64_t size() const { return lines_; }  // lines, as modelzoo counts the vocabulary
  // The token's id (lower-cased first with do_lower), if listed.
  std::optional<int64_t> find(const std::string& token) const;
  // The token's id, or `unknown` when it is not listed.
  int64_t id(const std::string& token, int64_t unknown) const {
    const auto found = find(token);
    return found ? *found : unknown;
  }
  const std::string& file() const { return file_; }

 private:
  std::string file_;
  bool do_lower_ = false;
  int64_t lines_ = 0;
  std::unordered_map<std::string, int64_t> ids_;
};

}  // namespace zoo::data
