// Server metrics in the Prometheus text format (version 0.0.4), served on
// --metrics-listen at /metrics.
//
// Four sources:
//  - per-RPC latency histograms and per-code counts, measured by the server
//    around every call (grpc_server_handling_seconds and
//    grpc_server_handled_total, the names go-grpc-prometheus made familiar);
//  - latency of the engine work the server waits on: Admin.Sync (one engine
//    commit: cowkv_sync_commit_duration_seconds) and durable KV writes
//    (which wait for a log sync or commit:
//    cowkv_durable_write_duration_seconds);
//  - every StoreStats counter (stats_table.h), read at scrape time;
//  - the engine's own latency histograms in StoreStats, read at scrape
//    time: every engine commit by trigger
//    (cowkv_commit_duration_seconds{trigger}) and every log sync
//    (cowkv_log_sync_duration_seconds).
//
// Invariant: the set of methods is fixed at construction (from the service
// descriptors), so recording never allocates or locks.
// Thread-safe: recording uses relaxed atomics (each counter is independent;
// a scrape may see a histogram mid-update, which Prometheus tolerates).
#ifndef COWKV_SERVER_METRICS_H_
#define COWKV_SERVER_METRICS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cowkv/store.h"
#include "grpcpp/support/status.h"

namespace cowkv {
namespace server {

// A latency histogram with fixed buckets (100 us .. 10 s).
class LatencyHistogram {
 public:
  static constexpr std::array<double, 16> kBucketsSeconds = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
      0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,     10};

  void Observe(absl::Duration d);
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  // Appends `<name>_bucket{<labels>,le=...}`, `_sum` and `_count` lines.
  void Render(absl::string_view name, absl::string_view labels, std::string* out) const;

 private:
  // Relaxed: each is an independent counter; nothing is published through them.
  std::array<std::atomic<uint64_t>, kBucketsSeconds.size()> buckets_{};
  std::atomic<uint64_t> count_{0};
  std::atomic<uint64_t> sum_ns_{0};
};

class RpcMetrics {
 public:
  // `methods`: full method names, "cowkv.v1.KV/Get".
  explicit RpcMetrics(const std::vector<std::string>& methods);
  RpcMetrics(const RpcMetrics&) = delete;
  RpcMetrics& operator=(const RpcMetrics&) = delete;

  // Records one started call (grpc_server_started_total).
  void Started(absl::string_view method);
  // Records one finished call. An unknown method is counted under "other".
  void Record(absl::string_view method, grpc::StatusCode code, absl::Duration latency);
  // Messages of a streaming call beyond what Started/Record imply (a unary
  // call counts one received at its start and one sent when it succeeds).
  void StreamMessages(absl::string_view method, uint64_t received, uint64_t sent);

  LatencyHistogram& sync_commit() { return sync_commit_; }
  LatencyHistogram& durable_write() { return durable_write_; }
  uint64_t calls() const { return calls_.load(std::memory_order_relaxed); }
  uint64_t errors() const { return errors_.load(std::memory_order_relaxed); }
  // Calls of one method so far (tests).
  uint64_t CallsOf(absl::string_view method) const;

  // The RPC and engine-latency metrics, in text format.
  void Render(std::string* out) const;

 private:
  static constexpr int kCodes = 17;  // grpc::StatusCode OK .. UNAUTHENTICATED
  struct Method {
    std::string service;  // "cowkv.v1.KV"
    std::string name;     // "Get"
    const char* type = "unary";  // grpc_type: unary, server_stream, client_stream
    LatencyHistogram latency;
    std::atomic<uint64_t> started{0};
    std::atomic<uint64_t> received{0};
    std::atomic<uint64_t> sent{0};
    std::array<std::atomic<uint64_t>, kCodes> codes{};
  };
  Method* Find(absl::string_view method) const;

  // Constant after construction.
  absl::flat_hash_map<std::string, std::unique_ptr<Method>> methods_;
  std::vector<const Method*> order_;  // render order
  std::unique_ptr<Method> other_;
  // Own synchronization (relaxed atomics: independent counters).
  LatencyHistogram sync_commit_;
  LatencyHistogram durable_write_;
  std::atomic<uint64_t> calls_{0};
  std::atomic<uint64_t> errors_{0};
};

// Server gauges that are not engine counters.
struct ServerGauges {
  uint64_t open_handles = 0;
  uint64_t expired_handles = 0;
  bool stopping = false;
  uint64_t inflight_bytes = 0;
  uint64_t admission_waits = 0;
  uint64_t admission_refusals = 0;
};

// The whole /metrics page.
std::string RenderPrometheus(const StoreStats& stats, const RpcMetrics& rpcs,
                             const ServerGauges& gauges);

// "OK", "NOT_FOUND", ... for a gRPC code.
absl::string_view CodeName(grpc::StatusCode code);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_METRICS_H_
