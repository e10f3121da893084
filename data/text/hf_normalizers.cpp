// tokenizer.json normalizers (data/text/hf_components.h): NFC, NFD, NFKC,
// NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, BertNormalizer,
// ByteLevel and Sequence.
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/text/hf_components.h"
#include "data/text/regex_splitter.h"
#include "data/text/tokenizer_json.h"
#include "data/text/unicode.h"
#include "data/text/utf8.h"

namespace zoo::text::hf {
namespace {

using json = nlohmann::json;
using Step = std::function<std::string(std::string)>;

// A step may grow the text a little (NFKD, Replace " " -> "▁"); steps that multiply it are refused.
constexpr size_t kMaxGrowth = 16;
void check_growth(const std::string& out, size_t input_size, size_t max_growth = kMaxGrowth) {
  if (max_growth && out.size() > max_growth * input_size + 4096)
    throw std::length_error("the normalized text grew past " + std::to_string(max_growth) +
                            " times the input: a normalizer that multiplies the text");
}

template <typename Keep, typename Map>
std::string filter_map(const std::string& s, Keep keep, Map map) {
  std::string out;
  out.reserve(s.size());
  for (size_t pos = 0; pos < s.size();) {
    size_t len = 0;
    const char32_t cp = next_code_point(s, pos, len);
    if (invalid_byte(s, pos, len)) out += s[pos];  // not UTF-8: left as it is
    else if (keep(cp)) append_utf8(out, map(cp));
    pos += len;
  }
  return out;
}

std::string strip(const std::string& s, bool left, bool right) {
  size_t a = 0, b = s.size(), len = 0;
  while (left && a < b && is_whitespace(next_code_point(s, a, len))) a += len;
  while (right && b > a) {
    size_t start = b - 1;
    while (start > a && (static_cast<unsigned char>(s[start]) >> 6) == 2) --start;  // back to the character's lead byte
    if (!is_whitespace(next_code_point(s, start, len)) || start + len != b) break;
    b = start;
  }
  return s.substr(a, b - a);
}

// BERT's clean-up and CJK spacing, then accents and case (the library's order).
Step bert_normalizer(const json& node, const std::string& where) {
  const bool clean = bool_or(node, "clean_text", true, where);
  const bool chinese = bool_or(node, "handle_chinese_chars", true, where);
  const bool lowercase = bool_or(node, "lowercase", true, where);
  const bool accents = bool_or(node, "strip_accents", lowercase, where);
  return [=](std::string s) {
    if (clean)
      s = filter_map(
          s, [](char32_t c) { return c != 0 && c != 0xFFFD && (c == '\t' || c == '\n' || c == '\r' || !is_other(c)); },
          [](char32_t c) { return c == '\t' || c == '\n' || c == '\r' || is_whitespace(c) ? U' ' : c; });
    if (chinese) {
      std::string spaced;
      spaced.reserve(s.size());
      for (size_t pos = 0, len = 0; pos < s.size(); pos += len) {
        const char32_t cp = next_code_point(s, pos, len);
        if (is_cjk(cp)) spaced.append(" ").append(s, pos, len).append(" ");
        else spaced.append(s, pos, len);
      }
      s = std::move(spaced);
    }
    if (accents) s = remove_marks(normalize_unicode(s, UnicodeForm::kNFD), true);
    if (lowercase) s = to_lower(s);
    return s;
  };
}

Step make_step(const json& node, const std::string& where) {
  const std::string type = type_of(node, where);
  if (type == "Sequence") return make_normalizer(node, where);
  if (type == "NFC") return [](std::string s) { return normalize_unicode(s, UnicodeForm::kNFC); };
  if (type == "NFD") return [](std::string s) { return normalize_unicode(s, UnicodeForm::kNFD); };
  if (type == "NFKC") return [](std::string s) { return normalize_unicode(s, UnicodeForm::kNFKC); };
  if (type == "NFKD") return [](std::string s) { return normalize_unicode(s, UnicodeForm::kNFKD); };
  if (type == "Lowercase") return [](std::string s) { return to_lower(s); };
  if (type == "StripAccents") return [](std::string s) { return remove_marks(s, false); };
  if (type == "Strip") {
    const bool left = bool_or(node, "strip_left", true, where), right = bool_or(node, "strip_right", true, where);
    return [=](std::string s) { return strip(s, left, right); };
  }
  if (type == "Prepend") {
    const std::string prefix = string_at(node, "prepend", where);
    return [=](std::string s) { return s.empty() ? s : prefix + s; };
  }
  if (type == "Replace") {
    Replacer replace = make_replacer(node, where, kMaxGrowth);
    return [replace](std::string s) { return replace(s); };
  }
  if (type == "BertNormalizer") return bert_normalizer(node, where);
  if (type == "ByteLevel")
    return [](std::string s) {
      std::string out;
      for (unsigned char b : s) out += byte_level_char(b);
      return out;
    };
  throw std::invalid_argument(where + ": zoo does not apply the normalizer type \"" + type +
                              "\" (it applies NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Replace, Prepend, "
                              "BertNormalizer, ByteLevel and Sequence)");
}

}  // namespace

std::vector<std::pair<size_t, size_t>> literal_matches(const std::string& text, const std::string& needle) {
  std::vector<std::pair<size_t, size_t>> found;
  if (needle.empty()) return found;
  for (size_t at = 0; (at = text.find(needle, at)) != std::string::npos; at += needle.size())
    found.emplace_back(at, at + needle.size());
  return found;
}

Replacer make_replacer(const json& node, const std::string& where, size_t max_growth) {
  const std::string content = string_at(node, "content", where);
  const json& pattern = node.value("pattern", json());
  std::function<std::vector<std::pair<size_t, size_t>>(const std::string&)> find;
  if (pattern.is_object() && pattern.contains("String")) {
    const std::string from = string_at(pattern, "String", where + ".pattern");
    find = [from](const std::string& s) { return literal_matches(s, from); };
  } else if (pattern.is_object() && pattern.contains("Regex")) {
    auto regex = std::make_shared<Regex>(string_at(pattern, "Regex", where + ".pattern"));
    find = [regex](const std::string& s) { return regex->matches(s); };
  } else {
    throw std::invalid_argument(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}, got " +
                                pattern.dump().substr(0, 200));
  }
  return [=](const std::string& s) {
    std::string out;
    out.reserve(s.size());
    size_t at = 0;
    for (const auto& [start, end] : find(s)) {
      out.append(s, at, start - at).append(content), at = end;
      check_growth(out, s.size(), max_growth);
    }
    return out.append(s, at, std::string::npos);
  };
}

Normalizer make_normalizer(const json& node, const std::string& where) {
  std::vector<Step> steps;
  std::vector<std::string> names;
  const auto nodes = steps_of(node, "normalizers", where);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string at =
        type_of(node, where) != "Sequence" ? where : where + ".normalizers[" + std::to_string(i) + "]";
    steps.push_back(make_step(nodes[i], at));
    names.push_back(at);
  }
  if (steps.empty()) return {};
  return [steps, names](std::string s) {
    const size_t input_size = s.size();
    for (size_t i = 0; i < steps.size(); ++i) {
      try {
        s = steps[i](std::move(s));
        check_growth(s, input_size);
      } catch (const std::exception& e) {
        throw std::runtime_error(names[i] + ": " + e.what());
      }
    }
    return s;
  };
}

}  // namespace zoo::text::hf
