// Partial receives (issue 19; docs/design.md "Resumable receive"): the
// hidden trees of resumable receives that stopped before their end, found
// by the progress item each holds (format::kReceiveProgressKey), listed
// with their resume tokens, dropped on request, and at mount dropped when
// they hold no progress item (a receive that was not resumable).
//
// Locks: progress items are read under the shared barrier and the tree's
// lock; receiving_ (a leaf) says which names and trees a ReceiveSession
// is writing to, so that one receive at a time continues each.
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "engine/base/status.h"
#include "engine/send/resume_token.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<std::vector<StoreImpl::PartialState>> StoreImpl::ReadPartialsLocked() {
  std::vector<PartialState> out;
  for (uint64_t id : subvols_->PartialReceives()) {
    Tree* tree = txn_->fs_tree(id);
    if (tree == nullptr) continue;
    absl::ReaderMutexLock tl(TreeLock(id));
    COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, tree->Lookup(format::kReceiveProgressKey));
    if (!v.has_value()) continue;  // a receive that is not resumable, or not started
    COWKV_ASSIGN_OR_RETURN(send::ReceiveProgress p, send::DecodeReceiveProgress(*v));
    out.push_back(PartialState{id, std::move(p)});
  }
  return out;
}

absl::StatusOr<StoreImpl::PartialState> StoreImpl::FindPartial(absl::string_view name) {
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(std::vector<PartialState> all, ReadPartialsLocked());
  for (PartialState& p : all) {
    if (p.progress.point.name == name) return std::move(p);
  }
  return send::ResumeMismatch(absl::StrCat("no partial receive '", name, "' here"), true);
}

absl::Status StoreImpl::CheckPartialNameFree(absl::string_view name) {
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(std::vector<PartialState> all, ReadPartialsLocked());
  for (const PartialState& p : all) {
    if (p.progress.point.name != name) continue;
    return WithReason(absl::AlreadyExistsError(absl::StrCat(
                          "receive: a partial receive of '", name,
                          "' is kept here; resume it (cowkv receive --resume-token) or drop it "
                          "(cowkv receive --abort)")),
                      ErrorReason::kPartialReceive);
  }
  return absl::OkStatus();
}

bool StoreImpl::ClaimPartial(uint64_t id, const std::string& name) {
  absl::MutexLock l(&partial_mu_);
  if (receiving_.count(name) != 0) return false;
  for (const auto& [n, tree] : receiving_) {
    if (id != 0 && tree == id) return false;
  }
  receiving_[name] = id;
  return true;
}

void StoreImpl::SetClaimedTree(const std::string& name, uint64_t id) {
  absl::MutexLock l(&partial_mu_);
  receiving_[name] = id;
}

void StoreImpl::ReleasePartial(const std::string& name) {
  absl::MutexLock l(&partial_mu_);
  receiving_.erase(name);
}

absl::Status StoreImpl::PartialBusy(absl::string_view name) {
  return WithReason(absl::FailedPreconditionError(
                        absl::StrCat("receive: another receive into '", name, "' is in progress")),
                    ErrorReason::kPartialReceive);
}

absl::StatusOr<std::vector<PartialReceive>> StoreImpl::PartialReceives() {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  std::vector<PartialState> all;
  {
    absl::ReaderMutexLock l(&mu_);
    COWKV_ASSIGN_OR_RETURN(all, ReadPartialsLocked());
  }
  std::vector<PartialReceive> out;
  absl::MutexLock l(&partial_mu_);
  for (const PartialState& p : all) {
    const send::ResumePoint& pt = p.progress.point;
    PartialReceive r;
    r.name = pt.name;
    r.token = send::ResumeTokenText(pt);
    r.records = pt.records;
    r.bytes = pt.offset;
    r.uuid = absl::BytesToHexString(
        absl::string_view(reinterpret_cast<const char*>(pt.uuid.data()), pt.uuid.size()));
    r.generation = pt.stransid;
    if (pt.parent_stransid != 0) {
      r.parent_uuid = absl::BytesToHexString(absl::string_view(
          reinterpret_cast<const char*>(pt.parent_uuid.data()), pt.parent_uuid.size()));
    }
    r.in_use = receiving_.count(pt.name) != 0;
    out.push_back(std::move(r));
  }
  return out;
}

absl::Status StoreImpl::AbortPartialReceive(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_ASSIGN_OR_RETURN(PartialState p, FindPartial(name));
  const std::string n(name);
  if (!ClaimPartial(p.id, n)) return PartialBusy(name);
  absl::Status s = ManageSubvolumes(
                       [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                         if (!t->IsPartialReceive(p.id)) {
                           return send::ResumeMismatch("the partial receive is gone", true);
                         }
                         COWKV_RETURN_IF_ERROR(t->AbortReceive(p.id));
                         return p.id;
                       },
                       /*commit_first=*/false, TxnManager::WriteKind::kDelete)
                       .status();
  ReleasePartial(n);
  COWKV_RETURN_IF_ERROR(s);
  absl::MutexLock hl(&handles_mu_);
  cleaner_work_ = true;
  return absl::OkStatus();
}

absl::Status StoreImpl::DropUnresumableReceivesLocked() {
  for (uint64_t id : subvols_->PartialReceives()) {
    Tree* tree = txn_->fs_tree(id);
    if (tree != nullptr) {
      absl::StatusOr<std::optional<std::string>> v = tree->Lookup(format::kReceiveProgressKey);
      if (v.ok() && v->has_value() && send::DecodeReceiveProgress(**v).ok()) continue;
    }
    // Not resumable (or not started): nothing of it was visible; the
    // cleaner drops the tree (committed with the next commit).
    COWKV_RETURN_IF_ERROR(subvols_->AbortReceive(id));
  }
  return absl::OkStatus();
}

}  // namespace cowkv
