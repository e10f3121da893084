// Implementation of runner/checkpoint/crc32c.h on ISA-L, whose crc32_iscsi is CRC32C
// without the initial and final inversions.
#include "runner/checkpoint/crc32c.h"

#include <isa-l/crc.h>

#include <array>

namespace zoo {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(size), ~crc);
}

namespace {

// A linear map on the 32-bit CRC register over GF(2): column i is the image of bit i.
using Gf2Matrix = std::array<uint32_t, 32>;

uint32_t apply(const Gf2Matrix& m, uint32_t v) {
  uint32_t out = 0;
  for (int i = 0; v != 0; ++i, v >>= 1)
    if (v & 1) out ^= m[i];
  return out;
}

Gf2Matrix compose(const Gf2Matrix& outer, const Gf2Matrix& inner) {
  Gf2Matrix out;
  for (int i = 0; i < 32; ++i) out[i] = apply(outer, inner[i]);
  return out;
}

// appends[k]: what feeding 2^k zero bytes does to the (reflected) register.
// Appending zeros to A moves CRC(A) to where CRC(A then B) starts from B's
// point of view; CRC(B) adds the rest (the pre/post inversions cancel).
const std::array<Gf2Matrix, 64>& zero_byte_operators() {
  static const std::array<Gf2Matrix, 64> ops = [] {
    Gf2Matrix bit{};  // one zero bit: shift right, fold the polynomial in when bit 0 falls out
    bit[0] = 0x82F63B78u;
    for (int i = 1; i < 32; ++i) bit[i] = uint32_t{1} << (i - 1);
    Gf2Matrix byte = compose(bit, bit);
    byte = compose(byte, byte);
    byte = compose(byte, byte);  // 8 bits
    std::array<Gf2Matrix, 64> out;
    out[0] = byte;
    for (size_t k = 1; k < out.size(); ++k) out[k] = compose(out[k - 1], out[k - 1]);
    return out;
  }();
  return ops;
}

}  // namespace

uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b) {
  const auto& ops = zero_byte_operators();
  for (int k = 0; size_b != 0; ++k, size_b >>= 1)
    if (size_b & 1) crc_a = apply(ops[k], crc_a);
  return crc_a ^ crc_b;
}

}  // namespace zoo
