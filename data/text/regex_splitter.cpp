// Implementation of data/text/regex_splitter.h with PCRE2 (8-bit, UTF + UCP).
#include "data/text/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace zoo::text {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
};

RegexSplitter::RegexSplitter(const std::string& pattern) : impl_(std::make_unique<Impl>()) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s, \w and friends follow Unicode, as in Python's `regex` and JS /u.
  // MATCH_INVALID_UTF: invalid byte sequences never match instead of failing the whole text.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument("pre-tokenizer regex '" + pattern + "': " + reinterpret_cast<char*>(message) +
                                " at offset " + std::to_string(offset));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // a speed-up only; falls back to the interpreter
}

RegexSplitter::~RegexSplitter() { pcre2_code_free(impl_->code); }

void RegexSplitter::split(std::string_view text, const std::function<void(std::string_view)>& piece) const {
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0, emitted = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(match);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error(std::string("pre-tokenizer: ") + reinterpret_cast<char*>(message));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    const size_t start = ov[0], end = ov[1];
    if (start > emitted) piece(text.substr(emitted, start - emitted));
    if (end > start) {
      piece(text.substr(start, end - start));
      emitted = end;
      pos = end;
    } else {
      emitted = start;
      pos = start + 1;  // an empty match: step past it (lands mid-character at worst, which cannot match)
    }
  }
  pcre2_match_data_free(match);
  if (emitted < text.size()) piece(text.substr(emitted));
}

}  // namespace zoo::text
