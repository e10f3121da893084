// Implementation of data/text/sp_bpe.h.
#include "data/text/sp_bpe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <stdexcept>

namespace zoo::text {
namespace {

const char* const kSpace = "\xE2\x96\x81";  // U+2581, SentencePiece's visible space

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += to.size()) s.replace(at, from.size(), to);
  return s;
}

// Bytes in one UTF-8 character starting with `lead`; 1 for a byte that cannot start one.
size_t utf8_length(unsigned char lead) {
  return lead < 0xC0 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : lead < 0xF8 ? 4 : 1;
}

bool valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k)
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    i += n;
  }
  return true;
}

std::string byte_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

// The byte a "<0xHH>" token stands for, or -1.
int byte_of_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  unsigned value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    value = value * 16 + static_cast<unsigned>(d);
  }
  return static_cast<int>(value);
}

std::string string_pattern(const nlohmann::json& step, const std::string& where) {
  const auto& pattern = step.value("pattern", nlohmann::json());
  if (!pattern.is_object() || !pattern.contains("String") || !pattern["String"].is_string())
    throw std::invalid_argument(where + ": a Replace is supported with a {\"String\": ...} pattern (not a Regex), got " +
                                pattern.dump());
  return pattern["String"].get<std::string>();
}

SentencePieceBpe::Prepend prepend_scheme(const nlohmann::json& step, const std::string& where) {
  if (step.contains("prepend_scheme")) {
    const std::string s = step["prepend_scheme"].get<std::string>();
    if (s == "always") return SentencePieceBpe::Prepend::kAlways;
    if (s == "first") return SentencePieceBpe::Prepend::kFirst;
    if (s == "never") return SentencePieceBpe::Prepend::kNever;
    throw std::invalid_argument(where + ".prepend_scheme: expected always, first or never, got \"" + s + "\"");
  }
  return step.value("add_prefix_space", true) ? SentencePieceBpe::Prepend::kAlways : SentencePieceBpe::Prepend::kNever;
}

std::vector<nlohmann::json> steps_of(const nlohmann::json& node, const char* list_key) {
  if (node.is_null()) return {};
  if (node.value("type", std::string()) == "Sequence") return node.value(list_key, std::vector<nlohmann::json>());
  return {node};
}

}  // namespace

bool SentencePieceBpe::describes(const nlohmann::json& j) {
  const auto& model = j.value("model", nlohmann::json::object());
  if (model.value("type", std::string()) != "BPE") return false;
  if (model.value("byte_fallback", false)) return true;
  for (const char* key : {"pre_tokenizer", "decoder"})
    for (const auto& step : steps_of(j.value(key, nlohmann::json()), key[0] == 'p' ? "pretokenizers" : "decoders"))
      if (step.value("type", std::string()) == "Metaspace") return true;
  for (const auto& step : steps_of(j.value("normalizer", nlohmann::json()), "normalizers"))
    if (step.value("content", std::string()) == kSpace || step.value("prepend", std::string()) == kSpace) return true;
  return false;
}

