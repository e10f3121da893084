// Pairwise BPE merging, shared by the byte-level and the SentencePiece-style
// tokenizers. Defines: BpeMerges.
#pragma once

#include <climits>
#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace zoo::text {

class BpeMerges {
 public:
  // Merges are added in rank order: the first added merges first.
  void add(const std::string& left, const std::string& right) {
    rank_.emplace(key(left, right), static_cast<int32_t>(rank_.size()));
  }
  size_t size() const { return rank_.size(); }

  // Joins adjacent symbols by rank until no adjacent pair has one: always
  // the pair of lowest rank, the leftmost of equal ones, as Hugging Face's
  // tokenizers do it (a heap of (rank, position); O(n log n), so a whole
  // document as one word is fine).
  void apply(std::vector<std::string>& word) const {
    const int n = static_cast<int>(word.size());
    if (n < 2) return;
    std::vector<int> prev(n), next(n);
    for (int i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1 < n ? i + 1 : -1;
    using Entry = std::pair<int32_t, int>;  // (rank, position of the left symbol)
    std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
    auto push = [&](int i) {
      if (i < 0 || next[i] < 0) return;
      if (auto it = rank_.find(key(word[i], word[next[i]])); it != rank_.end()) heap.emplace(it->second, i);
    };
    for (int i = 0; i + 1 < n; ++i) push(i);
    std::vector<bool> gone(n, false);
    while (!heap.empty()) {
      const auto [rank, i] = heap.top();
      heap.pop();
      if (gone[i] || next[i] < 0) continue;
      const auto it = rank_.find(key(word[i], word[next[i]]));
      if (it == rank_.end() || it->second != rank) continue;  // the pair changed since it was queued
      const int j = next[i];
      word[i] += word[j];
      gone[j] = true;
      next[i] = next[j];
      if (next[j] >= 0) prev[next[j]] = i;
      push(prev[i]);
      push(i);
    }
    std::vector<std::string> merged;
    for (int i = 0; i >= 0; i = next[i]) merged.push_back(std::move(word[i]));
    word = std::move(merged);
  }

 private:
  // NUL never occurs inside a token's text (byte-level text maps it to a
  // printable character; SentencePiece vocabularies spell it <0x00>).
  static std::string key(const std::string& left, const std::string& right) {
    std::string k;
    k.reserve(left.size() + right.size() + 1);
    k.append(left).push_back('\0');
    k.append(right);
    return k;
  }
  std::unordered_map<std::string, int32_t> rank_;
};

}  // namespace zoo::text
