// KV history items: the per-subvolume record of recent changes, keyed by
// revision, that reads at a past revision (Get/Range with a revision, the
// reads of an interactive transaction) are answered from, and that a
// watch can later stream in revision order. They live in the subvolume
// tree beside the KV items, so they are written by the same commits and
// log syncs as the data, shared by snapshots and dropped with the tree.
//
//   tree key 'h' + u56 BE revision + user key   -> history entry
//   tree key 'h' + 7 zero bytes (revision 0)    -> history info
//
// (A 7-byte revision keeps the largest key within the tree's 1032 bytes:
// 1 + 7 + 1024. Revisions stay below 2^56.) An entry records one key
// changed at `revision` and the key's item *before* the change:
//
//   u8 type (1 = put, 2 = delete) | u8 flags (bit 0: prev item follows) |
//   prev item (the KV item encoding)
//
// The info item: u64 LE compact_revision | u64 zero. Invariant: every
// change of the subvolume's KV items with a revision > compact_revision has
// its entry; no entry has a revision <= compact_revision once compaction
// finished. So the state at a revision R >= compact_revision is: for each
// key, the prev item of its first entry after R, or its current item if it
// has none.
//
// A prev item in a data extent keeps its reference: the extent reference
// moves from the KV item to the entry (format::LeafDataRef knows both),
// and compaction drops it with the entry.
#ifndef COWKV_ENGINE_KV_HISTORY_ITEM_H_
#define COWKV_ENGINE_KV_HISTORY_ITEM_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace kv {

inline constexpr char kHistoryPrefix = 'h';
inline constexpr size_t kHistoryKeyHeader = 8;  // 'h' + u56 BE revision
inline constexpr size_t kHistoryEntryHeader = 2;
inline constexpr size_t kHistoryInfoSize = 16;
inline constexpr uint8_t kHistoryPut = 1;
inline constexpr uint8_t kHistoryDelete = 2;
inline constexpr uint64_t kMaxHistoryRevision = (uint64_t{1} << 56) - 1;

// 'h' + BE56 rev + user key (rev <= kMaxHistoryRevision).
std::string HistoryKey(uint64_t revision, absl::string_view user_key);
// The info item's key (revision 0, no user key).
inline std::string HistoryInfoKey() { return HistoryKey(0, ""); }
inline bool IsHistoryTreeKey(absl::string_view tree_key) {
  return !tree_key.empty() && tree_key[0] == kHistoryPrefix;
}
// The revision of a history tree key (0 for a short one).
uint64_t HistoryKeyRevision(absl::string_view tree_key);

struct HistoryEntry {
  uint64_t revision = 0;
  uint8_t type = kHistoryPut;
  absl::string_view key;   // user key (into the tree key)
  bool has_prev = false;   // else the key was absent before the change
  absl::string_view prev;  // the prev KV item, raw (into the raw item)
};

std::string EncodeHistoryEntry(uint8_t type, const absl::string_view* prev_item);
// Decodes an entry; DATA_LOSS naming the item when the key or value is
// malformed (the prev item itself is checked by DecodeItem when read).
absl::StatusOr<HistoryEntry> DecodeHistoryEntry(absl::string_view tree_key, absl::string_view raw);
// The log's form of an entry (never in a tree): when the prev item is the
// key's item in the generation the log chain extends (its mod revision is
// at or below that generation's revision), a log sync writes only its mod
// revision — u8 type | u8 flags = 2 | u64 LE prev mod revision — and
// replay reads the prev item back from the tree it replays onto, before
// writing anything (docs/format.md "KV history").
inline constexpr uint8_t kHistoryPrevInBase = 2;
inline constexpr size_t kHistoryBaseFormSize = kHistoryEntryHeader + 8;
// The base form of entry `raw` when its prev item is at or below
// `base_revision`; nullopt otherwise (or for anything but an entry).
std::optional<std::string> HistoryEntryBaseForm(absl::string_view tree_key, absl::string_view raw,
                                                uint64_t base_revision);
bool IsHistoryBaseForm(absl::string_view tree_key, absl::string_view raw);
// The full entry from a base form and the key's item in the base tree
// (nullptr: absent there); DATA_LOSS naming the entry when that item is not
// the recorded one.
absl::StatusOr<std::string> HistoryEntryFromBase(absl::string_view tree_key,
                                                 absl::string_view base_form,
                                                 const std::string* base_item);

std::string EncodeHistoryInfo(uint64_t compact_revision);
// The info's compact revision; DATA_LOSS naming the item when malformed.
absl::StatusOr<uint64_t> DecodeHistoryInfo(absl::string_view raw);

}  // namespace kv
}  // namespace cowkv

#endif  // COWKV_ENGINE_KV_HISTORY_ITEM_H_
