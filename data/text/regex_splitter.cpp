// Implementation of data/text/regex_splitter.h with PCRE2 (8-bit, UTF + UCP).
#include "data/text/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>

namespace zoo::text {

const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Regex::Impl {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
};

Regex::Regex(const std::string& pattern) : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  // UCP: \s, \w and friends follow Unicode, as in Rust's regex, Oniguruma and JS /u.
  // MATCH_INVALID_UTF: invalid byte sequences never match instead of failing the whole text.
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    throw std::invalid_argument("regex '" + pattern + "': " + reinterpret_cast<char*>(message) + " at offset " +
                                std::to_string(offset));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // a speed-up only; falls back to the interpreter
  // The default limits allow minutes of backtracking on one match; real pre-tokenizers need a few hundred steps.
  impl_->context = pcre2_match_context_create(nullptr);
  pcre2_set_match_limit(impl_->context, 1000000);
  pcre2_set_depth_limit(impl_->context, 10000);
}

Regex::~Regex() {
  pcre2_match_context_free(impl_->context);
  pcre2_code_free(impl_->code);
}

std::vector<std::pair<size_t, size_t>> Regex::matches(std::string_view text) const {
  std::vector<std::pair<size_t, size_t>> found;
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  while (pos <= text.size()) {
    const int rc = pcre2_match(impl_->code, subject, text.size(), pos, 0, match, impl_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(match);
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      throw std::runtime_error("regex '" + pattern_.substr(0, 120) + "': " + reinterpret_cast<char*>(message) +
                               " (at byte " + std::to_string(pos) + " of a " + std::to_string(text.size()) +
                               "-byte text)");
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match);
    if (ov[1] > ov[0]) {
      found.emplace_back(ov[0], ov[1]);
      pos = ov[1];
    } else {
      pos = ov[0] + 1;  // an empty match: step past it (lands mid-character at worst, which cannot match)
    }
  }
  pcre2_match_data_free(match);
  return found;
}

}  // namespace zoo::text
