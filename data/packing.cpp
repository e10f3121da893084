// Implementation of data/packing.h.
#include "data/packing.h"

#include <algorithm>
#include <numeric>
#include <set>
#include <stdexcept>
#include <utility>

namespace zoo::data {

std::string packed_row_problem(const int32_t* span, const int32_t* pos, int64_t T) {
  auto at = [](int64_t t) { return " at column " + std::to_string(t); };
  for (int64_t t = 0; t < T; ++t) {
    if (span[t] < 0 || pos[t] < 0)
      return "attention_span " + std::to_string(span[t]) + " / position_ids " + std::to_string(pos[t]) + at(t) +
             ": expected values >= 0";
    // modelzoo shifts a whole row once, cutting the last sequence by a token: its span may end one past the row.
    if (span[t] > T - t)
      return "attention_span " + std::to_string(span[t]) + at(t) + " runs past the row's " + std::to_string(T) +
             " columns";
    const bool continues = t > 0 && span[t - 1] > 0;  // t is in the sequence of t - 1
    if (!continues && pos[t] != 0)
      return "position_ids " + std::to_string(pos[t]) + at(t) + " does not restart at 0 where a sequence begins" +
             (t > 0 ? " (the previous one ended at column " + std::to_string(t - 1) + ")" : std::string());
    if (continues && (pos[t] != pos[t - 1] + 1 || span[t] != span[t - 1] - 1))
      return "attention_span / position_ids " + std::to_string(span[t]) + " / " + std::to_string(pos[t]) + at(t) +
             " do not continue the sequence of column " + std::to_string(t - 1) + " (" + std::to_string(span[t - 1]) +
             " / " + std::to_string(pos[t - 1]) + "): expected " + std::to_string(span[t - 1] - 1) + " / " +
             std::to_string(pos[t - 1] + 1);
  }
  return "";
}

std::vector<std::vector<size_t>> best_fit_decreasing(const std::vector<int64_t>& sizes, int64_t capacity) {
  std::vector<size_t> order(sizes.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return sizes[a] > sizes[b]; });
  std::vector<std::vector<size_t>> bins;
  std::set<std::pair<int64_t, size_t>> room;  // (space left, bin): the fullest bin that fits is the first >= size
  for (size_t i : order) {
    if (sizes[i] < 1 || sizes[i] > capacity)
      throw std::invalid_argument("best_fit_decreasing: an item of size " + std::to_string(sizes[i]) +
                                  " does not fit bins of " + std::to_string(capacity));
    auto it = room.lower_bound({sizes[i], 0});
    size_t bin;
    int64_t left;
    if (it == room.end()) {
      bin = bins.size();
      bins.emplace_back();
      left = capacity;
    } else {
      bin = it->second;
      left = it->first;
      room.erase(it);
    }
    bins[bin].push_back(i);
    if (left - sizes[i] > 0) room.insert({left - sizes[i], bin});
  }
  return bins;
}

}  // namespace zoo::data
