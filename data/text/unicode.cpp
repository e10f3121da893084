// Implementation of data/text/unicode.h with utf8proc.
#include "data/text/unicode.h"

#include <utf8proc.h>

#include <cstdlib>
#include <stdexcept>

#include "data/text/utf8.h"

namespace zoo::text {
namespace {

// Calls `valid(run)` for each longest valid UTF-8 stretch and `invalid(byte_run)` for the bytes between them.
template <typename Valid, typename Invalid>
void for_each_run(std::string_view text, Valid valid, Invalid invalid) {
  size_t start = 0, pos = 0;
  while (pos < text.size()) {
    size_t len = 0;
    next_code_point(text, pos, len);
    if (!invalid_byte(text, pos, len)) {
      pos += len;
      continue;
    }
    if (pos > start) valid(text.substr(start, pos - start));
    invalid(text.substr(pos, 1));
    start = ++pos;
  }
  if (pos > start) valid(text.substr(start, pos - start));
}

std::string map_valid(std::string_view text, int options) {
  std::string out;
  out.reserve(text.size());
  for_each_run(
      text,
      [&](std::string_view run) {
        utf8proc_uint8_t* mapped = nullptr;
        const auto n =
            utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(run.data()),
                         static_cast<utf8proc_ssize_t>(run.size()), &mapped, static_cast<utf8proc_option_t>(options));
        if (n < 0) throw std::runtime_error(std::string("Unicode normalization: ") + utf8proc_errmsg(n));
        out.append(reinterpret_cast<const char*>(mapped), static_cast<size_t>(n));
        std::free(mapped);
      },
      [&](std::string_view bad) { out += bad; });
  return out;
}

template <typename Map>
std::string map_code_points(std::string_view text, Map map) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    size_t len = 0;
    const char32_t cp = next_code_point(text, pos, len);
    if (invalid_byte(text, pos, len)) out += text[pos];
    else map(cp, out);
    pos += len;
  }
  return out;
}

utf8proc_category_t category(char32_t cp) { return utf8proc_category(static_cast<utf8proc_int32_t>(cp)); }

}  // namespace

std::string normalize_unicode(std::string_view text, UnicodeForm form) {
  int options = UTF8PROC_STABLE;
  switch (form) {
    case UnicodeForm::kNFC: options |= UTF8PROC_COMPOSE; break;
    case UnicodeForm::kNFD: options |= UTF8PROC_DECOMPOSE; break;
    case UnicodeForm::kNFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case UnicodeForm::kNFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  return map_valid(text, options);
}

std::string to_lower(std::string_view text) {
  return map_code_points(text, [](char32_t cp, std::string& out) {
    // Unicode's one unconditional lower-casing into two characters (SpecialCasing.txt), as Rust's char::to_lowercase.
    if (cp == 0x130) return out.append("i\xCC\x87"), void();
    append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))));
  });
}

std::string remove_marks(std::string_view text, bool nonspacing_only) {
  return map_code_points(text, [nonspacing_only](char32_t cp, std::string& out) {
    const auto c = category(cp);
    const bool mark =
        nonspacing_only ? c == UTF8PROC_CATEGORY_MN : c >= UTF8PROC_CATEGORY_MN && c <= UTF8PROC_CATEGORY_ME;
    if (!mark) append_utf8(out, cp);
  });
}

char32_t next_code_point(std::string_view s, size_t pos, size_t& length) {
  const auto c = static_cast<unsigned char>(s[pos]);
  const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  length = 1;
  if (n == 0 || pos + n > s.size()) return U'\uFFFD';
  char32_t cp = n == 1 ? c : c & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto d = static_cast<unsigned char>(s[pos + k]);
    if ((d >> 6) != 2) return U'\uFFFD';
    cp = (cp << 6) | (d & 0x3F);
  }
  // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
  static const char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return U'\uFFFD';
  length = n;
  return cp;
}

bool is_whitespace(char32_t cp) {
  if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP || cp == 0x85;
}

bool is_punctuation(char32_t cp) {
  const auto c = category(cp);
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

bool is_bert_punctuation(char32_t cp) {
  return (cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) || (cp >= 123 && cp <= 126) ||
         is_punctuation(cp);
}

bool is_numeric(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}

bool is_alphanumeric(char32_t cp) {
  const auto c = category(cp);
  return (c >= UTF8PROC_CATEGORY_LU && c <= UTF8PROC_CATEGORY_LO) || is_numeric(cp);
}

bool is_other(char32_t cp) {
  const auto c = category(cp);
  return c == UTF8PROC_CATEGORY_CN || (c >= UTF8PROC_CATEGORY_CC && c <= UTF8PROC_CATEGORY_CO);
}

bool is_cjk(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

}  // namespace zoo::text
