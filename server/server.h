// Server: cowkvd in one object — the locked device, the engine Store, the
// gRPC server with the cowkv.v1 services (and request_parse_interceptor.h
// for requests that do not parse), grpc.health.v1 and reflection (v1alpha and v1),
// the /metrics HTTP listener, and the lease reaper for interactive
// transactions. main.cc wraps it in flags and signals; server_test.cc runs
// it in-process.
//
//   absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(options);
//   ... (*s)->port() ...
//   absl::Status stopped = (*s)->Stop();   // drain, commit, close
//
// Lifecycle:
//
//   Start() --> serving --Stop()--> draining --> stopped
//
//  - serving: every RPC runs; health reports SERVING.
//  - draining (Stop): health reports NOT_SERVING; new calls get UNAVAILABLE
//    (ServiceEnv::SetStopping) and gRPC's Shutdown lets in-flight calls
//    finish for up to drain_timeout, then cancels them; open interactive
//    transactions are aborted.
//  - stopped: the engine has committed and closed; the device lock is
//    released. Stop() returns the commit's status.
//
// Thread-safe: port()/metrics_port() are constant; Stop() may be called from
// any thread, once or many times (later calls return the first result).
#ifndef COWKV_SERVER_SERVER_H_
#define COWKV_SERVER_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "cowkv/store.h"
#include "server/auth.h"
#include "server/device.h"
#include "server/follower.h"
#include "server/lease_service.h"
#include "server/limits.h"
#include "server/metrics.h"
#include "server/reflection_v1.h"
#include "server/service_env.h"
#include "server/services.h"
#include "server/txn_registry.h"
#include "server/watch_hub.h"

namespace grpc {
class Server;
}  // namespace grpc
namespace httplib {
class Server;
}  // namespace httplib

namespace cowkv {
namespace server {

struct ServerOptions {
  DeviceOptions device;
  // host:port for gRPC; port 0 picks a free one (see port()).
  std::string listen = "127.0.0.1:7420";
  // host:port for /metrics; empty = no metrics listener; port 0 picks one.
  std::string metrics_listen = "127.0.0.1:7421";
  // PEM contents; both empty = plaintext, both set = TLS.
  std::string tls_cert_pem;
  std::string tls_key_pem;
  // PEM CA: require and verify client certificates signed by it (mTLS).
  std::string client_ca_pem;
  // Bearer tokens with roles (auth.h); empty = no authentication.
  TokenTable tokens;
  // One admin token, when `tokens` is empty (tests, embedders).
  std::string auth_token;
  // The engine's options (durability default, commit interval, ...).
  Options engine;
  RequestLimits limits;
  int max_txns_per_peer = kMaxOpenTxnsPerPeer;
  int max_txns_total = kMaxOpenTxnsTotal;
  int max_files_per_peer = kMaxOpenFilesPerPeer;
  int max_files_total = kMaxOpenFilesTotal;
  absl::Duration drain_timeout = absl::Milliseconds(kDrainTimeoutMs);
  absl::Duration reap_interval = absl::Milliseconds(200);
  // KV.Watch's bounds and timings.
  WatchLimits watch;
  // A read replica of another cowkvd (follower.h); off unless `primary`.
  FollowOptions follow;
};

class Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> Start(ServerOptions options);
  ~Server();  // Stop()s if still running; its status is then lost
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  bool device_created() const { return device_->created(); }

  // Drains, commits and closes; see the lifecycle above.
  absl::Status Stop();

  // The /metrics page as it would be served now.
  std::string RenderMetrics();
  RpcMetrics& metrics() { return *metrics_; }
  // The read replica's pulls (empty unless following).
  std::vector<ReplicaStatus> Replicas() const;
  // KV.Watch's hub (its read counters, for tests).
  WatchHub& watch_hub() { return *watch_hub_; }
  // Makes every later call UNAVAILABLE without shutting down (tests of the
  // draining state).
  void TEST_SetStopping() { env_->SetStopping(); }

  // Full names of every cowkv.v1 method ("cowkv.v1.KV/Get").
  static std::vector<std::string> MethodNames();

 private:
  explicit Server(ServerOptions options);
  absl::Status Init();
  absl::Status StartGrpc();
  absl::Status StartMetrics();
  void ReapLoop();

  const ServerOptions options_;
  // Constant after Start(), in construction order (destroyed in reverse:
  // gRPC before the services, the store before the device).
  std::unique_ptr<LockedDevice> device_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<RpcMetrics> metrics_;
  std::unique_ptr<TxnRegistry> txns_;
  std::unique_ptr<FileHandles> file_handles_;
  std::unique_ptr<ServiceEnv> env_;
  // Outlives gRPC (the Watch handlers use it); stopped first in Stop().
  std::unique_ptr<WatchHub> watch_hub_;
  std::unique_ptr<SubvolumesService> subvolumes_;
  std::unique_ptr<KvService> kv_;
  std::unique_ptr<FilesService> files_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<LeaseService> lease_;
  std::unique_ptr<ReflectionV1Service> reflection_v1_;
  std::unique_ptr<Follower> follower_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<httplib::Server> http_;
  int port_ = 0;
  int metrics_port_ = 0;
  std::thread http_thread_;
  std::thread reaper_;
  absl::Notification stop_reaper_;

  absl::Mutex stop_mu_;
  bool stopped_ ABSL_GUARDED_BY(stop_mu_) = false;
  absl::Status stop_status_ ABSL_GUARDED_BY(stop_mu_);
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_SERVER_H_
