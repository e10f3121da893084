// Pre-tokenization: cuts text into pieces with a PCRE2 regex (Unicode
// classes such as \p{L} need a real regex engine). Defines: RegexSplitter,
// kGpt2Pattern.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace zoo::text {

// GPT-2's pre-tokenization pattern (contractions, letters, numbers, other
// symbols, each with an optional leading space; runs of whitespace).
extern const char* const kGpt2Pattern;

class RegexSplitter {
 public:
  // Throws std::invalid_argument with PCRE2's message and the offset.
  explicit RegexSplitter(const std::string& pattern);
  ~RegexSplitter();
  RegexSplitter(const RegexSplitter&) = delete;
  RegexSplitter& operator=(const RegexSplitter&) = delete;
  // Calls `piece` for every match and every stretch between matches, in
  // order, so the pieces concatenate to `text` exactly: nothing is lost,
  // even bytes that are not valid UTF-8 (they never match and come out as
  // stretches of their own).
  void split(std::string_view text, const std::function<void(std::string_view)>& piece) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace zoo::text
