// Implementation of runner/crc32c.h on ISA-L, whose crc32_iscsi is CRC32C
// without the initial and final inversions.
#include "runner/crc32c.h"

#include <isa-l/crc.h>

namespace zoo {

uint32_t crc32c_extend(uint32_t crc, const void* data, size_t size) {
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(size), ~crc);
}

}  // namespace zoo
