// MemoryBudget: admission control for the bytes a call's response holds.
//
// Every handler that builds a large response (a KV value, a range page, a
// Txn's range results, a Read chunk) first acquires the bytes it may hold.
// A unary response outlives its handler: gRPC holds the message and its
// serialized copy until the client reads it (the handler's thread waits
// for that), so unary handlers acquire twice the payload and hand the
// grant to CallScope::KeepUntilSent; a stream's grant covers one chunk,
// whose Write returns once the transport took it. When the
// server-wide budget is spent, a call waits (checking its deadline and
// cancellation) up to `max_wait`, then fails RESOURCE_EXHAUSTED ("server
// busy"): memory in flight stays under the budget however many calls come,
// and is given back when calls end. A request larger than the whole budget
// is admitted alone (it waits until nothing else holds bytes).
//
// The thread count is bounded separately, by gRPC's ResourceQuota
// (ServerOptions::max_threads): the synchronous server runs one thread per
// call, and calls past the bound are refused by gRPC with
// RESOURCE_EXHAUSTED before a handler runs. The callback methods (KV Put,
// Delete, Txn) hold no thread while their write becomes durable: they are
// counted against their own bound (--max-waiting-writes) by
// ServiceEnv::RunAsync, and the bytes of
// a large request are admitted with TryAcquire (never waiting: a callback
// runs on one of gRPC's own threads) until the write is durable.
//
// Thread-safe.
#ifndef COWKV_SERVER_ADMISSION_H_
#define COWKV_SERVER_ADMISSION_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server_context.h"

namespace cowkv {
namespace server {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit, absl::Duration max_wait = absl::Seconds(10))
      : limit_(limit), max_wait_(max_wait) {}
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Holds bytes of the budget until destroyed (movable).
  class Grant {
   public:
    Grant() = default;
    Grant(Grant&& o) noexcept : budget_(o.budget_), bytes_(o.bytes_) { o.budget_ = nullptr; }
    Grant& operator=(Grant&& o) noexcept;
    ~Grant() { Release(); }
    uint64_t bytes() const { return bytes_; }
    void Release();

   private:
    friend class MemoryBudget;
    Grant(MemoryBudget* b, uint64_t bytes) : budget_(b), bytes_(bytes) {}
    MemoryBudget* budget_ = nullptr;
    uint64_t bytes_ = 0;
  };

  // Waits for `bytes` (at most the whole budget). `ctx` (may be null): a
  // cancelled call or a passed deadline stops the wait (CANCELLED /
  // DEADLINE_EXCEEDED); past max_wait, RESOURCE_EXHAUSTED.
  absl::StatusOr<Grant> Acquire(uint64_t bytes, grpc::ServerContextBase* ctx);
  // Acquire without waiting, for callback calls (they run on gRPC's own
  // threads, which must not block: the release they would wait for may need
  // one of them): the grant, or RESOURCE_EXHAUSTED (SERVER_BUSY) at once.
  absl::StatusOr<Grant> TryAcquire(uint64_t bytes);

  uint64_t limit() const { return limit_; }
  uint64_t in_use() const;
  uint64_t peak() const;          // the most ever held at once
  uint64_t waits() const;         // acquisitions that had to wait
  uint64_t refusals() const;      // acquisitions refused after waiting

 private:
  void Release(uint64_t bytes);

  const uint64_t limit_;
  const absl::Duration max_wait_;
  mutable absl::Mutex mu_;
  absl::CondVar freed_;
  uint64_t in_use_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t peak_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t waits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t refusals_ ABSL_GUARDED_BY(mu_) = 0;
};

// A unary response's memory: the message and its serialized copy.
inline constexpr uint64_t kUnaryResponseCopies = 2;

// The span of one call on a synchronous-server thread: from just before
// its handler runs until gRPC has sent its response and status (for a
// client that does not read, until it does or the connection goes) — the
// whole time the call holds the thread and its response's memory. Opened
// and closed by gRPC's global callbacks (Pre/PostSynchronousRequest), which
// Install() sets once per process.
class CallScope {
 public:
  static void Install();
  // Keeps `grant` until the running call ends; without a scope (a handler
  // called outside gRPC), it is released at once.
  static void KeepUntilSent(MemoryBudget::Grant grant);
  // Runs `fn` when the running call ends (at once without a scope).
  static void AtEnd(std::function<void()> fn);
};

// A unary handler's grant: on destruction (the handler's end) it goes to
// CallScope::KeepUntilSent, so it covers the response until it is sent.
//
//   ResponseGrant grant;
//   COWKV_ASSIGN_OR_RETURN(grant, budget.Acquire(kUnaryResponseCopies * n, ctx));
class ResponseGrant {
 public:
  ResponseGrant() = default;
  ResponseGrant(const ResponseGrant&) = delete;
  ResponseGrant& operator=(const ResponseGrant&) = delete;
  ResponseGrant& operator=(MemoryBudget::Grant g) {
    grant_ = std::move(g);
    return *this;
  }
  ~ResponseGrant() { CallScope::KeepUntilSent(std::move(grant_)); }
  void Release() { grant_.Release(); }

 private:
  MemoryBudget::Grant grant_;
};

// Calls in flight per client address (threads they hold, unread responses
// included): one client cannot take every thread of the server.
class ClientCalls {
 public:
  explicit ClientCalls(int per_client) : per_client_(per_client) {}
  // False when `client` already has per_client calls in flight.
  bool Enter(const std::string& client);
  void Leave(const std::string& client);
  int per_client() const { return per_client_; }

 private:
  const int per_client_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, int> in_flight_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_ADMISSION_H_
