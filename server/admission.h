// MemoryBudget: admission control for the bytes a call's response holds.
//
// Every handler that builds a large response (a KV value, a range page, a
// Txn's range results, a Read chunk) first acquires the bytes it may hold;
// the grant is released when the handler is done with them. When the
// server-wide budget is spent, a call waits (checking its deadline and
// cancellation) up to `max_wait`, then fails RESOURCE_EXHAUSTED ("server
// busy"): memory in flight stays under the budget however many calls come,
// and is given back when calls end. A request larger than the whole budget
// is admitted alone (it waits until nothing else holds bytes).
//
// The thread count is bounded separately, by gRPC's ResourceQuota
// (ServerOptions::max_threads): the synchronous server runs one thread per
// call, and calls past the bound are refused by gRPC with
// RESOURCE_EXHAUSTED before a handler runs.
//
// Thread-safe.
#ifndef COWKV_SERVER_ADMISSION_H_
#define COWKV_SERVER_ADMISSION_H_

#include <cstdint>

#include "absl/base/thread_annotations.h"
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
  absl::StatusOr<Grant> Acquire(uint64_t bytes, grpc::ServerContext* ctx);

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

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_ADMISSION_H_
