// Unicode for the tokenizer pipeline, from utf8proc (Debian's
// libutf8proc-dev): normalization forms, lower-casing and the character
// classes Hugging Face's tokenizers test (Rust's char methods). Text that is
// not valid UTF-8 passes through unchanged around its bad bytes.
// Defines: normalize_unicode, to_lower, remove_marks, next_code_point, the is_*
// classes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace zoo::text {

enum class UnicodeForm { kNFC, kNFD, kNFKC, kNFKD };
std::string normalize_unicode(std::string_view text, UnicodeForm form);
// Lower-casing per code point as Rust's char::to_lowercase ("İ" becomes "i" + U+0307).
std::string to_lower(std::string_view text);
// Without combining marks: all of them (M*), or only non-spacing ones (Mn).
std::string remove_marks(std::string_view text, bool nonspacing_only);

// The code point at text[pos] and its length in bytes; an invalid byte reads
// as U+FFFD of length 1.
char32_t next_code_point(std::string_view text, size_t pos, size_t& length);
// Whether next_code_point read an invalid byte there (a real U+FFFD in the text is 3 bytes long).
inline bool invalid_byte(std::string_view text, size_t pos, size_t length) {
  return length == 1 && static_cast<unsigned char>(text[pos]) >= 0x80;
}

bool is_whitespace(char32_t cp);        // Rust's char::is_whitespace (White_Space)
bool is_punctuation(char32_t cp);       // Unicode P* categories
bool is_bert_punctuation(char32_t cp);  // ASCII punctuation and symbols, or P*
bool is_numeric(char32_t cp);           // Nd, Nl, No
bool is_alphanumeric(char32_t cp);      // L*, Nd, Nl, No
bool is_other(char32_t cp);             // C* (control, format, unassigned, private use, surrogate)
bool is_cjk(char32_t cp);               // CJK ideographs, as BERT spaces them out

}  // namespace zoo::text
