// Leases, as etcd's: a lease has a TTL in seconds; keys put with it
// (Subvolume::PutItem with a lease, TxnOp::lease) are deleted, all in one
// revision, when it is revoked or expires without a keep-alive. Leases
// belong to a subvolume (Subvolume::LeaseGrant and friends, store.h) and
// persist across restarts; after a restart every lease's remaining TTL
// starts again from its full TTL, as etcd refreshes leases when a new
// leader starts. docs/design.md "Leases" has the rules; limits.h the bounds.
#ifndef COWKV_INCLUDE_COWKV_LEASE_H_
#define COWKV_INCLUDE_COWKV_LEASE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace cowkv {

// Subvolume::LeaseTimeToLive's answer (etcd's LeaseTimeToLiveResponse).
struct LeaseInfo {
  int64_t id = 0;
  int64_t granted_ttl = 0;  // seconds, as granted
  // Seconds left, rounded up; 0 when the deadline passed and the expiry
  // has not run yet.
  int64_t ttl = 0;
  std::vector<std::string> keys;  // sorted; only when asked for
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_LEASE_H_
