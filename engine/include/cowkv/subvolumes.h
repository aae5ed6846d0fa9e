// Subvolume listing and sync requests (Store::ListSubvolumes,
// Store::SyncDeletedSubvolumes): the options of btrfs-progs'
// `subvolume list -r -s --sort=...` and `subvolume sync [ID...]`.
//
//   SubvolumeListOptions o;
//   o.snapshots_only = true;
//   o.sort = {"-ogen", "path"};          // newest snapshot first, then by name
//   COWKV_ASSIGN_OR_RETURN(std::vector<SubvolumeInfo> l, store->ListSubvolumes(o));
//
//   SubvolumeSyncOptions s;               // every subvolume deleted so far
//   s.deadline = absl::Now() + absl::Seconds(30);
//   COWKV_ASSIGN_OR_RETURN(std::vector<uint64_t> gone, store->SyncDeletedSubvolumes(s));
//
// Plain values; docs/api.md "Subvolumes" describes them in depth.
#ifndef COWKV_INCLUDE_COWKV_SUBVOLUMES_H_
#define COWKV_INCLUDE_COWKV_SUBVOLUMES_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace cowkv {

// What a listing keeps and in which order. Filters combine with AND.
struct SubvolumeListOptions {
  bool read_only = false;       // only read-only subvolumes (btrfs list -r)
  bool snapshots_only = false;  // only snapshots: parent_id != 0 (btrfs list -s)
  // Sort keys, most significant first, each "[+|-]FIELD" with FIELD one of
  // gen, ogen, rootid (alias id), path (alias name); '+' (the default) is
  // ascending, '-' descending. Ties, and an empty list, go by id ascending.
  // An unknown key is INVALID_ARGUMENT naming it.
  std::vector<std::string> sort;
};

// One parsed sort key.
struct SubvolumeSortKey {
  enum class Field { kGen, kOgen, kId, kName };
  Field field = Field::kId;
  bool descending = false;
};

// Most sort keys a listing takes (INVALID_ARGUMENT beyond).
inline constexpr size_t kMaxSubvolumeSortKeys = 16;

// Parses SubvolumeListOptions::sort. Each element may itself hold several
// comma-separated keys ("gen,-ogen"), as btrfs's --sort does.
absl::StatusOr<std::vector<SubvolumeSortKey>> ParseSubvolumeSort(
    const std::vector<std::string>& keys);

// What Store::SyncDeletedSubvolumes waits for.
struct SubvolumeSyncOptions {
  // Ids of deleted subvolumes to wait for; empty = every subvolume deleted
  // before the call (not those deleted while it waits). An id that was never
  // a subvolume is NOT_FOUND; a live one is FAILED_PRECONDITION; one whose
  // tree is gone already is done at once.
  std::vector<uint64_t> ids;
  // Past it, the call stops with DEADLINE_EXCEEDED naming the ids still
  // pending (what was dropped so far stays dropped).
  absl::Time deadline = absl::InfiniteFuture();
  // Polled between cleaner batches; true stops the call with CANCELLED.
  std::function<bool()> cancelled;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_SUBVOLUMES_H_
