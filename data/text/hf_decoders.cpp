// tokenizer.json decoders (data/text/hf_components.h): ByteLevel,
// Metaspace, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, Replace, CTC
// and Sequence, and the byte-level alphabet shared with the pre-tokenizer.
#include <array>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/text/hf_components.h"
#include "data/text/regex_splitter.h"
#include "data/text/tokenizer.h"
#include "data/text/tokenizer_json.h"
#include "data/text/unicode.h"
#include "data/text/utf8.h"

namespace zoo::text::hf {
namespace {

using json = nlohmann::json;
using Tokens = std::vector<std::string>;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the
// other 68 bytes get code points 256, 257, ... in byte order.
struct ByteAlphabet {
  std::array<std::string, 256> byte_to_text;
  std::unordered_map<char32_t, uint8_t> code_point_to_byte;
  ByteAlphabet() {
    char32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const char32_t cp = printable ? b : next++;
      append_utf8(byte_to_text[b], cp);
      code_point_to_byte[cp] = static_cast<uint8_t>(b);
    }
  }
};
const ByteAlphabet& alphabet() {
  static const ByteAlphabet a;
  return a;
}

bool valid_utf8(const std::string& s) {
  for (size_t pos = 0, len = 0; pos < s.size(); pos += len) {
    next_code_point(s, pos, len);
    if (invalid_byte(s, pos, len)) return false;
  }
  return true;
}

// The library's WordPiece clean-up: transformers' spaces before punctuation and contractions, and " do not".
std::string library_cleanup(const std::string& s) {
  return replace_all(clean_up_tokenization_spaces(s), " do not", " don't");
}

// Each byte-level token back to its bytes; added tokens, and any token with a character outside the alphabet, as
// they are. The bytes are kept raw (the library shows invalid UTF-8 as U+FFFD).
Decoder byte_level(std::shared_ptr<const std::unordered_set<std::string>> literal) {
  return [literal](Tokens& tokens) {
    std::string out;
    const auto& map = alphabet().code_point_to_byte;
    for (const auto& t : tokens) {
      std::string bytes;
      bool mapped = !literal->count(t);
      for (size_t pos = 0, len = 0; mapped && pos < t.size(); pos += len) {
        const auto it = map.find(next_code_point(t, pos, len));
        if (it == map.end()) mapped = false;
        else bytes += static_cast<char>(it->second);
      }
      out += mapped ? bytes : t;
    }
    tokens = {out};
  };
}

// Runs of byte tokens become their UTF-8 text, or one U+FFFD per byte when that is not valid.
void byte_fallback(Tokens& tokens) {
  Tokens joined;
  std::string bytes;
  size_t count = 0;
  auto flush = [&] {
    if (count == 0) return;
    if (valid_utf8(bytes)) joined.push_back(bytes);
    else
      for (size_t k = 0; k < count; ++k) joined.push_back("\xEF\xBF\xBD");
    bytes.clear();
    count = 0;
  };
  for (auto& t : tokens) {
    const int b = byte_of_token(t);
    if (b >= 0) {
      bytes += static_cast<char>(b);
      ++count;
    } else {
      flush();
      joined.push_back(std::move(t));
    }
  }
  flush();
  tokens = std::move(joined);
}

Decoder make_step(const json& node, const std::string& where,
                  const std::shared_ptr<const std::unordered_set<std::string>>& literal);

Decoder sequence(const json& node, const std::string& where,
                 const std::shared_ptr<const std::unordered_set<std::string>>& literal) {
  std::vector<Decoder> steps;
  const auto nodes = steps_of(node, "decoders", where);
  for (size_t i = 0; i < nodes.size(); ++i)
    steps.push_back(make_step(nodes[i], where + ".decoders[" + std::to_string(i) + "]", literal));
  return [steps](Tokens& tokens) {
    for (const auto& step : steps) step(tokens);
  };
}

Decoder make_step(const json& node, const std::string& where,
                  const std::shared_ptr<const std::unordered_set<std::string>>& literal) {
  const std::string type = type_of(node, where);
  if (type == "Sequence") return sequence(node, where, literal);
  if (type == "ByteLevel") return byte_level(literal);
  if (type == "ByteFallback") return byte_fallback;
  if (type == "Fuse")
    return [](Tokens& tokens) {
      std::string all;
      for (const auto& t : tokens) all += t;
      tokens = {all};
    };
  if (type == "Strip") {
    const std::string content = string_or(node, "content", " ", where);
    const int64_t start = int_or(node, "start", 0, where), stop = int_or(node, "stop", 0, where);
    return [=](Tokens& tokens) {
      for (auto& t : tokens) {
        size_t a = 0, b = t.size();
        for (int64_t k = 0; k < start && a + content.size() <= b && t.compare(a, content.size(), content) == 0; ++k)
          a += content.size();
        for (int64_t k = 0;
             k < stop && b >= a + content.size() && t.compare(b - content.size(), content.size(), content) == 0; ++k)
          b -= content.size();
        t = t.substr(a, b - a);
      }
    };
  }
  if (type == "Replace") {
    Replacer replace = make_replacer(node, where, /*max_growth=*/0);  // decoding writes what the ids say
    return [replace](Tokens& tokens) {
      for (auto& t : tokens) t = replace(t);
    };
  }
  if (type == "Metaspace") {
    const std::string replacement = string_or(node, "replacement", "\xE2\x96\x81", where);
    std::string scheme = string_or(node, "prepend_scheme", "", where);
    if (scheme.empty()) scheme = bool_or(node, "add_prefix_space", true, where) ? "always" : "never";
    // The first token's replacement characters stand for the prepended space: the library drops them all.
    const bool strip_first = scheme != "never";
    return [=](Tokens& tokens) {
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replace_all(tokens[i], replacement, i == 0 && strip_first ? "" : " ");
    };
  }
  if (type == "WordPiece") {
    const std::string prefix = string_or(node, "prefix", "##", where);
    const bool cleanup = bool_or(node, "cleanup", true, where);
    return [=](Tokens& tokens) {
      for (size_t i = 0; i < tokens.size(); ++i) {
        auto& t = tokens[i];
        if (i > 0) {
          if (!prefix.empty() && t.compare(0, prefix.size(), prefix) == 0) t.erase(0, prefix.size());
          else t.insert(0, " ");
        }
        if (cleanup) t = library_cleanup(t);
      }
    };
  }
  if (type == "BPEDecoder") {
    const std::string suffix = string_or(node, "suffix", "</w>", where);
    return [=](Tokens& tokens) {
      for (size_t i = 0; i < tokens.size(); ++i)
        tokens[i] = replace_all(tokens[i], suffix, i + 1 == tokens.size() ? "" : " ");
    };
  }
  if (type == "CTC") {
    const std::string pad = string_or(node, "pad_token", "<pad>", where);
    const std::string delimiter = string_or(node, "word_delimiter_token", "|", where);
    const bool cleanup = bool_or(node, "cleanup", true, where);
    return [=](Tokens& tokens) {
      Tokens out;
      for (size_t i = 0; i < tokens.size(); ++i) {
        if (i > 0 && tokens[i] == tokens[i - 1]) continue;
        std::string t = replace_all(tokens[i], pad, "");
        if (cleanup) t = replace_all(library_cleanup(t), delimiter, " ");
        if (!t.empty()) out.push_back(std::move(t));
      }
      tokens = std::move(out);
    };
  }
  throw std::invalid_argument(where + ": zoo does not apply the decoder type \"" + type +
                              "\" (it applies ByteLevel, Metaspace, WordPiece, BPEDecoder, ByteFallback, Fuse, Strip, "
                              "Replace, CTC and Sequence)");
}

}  // namespace

const std::string& byte_level_char(unsigned char b) { return alphabet().byte_to_text[b]; }

Decoder make_decoder(const json& node, const std::string& where,
                     std::shared_ptr<const std::unordered_set<std::string>> literal) {
  if (node.is_null()) return {};
  return make_step(node, where, literal);
}

}  // namespace zoo::text::hf
