// The lease call path (etcd's lease API over a subvolume): grant, revoke,
// keep-alive, time-to-live, list, puts with a lease, and the expiry thread.
// The state is lease::Lessor's; its items change in the same KvSpace::Apply
// as the keys they go with (the lessor is the KvSpace's ApplyHook), so a
// revoke deletes every attached key in one revision and one log sync, and
// a crash keeps all of it or none.
#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/lease/lease_item.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::Status StoreImpl::LoadLeases(uint64_t subvol) {
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  return lessor_->Load(subvol, tree, txn_->IsReadOnly(subvol));
}

absl::Status StoreImpl::LoadAllLeases() {
  absl::ReaderMutexLock l(&mu_);
  for (uint64_t id : txn_->TreeIds(/*dropping=*/false)) {
    if (txn_->fs_tree(id) == nullptr || lessor_->IsLoaded(id) || subvols_->IsPartialReceive(id)) {
      continue;
    }
    COWKV_RETURN_IF_ERROR(LoadLeases(id));
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::LeaseOpsLocked(uint64_t subvol, Tree* tree,
                                       const std::vector<kv::KvOp>& ops) {
  COWKV_RETURN_IF_ERROR(txn_->fatal());
  uint64_t bytes = 0;
  for (const kv::KvOp& op : ops) bytes += op.tree_key.size() + (op.item ? op.item->size() : 0) + 16;
  COWKV_RETURN_IF_ERROR(
      txn_->ReserveForWrite(tree, TxnManager::WriteKind::kInsert, ops.size(), bytes, 0));
  for (const kv::KvOp& op : ops) {
    COWKV_DCHECK(lease::IsLeaseTreeKey(op.tree_key));
    absl::Status s = kv_->ApplyOp(tree, subvol, op);
    if (!s.ok()) {
      txn_->SetFatal(s);  // half applied in memory: this generation must never commit
      return s;
    }
    log_->NoteChange(subvol, op.tree_key);
  }
  if (!ops.empty()) ++durable_seq_;  // a change the next log sync covers
  return absl::OkStatus();
}

absl::StatusOr<int64_t> StoreImpl::LeaseGrant(uint64_t subvol, int64_t ttl_seconds, int64_t id,
                                              Durability d) {
  COWKV_RETURN_IF_ERROR(lease::ValidateTtl(ttl_seconds));
  COWKV_RETURN_IF_ERROR(lease::ValidateId(id));
  int64_t granted = 0;
  COWKV_RETURN_IF_ERROR(KvWrite(
                            [&]() -> absl::StatusOr<uint64_t> {
                              COWKV_ASSIGN_OR_RETURN(Tree * tree, WritableTree(subvol));
                              COWKV_RETURN_IF_ERROR(lessor_->Load(subvol, tree, false));
                              std::vector<kv::KvOp> ops;
                              COWKV_ASSIGN_OR_RETURN(
                                  granted, lessor_->PlanGrant(subvol, ttl_seconds, id, &ops));
                              COWKV_RETURN_IF_ERROR(LeaseOpsLocked(subvol, tree, ops));
                              lessor_->Applied(subvol, kv_->revision());
                              return kv_->revision();
                            },
                            d)
                            .status());
  return granted;
}

absl::StatusOr<uint64_t> StoreImpl::LeaseRevoke(uint64_t subvol, int64_t id, Durability d,
                                                bool only_expired) {
  if (id <= 0) return lease::LeaseNotFound(id);
  bool skipped = false;
  absl::StatusOr<uint64_t> rev = KvWrite(
      [&]() -> absl::StatusOr<uint64_t> {
        COWKV_ASSIGN_OR_RETURN(Tree * tree, WritableTree(subvol));
        COWKV_RETURN_IF_ERROR(lessor_->Load(subvol, tree, false));
        if (only_expired && !lessor_->IsExpired(subvol, id)) {
          skipped = true;  // kept alive since the expiry thread looked
          return kv_->revision();
        }
        COWKV_ASSIGN_OR_RETURN(std::vector<std::string> keys, lessor_->Keys(subvol, id));
        kv::KvWriteSet ws;
        for (const std::string& k : keys) kv::BufferDelete(&ws, k);
        ws.revoke_lease = static_cast<uint64_t>(id);
        const uint64_t before = kv_->revision();
        COWKV_ASSIGN_OR_RETURN(uint64_t r, ApplyLocked(subvol, 0, kv::ReadSet{}, ws));
        if (r > before) return r;
        // No key left to delete: the lease's items go alone, no revision.
        std::vector<kv::KvOp> ops;
        COWKV_RETURN_IF_ERROR(lessor_->Plan(subvol, tree, ws, {}, &ops));
        COWKV_RETURN_IF_ERROR(LeaseOpsLocked(subvol, tree, ops));
        lessor_->Applied(subvol, r);
        return r;
      },
      d);
  COWKV_RETURN_IF_ERROR(rev.status());
  if (skipped) return lease::LeaseNotFound(id);
  return rev;
}

absl::StatusOr<int64_t> StoreImpl::LeaseKeepAlive(uint64_t subvol, int64_t id) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_RETURN_IF_ERROR(LoadLeases(subvol));
  return lessor_->KeepAlive(subvol, id);
}

absl::StatusOr<LeaseInfo> StoreImpl::LeaseTimeToLive(uint64_t subvol, int64_t id, bool keys) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_RETURN_IF_ERROR(LoadLeases(subvol));
  return lessor_->Info(subvol, id, keys);
}

