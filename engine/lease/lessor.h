// Lessor: the leases of every subvolume in memory (etcd's lessor), and the
// kv::ApplyHook that writes their items with the key changes they go with.
//
//   StoreImpl (engine/store/lease_path.cc)   locks, durability, expiry thread
//     Lessor                                   ids, TTLs, deadlines, attached keys
//       lease items (lease_item.h)             the same state, persisted
//
// A subvolume's leases are loaded from its tree on first use (one scan of
// its 'L' items) and kept in memory from then on: the record of every
// lease and which lease each attached key belongs to. Deadlines live in
// memory only: a loaded lease's deadline is now + its TTL (etcd refreshes
// every lease to its full TTL when a new leader starts); KeepAlive does
// the same and writes nothing.
//
// Invariants (under mu_):
//   1. attached_[k] == id exactly when k is in leases_[id].keys;
//   2. every loaded subvolume's state equals its lease items as of the last
//      change applied (Plan/Applied pairs run under the exclusive tree lock;
//      a plan not followed by Applied is dropped by the next Plan);
//   3. at most kMaxLeasesPerSubvolume leases, kMaxKeysPerLease keys per
//      lease, kMaxLeasedKeysPerSubvolume attached keys per subvolume.
// Thread-safety: every method takes mu_, a leaf below the store's tree
// locks (and above the node cache, which a load reads through).
#ifndef COWKV_ENGINE_LEASE_LESSOR_H_
#define COWKV_ENGINE_LEASE_LESSOR_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/lease.h"
#include "engine/kv/kv_space.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace lease {

class Lessor : public kv::ApplyHook {
 public:
  // `now_ms`: a monotonic clock in milliseconds (Options::lease_clock_ms).
  // `bug_keep_attachment`: the planted bug kLeasePutKeepsAttachment (a put
  // without a lease leaves the key attached).
  Lessor(std::function<int64_t()> now_ms, bool bug_keep_attachment);

  int64_t Now() const { return now_ms_(); }

  // Loads `subvol`'s leases from `tree` unless loaded. `frozen` (a
  // read-only snapshot): its leases never expire and cannot be kept alive.
  absl::Status Load(uint64_t subvol, Tree* tree, bool frozen) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a put of `key` without a lease must go through Apply (the key
  // is attached, or `subvol` is not loaded yet). One hash lookup.
  bool PutNeedsApply(uint64_t subvol, absl::string_view key) ABSL_LOCKS_EXCLUDED(mu_);
  bool IsLoaded(uint64_t subvol) ABSL_LOCKS_EXCLUDED(mu_);
  // Forgets a subvolume (deleted).
  void Forget(uint64_t subvol) ABSL_LOCKS_EXCLUDED(mu_);

  // kv::ApplyHook. Plan also serves the changes that have no KV key op:
  // a revoke of a lease whose keys are gone (ops empty, ws.revoke_lease).
  absl::Status Plan(uint64_t subvol, Tree* tree, const kv::KvWriteSet& ws,
                    const std::vector<kv::KvOp>& ops, std::vector<kv::KvOp>* extra) override
      ABSL_LOCKS_EXCLUDED(mu_);
  void Applied(uint64_t subvol, uint64_t revision) override ABSL_LOCKS_EXCLUDED(mu_);

  // A grant's record op (Applied commits it). `id` 0 = pick one.
  // ALREADY_EXISTS for a lease id in use; RESOURCE_EXHAUSTED (kLimit) past
  // kMaxLeasesPerSubvolume.
  absl::StatusOr<int64_t> PlanGrant(uint64_t subvol, int64_t ttl_seconds, int64_t id,
                                    std::vector<kv::KvOp>* ops) ABSL_LOCKS_EXCLUDED(mu_);
  // The keys a revoke of `id` deletes; NOT_FOUND (kLeaseNotFound) if no such lease.
  absl::StatusOr<std::vector<std::string>> Keys(uint64_t subvol, int64_t id)
      ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<int64_t> KeepAlive(uint64_t subvol, int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<LeaseInfo> Info(uint64_t subvol, int64_t id, bool keys) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<int64_t> Ids(uint64_t subvol) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether lease `id` of `subvol` exists and its deadline passed.
  bool IsExpired(uint64_t subvol, int64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Up to `max` expired leases (subvolume, id), soonest deadline first.
  std::vector<std::pair<uint64_t, int64_t>> Expired(size_t max) ABSL_LOCKS_EXCLUDED(mu_);

  // Statistics.
  uint64_t leases() ABSL_LOCKS_EXCLUDED(mu_);
  uint64_t attached_keys() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Lease {
    int64_t ttl = 0;       // seconds
    int64_t deadline = 0;  // ms on now_ms_
    std::set<std::string> keys;
  };
  // PutNeedsApply's lock-free answer: 1 + the id of a loaded subvolume
  // with no attached key (0: none known). Cleared by every change.
  std::atomic<uint64_t> clear_subvol_{0};
  struct SubvolLeases {
    bool frozen = false;
    std::map<uint64_t, Lease> leases;
    absl::flat_hash_map<std::string, uint64_t> attached;
  };
  // One change to the in-memory state, applied by Applied().
  struct Change {
    enum class Kind { kAttach, kDetach, kGrant, kRemove } kind;
    uint64_t id = 0;
    std::string key;
    int64_t ttl = 0;
  };

  absl::Status LoadLocked(uint64_t subvol, Tree* tree, bool frozen)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<SubvolLeases*> Find(uint64_t subvol) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int64_t Deadline(int64_t ttl_seconds) const;

  const std::function<int64_t()> now_ms_;
  const bool bug_keep_attachment_;
  absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, SubvolLeases> subvols_ ABSL_GUARDED_BY(mu_);
  // The last Plan's changes, for `pending_subvol_`.
  uint64_t pending_subvol_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<Change> pending_ ABSL_GUARDED_BY(mu_);
  std::mt19937_64 rng_ ABSL_GUARDED_BY(mu_);
};

// LEASE_NOT_FOUND: "lease <id> not found" (NOT_FOUND, etcd's ErrLeaseNotFound).
absl::Status LeaseNotFound(int64_t id);

}  // namespace lease
}  // namespace cowkv

#endif  // COWKV_ENGINE_LEASE_LESSOR_H_
