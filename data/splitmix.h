// splitmix64: a small, fast generator whose stream is fixed by its seed on
// every platform and library (unlike std:: distributions), for data that must
// be the same everywhere: the built-in corpus, synthetic tokens, BERT masks.
// Defines: SplitMix64.
#pragma once

#include <cstdint>

namespace zoo::data {

struct SplitMix64 {
  uint64_t state;
  // The finalizer alone: a well-mixed hash of z.
  static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  uint64_t next() { return mix(state += 0x9E3779B97F4A7C15ull); }
  uint64_t below(uint64_t n) { return next() % n; }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // in [0, 1)
};

}  // namespace zoo::data
