// TxnRegistry: the server's interactive client transactions (KV.Begin ..
// KV.Commit/Abort), each behind a random 64-bit handle with a lease.
//
// A handle moves through these states:
//
//     Begin()            With() renews the lease
//   ---------> open --------------------------------+
//               |  ^________________________________|
//               |
//               +-- Commit()/Abort() -------------> finished (removed)
//               +-- ExpireIdle() past the lease ---> expired (removed,
//               |                                    remembered for ABORTED)
//               +-- ExpireClosed() its connection -> expired (likewise)
//               |   is gone
//               +-- AbortAll() (server stop) ------> finished (removed)
//
// Invariants:
//  1. An entry is in `entries_` iff it is open; its KvTransaction is
//     finished exactly once, by whoever removes it.
//  2. open_per_peer_[p] equals the number of open entries of client p, and
//     no client exceeds Limits::per_peer, nor the total Limits::total. A
//     client is a peer identity (PeerIdentity: its address without the
//     port, and its token), not a connection: opening more connections
//     gives one client no more slots.
//  3. Calls on one handle are serialized by its entry's mutex
//     (KvTransaction is not thread-safe); an entry being used is never
//     expired (ExpireIdle skips entries whose mutex is held).
//
// Errors: an unknown handle is NOT_FOUND; a handle that expired recently
// (the last kRememberExpired) is ABORTED "expired", so a client's retry loop
// restarts the transaction; over a limit is RESOURCE_EXHAUSTED.
//
// Thread-safe. Lock order: an entry's mu before the registry's mu_
// (ExpireIdle holds an entry while it re-checks the registry); no path takes
// an entry's mu while holding mu_.
#ifndef COWKV_SERVER_TXN_REGISTRY_H_
#define COWKV_SERVER_TXN_REGISTRY_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cowkv/store.h"

namespace cowkv {
namespace server {

class TxnRegistry {
 public:
  struct Limits {
    int per_peer;
    int total;
  };
  struct Begun {
    uint64_t handle = 0;
    uint64_t read_revision = 0;
    absl::Duration lease;
  };

  explicit TxnRegistry(Limits limits) : limits_(limits) {}
  ~TxnRegistry() { AbortAll(); }
  TxnRegistry(const TxnRegistry&) = delete;
  TxnRegistry& operator=(const TxnRegistry&) = delete;

  // Registers `txn` for client `identity`, begun on `connection` (the gRPC
  // peer string, "ipv4:127.0.0.1:43210"). RESOURCE_EXHAUSTED (and `txn`
  // aborted) over a limit.
  absl::StatusOr<Begun> Add(const std::string& identity, const std::string& connection,
                            std::unique_ptr<KvTransaction> txn, absl::Duration lease,
                            absl::Time now);

  // Runs `fn` on the handle's transaction, serialized with other calls on
  // it, and renews its lease.
  absl::Status With(uint64_t handle, absl::Time now,
                    const std::function<absl::Status(KvTransaction&)>& fn);

  // Finishes the handle: commits (the revision) or aborts it.
  absl::StatusOr<uint64_t> Commit(uint64_t handle, Durability durability, absl::Time now);
  absl::Status Abort(uint64_t handle, absl::Time now);

  // Aborts every open handle idle past its lease at `now`.
  void ExpireIdle(absl::Time now);
  // Aborts every open handle whose connection `is_open` says is gone (not
  // one being used by a call right now: its call decides).
  void ExpireClosed(const std::function<bool(const std::string& connection)>& is_open);
  // Aborts every open handle (server stop).
  void AbortAll();

  uint64_t open() const;
  uint64_t expired_total() const;
  // High-water marks since start: handles open at once, in all and for one
  // client (a load test's proof that a limit was reached, not exceeded).
  struct Peaks {
    uint64_t total = 0;
    uint64_t per_client = 0;
  };
  Peaks peaks() const;

  // Expired handles remembered for an ABORTED reply instead of NOT_FOUND.
  static constexpr size_t kRememberExpired = 4096;

 private:
  struct Entry {
    absl::Mutex mu;  // serializes calls on this handle (invariant 3)
    std::unique_ptr<KvTransaction> txn ABSL_GUARDED_BY(mu);
    bool finished ABSL_GUARDED_BY(mu) = false;
    // Constant after Add().
    std::string peer;        // the client identity
    std::string connection;  // the gRPC peer that began it
    absl::Duration lease;
    // Guarded by the registry's mu_.
    absl::Time deadline;
  };

  // The open entry, or the error for a missing/expired one. Expires the
  // entry first if its lease ran out (so expiry does not depend on the
  // reaper's timing).
  absl::StatusOr<std::shared_ptr<Entry>> Lookup(uint64_t handle, absl::Time now, bool remove);
  absl::Status MissingLocked(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Expires the idle entries `doomed` picks (under mu_).
  void ExpireWhere(const std::function<bool(const Entry&)>& doomed, bool closed = false);
  void RemoveLocked(uint64_t handle, const Entry& e, bool expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Limits limits_;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, std::shared_ptr<Entry>> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> open_per_peer_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> expired_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> expired_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> closed_ ABSL_GUARDED_BY(mu_);  // of expired_: by a closed connection
  uint64_t expired_total_ ABSL_GUARDED_BY(mu_) = 0;
  Peaks peaks_ ABSL_GUARDED_BY(mu_);
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_TXN_REGISTRY_H_
