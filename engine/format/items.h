// Item keys and values of the engine's own trees (root tree, extent tree).
//
// Engine trees use btrfs-shaped 17-byte keys: objectid (u64 big-endian, so
// memcmp order is numeric order), type (u8), offset (u64 big-endian).
//
//   root tree:   (tree_id, ROOT_ITEM, 0)              -> RootItem
//   extent tree: (bytenr, EXTENT_ITEM, num_bytes)     -> ExtentItem
//                (bytenr, TREE_BLOCK_REF, root_id)    -> "" (one ref)
//                (bytenr, SHARED_BLOCK_REF, parent)   -> "" (one ref)
//                (bytenr, EXTENT_DATA_REF, root_id)   -> u32 count (leaf items of
//                                                        that tree pointing here)
//                (bytenr, SHARED_DATA_REF, leaf)      -> u32 count (items of that
//                                                        FULL_BACKREF leaf)
//
// The backref items of an extent sort right after its EXTENT_ITEM because
// they share the bytenr prefix. ExtentItem.refs equals the number of tree
// block backref items plus the sum of the data backref counts (check
// verifies it).
#ifndef COWKV_ENGINE_FORMAT_ITEMS_H_
#define COWKV_ENGINE_FORMAT_ITEMS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace format {

inline constexpr size_t kKeySize17 = 17;

enum ItemType : uint8_t {
  kRootItem = 132,
  kSubvolInfo = 140,
  kExtentItem = 168,
  kTreeBlockRef = 176,
  kExtentDataRef = 178,
  kSharedBlockRef = 182,
  kSharedDataRef = 184,
};

inline bool IsDataRef(uint8_t type) { return type == kExtentDataRef || type == kSharedDataRef; }
inline bool IsBackref(uint8_t type) {
  return type == kTreeBlockRef || type == kSharedBlockRef || IsDataRef(type);
}

// A data backref's value: its count (u32, > 0).
std::string EncodeDataRefCount(uint32_t count);
absl::StatusOr<uint32_t> DecodeDataRefCount(absl::string_view v, uint64_t bytenr);

// ---- Data references held by subvolume leaves ----------------------------------
//
// A KV item (tree key 'k' + user key) whose value lives in a data extent:
// the 32-byte KV header with kind 1, then u64 disk_bytenr, u64 disk_len
// (the extent, sector-rounded), u64 value_len, u32 crc32c of the value,
// u32 zero. The refs layer only needs the extent; kv/ owns the rest.
//
// A file extent (tree key 'f' + 17-byte key of type EXTENT_DATA) of kind 1
// (regular): u64 generation, u8 kind, 7 zero bytes, u64 disk_bytenr, u64
// disk_len, u64 offset, u64 num_bytes, u32 crc32c of the whole extent's
// disk_len bytes, u32 zero. fs/ owns the rest. A file extent of kind 2
// (preallocated) has the same layout and crc 0: it refers to its extent
// like a regular one, but its data was never written (value_len 0: no
// bytes to verify).
inline constexpr char kKvKeyPrefix = 'k';
// A KV history entry (tree key 'h' + u56 BE revision + user key) may
// hold a prev KV item in a data extent; kv/history_item.h owns the rest.
inline constexpr char kKvHistoryPrefix = 'h';
inline constexpr size_t kKvHistoryKeyHeader = 8;
inline constexpr uint8_t kKvKindExtent = 1;
inline constexpr size_t kKvExtentItemSize = 64;
inline constexpr size_t kKvExtentBytenrOff = 32;
inline constexpr size_t kKvExtentDiskLenOff = 40;
inline constexpr size_t kKvExtentValueLenOff = 48;
inline constexpr size_t kKvExtentCsumOff = 56;
inline constexpr char kFsKeyPrefix = 'f';
inline constexpr uint8_t kFsExtentDataType = 108;
inline constexpr uint8_t kFsExtentRegular = 1;
inline constexpr uint8_t kFsExtentPrealloc = 2;
inline constexpr size_t kFsExtentItemSize = 56;
inline constexpr size_t kFsExtentKindOff = 8;
inline constexpr size_t kFsExtentBytenrOff = 16;
inline constexpr size_t kFsExtentDiskLenOff = 24;
inline constexpr size_t kFsExtentCsumOff = 48;

struct DataRef {
  uint64_t bytenr = 0;
  uint64_t len = 0;
  // What the data must be (filled by LeafDataRef; not part of identity):
  // the crc covers the first value_len bytes (a KV value's length; a file
  // extent's whole disk_len).
  uint64_t value_len = 0;
  uint32_t crc = 0;
};
// The data extent a leaf item refers to, if any. Items that do not parse
// refer to nothing (readers report them as DATA_LOSS).
bool LeafDataRef(absl::string_view key, absl::string_view value, DataRef* ref);

