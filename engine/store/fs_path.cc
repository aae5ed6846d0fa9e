// The file call path: StoreImpl's fs::FsBackend (the tree writes FsOps asks
// for, with their data references), FsRead/FsWrite under the tree lock
// (space and the throttler), and fsync through the log.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/fs/fs_ops.h"
#include "engine/store/fs_backend_impl.h"
#include "engine/store/store_impl.h"

namespace cowkv {

static_assert(kRootInode == fs::kRootDirIno);

static_assert(kFiemapExtentUnwritten == fs::kFiemapUnwritten);
static_assert(kFallocKeepSize == fs::kFallocKeepSize && kFallocPunchHole == fs::kFallocPunchHole &&
              kFallocZeroRange == fs::kFallocZeroRange);
static_assert(kFiemapExtentLast == fs::kFiemapLast && kFiemapExtentShared == fs::kFiemapShared &&
              kFiemapExtentInline == fs::kFiemapInline &&
              kFiemapExtentNotAligned == fs::kFiemapNotAligned);
static_assert(kRenameNoReplace == fs::kRenameNoReplace && kRenameExchange == fs::kRenameExchange);
static_assert(kXattrCreate == fs::kXattrCreate && kXattrReplace == fs::kXattrReplace);

// What applying a batch will do: its tree writes in order, the data
// references they add and drop, and what to reserve for them.
struct StoreImpl::FsBackendImpl::ApplyPlan {
  struct Ref {
    format::DataRef d;
    bool first;
  };
  struct Step {
    const fs::FsWrite* w;
    bool may_be_absent;  // an unread delete: absent means nothing to do
  };
  std::vector<Ref> plus, minus;
  std::vector<Step> steps;
  // The reservation: a batch that only deletes or shrinks items cannot
  // grow the tree (a full store can always unlink); its worst case is one
  // path per leaf it touches — an fs operation's items are clustered by
  // inode, so count the inodes plus the leaves their bytes can span.
  bool shrinks = true;
  uint64_t bytes = 0;
  absl::InlinedVector<uint64_t, 8> inodes;
};

absl::Status StoreImpl::FsBackendImpl::PlanWrite(const fs::FsWrite& w, ApplyPlan* plan) {
  const std::optional<std::string>& value = *w.value;
  if (value.has_value()) {
    absl::Status v = tree_->ValidatePut(w.key, *value);
    if (!v.ok()) {
      return PosixError(
          ErrorReason::kEINVAL,
          absl::StrCat("an item of ", value->size(), " bytes does not fit in a node (at most ",
                       tree_->max_value_size(), ")"));
    }
  }
  fs::FsKey k;
  const bool fs_key = fs::DecodeFsKey(w.key, &k);
  if (fs_key &&
      std::find(plan->inodes.begin(), plan->inodes.end(), k.objectid) == plan->inodes.end()) {
    plan->inodes.push_back(k.objectid);
  }
  if (fs_key && k.type != fs::kExtentData && w.old == nullptr) {
    // An item the operation did not read, which cannot hold a data
    // reference: no need to read it first. A delete shrinks the tree
    // either way (an absent key is simply nothing to delete); a put is
    // reserved as an insert over an old item of the largest size.
    if (value.has_value()) {
      plan->shrinks = false;
      plan->bytes += w.key.size() + std::max(value->size(), tree_->max_value_size()) + 16;
    } else {
      plan->bytes += w.key.size() + 16;
    }
    plan->steps.push_back({&w, !value.has_value()});
    return absl::OkStatus();
  }
  std::optional<std::string> fetched;
  const std::optional<std::string>* old = w.old;
  if (old == nullptr) {
    COWKV_ASSIGN_OR_RETURN(fetched, Get(w.key));
    old = &fetched;
  }
  if (!old->has_value() && !value.has_value()) return absl::OkStatus();
  format::DataRef d;
  if (old->has_value() && format::LeafDataRef(w.key, **old, &d)) plan->minus.push_back({d, false});
  if (value.has_value() && format::LeafDataRef(w.key, *value, &d)) {
    plan->plus.push_back({d, w.first_ref});
  }
  plan->shrinks = plan->shrinks &&
                  (!value.has_value() || (old->has_value() && value->size() <= (*old)->size()));
  plan->bytes += w.key.size() +
                 std::max(old->has_value() ? (*old)->size() : 0, value ? value->size() : 0) + 16;
  plan->steps.push_back({&w, false});
  return absl::OkStatus();
}

// The item writes first (space for all of them reserved up front), then
// the data references: every +1 before any -1, so an extent that one item
// lets go of and another takes (a trimmed extent, a clone) never touches
// zero on the way.
absl::Status StoreImpl::FsBackendImpl::Apply(const std::vector<fs::FsWrite>& op_writes) {
  // A recorded operation's events (or a span's closing info) go in with
  // its items, in the same reservation (file_watch_path.cc).
  std::vector<fs::FsWrite> with_events;
  uint64_t event_revision = 0;
  const bool extra = !events_.empty() || close_span_.has_value();
  if (extra) StageFileEventWrites(op_writes, &with_events, &event_revision);
  const std::vector<fs::FsWrite>& writes = extra ? with_events : op_writes;
  ApplyPlan plan;
  plan.steps.reserve(writes.size());
  for (const fs::FsWrite& w : writes) COWKV_RETURN_IF_ERROR(PlanWrite(w, &plan));
  if (plan.steps.empty()) return absl::OkStatus();
  const uint64_t leaves = plan.inodes.size() + plan.bytes / (s_->nodesize_ / 4) + 1;
  COWKV_RETURN_IF_ERROR(s_->txn_->ReserveForWrite(
      tree_, plan.shrinks ? TxnManager::WriteKind::kDelete : TxnManager::WriteKind::kInsert,
      std::min<uint64_t>(plan.steps.size(), leaves), plan.bytes));
  for (const ApplyPlan::Step& t : plan.steps) {
    const fs::FsWrite* w = t.w;
    // Deletes skip Tree::Delete's probe descent: the item was just read,
    // or (unread) is one the namespace holds, so a miss is rare (a damaged
    // tree) and costs only a needlessly CoWed path, within the reservation.
    absl::Status st =
        w->value->has_value() ? tree_->Put(w->key, **w->value) : tree_->DeletePresent(w->key);
    if (t.may_be_absent && absl::IsNotFound(st)) continue;  // nothing was changed
    if (!st.ok()) {
      s_->txn_->SetFatal(st);  // half applied in memory: this generation must not commit
      return st;
    }
  }
  for (const ApplyPlan::Ref& r : plan.plus) s_->txn_->AddDataRef(subvol_, r.d, +1, r.first);
  for (const ApplyPlan::Ref& r : plan.minus) s_->txn_->AddDataRef(subvol_, r.d, -1, false);
  if (extra) FileEventsApplied(event_revision);
  return absl::OkStatus();
}

std::shared_ptr<fs::FsState> StoreImpl::FsStateFor(uint64_t subvol) {
  absl::MutexLock l(&fs_mu_);
  std::shared_ptr<fs::FsState>& st = fs_states_[subvol];
  if (st == nullptr) st = std::make_shared<fs::FsState>(options_.inode_cache_entries);
  return st;
}

void StoreImpl::ForgetFsState(uint64_t subvol) {
  absl::MutexLock l(&fs_mu_);
  fs_states_.erase(subvol);
}

fs::FsOptions StoreImpl::FsOptionsFromStore() const {
  fs::FsOptions o;
  o.dir_index_offset = options_.fs_dir_index_offset;
  o.precise_logged_check = options_.fs_precise_logged_check;
  o.fiemap_path_cache = options_.fiemap_path_cache;
  o.inode_cache_entries = options_.inode_cache_entries;
  o.ref_item_names = options_.test_hooks.ref_item_names;
  o.bug_no_full_commit =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kNoFullCommit;
  o.bug_item_counts_as_names =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kItemCountsAsNames;
  o.bug_replay_drops_new_name =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kReplayDropsNewName;
  o.bug_late_inode_counter =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kLateInodeCounter;
  o.bug_replay_drops_prealloc =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kDropsPrealloc;
  o.bug_skip_orphan_cleanup =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kSkipOrphanCleanup;
  o.bug_logged_inode_skips_item =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kLoggedInodeSkipsItem;
  o.bug_xattr_removal_not_logged =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kXattrRemovalNotLogged;
  o.bug_extref_not_logged =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kExtrefNotLogged;
  return o;
}

absl::Status StoreImpl::FsRead(uint64_t subvol, const std::function<absl::Status(fs::FsOps&)>& fn) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);  // kept alive if the subvolume goes
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  FsBackendImpl be(this, subvol, tree);
  fs::FsOps ops(&be, st.get(), fs_options_);
  return fn(ops);
}