std::unique_ptr<SentencePieceBpe> SentencePieceBpe::from_tokenizer_json(const nlohmann::json& j,
                                                                        const std::string& path) {
  auto fail = [&](const std::string& key, const std::string& what) {
    return std::invalid_argument(path + ": " + key + ": " + what);
  };
  std::unique_ptr<SentencePieceBpe> t(new SentencePieceBpe());
  const auto& model = j.value("model", nlohmann::json::object());
  if (model.value("type", std::string()) != "BPE")
    throw fail("model.type", "expected \"BPE\", got " + model.value("type", nlohmann::json()).dump());
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(key) && !model[key].is_null() && model[key] != "")
      throw fail(std::string("model.") + key, "not supported by SentencePiece-style BPE");
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    throw fail("model.dropout", "BPE dropout makes tokenization random; expected null for preparing data");
  t->vocab_ = read_vocab(model.value("vocab", nlohmann::json()), path + ": model.vocab");
  t->byte_fallback_ = model.value("byte_fallback", false);
  t->fuse_unk_ = model.value("fuse_unk", false);
  if (model.value("ignore_merges", false)) throw fail("model.ignore_merges", "true is not supported here, expected false");
  for (const auto& [left, right] : read_merges(model.value("merges", nlohmann::json::array()), path + ": model.merges")) {
    if (!t->vocab_.count(left + right))
      throw fail("model.merges", "merge [\"" + left + "\", \"" + right + "\"] makes a token that is not in model.vocab");
    t->merges_.add(left, right);
  }
  const auto& unk = model.value("unk_token", nlohmann::json());
  if (unk.is_string()) {
    const auto it = t->vocab_.find(unk.get<std::string>());
    if (it == t->vocab_.end()) throw fail("model.unk_token", unk.dump() + " is not in model.vocab");
    t->unk_id_ = it->second;
  }
  if (t->byte_fallback_)
    for (int b = 0; b < 256; ++b)
      if (!t->vocab_.count(byte_token(static_cast<unsigned char>(b))))
        throw fail("model.byte_fallback", "true, but model.vocab lacks the byte token " + byte_token(static_cast<unsigned char>(b)));

  for (const auto& step : steps_of(j.value("normalizer", nlohmann::json()), "normalizers")) {
    const std::string type = step.value("type", std::string());
    if (type == "Prepend") t->normalizer_.push_back({TextStep::kPrepend, "", step.at("prepend").get<std::string>()});
    else if (type == "Replace")
      t->normalizer_.push_back({TextStep::kReplace, string_pattern(step, path + ": normalizer"), step.at("content").get<std::string>()});
    else throw fail("normalizer", "zoo applies Prepend and Replace normalizers; got " + step.dump().substr(0, 200));
  }
  for (const auto& step : steps_of(j.value("pre_tokenizer", nlohmann::json()), "pretokenizers")) {
    if (step.value("type", std::string()) != "Metaspace")
      throw fail("pre_tokenizer", "expected null or Metaspace for a SentencePiece-style BPE; got " + step.dump().substr(0, 200));
    t->metaspace_ = true;
    t->metaspace_replacement_ = step.value("replacement", std::string(kSpace));
    t->metaspace_prepend_ = prepend_scheme(step, path + ": pre_tokenizer");
    t->metaspace_split_ = step.value("split", true);
  }
  for (const auto& step : steps_of(j.value("decoder", nlohmann::json()), "decoders")) {
    const std::string type = step.value("type", std::string());
    DecodeStep d{DecodeStep::kFuse, "", ""};
    if (type == "Replace") d = {DecodeStep::kReplace, string_pattern(step, path + ": decoder"), step.at("content").get<std::string>()};
    else if (type == "ByteFallback") d.kind = DecodeStep::kByteFallback;
    else if (type == "Fuse") d.kind = DecodeStep::kFuse;
    else if (type == "Strip") {
      if (step.value("content", std::string(" ")) != " ") throw fail("decoder", "a Strip is supported for \" \" only");
      d.kind = DecodeStep::kStrip;
      d.strip_start = step.value("start", 0);
      d.strip_stop = step.value("stop", 0);
    } else if (type == "Metaspace") {
      d = {DecodeStep::kMetaspace, step.value("replacement", std::string(kSpace)), " "};
      d.strip_first = prepend_scheme(step, path + ": decoder") != Prepend::kNever;
    } else {
      throw fail("decoder", "expected Replace, ByteFallback, Fuse, Strip or Metaspace steps; got " + step.dump().substr(0, 200));
    }
    t->decoder_.push_back(d);
  }
  t->added_tokens_ = read_added_tokens(j.value("added_tokens", nlohmann::json()), path + ": added_tokens");
  for (const auto& a : t->added_tokens_) {
    t->vocab_.emplace(a.content, a.id);
    t->added_ids_.insert(a.id);
  }
  std::stable_sort(t->added_tokens_.begin(), t->added_tokens_.end(),
                   [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  int32_t max_id = -1;
  for (const auto& [token, id] : t->vocab_) max_id = std::max(max_id, id);
  t->id_to_token_.resize(static_cast<size_t>(max_id + 1));
  for (const auto& [token, id] : t->vocab_) t->id_to_token_[id] = token;
  return t;
}

std::optional<int32_t> SentencePieceBpe::token_to_id(const std::string& token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

std::vector<int32_t> SentencePieceBpe::encode(std::string_view text) const {
  std::vector<int32_t> ids;
  size_t stretch = 0;
  for (size_t pos = 0; pos < text.size();) {
    const AddedToken* hit = nullptr;
    for (const auto& added : added_tokens_)
      if (text.compare(pos, added.content.size(), added.content) == 0) {
        hit = &added;
        break;
      }
    if (!hit) {
      ++pos;
      continue;
    }
    encode_stretch(text.substr(stretch, pos - stretch), stretch == 0, ids);
    ids.push_back(hit->id);
    pos += hit->content.size();
    stretch = pos;
  }
  encode_stretch(text.substr(stretch), stretch == 0, ids);
  return ids;
}

void SentencePieceBpe::encode_stretch(std::string_view text, bool at_start, std::vector<int32_t>& out) const {
  if (text.empty()) return;
  std::string s(text);
  for (const auto& step : normalizer_)
    s = step.kind == TextStep::kPrepend ? step.to + s : replace_all(std::move(s), step.from, step.to);
  if (!metaspace_) return encode_word(s, out);
  s = replace_all(std::move(s), " ", metaspace_replacement_);
  const bool prepend = metaspace_prepend_ == Prepend::kAlways || (metaspace_prepend_ == Prepend::kFirst && at_start);
  if (prepend && s.compare(0, metaspace_replacement_.size(), metaspace_replacement_) != 0) s = metaspace_replacement_ + s;
  if (!metaspace_split_) return encode_word(s, out);
  // Each word runs up to the next replacement character, which starts the next word.
  size_t start = 0;
  for (size_t at = s.find(metaspace_replacement_, 1); at != std::string::npos;
       at = s.find(metaspace_replacement_, at + 1)) {
    encode_word(s.substr(start, at - start), out);
    start = at;
  }
  encode_word(s.substr(start), out);
}

void SentencePieceBpe::encode_word(const std::string& word, std::vector<int32_t>& out) const {
  std::vector<std::string> symbols;
  bool last_unknown = false;
  for (size_t i = 0; i < word.size();) {
    const size_t n = std::min(utf8_length(static_cast<unsigned char>(word[i])), word.size() - i);
    std::string ch = word.substr(i, n);
    i += n;
    if (vocab_.count(ch)) {
      symbols.push_back(std::move(ch));
      last_unknown = false;
    } else if (byte_fallback_) {
      for (unsigned char b : ch) symbols.push_back(byte_token(b));
      last_unknown = false;
    } else if (unk_id_) {
      if (!(fuse_unk_ && last_unknown)) symbols.push_back(id_to_token_[*unk_id_]);
      last_unknown = true;
    } else {
      throw std::invalid_argument("tokenizer: the character '" + ch + "' is not in the vocabulary, which has no unk_token and no byte fallback");
    }
  }
  merges_.apply(symbols);
  for (const auto& s : symbols) out.push_back(vocab_.at(s));
}

std::string SentencePieceBpe::decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || id_to_token_[id].empty())
      throw std::out_of_range("token id " + std::to_string(id) + " is not in the vocabulary");
    tokens.push_back(id_to_token_[id]);
  }
  for (const auto& step : decoder_) {
    switch (step.kind) {
      case DecodeStep::kReplace:
        for (auto& t : tokens) t = replace_all(std::move(t), step.from, step.to);
        break;
      case DecodeStep::kByteFallback: {
        // Runs of byte tokens become their UTF-8 text, or one U+FFFD per byte when invalid.
        std::vector<std::string> joined;
        std::string bytes;
        size_t count = 0;
        auto flush = [&] {
          if (count == 0) return;
          if (valid_utf8(bytes)) joined.push_back(bytes);
          else for (size_t k = 0; k < count; ++k) joined.push_back("\xEF\xBF\xBD");
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
        break;
      }
      case DecodeStep::kFuse: {
        std::string all;
        for (const auto& t : tokens) all += t;
        tokens = {all};
        break;
      }
      case DecodeStep::kStrip:
        for (auto& t : tokens) {
          size_t a = 0, b = t.size();
          while (a < step.strip_start && a < b && t[a] == ' ') ++a;
          while (t.size() - b < step.strip_stop && b > a && t[b - 1] == ' ') --b;
          t = t.substr(a, b - a);
        }
        break;
      case DecodeStep::kMetaspace:
        for (size_t i = 0; i < tokens.size(); ++i) {
          tokens[i] = replace_all(std::move(tokens[i]), step.from, " ");
          if (i == 0 && step.strip_first && !tokens[i].empty() && tokens[i][0] == ' ') tokens[i].erase(0, 1);
        }
        break;
    }
  }
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace zoo::text