struct Key17 {
  uint64_t objectid = 0;
  uint8_t type = 0;
  uint64_t offset = 0;
};

std::string EncodeKey17(const Key17& k);
// The same 17 bytes into `out` (no allocation).
void EncodeKey17To(char* out, const Key17& k);
// False when `s` is not exactly 17 bytes.
bool DecodeKey17(absl::string_view s, Key17* k);

// Extent flags.
inline constexpr uint64_t kExtentFlagTreeBlock = 1;
inline constexpr uint64_t kExtentFlagData = 2;
// Tree blocks: this node's pointers to its children are recorded as
// SHARED_BLOCK_REF(this node) rather than TREE_BLOCK_REF(owner) (btrfs's
// BTRFS_BLOCK_FLAG_FULL_BACKREF; docs/design.md "Snapshots and shared blocks").
inline constexpr uint64_t kExtentFlagFullBackref = 256;

// EXTENT_ITEM value: refs u64, generation u64, flags u64, level u8, pad 7.
inline constexpr size_t kExtentItemSize = 32;
inline constexpr size_t kExtentItemFieldBytes = 25;  // the rest is reserved (zero)
struct ExtentItem {
  uint64_t refs = 0;
  uint64_t generation = 0;  // generation that allocated the extent
  uint64_t flags = 0;
  uint8_t level = 0;  // tree blocks: the node's level
};
std::string EncodeExtentItem(const ExtentItem& e);
absl::StatusOr<ExtentItem> DecodeExtentItem(absl::string_view v, uint64_t bytenr);

// ROOT_ITEM value: bytenr u64, generation u64, level u8 + pad 7, flags u64,
// last_snapshot u64, drop_level u8 + pad 7; then, only while a deletion is in
// progress, the drop-progress key bytes (0..1024).
inline constexpr size_t kRootItemSize = 48;
inline constexpr uint64_t kRootFlagReadOnly = 1;
// The subvolume was deleted; the cleaner is dropping its tree.
inline constexpr uint64_t kRootFlagDropping = 2;
// A receive is filling the tree (issue 19): it has no SUBVOL_INFO yet and is
// invisible. Mount keeps one left by a crash if it holds a receive progress
// item (a resumable receive), else drops it.
inline constexpr uint64_t kRootFlagReceiving = 4;
// The receive progress item of a resumable receive's tree (key "R", outside
// every prefix a stream carries or a digest hashes): engine/send's
// EncodeReceiveProgress; docs/format.md "Resume token".
inline constexpr char kReceiveProgressKey[] = "R";
struct RootItem {
  uint64_t bytenr = 0;
  uint64_t generation = 0;
  uint8_t level = 0;
  uint64_t flags = 0;
  uint64_t last_snapshot = 0;
  uint8_t drop_level = 0;
  std::string drop_progress;
};
std::string EncodeRootItem(const RootItem& r);
absl::StatusOr<RootItem> DecodeRootItem(absl::string_view v, uint64_t tree_id);

// SUBVOL_INFO value (root tree, key (tree_id, SUBVOL_INFO, 0)): parent id
// u64, creation time in Unix ms u64, the name (1..255 bytes, no '/' or
// NUL), then NUL and the creation generation u64 (btrfs's otransid, >= 1).
// Items written before the trailer existed end with the name: their
// creation generation is 0 (unknown), and they are rewritten so.
inline constexpr size_t kSubvolInfoFixedSize = 16;
inline constexpr size_t kSubvolInfoOgenSize = 8;
// A received subvolume's trailer goes on: the sender's identity (16 bytes,
// btrfs's received_uuid, never all zero) and its generation there (u64,
// btrfs's stransid, >= 1).
inline constexpr size_t kSubvolInfoReceivedSize = 24;
inline constexpr size_t kMaxSubvolNameSize = 255;
struct SubvolInfoItem {
  uint64_t parent_id = 0;
  uint64_t ctime_ms = 0;
  uint64_t ogen = 0;  // the engine generation that created the subvolume; 0 = unknown
  std::string name;
  std::string received_uuid;  // empty, or 16 bytes (then ogen != 0)
  uint64_t received_generation = 0;
};
std::string EncodeSubvolInfo(const SubvolInfoItem& s);
absl::StatusOr<SubvolInfoItem> DecodeSubvolInfo(absl::string_view v, uint64_t tree_id);

}  // namespace format
}  // namespace cowkv

#endif  // COWKV_ENGINE_FORMAT_ITEMS_H_