absl::Status StoreImpl::FsWrite(uint64_t subvol,
                                const std::function<absl::Status(fs::FsOps&)>& fn) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return PosixError(ErrorReason::kEROFS, "store is opened read-only");
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  bool exclusive = false;
  for (int attempt = 0;; ++attempt) {
    absl::Status s;
    ThrottleSample sample;
    // A subvolume whose file events are recorded is written under the
    // exclusive barrier (its events take store-wide revisions); otherwise
    // the barrier shared and this subvolume's tree lock exclusive: file
    // writers of other subvolumes run beside this one (store_impl.h).
    exclusive = exclusive || st->file_watch.watchers.load(std::memory_order_relaxed) > 0;
    bool retry_exclusive = false;
    if (exclusive) {
      absl::WriterMutexLock l(&mu_);
      s = FsWriteLocked(subvol, st.get(), fn, true, &retry_exclusive, &sample);
    } else {
      absl::ReaderMutexLock l(&mu_);
      s = FsWriteLocked(subvol, st.get(), fn, false, &retry_exclusive, &sample);
    }
    if (retry_exclusive) {
      exclusive = true;
      --attempt;
      continue;
    }
    if (absl::IsResourceExhausted(s) && attempt == 0) {
      // Space freed in this generation is pinned until it commits.
      COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kSpace));
      continue;
    }
    if (absl::IsResourceExhausted(s) && !absl::StartsWith(s.message(), "ENOSPC")) {
      return PosixError(ErrorReason::kENOSPC, s.message());
    }
    if (s.ok()) Throttle(sample);
    return s;
  }
}

