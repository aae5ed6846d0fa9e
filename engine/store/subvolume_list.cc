// Subvolume listing with btrfs-progs' filters and sort keys, and `subvolume
// sync`: waiting until deleted subvolumes' trees are dropped and their space
// is free (cowkv/subvolumes.h).
//
// Sync drives the cleaner itself (CleanerBatch, as DropDeletedSubvolumes
// does) rather than sleeping on the background thread, so it works with the
// background cleaner off, and checks its deadline and cancellation between
// batches: a call is bounded by one batch past its deadline. When it has
// waited for anything, or any drop ran since the last sync (the background
// cleaner's), it commits twice: the first commit makes the drop
// durable, the second releases what that commit pinned (freed extents are
// reusable only once the generation that freed them is durable), so the
// space figures are back when it returns.
#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<std::vector<SubvolumeSortKey>> ParseSubvolumeSort(
    const std::vector<std::string>& keys) {
  std::vector<SubvolumeSortKey> out;
  for (const std::string& spec : keys) {
    for (absl::string_view k : absl::StrSplit(spec, ',')) {
      SubvolumeSortKey key;
      absl::string_view field = k;
      if (!field.empty() && (field[0] == '+' || field[0] == '-')) {
        key.descending = field[0] == '-';
        field.remove_prefix(1);
      }
      if (field == "gen") {
        key.field = SubvolumeSortKey::Field::kGen;
      } else if (field == "ogen") {
        key.field = SubvolumeSortKey::Field::kOgen;
      } else if (field == "rootid" || field == "id") {
        key.field = SubvolumeSortKey::Field::kId;
      } else if (field == "path" || field == "name") {
        key.field = SubvolumeSortKey::Field::kName;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("EINVAL: unknown subvolume sort key '", k,
                         "' (want [+|-] and one of gen, ogen, rootid, id, path, name)"));
      }
      out.push_back(key);
      // Four fields, two directions: more keys add nothing but work for
      // every comparison.
      if (out.size() > kMaxSubvolumeSortKeys) {
        return absl::InvalidArgumentError(absl::StrCat("EINVAL: at most ", kMaxSubvolumeSortKeys,
                                                       " subvolume sort keys, got more"));
      }
    }
  }
  return out;
}

namespace {

// <0, 0, >0 as a orders before, with, after b on `key`'s field ascending.
int CompareField(const SubvolumeInfo& a, const SubvolumeInfo& b, SubvolumeSortKey::Field f) {
  auto cmp = [](auto x, auto y) { return x < y ? -1 : (y < x ? 1 : 0); };
  switch (f) {
    case SubvolumeSortKey::Field::kGen:
      return cmp(a.generation, b.generation);
    case SubvolumeSortKey::Field::kOgen:
      return cmp(a.creation_generation, b.creation_generation);
    case SubvolumeSortKey::Field::kId:
      return cmp(a.id, b.id);
    case SubvolumeSortKey::Field::kName:
      return a.name.compare(b.name) < 0 ? -1 : (a.name == b.name ? 0 : 1);  // bytes, memcmp
  }
  return 0;
}

}  // namespace

absl::StatusOr<std::vector<SubvolumeInfo>> StoreImpl::ListSubvolumes(
    const SubvolumeListOptions& options) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_ASSIGN_OR_RETURN(std::vector<SubvolumeSortKey> keys, ParseSubvolumeSort(options.sort));
  const bool planted =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kSortIgnoresDirection;
  std::vector<SubvolumeInfo> out;
  {
    // As ListSubvolumes(): root pointers are read under the exclusive barrier.
    absl::WriterMutexLock l(&mu_);
    for (const SubvolInfo& s : subvols_->List()) {
      SubvolumeInfo info = ToPublicSubvolumeInfo(s);
      if (options.read_only && !info.read_only) continue;
      if (options.snapshots_only && info.parent_id == 0) continue;
      out.push_back(std::move(info));
    }
  }
  // Ids are unique, so with id as the last tie-break the order is total and
  // the sort's result does not depend on its stability.
  std::sort(out.begin(), out.end(), [&](const SubvolumeInfo& a, const SubvolumeInfo& b) {
    for (const SubvolumeSortKey& k : keys) {
      int c = CompareField(a, b, k.field);
      if (k.descending && !planted) c = -c;
      if (c != 0) return c < 0;
    }
    return a.id < b.id;
  });
  for (size_t i = 1; i < out.size(); ++i) COWKV_DCHECK(out[i - 1].id != out[i].id);
  return out;
}

absl::StatusOr<std::vector<uint64_t>> StoreImpl::SyncDeletedSubvolumes(
    const SubvolumeSyncOptions& options) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  std::set<uint64_t> wanted;
  bool unreleased = false;  // drops whose freed space may still be pinned
  {
    absl::ReaderMutexLock l(&mu_);
    unreleased = cleaner_steps_ != synced_cleaner_steps_;
    const std::vector<uint64_t> dying = txn_->TreeIds(/*dropping=*/true);
    const std::set<uint64_t> dying_set(dying.begin(), dying.end());
    if (options.ids.empty()) wanted = dying_set;
    for (uint64_t id : options.ids) {
      if (subvols_->IsLive(id)) {
        // (Get() would read its root item, which needs the tree lock.)
        return absl::FailedPreconditionError(
            absl::StrCat("EBUSY: subvolume ", id, " is live, not deleted"));
      }
      if (id < format::kFirstFreeTreeId || id >= txn_->next_tree_id()) {
        return absl::NotFoundError(absl::StrCat("ENOENT: no subvolume ever had id ", id));
      }
      // Neither live nor dying: deleted and dropped already, nothing to wait for.
      if (dying_set.count(id)) wanted.insert(id);
    }
  }
  const std::vector<uint64_t> result(wanted.begin(), wanted.end());
  // Nothing to drop and nothing dropped since the last sync: at once.
  if (wanted.empty() && !unreleased) return result;
  // A read-only store cannot drop anything (an image with deletions
  // pending, mounted read-only, keeps them pending).
  if (options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  for (;;) {
    std::vector<uint64_t> pending;
    {
      absl::ReaderMutexLock l(&mu_);
      for (uint64_t id : txn_->TreeIds(/*dropping=*/true)) {
        if (wanted.count(id)) pending.push_back(id);
      }
    }
    if (pending.empty()) break;
    if (options.cancelled && options.cancelled()) {
      return absl::CancelledError(absl::StrCat(
          "ECANCELED: subvolume sync cancelled; still pending: ", absl::StrJoin(pending, ", ")));
    }
    if (absl::Now() >= options.deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "ETIMEDOUT: subvolume sync timed out; still pending: ", absl::StrJoin(pending, ", ")));
    }
    // The cleaner drops the oldest deletion first; ids deleted before the
    // wanted ones are dropped on the way.
    COWKV_RETURN_IF_ERROR(CleanerBatch(256).status());
  }
  uint64_t steps;
  {
    absl::ReaderMutexLock l(&mu_);
    steps = cleaner_steps_;
  }
  COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kExplicit));
  COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kExplicit));
  {
    absl::WriterMutexLock l(&mu_);
    synced_cleaner_steps_ = std::max(synced_cleaner_steps_, steps);
  }
  return result;
}

}  // namespace cowkv
