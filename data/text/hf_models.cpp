// tokenizer.json models (data/text/hf_components.h): BPE (merges by rank,
// ignore_merges, byte_fallback, unk fusing, continuing_subword_prefix,
// end_of_word_suffix), WordPiece, WordLevel and Unigram (Viterbi over the
// pieces' log probabilities), each as the tokenizers library applies it.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <limits>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <stdexcept>

#include "data/text/hf_components.h"
#include "data/text/tokenizer_json.h"
#include "data/text/unicode.h"

namespace zoo::text::hf {
namespace {

using json = nlohmann::json;

size_t char_length(const std::string& s, size_t pos) {
  size_t len = 0;
  next_code_point(s, pos, len);
  return len;
}

int32_t id_in(const std::unordered_map<std::string, int32_t>& vocab, const std::string& token, const std::string& where,
              const char* key) {
  const auto it = vocab.find(token);
  if (it == vocab.end())
    throw std::invalid_argument(where + "." + key + ": \"" + token + "\" is not in the vocabulary");
  return it->second;
}

class Bpe : public Model {
 public:
  Bpe(const json& node, const std::string& where) {
    vocab_ = read_vocab(node.value("vocab", json()), where + ".vocab");
    prefix_ = string_or(node, "continuing_subword_prefix", "", where);
    suffix_ = string_or(node, "end_of_word_suffix", "", where);
    ignore_merges_ = bool_or(node, "ignore_merges", false, where);
    byte_fallback_ = bool_or(node, "byte_fallback", false, where);
    fuse_unk_ = bool_or(node, "fuse_unk", false, where);
    if (node.contains("dropout") && !node["dropout"].is_null() && node["dropout"] != 0.0)
      throw std::invalid_argument(where +
                                  ".dropout: BPE dropout makes tokenization random; expected null for preparing data");
    const std::string unk = string_or(node, "unk_token", "", where);
    if (!unk.empty()) unk_ = id_in(vocab_, unk, where, "unk_token");
    const auto merges = read_merges(node.value("merges", json::array()), where + ".merges");
    merges_.reserve(merges.size());
    for (const auto& [left, right] : merges) {
      const std::string at = where + ".merges[" + std::to_string(merges_.size()) + "]";
      const int32_t a = id_in(vocab_, left, at, "left"), b = id_in(vocab_, right, at, "right");
      const std::string joined = left + right.substr(std::min(prefix_.size(), right.size()));
      const auto it = vocab_.find(joined);
      if (it == vocab_.end())
        throw std::invalid_argument(at + ": merge [\"" + left + "\", \"" + right + "\"] makes \"" + joined +
                                    "\", which is not in the vocabulary");
      merges_.emplace(pair_key(a, b), Merge{static_cast<int32_t>(merges_.size()), it->second});
    }
  }

  void encode(const std::string& piece, std::vector<int32_t>& out) const override {
    if (ignore_merges_)
      if (const auto it = vocab_.find(piece); it != vocab_.end()) return out.push_back(it->second);
    {
      std::lock_guard<std::mutex> lock(cache_mutex_);
      if (const auto it = cache_.find(piece); it != cache_.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        return;
      }
    }
    std::vector<int32_t> ids = symbols(piece);
    merge(ids);
    out.insert(out.end(), ids.begin(), ids.end());
    if (piece.size() > 256) return;  // words repeat; whole lines (no pre-tokenizer) seldom do
    std::lock_guard<std::mutex> lock(cache_mutex_);
    if (cache_.size() > (1u << 18)) cache_.clear();  // bounded memory on huge, varied corpora
    cache_.emplace(piece, std::move(ids));
  }

 private:
  struct Merge {
    int32_t rank, id;
  };
  static uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(a) << 32) | static_cast<uint32_t>(b); }

  // One symbol per character (with the prefix after the first, the suffix on the last), bytes or unk where the
  // vocabulary lacks the character.
  std::vector<int32_t> symbols(const std::string& word) const {
    std::vector<int32_t> ids;
    std::optional<int32_t> pending_unk;
    for (size_t pos = 0; pos < word.size();) {
      const size_t len = char_length(word, pos);
      std::string s = word.substr(pos, len);
      if (pos > 0) s.insert(0, prefix_);
      pos += len;
      if (pos == word.size()) s += suffix_;
      if (const auto it = vocab_.find(s); it != vocab_.end()) {
        if (pending_unk) ids.push_back(*pending_unk), pending_unk.reset();
        ids.push_back(it->second);
        continue;
      }
      if (byte_fallback_) {
        std::vector<int32_t> bytes;
        for (unsigned char b : s)
          if (const auto it = vocab_.find(byte_token(b)); it != vocab_.end()) bytes.push_back(it->second);
        if (bytes.size() == s.size()) {
          ids.insert(ids.end(), bytes.begin(), bytes.end());
          continue;
        }
      }
      if (!unk_)
        throw std::invalid_argument("tokenizer: the character '" + word.substr(pos - len, len) +
                                    "' is not in the vocabulary, which has no unk_token and no byte fallback");
      if (pending_unk && !fuse_unk_) ids.push_back(*pending_unk);
      pending_unk = *unk_;
    }
    if (pending_unk) ids.push_back(*pending_unk);
    return ids;
  }

