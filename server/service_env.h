// ServiceEnv: what every gRPC service of cowkvd shares, and Run(), the one
// wrapper every handler body goes through.
//
// Run() does, in order: refuse the call with UNAVAILABLE if the server is
// stopping; check the bearer token (UNAUTHENTICATED); refuse a call whose
// deadline has already passed or that was cancelled; run the body; map its
// absl::Status through status_mapping.h (POSIX-named for Files); and record
// the latency and code in RpcMetrics. Handler bodies therefore return
// absl::Status and never build a grpc::Status.
//
// Long bodies (Range, Read and Write streams) call CheckAlive() between
// pieces of work, so a client's deadline or cancellation stops them.
//
// Thread-safe. The Store, device, metrics and registry are borrowed from the
// Server, which outlives every call (it shuts gRPC down before they go).
#ifndef COWKV_SERVER_SERVICE_ENV_H_
#define COWKV_SERVER_SERVICE_ENV_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "grpcpp/support/server_callback.h"
#include "server/admission.h"
#include "server/auth.h"
#include "server/file_handles.h"
#include "server/limits.h"
#include "server/log.h"
#include "server/metrics.h"
#include "server/status_mapping.h"
#include "server/txn_registry.h"

namespace cowkv {
namespace server {

class WatchHub;

// For raw callback methods (KvService's Put, Delete, Txn): parses `buffer`
// as `Msg` as gRPC would; one that does not parse is the INVALID_ARGUMENT
// (UNPARSABLE_REQUEST) the request-parse interceptor gives other methods.
template <typename Msg>
absl::Status ParseRawRequest(const grpc::ByteBuffer* buffer, absl::string_view method, Msg* out) {
  if (buffer == nullptr || buffer->Length() == 0) {  // every field at its default
    out->Clear();
    return absl::OkStatus();
  }
  grpc::ByteBuffer shared(*buffer);  // shares the slices; the reader needs a mutable buffer
  grpc::ProtoBufferReader reader(&shared);
  if (!out->ParseFromZeroCopyStream(&reader)) {
    return UnparsableRequestError(method, Msg::descriptor()->full_name());
  }
  return absl::OkStatus();
}

// The response of a raw callback method; false only if protobuf refused a
// message the server built (larger than 2 GiB: never, with its limits).
template <typename Msg>
bool SerializeRawResponse(const Msg& msg, grpc::ByteBuffer* out) {
  bool own_buffer = false;
  return grpc::SerializationTraits<Msg>::Serialize(msg, out, &own_buffer).ok();
}

class ServiceEnv {
 public:
  enum class Errors { kPlain, kPosix };

  // `tokens` empty = no authentication. `default_durable`: what
  // DURABILITY_DEFAULT means on this store (for the durable-write metric).
  ServiceEnv(Store* store, BlockDevice* device, RpcMetrics* metrics, TxnRegistry* txns,
             TokenTable tokens, bool default_durable, RequestLimits limits = {});
  ServiceEnv(const ServiceEnv&) = delete;
  ServiceEnv& operator=(const ServiceEnv&) = delete;

  Store& store() { return *store_; }
  BlockDevice& device() { return *device_; }
  RpcMetrics& metrics() { return *metrics_; }
  TxnRegistry& txns() { return *txns_; }
  // Open file handles (Files.Open); set once by the server before serving.
  void set_file_handles(FileHandles* h) { file_handles_ = h; }
  FileHandles& file_handles() { return *file_handles_; }
  // KV.Watch's hub (watch_hub.h); set once by the server before serving.
  void set_watch_hub(WatchHub* h) { watch_hub_ = h; }
  WatchHub* watch_hub() { return watch_hub_; }
  const RequestLimits& limits() const { return limits_; }
  const TokenTable& tokens() const { return tokens_; }
  MemoryBudget& budget() { return budget_; }

