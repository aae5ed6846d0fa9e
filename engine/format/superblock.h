// Superblock: the root of everything on the device.
//
// Written at kSuperblockOffsets[i] for every mirror that fits on the device,
// after the nodes it points to are flushed. Mount reads every copy and uses
// the newest one whose checksum verifies and whose root node verifies. The
// byte layout is in layout.h and docs/format.md.
#ifndef COWKV_ENGINE_FORMAT_SUPERBLOCK_H_
#define COWKV_ENGINE_FORMAT_SUPERBLOCK_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace format {

struct Superblock {
  std::string fsid;  // kFsidSize bytes
  uint64_t bytenr = 0;
  uint64_t flags = 0;
  uint64_t generation = 0;
  uint64_t root = 0;
  uint64_t root_generation = 0;
  uint8_t root_level = 0;
  uint64_t total_bytes = 0;
  uint64_t bytes_used = 0;
  uint32_t nodesize = 0;
  uint32_t sectorsize = 0;
  uint64_t log_root = 0;   // first log root block of the chain (0 = none)
  uint64_t log_nonce = 0;  // random per chain; log blocks must repeat it
  uint64_t next_tree_id = 0;
  uint64_t revision = 0;   // KV revision when this generation was sealed
};

// Encodes into exactly kSuperblockSize bytes, checksum included.
std::string EncodeSuperblock(const Superblock& sb);

// Decodes and verifies one copy read from `expected_bytenr`: size, checksum,
// magic, csum type, format version, bytenr, nodesize/sectorsize sanity, root
// alignment and range. Any failure is DATA_LOSS with the reason.
absl::StatusOr<Superblock> DecodeSuperblock(absl::string_view data,
                                            uint64_t expected_bytenr);

// Number of superblock mirrors that fit on a device of `device_size` bytes.
int MirrorCount(uint64_t device_size);

}  // namespace format
}  // namespace cowkv

#endif  // COWKV_ENGINE_FORMAT_SUPERBLOCK_H_