  // Joins adjacent symbols by rank until no adjacent pair has one: always the pair of lowest rank, the leftmost of
  // equal ones (a heap of (rank, position): O(n log n), so a whole document as one word is fine).
  void merge(std::vector<int32_t>& word) const {
    const int n = static_cast<int>(word.size());
    if (n < 2) return;
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
    using Entry = std::pair<int32_t, int>;  // (rank, position of the left symbol)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto rank_at = [&](int i) -> const Merge* {
      if (i < 0 || next[i] < 0) return nullptr;
      const auto it = merges_.find(pair_key(word[i], word[next[i]]));
      return it == merges_.end() ? nullptr : &it->second;
    };
    auto push = [&](int i) {
      if (const Merge* m = rank_at(i)) heap.emplace(m->rank, i);
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    std::vector<bool> gone(n, false);
    while (!heap.empty()) {
      const auto [rank, i] = heap.top();
      heap.pop();
      if (gone[i]) continue;
      const Merge* m = rank_at(i);
      if (!m || m->rank != rank) continue;  // the pair changed since it was queued
      const int j = next[i];
      word[i] = m->id;
      gone[j] = true;
      next[i] = next[j];
      if (next[j] >= 0) prev[next[j]] = i;
      push(prev[i]);
      push(i);
    }
    std::vector<int32_t> merged;
    for (int i = 0; i >= 0; i = next[i]) merged.push_back(word[i]);
    word = std::move(merged);
  }

  std::unordered_map<uint64_t, Merge> merges_;
  std::string prefix_, suffix_;
  bool ignore_merges_ = false, byte_fallback_ = false, fuse_unk_ = false;
  std::optional<int32_t> unk_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

// Greedy longest match from the left; "##" marks a piece inside a word.
class WordPiece : public Model {
 public:
  WordPiece(const json& node, const std::string& where) {
    vocab_ = read_vocab(node.value("vocab", json()), where + ".vocab");
    unk_ = id_in(vocab_, string_or(node, "unk_token", "[UNK]", where), where, "unk_token");
    prefix_ = string_or(node, "continuing_subword_prefix", "##", where);
    max_chars_ = int_or(node, "max_input_chars_per_word", 100, where);
  }
  void encode(const std::string& word, std::vector<int32_t>& out) const override {
    int64_t chars = 0;
    for (size_t pos = 0; pos < word.size(); pos += char_length(word, pos)) ++chars;
    if (chars > max_chars_) return out.push_back(unk_);
    std::vector<int32_t> pieces;
    for (size_t start = 0; start < word.size();) {
      std::optional<int32_t> found;
      size_t end = word.size();
      while (start < end) {
        std::string sub = word.substr(start, end - start);
        if (start > 0) sub.insert(0, prefix_);
        if (const auto it = vocab_.find(sub); it != vocab_.end()) {
          found = it->second;
          break;
        }
        do --end;  // back one character
        while (end > start && (static_cast<unsigned char>(word[end]) >> 6) == 2);
      }
      if (!found) return out.push_back(unk_);
      pieces.push_back(*found);
      start = end;
    }
    out.insert(out.end(), pieces.begin(), pieces.end());
  }

 private:
  int32_t unk_ = 0;
  std::string prefix_;
  int64_t max_chars_ = 100;
};

class WordLevel : public Model {
 public:
  WordLevel(const json& node, const std::string& where) {
    vocab_ = read_vocab(node.value("vocab", json()), where + ".vocab");
    const std::string unk = string_or(node, "unk_token", "", where);
    if (!unk.empty()) unk_ = id_in(vocab_, unk, where, "unk_token");
  }
  void encode(const std::string& word, std::vector<int32_t>& out) const override {
    if (const auto it = vocab_.find(word); it != vocab_.end()) return out.push_back(it->second);
    if (!unk_)
      throw std::invalid_argument("tokenizer: the word '" + word +
                                  "' is not in the vocabulary, which has no unk_token");
    out.push_back(*unk_);
  }