absl::StatusOr<std::vector<int64_t>> StoreImpl::Leases(uint64_t subvol) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_RETURN_IF_ERROR(LoadLeases(subvol));
  return lessor_->Ids(subvol);
}

absl::StatusOr<uint64_t> StoreImpl::PutWithLease(uint64_t subvol, absl::string_view key,
                                                 absl::string_view value, int64_t lease,
                                                 Durability d, uint64_t* defer_point) {
  if (lease == 0) return Put(subvol, key, value, d, defer_point);
  if (lease < 0) return lease::LeaseNotFound(lease);
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  COWKV_RETURN_IF_ERROR(kv::ValidateValue(value));
  kv::KvWriteSet ws;
  kv::BufferPut(&ws, key, value);
  ws.leases[std::string(key)] = static_cast<uint64_t>(lease);
  return KvWriteSetWrite(
      &ws, [&] { return ApplyLocked(subvol, 0, kv::ReadSet{}, ws); }, d, defer_point);
}

absl::StatusOr<int> StoreImpl::ExpireLeases(int max) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return 0;
  // Subvolumes made since the last round (snapshots) start their leases'
  // TTLs now.
  COWKV_RETURN_IF_ERROR(LoadAllLeases());
  int done = 0;
  for (const auto& [subvol, id] : lessor_->Expired(static_cast<size_t>(std::max(max, 0)))) {
    absl::StatusOr<uint64_t> rev = LeaseRevoke(subvol, id, Durability::kDefault, true);
    if (rev.ok()) {
      ++done;
    } else if (absl::IsNotFound(rev.status()) &&
               ReasonOf(rev.status()) != ErrorReason::kLeaseNotFound) {
      lessor_->Forget(subvol);  // the subvolume is gone
    } else if (!absl::IsNotFound(rev.status())) {
      return rev.status();
    }
  }
  return done;
}

void StoreImpl::LeaseExpiryLoop() {
  const absl::Duration interval = absl::Milliseconds(options_.lease_expiry_interval_ms);
  for (;;) {
    {
      absl::MutexLock hl(&handles_mu_);
      if (handles_mu_.AwaitWithTimeout(absl::Condition(&stop_), interval)) return;
    }
    // Bounded work per round; errors (a read-only store) are retried next round.
    ExpireLeases(static_cast<int>(options_.lease_expiry_batch)).IgnoreError();
  }
}

// ---- The facade --------------------------------------------------------------

absl::StatusOr<int64_t> Subvolume::LeaseGrant(int64_t ttl_seconds, int64_t id, Durability d) {
  return store_->LeaseGrant(id_, ttl_seconds, id, d);
}

absl::StatusOr<uint64_t> Subvolume::LeaseRevoke(int64_t id, Durability d) {
  return store_->LeaseRevoke(id_, id, d);
}

absl::StatusOr<int64_t> Subvolume::LeaseKeepAlive(int64_t id) {
  return store_->LeaseKeepAlive(id_, id);
}

absl::StatusOr<LeaseInfo> Subvolume::LeaseTimeToLive(int64_t id, bool keys) {
  return store_->LeaseTimeToLive(id_, id, keys);
}

absl::StatusOr<std::vector<int64_t>> Subvolume::Leases() { return store_->Leases(id_); }

absl::StatusOr<uint64_t> Subvolume::PutItemWithLease(absl::string_view key, absl::string_view value,
                                                     int64_t lease, Durability d) {
  return store_->PutWithLease(id_, key, value, lease, d);
}

void Subvolume::PutItemWithLeaseThen(absl::string_view key, absl::string_view value, int64_t lease,
                                     Durability d, RevisionDone done) {
  uint64_t point = 0;
  absl::StatusOr<uint64_t> rev = store_->PutWithLease(id_, key, value, lease, d, &point);
  if (!rev.ok()) {
    done(rev.status());
    return;
  }
  store_->AfterDurable(point, [rev = *rev, done = std::move(done)](const absl::Status& s) {
    done(s.ok() ? absl::StatusOr<uint64_t>(rev) : s);
  });
}

absl::StatusOr<int> Store::ExpireLeases(int max) { return impl_->ExpireLeases(max); }

}  // namespace cowkv
