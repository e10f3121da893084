// UTF-8 <-> code points, for the tokenizers and the BERT CSV reader.
// Defines: append_utf8, encode_utf8, decode_utf8.
#pragma once

#include <string>

namespace zoo::text {

inline void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6)), out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12)), out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18)), out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F)), out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

inline std::string encode_utf8(const std::u32string& s) {
  std::string out;
  for (char32_t cp : s) append_utf8(out, cp);
  return out;
}

// Invalid bytes decode as U+FFFD, one per byte.
inline std::u32string decode_utf8(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out += U'\uFFFD';
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? c : c & (0x7F >> n);
    bool ok = true;
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      ok = ok && (d >> 6) == 2;
      cp = (cp << 6) | (d & 0x3F);
    }
    out += ok ? cp : U'\uFFFD';
    i += ok ? n : 1;
  }
  return out;
}

}  // namespace zoo::text
