// Subvolume and snapshot management: create, snapshot, rename, delete,
// show, list, open. Each change runs with no handle open and commits.
#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<uint64_t> StoreImpl::ManageSubvolumes(
    const std::function<absl::StatusOr<uint64_t>(Subvolumes*)>& op, bool commit_first,
    TxnManager::WriteKind kind) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  absl::MutexLock cl(&commit_mu_);
  absl::MutexLock ll(&log_mu_);  // no log sync runs meanwhile (CommitLocked)
  absl::MutexLock hl(&handles_mu_);
  handles_mu_.Await(absl::Condition(
      +[](bool* wanted) { return !*wanted; }, &commit_wanted_));
  commit_wanted_ = true;
  handles_mu_.Await(absl::Condition(
      +[](int* n) { return *n == 0; }, &open_handles_));
  absl::StatusOr<uint64_t> id;
  {
    absl::WriterMutexLock l(&mu_);
    absl::Status s = commit_first ? CommitLocked(CommitTrigger::kExplicit) : absl::OkStatus();
    if (s.ok()) s = txn_->ReserveForWrite(txn_->fs_tree(format::kDefaultTreeId), kind);
    id = s.ok() ? op(subvols_.get()) : absl::StatusOr<uint64_t>(s);
    AddTreeLocksLocked();  // a new subvolume's, before any writer can find it
    if (id.ok()) s = CommitLocked(CommitTrigger::kExplicit);
    if (!s.ok()) id = s;
  }
  commit_wanted_ = false;
  return id;
}

absl::Status StoreImpl::DeleteSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(ManageSubvolumes(
                            [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                              COWKV_ASSIGN_OR_RETURN(uint64_t id, t->Lookup(name));
                              COWKV_RETURN_IF_ERROR(t->Delete(id));
                              ForgetFsState(id);
                              return id;
                            },
                            false, TxnManager::WriteKind::kDelete)
                            .status());
  durable_rev_->Kick();  // its watchers end (ReadEvents: NOT_FOUND)
  absl::MutexLock hl(&handles_mu_);
  cleaner_work_ = true;
  return absl::OkStatus();
}

namespace {
SubvolumeInfo ToSubvolumeInfo(const SubvolInfo& s) {
  SubvolumeInfo out;
  out.id = s.id;
  out.name = s.name;
  out.parent_id = s.parent_id;
  out.generation = s.generation;
  out.last_snapshot = s.last_snapshot;
  out.created_unix_ms = s.ctime_ms;
  out.read_only = s.flags & format::kRootFlagReadOnly;
  out.creation_generation = s.ogen;
  out.uuid = absl::BytesToHexString(s.uuid);
  out.parent_uuid = absl::BytesToHexString(s.parent_uuid);
  out.received_uuid = absl::BytesToHexString(s.received_uuid);
  out.received_generation = s.received_generation;
  return out;
}
}  // namespace

SubvolumeInfo ToPublicSubvolumeInfo(const SubvolInfo& s) { return ToSubvolumeInfo(s); }

// A subvolume's info holds its tree's root pointer, which a file writer of
// that subvolume moves under the shared barrier: Show reads it under the
// tree lock (the server asks on every file write), List under the
// exclusive barrier (one lock for all of them; an admin call).
absl::StatusOr<SubvolumeInfo> StoreImpl::ShowSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(uint64_t id, subvols_->Lookup(name));
  absl::ReaderMutexLock tl(TreeLock(id));
  COWKV_ASSIGN_OR_RETURN(SubvolInfo s, subvols_->Get(id));
  SubvolumeInfo out = ToSubvolumeInfo(s);
  out.snapshots = subvols_->SnapshotNamesOf(id);
  return out;
}

std::vector<SubvolumeInfo> StoreImpl::ListSubvolumes() {
  std::vector<SubvolumeInfo> out;
  absl::WriterMutexLock l(&mu_);
  for (const SubvolInfo& s : subvols_->List()) out.push_back(ToSubvolumeInfo(s));
  return out;
}

absl::StatusOr<SubvolumeInfo> StoreImpl::CreateSubvolume(absl::string_view name) {
  COWKV_ASSIGN_OR_RETURN(uint64_t id,
                         ManageSubvolumes([&](Subvolumes* t) { return t->Create(name); }, false));
  (void)id;
  return ShowSubvolume(name);
}

absl::StatusOr<SubvolumeInfo> StoreImpl::CreateSnapshot(absl::string_view source,
                                                        absl::string_view name, bool read_only) {
  COWKV_RETURN_IF_ERROR(ValidateSubvolName(name));
  COWKV_ASSIGN_OR_RETURN(uint64_t id, ManageSubvolumes(
                                          [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                                            COWKV_ASSIGN_OR_RETURN(uint64_t src, t->Lookup(source));
                                            snapshot_epoch_.fetch_add(1, std::memory_order_acq_rel);
                                            return t->Snapshot(src, name, read_only);
                                          },
                                          true));
  (void)id;
  return ShowSubvolume(name);
}

absl::Status StoreImpl::RenameSubvolume(absl::string_view name, absl::string_view new_name) {
  return ManageSubvolumes(
             [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
               COWKV_ASSIGN_OR_RETURN(uint64_t id, t->Lookup(name));
               COWKV_RETURN_IF_ERROR(t->Rename(id, new_name));
               return id;
             },
             false)
      .status();
}

absl::Status StoreImpl::ReplaceSubvolume(absl::string_view name, absl::string_view target) {
  COWKV_RETURN_IF_ERROR(ValidateSubvolName(target));
  if (name == target || name == "default" || target == "default") {
    return absl::InvalidArgumentError("replace: two names, neither of them 'default'");
  }
  COWKV_RETURN_IF_ERROR(ManageSubvolumes(
                            [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                              COWKV_ASSIGN_OR_RETURN(uint64_t id, t->Lookup(name));
                              absl::StatusOr<uint64_t> old = t->Lookup(target);
                              if (old.ok()) {
                                COWKV_RETURN_IF_ERROR(t->Delete(*old));
                                ForgetFsState(*old);
                              }
                              // The name is free now: Rename fails only as any root-tree
                              // write can (space, which ManageSubvolumes reserved first).
                              COWKV_RETURN_IF_ERROR(t->Rename(id, target));
                              return id;
                            },
                            false, TxnManager::WriteKind::kDelete)
                            .status());
  durable_rev_->Kick();  // the old one's watchers end
  absl::MutexLock hl(&handles_mu_);
  cleaner_work_ = true;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Subvolume>> StoreImpl::OpenSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(uint64_t id, subvols_->Lookup(name));
  return std::unique_ptr<Subvolume>(new Subvolume(this, id));
}

}  // namespace cowkv