 private:
  std::optional<int32_t> unk_;
};

// The pieces' scores are log probabilities; the best segmentation maximizes their sum. A character no piece covers
// becomes unk, scored 10 below the lowest piece (the library's penalty).
class Unigram : public Model {
 public:
  Unigram(const json& node, const std::string& where) {
    const json& vocab = node.value("vocab", json());
    if (!vocab.is_array()) throw std::invalid_argument(where + ".vocab: expected a list of [piece, score]");
    for (const auto& entry : vocab) {
      const std::string at = where + ".vocab[" + std::to_string(scores_.size()) + "]";
      if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
        throw std::invalid_argument(at + ": expected [piece, score], got " + entry.dump().substr(0, 200));
      const int32_t id = static_cast<int32_t>(scores_.size());
      const std::string piece = entry[0].get<std::string>();
      vocab_.emplace(piece, id);
      scores_.push_back(entry[1].get<double>());
      max_piece_bytes_ = std::max(max_piece_bytes_, piece.size());
    }
    if (scores_.empty()) throw std::invalid_argument(where + ".vocab: empty");
    const int64_t unk = int_or(node, "unk_id", -1, where);
    if (unk >= static_cast<int64_t>(scores_.size()) ||
        (node.contains("unk_id") && !node["unk_id"].is_null() && unk < 0))
      throw std::invalid_argument(where + ".unk_id: " + std::to_string(unk) + " is not an id of the vocabulary");
    if (unk >= 0) unk_ = static_cast<int32_t>(unk);
    byte_fallback_ = bool_or(node, "byte_fallback", false, where);
    unk_score_ = *std::min_element(scores_.begin(), scores_.end()) - 10.0;
  }

  void encode(const std::string& text, std::vector<int32_t>& out) const override {
    const size_t n = text.size();
    struct Best {
      double score = -std::numeric_limits<double>::infinity();
      size_t from = 0;
      int32_t id = -1;  // -1: unk
      bool reached = false;
    };
    std::vector<Best> best(n + 1);
    best[0].reached = true;
    best[0].score = 0;
    for (size_t start = 0; start < n;) {
      const size_t len = char_length(text, start);
      bool single = false;
      for (size_t end = start + 1; end <= n && end - start <= max_piece_bytes_; ++end) {
        const auto it = vocab_.find(text.substr(start, end - start));
        if (it == vocab_.end()) continue;
        const double candidate = best[start].score + scores_[it->second];
        if (!best[end].reached || candidate > best[end].score) best[end] = {candidate, start, it->second, true};
        single = single || end - start == len;
      }
      if (!single) {
        const double candidate = best[start].score + unk_score_;
        if (!best[start + len].reached || candidate > best[start + len].score)
          best[start + len] = {candidate, start, -1, true};
      }
      start += len;
    }
    std::vector<std::pair<size_t, int32_t>> path;  // (start, id) from the end
    for (size_t at = n; at > 0; at = best[at].from) path.emplace_back(best[at].from, best[at].id);
    std::reverse(path.begin(), path.end());
    // Adjacent unknown stretches fuse into one (the library's default for Unigram).
    for (size_t i = 0; i < path.size(); ++i) {
      if (path[i].second >= 0) {
        out.push_back(path[i].second);
        continue;
      }
      size_t j = i;
      while (j + 1 < path.size() && path[j + 1].second < 0) ++j;
      const size_t end = j + 1 < path.size() ? path[j + 1].first : n;
      emit_unknown(text.substr(path[i].first, end - path[i].first), out);
      i = j;
    }
  }

 private:
  void emit_unknown(const std::string& s, std::vector<int32_t>& out) const {
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      for (unsigned char b : s)
        if (const auto it = vocab_.find(byte_token(b)); it != vocab_.end()) bytes.push_back(it->second);
      if (bytes.size() == s.size()) return out.insert(out.end(), bytes.begin(), bytes.end()), void();
    }
    if (!unk_)
      throw std::invalid_argument("tokenizer: '" + s + "' is not in the Unigram vocabulary, which has no unk_id");
    out.push_back(*unk_);
  }

  std::vector<double> scores_;
  size_t max_piece_bytes_ = 0;
  std::optional<int32_t> unk_;
  bool byte_fallback_ = false;
  double unk_score_ = 0;
};

}  // namespace

std::string byte_token(unsigned char b) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "<0x%02X>", b);
  return buf;
}

int byte_of_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  int value = 0;
  for (size_t i = 3; i < 5; ++i) {
    const char c = t[i];
    const int d = c >= '0' && c <= '9'   ? c - '0'
                  : c >= 'A' && c <= 'F' ? c - 'A' + 10
                  : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                         : -1;
    if (d < 0) return -1;
    value = value * 16 + d;
  }
  return value;
}

std::unique_ptr<Model> make_model(const json& node, const std::string& where) {
  std::string type =
      node.is_object() && !node.contains("type") ? "BPE" : type_of(node, where);  // old files omit BPE's type
  if (type == "BPE") return std::make_unique<Bpe>(node, where);
  if (type == "WordPiece") return std::make_unique<WordPiece>(node, where);
  if (type == "WordLevel") return std::make_unique<WordLevel>(node, where);
  if (type == "Unigram") return std::make_unique<Unigram>(node, where);
  throw std::invalid_argument(where + ".type: zoo does not apply the model type \"" + type +
                              "\" (it applies BPE, WordPiece, WordLevel and Unigram)");
}

}  // namespace zoo::text::hf
