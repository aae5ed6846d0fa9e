// On-device layout constants: where things are and how big they are.
//
// docs/format.md describes the same numbers byte by byte, and
// //docs:format_doc_test parses its tables and compares them with these
// constants, so the document cannot drift from the code.
#ifndef COWKV_ENGINE_FORMAT_LAYOUT_H_
#define COWKV_ENGINE_FORMAT_LAYOUT_H_

#include <cstddef>
#include <cstdint>

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
inline constexpr size_t kSbLogRootOff = 104;       // u64 (0 = no log)
inline constexpr size_t kSbLogRootTransidOff = 112;// u64
inline constexpr size_t kSbLogRootLevelOff = 120;  // u8 (+7 pad)
inline constexpr size_t kSbNextTreeIdOff = 128;    // u64
inline constexpr size_t kSbFormatVersionOff = 136; // u64
inline constexpr size_t kSbUsedSize = 144;         // bytes [144, 4096) are zero

// ---- Reserved device ranges ---------------------------------------------------
// [0, 1 MiB) holds the primary superblock; each mirror reserves 1 MiB starting
// at its offset. The allocator never hands these out.
inline constexpr uint64_t kReservedHead = 1ull << 20;
inline constexpr uint64_t kMirrorReserve = 1ull << 20;
// Smallest device mkfs accepts.
inline constexpr uint64_t kMinDeviceSize = 16ull << 20;

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
inline constexpr size_t kMaxKeySize = 1024;
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
  return MaxLeafItemSize(nodesize) - kSlotSize - kMaxKeySize;
}
// Largest internal item: slot + maximum key + child pointer.
inline constexpr size_t kMaxInternalItemSize = kSlotSize + kMaxKeySize + kChildPtrSize;

constexpr bool ValidNodesize(uint32_t n) {
  return n >= 4096 && n <= 65536 && (n & (n - 1)) == 0;
}

// ---- Well-known tree ids --------------------------------------------------------
inline constexpr uint64_t kRootTreeId = 1;
inline constexpr uint64_t kExtentTreeId = 2;
inline constexpr uint64_t kDefaultTreeId = 5;
inline constexpr uint64_t kFirstFreeTreeId = 256;

}  // namespace format
}  // namespace cowkv

#endif  // COWKV_ENGINE_FORMAT_LAYOUT_H_
