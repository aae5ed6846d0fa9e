#include "engine/base/crc32c.h"

#include <isa-l.h>

namespace cowkv {

uint32_t Crc32c(const void* data, size_t n) {
  // ISA-L's crc32_iscsi neither pre- nor post-inverts; doing both gives the
  // standard crc32c value.
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)),
                      static_cast<int>(n), 0xFFFFFFFFu);
}

uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n) {
  return ~crc32_iscsi(static_cast<unsigned char*>(const_cast<void*>(data)), static_cast<int>(n),
                      ~crc);
}

}  // namespace cowkv
