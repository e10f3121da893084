// zoo's built-in training text: a deterministic, generated corpus of short
// English-like sentences about a small world (people, places, objects,
// counting and simple sums), written so that a small byte-level model can
// learn its spelling, grammar and arithmetic patterns in minutes.
// Defines: generate_corpus, write_corpus.
#pragma once

#include <cstdint>
#include <string>

namespace zoo::data {

// About `num_bytes` of text (whole sentences, one story per line), fixed by `seed`.
std::string generate_corpus(uint64_t seed, int64_t num_bytes);

// Writes <dir>/train/corpus.txt and <dir>/eval/corpus.txt (different seeds).
// Returns false and leaves existing files alone when both already exist.
bool write_corpus(const std::string& dir, int64_t train_bytes, int64_t eval_bytes);

}  // namespace zoo::data
