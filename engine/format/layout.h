// On-device layout constants: where things are and how big they are.
//
// docs/format.md describes the same numbers byte by byte, and
// //docs:format_doc_test parses its tables and compares them with these
// constants, so the document cannot drift from the code.
#ifndef COWKV_ENGINE_FORMAT_LAYOUT_H_
#define COWKV_ENGINE_FORMAT_LAYOUT_H_

#include <cstddef>
#include <cstdint>

#include "cowkv/limits.h"

namespace cowkv {
namespace format {

// ---- Superblock -------------------------------------------------------------
inline constexpr uint64_t kSuperblockOffsets[] = {64ull << 10, 64ull << 20,
                                                  256ull << 30};
inline constexpr int kNumSuperblockMirrors = 3;
inline constexpr size_t kSuperblockSize = 4096;
inline constexpr uint64_t kSuperMagic = 0x4d5f564b574f435full;  // "_COWKV_M"
inline constexpr uint32_t kCsumTypeCrc32c = 1;
inline constexpr uint64_t kFormatVersion = 1;

// Superblock field offsets (all integers little-endian).
inline constexpr size_t kSbCsumOff = 0;            // u32 crc32c of [4, 4096)
inline constexpr size_t kSbCsumTypeOff = 4;        // u32
inline constexpr size_t kSbMagicOff = 8;           // u64
inline constexpr size_t kSbFsidOff = 16;           // 16 bytes
inline constexpr size_t kSbBytenrOff = 32;         // u64, this copy's offset
inline constexpr size_t kSbFlagsOff = 40;          // u64
inline constexpr size_t kSbGenerationOff = 48;     // u64
inline constexpr size_t kSbRootOff = 56;           // u64 root tree bytenr
inline constexpr size_t kSbRootGenerationOff = 64; // u64
inline constexpr size_t kSbRootLevelOff = 72;      // u8 (+7 pad)
inline constexpr size_t kSbTotalBytesOff = 80;     // u64
inline constexpr size_t kSbBytesUsedOff = 88;      // u64
inline constexpr size_t kSbNodesizeOff = 96;       // u32
inline constexpr size_t kSbSectorsizeOff = 100;    // u32
inline constexpr size_t kSbLogRootOff = 104;       // u64 first log root block (0 = no log)
inline constexpr size_t kSbLogNonceOff = 112;      // u64 the log chain's nonce
inline constexpr size_t kSbLogRootLevelOff = 120;  // u8 zero (+7 pad)
inline constexpr size_t kSbNextTreeIdOff = 128;    // u64
inline constexpr size_t kSbFormatVersionOff = 136; // u64
inline constexpr size_t kSbRevisionOff = 144;      // u64 KV revision at this commit
inline constexpr size_t kSbUsedSize = 152;         // bytes [152, 4096) are zero

// ---- Reserved device ranges ---------------------------------------------------
// [0, 1 MiB) holds the primary superblock; each mirror reserves 1 MiB starting
// at its offset. The allocator never hands these out.
inline constexpr uint64_t kReservedHead = 1ull << 20;
inline constexpr uint64_t kMirrorReserve = 1ull << 20;

// ---- Nodes --------------------------------------------------------------------
inline constexpr size_t kNodeHeaderSize = 64;
inline constexpr size_t kNodeCsumOff = 0;        // u32 crc32c of [4, nodesize)
inline constexpr size_t kNodeFlagsOff = 4;       // u32, zero
inline constexpr size_t kNodeFsidOff = 8;        // 16 bytes
inline constexpr size_t kNodeBytenrOff = 24;     // u64
inline constexpr size_t kNodeGenerationOff = 32; // u64
inline constexpr size_t kNodeOwnerOff = 40;      // u64 tree id
inline constexpr size_t kNodeNritemsOff = 48;    // u32
inline constexpr size_t kNodeLevelOff = 52;      // u8 (+11 reserved zero)

// Slot: u16 data offset, u16 key length, u16 value length, u16 zero.
inline constexpr size_t kSlotSize = 8;
// An internal node's item value: u64 child bytenr, u64 child generation.
inline constexpr size_t kChildPtrSize = 16;
inline constexpr int kMaxLevel = 16;
// Tree keys: a user key of up to 1024 bytes plus a namespace prefix of up
// to 8 bytes (kv/ and fs/ key spaces inside one subvolume tree).
inline constexpr size_t kMaxTreeKeySize = 1032;
static_assert(kMaxTreeKeySize >= ::cowkv::kMaxKeySize + 8, "a prefixed user key fits");
inline constexpr size_t kFsidSize = 16;

// Bytes of a node available to slots and item data.
constexpr size_t NodeCapacity(uint32_t nodesize) {
  return nodesize - kNodeHeaderSize;
}
// Largest leaf item (slot + key + value): half the capacity, which guarantees
// that an overflowing leaf always splits into two nodes that fit.
constexpr size_t MaxLeafItemSize(uint32_t nodesize) {
  return NodeCapacity(nodesize) / 2;
}
// Largest value stored inline, whatever the key length (a maximum-size key
// plus this value still fits MaxLeafItemSize).
constexpr size_t MaxInlineValue(uint32_t nodesize) {
  return MaxLeafItemSize(nodesize) - kSlotSize - kMaxTreeKeySize;
}
// Largest internal item: slot + maximum key + child pointer.
inline constexpr size_t kMaxInternalItemSize = kSlotSize + kMaxTreeKeySize + kChildPtrSize;

constexpr bool ValidNodesize(uint32_t n) {
  return n >= 4096 && n <= 65536 && (n & (n - 1)) == 0;
}

// ---- Well-known tree ids --------------------------------------------------------
inline constexpr uint64_t kRootTreeId = 1;
inline constexpr uint64_t kExtentTreeId = 2;
inline constexpr uint64_t kDefaultTreeId = 5;
inline constexpr uint64_t kFirstFreeTreeId = 256;
// Owner of every log tree node (btrfs's TREE_LOG_OBJECTID, -6).
inline constexpr uint64_t kLogTreeOwner = ~uint64_t{5};

// ---- Log root block -----------------------------------------------------------
// One sector at a nodesize-aligned bytenr, self-validating (see
// docs/format.md "Log"). All integers little-endian.
inline constexpr uint64_t kLogMagic = 0x4c5f564b574f435full;  // "_COWKV_L"
inline constexpr size_t kLogCsumOff = 0;        // u32 crc32c of [4, sectorsize)
inline constexpr size_t kLogFlagsOff = 4;       // u32 zero
inline constexpr size_t kLogMagicOff = 8;       // u64
inline constexpr size_t kLogFsidOff = 16;       // 16 bytes
inline constexpr size_t kLogBytenrOff = 32;     // u64 where this block is
inline constexpr size_t kLogNonceOff = 40;      // u64 = superblock log_nonce
inline constexpr size_t kLogBaseGenOff = 48;    // u64 = superblock generation
inline constexpr size_t kLogSeqOff = 56;        // u64 0, 1, 2, ... along the chain
inline constexpr size_t kLogNextOff = 64;       // u64 where block seq+1 goes
inline constexpr size_t kLogRevisionOff = 72;   // u64 KV revision the log reaches
inline constexpr size_t kLogNtreesOff = 80;     // u32 log trees listed
inline constexpr size_t kLogNentriesOff = 84;   // u32 entries inline in this block
inline constexpr size_t kLogHeaderSize = 88;
// One entry per log tree: u64 subvolume id, u64 root bytenr, u64 root
// generation, u8 root level (+7 pad).
inline constexpr size_t kLogEntrySize = 32;
// An inline entry: u64 subvolume id, u16 key length, u32 value length (0 =
// the key was deleted), then the key and the value.
inline constexpr size_t kLogInlineHeaderSize = 14;

}  // namespace format
}  // namespace cowkv

#endif  // COWKV_ENGINE_FORMAT_LAYOUT_H_
