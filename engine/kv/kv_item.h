// KV items: how the transactional key space sits inside a subvolume tree.
//
// Every user key k (1..1024 bytes) is stored under the tree key 'k' + k, so
// the key space is one contiguous, ordered run of the tree beside the file
// namespace ('f' + 17-byte key). The item value is a 32-byte header and the
// value bytes:
//
//   u8 kind (0 = inline) | 7 bytes zero | u64 create_revision |
//   u64 mod_revision | u64 version | value
//
// Revisions come from one store-wide sequence; version counts the writes
// since the key was created (1 = just created), as etcd does.
//
// A value larger than the inline limit lives in a data extent: kind 1, and
// after the header (format/items.h "Data references") u64 disk_bytenr,
// u64 disk_len, u64 value_len, u32 crc32c of the value, u32 zero.
#ifndef COWKV_ENGINE_KV_KV_ITEM_H_
#define COWKV_ENGINE_KV_KV_ITEM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/limits.h"
#include "engine/base/coding.h"

namespace cowkv {
namespace kv {

inline constexpr char kKvPrefix = 'k';
inline constexpr char kKvPrefixEnd = 'k' + 1;  // first tree key past the key space
inline constexpr size_t kKvHeaderSize = 32;
inline constexpr uint8_t kKindInline = 0;
inline constexpr uint8_t kKindExtent = 1;

struct ItemMeta {
  uint64_t create_revision = 0;
  uint64_t mod_revision = 0;
  uint64_t version = 0;
};

std::string TreeKey(absl::string_view user_key);
inline bool IsKvTreeKey(absl::string_view tree_key) {
  return !tree_key.empty() && tree_key[0] == kKvPrefix;
}
// The user key of a KV tree key (caller checked IsKvTreeKey).
// The user key of a KV tree key (empty for an empty tree key).
inline absl::string_view UserKey(absl::string_view tree_key) {
  return tree_key.empty() ? tree_key : tree_key.substr(1);
}

std::string EncodeItem(const ItemMeta& meta, absl::string_view value);
// EncodeItem into `*out` (replacing its contents; its capacity is reused).
void EncodeItemTo(const ItemMeta& meta, absl::string_view value, std::string* out);
// TreeKey into `*out` (replacing its contents; its capacity is reused).
void TreeKeyTo(absl::string_view user_key, std::string* out);

struct ExtentRef {
  uint64_t bytenr = 0;
  uint64_t disk_len = 0;
  uint64_t value_len = 0;
  uint32_t crc = 0;
};
std::string EncodeExtentItem(const ItemMeta& meta, const ExtentRef& ref);

struct ItemView {
  ItemMeta meta;
  absl::string_view value;  // inline items: into the raw item
  bool in_extent = false;   // else the value is in `extent`
  ExtentRef extent;
};
// Decodes an item read from the tree. DATA_LOSS (naming the key) when the
// header is short, of an unknown kind, or its revisions are inconsistent.
absl::StatusOr<ItemView> DecodeItem(absl::string_view tree_key, absl::string_view raw);
// The hot path of DecodeItem for readers that want only the value: true
// and `*value` when `raw` is an inline item DecodeItem accepts (the same
// checks), false for anything else (an extent item or a bad header: call
// DecodeItem).
inline bool InlineValue(absl::string_view raw, absl::string_view* value) {
  if (raw.size() < kKvHeaderSize) return false;
  const char* p = raw.data();
  // Kind 0 (inline) and seven zero bytes.
  if (DecodeLE64(p) != 0) return false;
  const uint64_t create = DecodeLE64(p + 8), mod = DecodeLE64(p + 16), version = DecodeLE64(p + 24);
  if (create == 0 || mod < create || version == 0) return false;
  *value = raw.substr(kKvHeaderSize);
  return true;
}

// Largest value stored inline for `nodesize`; larger ones (up to
// kMaxValueSize) go to data extents.
size_t MaxInlineValue(uint32_t nodesize);
// What MaxInlineValue leaves for a history entry's 2-byte header before
// the prev item it holds (history_item.h): an entry's value is an item
// plus 2 bytes, within the tree's value limit.
inline constexpr size_t kHistoryInlineReserve = 2;

// Validates a user key / value size. INVALID_ARGUMENT with the reason.
absl::Status ValidateKey(absl::string_view key);
absl::Status ValidateValue(absl::string_view value);

}  // namespace kv
}  // namespace cowkv

#endif  // COWKV_ENGINE_KV_KV_ITEM_H_
