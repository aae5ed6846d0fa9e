// Follower: `cowkvd --follow ADDR --follow-subvolume NAME[,...]`, a read
// replica that pulls incremental sends from a primary (issue 19;
// docs/design.md "Read replicas").
//
// Every interval (and at once after start), for each followed subvolume
// NAME, one pull at a time:
//
//   1. local NAME, if present, must be a received read-only replica; its
//      received_uuid names the primary snapshot it came from (the parent);
//   2. primary: Snapshot -r NAME as NAME@follow-<unix ms>;
//   3. primary Send (-p the parent, if the primary still has it; else a
//      full stream) piped into a local Receive of NAME@follow-<ms>;
//   4. local: ReplaceSubvolume(NAME@follow-<ms> -> NAME): the old replica
//      goes and the new one takes its name in one commit, so readers always
//      find "the latest replica of NAME" at NAME;
//   5. rotate: delete every other NAME@follow-* on the primary (the new one
//      is the next parent) and any local leftover of a cut pull.
//
// A failed pull leaves the last replica serving; its error is kept for
// status and metrics, and the next try waits interval * 2^failures (at
// most max_backoff). A pull is bounded by pull_timeout (the gRPC deadline
// of each primary call) and by the stream's memory bounds (one message at
// a time). Writes to a replica are refused: it is a read-only snapshot
// (FAILED_PRECONDITION, READ_ONLY_SNAPSHOT).
//
// Thread safety: Start/Stop from one thread; Status and RenderMetrics from
// any.
#ifndef COWKV_SERVER_FOLLOWER_H_
#define COWKV_SERVER_FOLLOWER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cowkv/store.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace cowkv {
namespace server {

struct FollowOptions {
  std::string primary;  // host:port; empty = not a follower
  std::vector<std::string> subvolumes;
  absl::Duration interval = absl::Seconds(5);
  absl::Duration max_backoff = absl::Seconds(60);
  absl::Duration pull_timeout = absl::Minutes(10);
  std::string token;       // bearer token for the primary (empty: none)
  std::string tls_ca_pem;  // TLS to the primary, verified with this CA (empty: plaintext)
};

// The snapshot name pattern on the primary (and of a pull in progress here).
inline constexpr char kFollowSuffix[] = "@follow-";

struct ReplicaStatus {
  std::string name;
  std::string snapshot;          // the primary snapshot the replica is (NAME@follow-<ms>)
  int64_t snapshot_unix_ms = 0;  // when it was taken on the primary (0: no replica yet)
  int64_t last_pull_unix_ms = 0;
  uint64_t pulls = 0;  // successful
  uint64_t failures = 0;
  uint64_t bytes_received = 0;
  std::string last_error;  // of the last pull; empty if it succeeded
};

class Follower {
 public:
  Follower(FollowOptions options, Store* store);
  ~Follower();  // Stop()s
  Follower(const Follower&) = delete;
  Follower& operator=(const Follower&) = delete;

  void Start();
  // Ends the loop; a pull in flight is cancelled (its receive is dropped).
  void Stop();
  const std::string& primary() const { return options_.primary; }
  std::vector<ReplicaStatus> Status() const;
  // Prometheus text: cowkv_replica_lag_seconds, _bytes_received_total,
  // _pulls_total, _failures_total, _up, per subvolume.
  std::string RenderMetrics() const;

 private:
  class Primary;
  void Loop();
  absl::Status PullOnce(Primary& primary, const std::string& name, uint64_t* bytes,
                        std::string* snapshot, int64_t* snapshot_ms);

  const FollowOptions options_;
  Store* const store_;
  std::thread thread_;
  absl::Notification stop_;
  absl::Mutex call_mu_;
  grpc::ClientContext* call_ ABSL_GUARDED_BY(call_mu_) = nullptr;  // the Send in flight
  mutable absl::Mutex mu_;
  std::vector<ReplicaStatus> replicas_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_FOLLOWER_H_
