// CRC32C (Castagnoli), incremental. Used for TensorBoard record framing and
// checkpoint checksums. Defines: crc32c_extend, crc32c_combine.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zoo {

// The CRC32C of (data seen so far, then `data`), where `crc` is the CRC32C of
// the data seen so far (0 for none). crc32c_extend(0, "123456789", 9) == 0xE3069283.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

// The CRC32C of A then B from crc_a = CRC32C(A), crc_b = CRC32C(B) and B's
// length, so the pieces of a long input can be summed on several threads.
uint32_t crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t size_b);

}  // namespace zoo
