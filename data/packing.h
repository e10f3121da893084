// Rows that pack several sequences, in modelzoo's variable-sequence-length
// (VSL) layout: per token, attention_span (tokens after it in its sequence)
// and position_ids (tokens before it), both 0 at padding, so that each
// sequence attends only within itself. Defines: packed_row_problem,
// best_fit_decreasing.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zoo::data {

// "" when span/positions (T each) describe sequences that tile the row: each
// starts at position 0, counts up by one while the previous token's span is
// above 0, its span counting down to 0 at its last token, none running past
// the row (but the last by one token: modelzoo shifts a whole packed row
// once, cutting its last sequence's last token). Otherwise what is wrong and where ("position_ids 3 at column 7
// does not restart at 0 after a sequence ended at column 6").
std::string packed_row_problem(const int32_t* attention_span, const int32_t* position_ids, int64_t T);

// Packs items of the given sizes (each 1 .. capacity) into as few bins of
// `capacity` as best-fit decreasing finds: largest first, each into the
// fullest bin it fits in, a new bin when none has room. Returns each bin's
// items (indices into sizes) in the order placed; deterministic.
std::vector<std::vector<size_t>> best_fit_decreasing(const std::vector<int64_t>& sizes, int64_t capacity);

}  // namespace zoo::data