absl::Status StoreImpl::FsWriteLocked(uint64_t subvol, fs::FsState* st,
                                      const std::function<absl::Status(fs::FsOps&)>& fn,
                                      bool exclusive, bool* retry_exclusive,
                                      ThrottleSample* sample) {
  COWKV_RETURN_IF_ERROR(TreeFor(subvol).status());
  absl::MutexLock tl(TreeLock(subvol));
  // Stable now: watchers change only under the exclusive barrier.
  const bool recording = st->file_watch.watchers.load(std::memory_order_relaxed) > 0;
  if (recording && !exclusive) {
    *retry_exclusive = true;
    return absl::OkStatus();
  }
  // Checks fatal() and samples the heads before the write; reservations
  // are held until EndWrite (TxnManager::ReserveForWrite).
  COWKV_ASSIGN_OR_RETURN(const uint64_t heads_before, txn_->BeginWrite(subvol));
  absl::StatusOr<Tree*> tree = WritableTree(subvol);
  if (!tree.ok()) {
    txn_->EndWrite(subvol);
    // A read-only snapshot: EROFS first in the message, the reason kept.
    return absl::IsFailedPrecondition(tree.status())
               ? WithReason(absl::FailedPreconditionError(
                                absl::StrCat("EROFS: ", tree.status().message())),
                            ReasonOf(tree.status()))
               : tree.status();
  }
  FsBackendImpl be(this, subvol, *tree);
  absl::Status s = PrepareFileEvents(st, &be, recording);
  if (s.ok()) {
    fs::FsOps ops(&be, st, fs_options_);
    ops.BeginWrite();
    s = fn(ops);
  }
  if (s.ok()) FinishFileEvents(subvol, *tree, st, be);
  const TxnManager::RefCounts after = txn_->EndWrite(subvol);
  if (s.ok()) *sample = PayDelayedRefsLocked(heads_before, after);
  return s;
}

absl::Status StoreImpl::FsFsync(uint64_t subvol, uint64_t ino, bool datasync) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  uint64_t point = 0;
  bool logged = false;
  {
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(txn_->fatal());
    COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
    FsBackendImpl be(this, subvol, tree);
    fs::FsOps ops(&be, st.get(), fs_options_);
    if (options_.read_only || txn_->IsReadOnly(subvol)) {
      return ops.Stat(ino).status();  // nothing there that is not committed
    }
    // While its file events are recorded, the file tree is made durable by
    // engine commits only: its events are never logged, so a log sync
    // would make a change durable without its event (docs/design.md "File
    // watch"). Decided under the exclusive barrier, where watchers change.
    const bool watched = st->file_watch.watchers.load(std::memory_order_relaxed) > 0 &&
                         options_.test_hooks.planted_bug !=
                             Options::TestHooks::PlantedBug::kFileFsyncLogsWhileWatched;
    if (watched) {
      COWKV_RETURN_IF_ERROR(ops.Stat(ino).status());
    } else {
      ops.BeginWrite();
      COWKV_ASSIGN_OR_RETURN(logged, ops.LogForFsync(ino, datasync));
      point = ++durable_seq_;
    }
  }
  // A name the fsync depends on was removed or moved in this transaction
  // (or the file tree is watched): the log cannot carry it, the engine
  // commit makes everything durable.
  if (!logged) return Commit(CommitTrigger::kFsync);
  return WaitDurable(point);
}

}  // namespace cowkv
