// Pre-tokenization regexes: PCRE2 (Unicode classes such as \p{L} need a
// real regex engine), bounded so that a hostile pattern cannot hang a run.
// Defines: Regex, kGpt2Pattern.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zoo::text {

// GPT-2's pre-tokenization pattern (contractions, letters, numbers, other
// symbols, each with an optional leading space; runs of whitespace).
extern const char* const kGpt2Pattern;

class Regex {
 public:
  // Throws std::invalid_argument with PCRE2's message and the offset.
  explicit Regex(const std::string& pattern);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // The [start, end) byte ranges of the non-empty, non-overlapping matches,
  // left to right. Bytes that are not valid UTF-8 never match. Throws
  // std::runtime_error naming the pattern when PCRE2's match limit is hit
  // (a pattern that backtracks without end).
  std::vector<std::pair<size_t, size_t>> matches(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string pattern_;
};

}  // namespace zoo::text
