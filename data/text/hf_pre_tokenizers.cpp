// tokenizer.json pre-tokenizers (data/text/hf_components.h): ByteLevel,
// Split (every behavior, inverted too), Metaspace, Whitespace,
// WhitespaceSplit, BertPreTokenizer, Punctuation, Digits, CharDelimiterSplit
// and Sequence. Each cuts every piece it is given, as the library does.
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "data/text/hf_components.h"
#include "data/text/regex_splitter.h"
#include "data/text/tokenizer_json.h"
#include "data/text/unicode.h"

namespace zoo::text::hf {
namespace {

using json = nlohmann::json;
using Range = std::pair<size_t, size_t>;
// A piece's matches -> its [start, end) ranges, each flagged as a match or not, covering the piece in order.
using Finder = std::function<std::vector<Range>(const std::string&)>;
enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

Behavior behavior_of(const json& node, const char* fallback, const std::string& where) {
  const std::string b = string_or(node, "behavior", fallback, where);
  if (b == "Removed") return Behavior::kRemoved;
  if (b == "Isolated") return Behavior::kIsolated;
  if (b == "MergedWithPrevious") return Behavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return Behavior::kMergedWithNext;
  if (b == "Contiguous") return Behavior::kContiguous;
  throw std::invalid_argument(where +
                              ".behavior: expected Removed, Isolated, MergedWithPrevious, MergedWithNext or "
                              "Contiguous, got \"" +
                              b + "\"");
}

// The library's split of one piece: its matches and the stretches between, combined by `behavior`.
void split_piece(const Piece& piece, const std::vector<Range>& found, Behavior behavior, bool invert,
                 std::vector<Piece>& out) {
  struct Segment {
    size_t start, end;
    bool match;
  };
  std::vector<Segment> segments;
  size_t at = 0;
  for (const auto& [start, end] : found) {
    if (start > at) segments.push_back({at, start, invert});
    segments.push_back({start, end, !invert});
    at = end;
  }
  if (at < piece.text.size()) segments.push_back({at, piece.text.size(), invert});

  std::vector<Range> kept;
  bool previous_match = false;
  switch (behavior) {
    case Behavior::kRemoved:
      for (const auto& s : segments)
        if (!s.match) kept.emplace_back(s.start, s.end);
      break;
    case Behavior::kIsolated:
      for (const auto& s : segments) kept.emplace_back(s.start, s.end);
      break;
    case Behavior::kContiguous:
      for (const auto& s : segments) {
        if (s.match == previous_match && !kept.empty()) kept.back().second = s.end;
        else kept.emplace_back(s.start, s.end);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithPrevious:
      for (const auto& s : segments) {
        if (s.match && !previous_match && !kept.empty()) kept.back().second = s.end;
        else kept.emplace_back(s.start, s.end);
        previous_match = s.match;
      }
      break;
    case Behavior::kMergedWithNext:
      for (auto s = segments.rbegin(); s != segments.rend(); ++s) {
        if (s->match && !previous_match && !kept.empty()) kept.back().first = s->start;
        else kept.emplace_back(s->start, s->end);
        previous_match = s->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
  }
  for (const auto& [start, end] : kept)
    if (end > start) out.push_back({piece.text.substr(start, end - start), piece.at_start && start == 0});
}

PreTokenizer splitter(Finder find, Behavior behavior, bool invert = false) {
  return [find = std::move(find), behavior, invert](std::vector<Piece>& pieces) {
    std::vector<Piece> out;
    out.reserve(pieces.size());
    for (const auto& p : pieces) split_piece(p, find(p.text), behavior, invert, out);
    pieces = std::move(out);
  };
}

// Every character for which `test` holds is a match of its own.
template <typename Test>
Finder each_char(Test test) {
  return [test](const std::string& s) {
    std::vector<Range> found;
    for (size_t pos = 0, len = 0; pos < s.size(); pos += len)
      if (test(next_code_point(s, pos, len))) found.emplace_back(pos, pos + len);
    return found;
  };
}

Finder literal(const std::string& needle) {
  return [needle](const std::string& s) { return literal_matches(s, needle); };
}

Finder regex(const std::string& pattern, const std::string& where) {
  std::shared_ptr<Regex> re;
  try {
    re = std::make_shared<Regex>(pattern);
  } catch (const std::exception& e) {
    throw std::invalid_argument(where + ".pattern: " + e.what());
  }
  return [re](const std::string& s) { return re->matches(s); };
}

PreTokenizer byte_level(const json& node, const std::string& where) {
  const bool prefix_space = bool_or(node, "add_prefix_space", true, where);
  const bool use_regex = bool_or(node, "use_regex", true, where);
  PreTokenizer gpt2_split = use_regex ? splitter(regex(kGpt2Pattern, where), Behavior::kIsolated) : PreTokenizer();
  return [=](std::vector<Piece>& pieces) {
    if (prefix_space)
      for (auto& p : pieces)
        if (p.text.empty() || p.text[0] != ' ') p.text.insert(0, " ");
    if (gpt2_split) gpt2_split(pieces);
    for (auto& p : pieces) {
      std::string mapped;
      mapped.reserve(p.text.size() * 2);
      for (unsigned char b : p.text) mapped += byte_level_char(b);
      p.text = std::move(mapped);
    }
  };
}

PreTokenizer metaspace(const json& node, const std::string& where) {
  const std::string replacement = string_or(node, "replacement", "\xE2\x96\x81", where);
  std::string scheme = string_or(node, "prepend_scheme", "", where);
  if (scheme.empty()) scheme = bool_or(node, "add_prefix_space", true, where) ? "always" : "never";
  if (scheme != "always" && scheme != "first" && scheme != "never")
    throw std::invalid_argument(where + ".prepend_scheme: expected always, first or never, got \"" + scheme + "\"");
  const bool split = bool_or(node, "split", true, where);
  PreTokenizer cut = splitter(literal(replacement), Behavior::kMergedWithNext);
  return [=](std::vector<Piece>& pieces) {
    for (auto& p : pieces) {
      std::string s;
      s.reserve(p.text.size());
      for (char c : p.text) {
        if (c == ' ') s += replacement;
        else s += c;
      }
      const bool prepend = scheme == "always" || (scheme == "first" && p.at_start);
      if (prepend && s.compare(0, replacement.size(), replacement) != 0) s.insert(0, replacement);
      p.text = std::move(s);
    }
    if (split) cut(pieces);
  };
}

PreTokenizer make_step(const json& node, const std::string& where) {
  const std::string type = type_of(node, where);
  if (type == "Sequence") return make_pre_tokenizer(node, where);
  if (type == "ByteLevel") return byte_level(node, where);
  if (type == "Metaspace") return metaspace(node, where);
  if (type == "Split") {
    const json& pattern = node.value("pattern", json());
    Finder find;
    if (pattern.is_object() && pattern.contains("String"))
      find = literal(string_at(pattern, "String", where + ".pattern"));
    else if (pattern.is_object() && pattern.contains("Regex"))
      find = regex(string_at(pattern, "Regex", where + ".pattern"), where);
    else
      throw std::invalid_argument(where + ".pattern: expected {\"String\": ...} or {\"Regex\": ...}, got " +
                                  pattern.dump().substr(0, 200));
    return splitter(find, behavior_of(node, "", where), bool_or(node, "invert", false, where));
  }
  if (type == "Whitespace") {
    // The library's \w+|[^\w\s]+ with Rust's \w (Alphabetic, marks, decimal digits, connectors, joiners).
    const std::string word = R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}])";
    const std::string other = R"([^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\s])";
    return splitter(regex(word + "+|" + other + "+", where), Behavior::kRemoved, true);
  }
  if (type == "WhitespaceSplit") return splitter(each_char(is_whitespace), Behavior::kRemoved);
  if (type == "BertPreTokenizer") {
    PreTokenizer spaces = splitter(each_char(is_whitespace), Behavior::kRemoved);
    PreTokenizer punctuation = splitter(each_char(is_bert_punctuation), Behavior::kIsolated);
    return [=](std::vector<Piece>& pieces) { spaces(pieces), punctuation(pieces); };
  }
  if (type == "Punctuation") return splitter(each_char(is_bert_punctuation), behavior_of(node, "Isolated", where));
  if (type == "Digits") {
    const bool individual = bool_or(node, "individual_digits", false, where);
    return splitter(each_char(is_numeric), individual ? Behavior::kIsolated : Behavior::kContiguous);
  }
  if (type == "CharDelimiterSplit") {
    const std::string delimiter = string_at(node, "delimiter", where);
    return splitter(literal(delimiter), Behavior::kRemoved);
  }
  throw std::invalid_argument(where + ": zoo does not apply the pre-tokenizer type \"" + type +
                              "\" (it applies ByteLevel, Split, Metaspace, Whitespace, WhitespaceSplit, "
                              "BertPreTokenizer, Punctuation, Digits, CharDelimiterSplit and Sequence)");
}

}  // namespace

PreTokenizer make_pre_tokenizer(const json& node, const std::string& where) {
  std::vector<PreTokenizer> steps;
  const auto nodes = steps_of(node, "pretokenizers", where);
  const bool sequence = !node.is_null() && type_of(node, where) == "Sequence";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const std::string at = sequence ? where + ".pretokenizers[" + std::to_string(i) + "]" : where;
    steps.push_back(make_step(nodes[i], at));
  }
  if (steps.empty()) return {};
  if (steps.size() == 1) return steps[0];
  return [steps](std::vector<Piece>& pieces) {
    for (const auto& step : steps) step(pieces);
  };
}

}  // namespace zoo::text::hf
