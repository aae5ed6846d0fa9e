// A self-validating sector: the header the superblock and the log root block
// share, sealed and opened in one place.
//
// Both are one sector (the superblock kSuperblockSize bytes, a log root block
// the device's sectorsize) that carries its own checksum and names its kind:
//
//   [0, 4)     u32 crc32c of [4, size)        (kSbCsumOff, kLogCsumOff)
//   [4, 8)     u32 of the kind's own          (csum type; log flags)
//   [8, 16)    u64 magic naming the kind      (kSbMagicOff, kLogMagicOff)
//   [16, size) the kind's fields (layout.h)
//
// Invariants:
//  1. SealSector is the last write to an encoded sector: it stores the magic,
//     then the checksum over every other byte.
//  2. OpenSector checks size, then magic, then checksum, so the first failure
//     names the likeliest cause (a short read, a block of another kind or
//     never written, a torn or damaged one). Every failure is DATA_LOSS built
//     by CorruptionError with the caller's site.
//  3. A sector that opens has verified only these three facts; the caller's
//     decoder checks its fields (superblock.cc, log/log_format.cc).
// docs/format.md ("Superblock", "Log") has the byte layouts. Pure functions:
// safe from any thread.
#ifndef COWKV_ENGINE_FORMAT_SECTOR_H_
#define COWKV_ENGINE_FORMAT_SECTOR_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"

namespace cowkv {
namespace format {

inline constexpr size_t kSectorCsumOff = 0;
inline constexpr size_t kSectorMagicOff = 8;
inline constexpr size_t kSectorHeaderSize = 16;
static_assert(kSbCsumOff == kSectorCsumOff && kSbMagicOff == kSectorMagicOff,
              "the superblock is a sealed sector");
static_assert(kLogCsumOff == kSectorCsumOff && kLogMagicOff == kSectorMagicOff,
              "the log root block is a sealed sector");
static_assert(kSuperblockSize >= kSectorHeaderSize && kLogHeaderSize >= kSectorHeaderSize,
              "both headers hold the sector header");

// One kind of sealed sector: its magic and the sizes it may have.
struct SectorKind {
  uint64_t magic = 0;
  size_t min_size = kSectorHeaderSize;
  size_t max_size = kSectorHeaderSize;
};

inline constexpr SectorKind kSuperblockSector{kSuperMagic, kSuperblockSize, kSuperblockSize};
// A log root block fills one sector of the device: any size that holds its
// header (the encoder checks the sectorsize, the reader reads one sector).
inline constexpr SectorKind kLogRootSector{kLogMagic, kLogHeaderSize, SIZE_MAX};

// Writes `kind`'s magic and then the checksum into `sector`, whose other
// bytes the caller has encoded. CHECKs the size: an encoder bug.
void SealSector(const SectorKind& kind, std::string* sector);

// OK when `data` has a size `kind` allows, its magic and a checksum that
// verifies; otherwise DATA_LOSS through CorruptionError at `site` (the
// reasons: "short <what>" or "long <what>", "bad magic", "checksum mismatch").
absl::Status OpenSector(const SectorKind& kind, absl::string_view data, const CorruptionSite& site);

// The same three checks for a caller that words its own error (the log's
// chain walk, where a block that does not open is the chain's end): "" when
// the sector opens, else "short sector", "long sector", "bad magic" or
// "checksum mismatch".
std::string SectorProblem(const SectorKind& kind, absl::string_view data);

}  // namespace format
}  // namespace cowkv

#endif  // COWKV_ENGINE_FORMAT_SECTOR_H_
