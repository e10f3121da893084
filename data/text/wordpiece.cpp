// Implementation of data/text/wordpiece.h. CJK and punctuation come from
// data/text/unicode.h (BERT's classes, shared with the tokenizer.json
// pipeline), the other Unicode classes from PCRE2 (\p{Mn}, \p{Zs}, \p{Cc},
// \p{Cf}) and lower-casing from the C.UTF-8
// locale; accents are stripped from precomposed Latin-1 and Latin
// Extended-A letters by a table (Python's NFD covers every script).
#include "data/text/wordpiece.h"

#include "data/text/unicode.h"
#include "data/text/utf8.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <locale.h>
#include <pcre2.h>
#include <wctype.h>

#include <clocale>
#include <cwctype>
#include <fstream>
#include <stdexcept>

namespace zoo::text {
namespace {

std::u32string decode(const std::string& s) { return decode_utf8(s); }
std::string encode(const std::u32string& s) { return encode_utf8(s); }

// One Unicode class, tested through PCRE2 on the code point's UTF-8.
class UnicodeClass {
 public:
  explicit UnicodeClass(const char* pattern) {
    int error = 0;
    PCRE2_SIZE offset = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &error,
                          &offset, nullptr);
    if (!code_) throw std::logic_error(std::string("bad class pattern ") + pattern);
  }
  ~UnicodeClass() { pcre2_code_free(code_); }
  bool has(char32_t cp) const {
    const std::string s = encode(std::u32string(1, cp));
    pcre2_match_data* m = pcre2_match_data_create_from_pattern(code_, nullptr);
    const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, m, nullptr);
    pcre2_match_data_free(m);
    return rc > 0;
  }

 private:
  pcre2_code* code_ = nullptr;
};

const UnicodeClass& nonspacing_mark() {
  static const UnicodeClass c("^\\p{Mn}$");
  return c;
}
const UnicodeClass& space_separator() {
  static const UnicodeClass c("^\\p{Zs}$");
  return c;
}
const UnicodeClass& control() {
  static const UnicodeClass c("^[\\p{Cc}\\p{Cf}]$");
  return c;
}

// BERT's whitespace: " ", \t, \n, \r and Zs (modelzoo's copy drops \t \n \r as control characters instead).
bool is_bert_whitespace(char32_t cp) {
  return cp == U' ' || cp == U'\t' || cp == U'\n' || cp == U'\r' || (cp > 0x7F && space_separator().has(cp));
}
bool is_bert_control(char32_t cp) {
  return !is_bert_whitespace(cp) && (cp < 0x20 || cp == 0x7F || (cp > 0x7F && control().has(cp)));
}
char32_t lower(char32_t cp) {
  if (cp < 0x80) return cp >= U'A' && cp <= U'Z' ? cp + 32 : cp;
  static const locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return utf8 ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(cp), utf8)) : cp;
}

// The base letter of a precomposed Latin-1 / Latin Extended-A letter (NFD
// minus its marks), or 0 when it has none.
char32_t unaccented(char32_t cp) {
  static const char* const latin1 =  // U+00C0 .. U+00FF; '.' = no decomposition
      "AAAAAA.CEEEEIIII.NOOOOO..UUUUY..aaaaaa.ceeeeiiii.nooooo..uuuuy.y";
  static const char* const extended_a =  // U+0100 .. U+017F
      "AaAaAaCcCcCcCcDd..EeEeEeEeEeGgGgGgGgHh..IiIiIiIiI...JjKk.LlLlLl....NnNnNn...OoOoOo..RrRrRrSsSsSsSsTtTt.."
      "UuUuUuUuUuUuWwYyYZzZzZz.";
  if (cp >= 0xC0 && cp <= 0xFF && latin1[cp - 0xC0] != '.') return static_cast<char32_t>(latin1[cp - 0xC0]);
  if (cp >= 0x100 && cp <= 0x17F && extended_a[cp - 0x100] != '.') return static_cast<char32_t>(extended_a[cp - 0x100]);
  return 0;
}

}  // namespace

WordPieceTokenizer::WordPieceTokenizer(const std::string& vocab_file, bool do_lower, const std::string& unknown_token)
    : unknown_(unknown_token), do_lower_(do_lower) {
  std::ifstream in(vocab_file);
  if (!in) throw std::runtime_error(vocab_file + ": cannot be read");
  std::string line;
  for (; std::getline(in, line); ++vocab_size_) {
    const size_t a = line.find_first_not_of(" \t\r\n"), b = line.find_last_not_of(" \t\r\n");
    std::string token = a == std::string::npos ? "" : line.substr(a, b - a + 1);
    if (do_lower) {
      std::u32string cps = decode(token);
      for (char32_t& c : cps) c = lower(c);
      token = encode(cps);
    }
    vocab_[token] = vocab_size_;
  }
  if (!contains(unknown_token)) throw std::runtime_error(vocab_file + ": no '" + unknown_token + "' token");
  unknown_id_ = id(unknown_token);
}

bool WordPieceTokenizer::contains(const std::string& token) const {
  std::u32string cps = decode(token);
  if (do_lower_)
    for (char32_t& c : cps) c = lower(c);
  return vocab_.count(encode(cps)) > 0;
}

int64_t WordPieceTokenizer::id(const std::string& token) const {
  std::u32string cps = decode(token);
  if (do_lower_)
    for (char32_t& c : cps) c = lower(c);
  const auto it = vocab_.find(encode(cps));
  return it == vocab_.end() ? unknown_id_ : it->second;
}

std::vector<std::string> WordPieceTokenizer::basic_tokens(const std::string& text) const {
  // Clean (drop NUL, U+FFFD and control characters; whitespace becomes ' '),
  // space out CJK, lower-case, strip accents and split off punctuation.
  std::vector<std::string> out;
  std::u32string word;
  auto flush = [&] {
    if (!word.empty()) out.push_back(encode(word));
    word.clear();
  };
  for (char32_t cp : decode(text)) {
    if (cp == 0 || cp == 0xFFFD || is_bert_control(cp)) continue;
    if (is_bert_whitespace(cp)) {
      flush();
      continue;
    }
    if (do_lower_) cp = lower(cp);
    if (const char32_t base = unaccented(cp)) cp = base;
    if (nonspacing_mark().has(cp) && cp > 0x7F) continue;
    if (is_cjk(cp) || is_bert_punctuation(cp)) {
      flush();
      out.push_back(encode(std::u32string(1, cp)));
      continue;
    }
    word += cp;
  }
  flush();
  return out;
}

std::vector<std::string> WordPieceTokenizer::tokenize(const std::string& text) const {
  std::vector<std::string> out;
  for (const std::string& word : basic_tokens(text)) {
    const std::u32string cps = decode(word);
    if (cps.size() > 200) {  // BERT's max_input_chars_per_word
      out.push_back(unknown_);
      continue;
    }
    std::vector<std::string> pieces;
    bool known = true;
    for (size_t start = 0; start < cps.size() && known;) {
      size_t end = cps.size();
      std::string piece;
      for (; end > start; --end) {
        piece = (start > 0 ? "##" : "") + encode(cps.substr(start, end - start));
        if (vocab_.count(piece)) break;
      }
      if (end == start) known = false;
      else pieces.push_back(piece), start = end;
    }
    if (known) out.insert(out.end(), pieces.begin(), pieces.end());
    else out.push_back(unknown_);
  }
  return out;
}

}  // namespace zoo::text