  // Runs one RPC body; see the file comment. `method` is the full method
  // name, "cowkv.v1.KV/Get".
  grpc::Status Run(grpc::ServerContext* ctx, absl::string_view method, Errors errors,
                   const std::function<absl::Status()>& body);

  // Run() for a callback-API method whose answer may come later from
  // another thread (a write answered once durable, without a thread held
  // meanwhile). The same checks in the same order; then `body` runs on the
  // calling thread, with the caller known (RequireAccess). It either
  // returns an error — answered at once — or returns OK having arranged for
  // `answer` to be called exactly once, from any thread, after it filled
  // the response. A grant it moves into `*keep` (and the per-client call
  // count) lasts until gRPC is done with the call, as Run's CallScope does.
  // Such calls hold no thread: they are bounded by their own count,
  // server-wide, against RequestLimits::max_waiting_writes
  // (RESOURCE_EXHAUSTED past it), and a body holding a large request admits its bytes in `keep`
  // (MemoryBudget::TryAcquire: a callback body must never block).
  using Answer = std::function<void(const absl::Status&)>;
  using AsyncBody = std::function<absl::Status(Answer answer, MemoryBudget::Grant* keep)>;
  grpc::ServerUnaryReactor* RunAsync(grpc::CallbackServerContext* ctx, absl::string_view method,
                                     Errors errors, const AsyncBody& body);

  // From now on Run() refuses calls with UNAVAILABLE. Calls already running
  // finish (the drain).
  void SetStopping() { stopping_.store(true, std::memory_order_release); }
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

  // CANCELLED or DEADLINE_EXCEEDED when the call should stop now.
  static absl::Status CheckAlive(grpc::ServerContextBase* ctx);

  // PERMISSION_DENIED unless the caller of the running call (Run sets it
  // for its body, on its thread) has `access` / may see subvolume `name`.
  // Always OK when authentication is off.
  static absl::Status RequireAccess(Access access);
  static absl::Status RequireSubvolume(absl::string_view name);

  // Opens a subvolume by name ("" = "default"), checking the name first,
  // then that the caller may see it.
  absl::StatusOr<std::unique_ptr<Subvolume>> OpenSubvolume(absl::string_view field,
                                                           absl::string_view name);

  // Whether a write with durability `d` waits for a sync (for metrics).
  bool IsDurable(Durability d) const {
    return d == Durability::kDurable || (d == Durability::kDefault && default_durable_);
  }

 private:
  class CallReactor;
  grpc::Status Admit(grpc::ServerContextBase* ctx, absl::string_view method,
                     const std::string& client, bool entered, bool over_waiting_bound,
                     const Principal** caller);
  // The caller's principal; nullptr when authentication is off.
  absl::StatusOr<const Principal*> Authenticate(grpc::ServerContextBase* ctx) const;
  // A DATA_LOSS, ENOSPC or read-only error is an operator's business:
  // logged (rate-limited), with the method and the peer.
  void LogIfOperatorError(grpc::ServerContextBase* ctx, absl::string_view method,
                          const absl::Status& s);

  // Constant after construction.
  Store* const store_;
  BlockDevice* const device_;
  RpcMetrics* const metrics_;
  TxnRegistry* const txns_;
  FileHandles* file_handles_ = nullptr;
  WatchHub* watch_hub_ = nullptr;
  const TokenTable tokens_;
  const bool default_durable_;
  const RequestLimits limits_;
  MemoryBudget budget_;
  ClientCalls client_calls_;
  LogLimiter auth_log_{5, absl::Seconds(10)};
  LogLimiter error_log_{10, absl::Seconds(10)};

  // Callback calls not yet answered (RunAsync), server-wide: they hold no
  // thread, so the thread bound does not count them; this does, against
  // RequestLimits::max_waiting_writes.
  std::atomic<int> async_calls_{0};

  // Release/acquire: a call that sees `true` also sees everything the
  // stopping thread did before setting it (it is set once, never cleared).
  std::atomic<bool> stopping_{false};
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_SERVICE_ENV_H_
