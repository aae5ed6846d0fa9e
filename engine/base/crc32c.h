// crc32c (Castagnoli), the checksum of every node and superblock.
//
// Computed with ISA-L's crc32_iscsi (libisal-dev). Value convention is the
// standard one: Crc32c("123456789") == 0xE3069283.
#ifndef COWKV_ENGINE_BASE_CRC32C_H_
#define COWKV_ENGINE_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace cowkv {

uint32_t Crc32c(const void* data, size_t n);
// The crc32c of (what `crc` was computed over) followed by data[0, n):
// Crc32cExtend(Crc32c(a), b) == Crc32c(a ‖ b); Crc32cExtend(0, b) == Crc32c(b).
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);

}  // namespace cowkv

#endif  // COWKV_ENGINE_BASE_CRC32C_H_
