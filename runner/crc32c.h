// CRC32C (Castagnoli), incremental. Used for TensorBoard record framing and
// checkpoint checksums. Defines: crc32c_extend.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zoo {

// The CRC32C of (data seen so far, then `data`), where `crc` is the CRC32C of
// the data seen so far (0 for none). crc32c_extend(0, "123456789", 9) == 0xE3069283.
uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size);

}  // namespace zoo
