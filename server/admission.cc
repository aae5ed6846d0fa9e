// Admission control for response bytes; see admission.h.
#include "server/admission.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/server.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {

MemoryBudget::Grant& MemoryBudget::Grant::operator=(Grant&& o) noexcept {
  if (this != &o) {
    Release();
    budget_ = o.budget_;
    bytes_ = o.bytes_;
    o.budget_ = nullptr;
  }
  return *this;
}

void MemoryBudget::Grant::Release() {
  if (budget_ != nullptr) budget_->Release(bytes_);
  budget_ = nullptr;
}

absl::StatusOr<MemoryBudget::Grant> MemoryBudget::Acquire(uint64_t bytes,
                                                          grpc::ServerContextBase* ctx) {
  bytes = std::min(bytes, limit_);
  const absl::Time give_up = absl::Now() + max_wait_;
  absl::MutexLock l(&mu_);
  bool waited = false;
  while (in_use_ + bytes > limit_) {
    if (!waited) ++waits_;
    waited = true;
    if (ctx != nullptr && ctx->IsCancelled()) {
      return absl::CancelledError("the call was cancelled while waiting for memory");
    }
    if (ctx != nullptr && absl::FromChrono(ctx->deadline()) < absl::Now()) {
      return absl::DeadlineExceededError("the deadline passed while waiting for memory");
    }
    if (absl::Now() >= give_up) {
      ++refusals_;
      return WithServerReason(
          absl::ResourceExhaustedError(absl::StrCat(
              "server busy: responses in flight hold ", in_use_, " bytes of the ", limit_,
              "-byte budget (cowkvd --max-inflight-bytes) and this call needs ", bytes,
              "; retry later")),
          "SERVER_BUSY");
    }
    freed_.WaitWithTimeout(&mu_, absl::Milliseconds(50));
  }
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  return Grant(this, bytes);
}

absl::StatusOr<MemoryBudget::Grant> MemoryBudget::TryAcquire(uint64_t bytes) {
  bytes = std::min(bytes, limit_);
  absl::MutexLock l(&mu_);
  if (in_use_ + bytes > limit_) {
    ++refusals_;
    return WithServerReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "server busy: requests and responses in flight hold ", in_use_, " bytes of the ",
            limit_, "-byte budget (cowkvd --max-inflight-bytes) and this write needs ", bytes,
            "; retry with backoff")),
        "SERVER_BUSY");
  }
  in_use_ += bytes;
  peak_ = std::max(peak_, in_use_);
  return Grant(this, bytes);
}

void MemoryBudget::Release(uint64_t bytes) {
  absl::MutexLock l(&mu_);
  in_use_ -= std::min(in_use_, bytes);
  freed_.SignalAll();
}

uint64_t MemoryBudget::in_use() const {
  absl::MutexLock l(&mu_);
  return in_use_;
}
uint64_t MemoryBudget::peak() const {
  absl::MutexLock l(&mu_);
  return peak_;
}
uint64_t MemoryBudget::waits() const {
  absl::MutexLock l(&mu_);
  return waits_;
}
uint64_t MemoryBudget::refusals() const {
  absl::MutexLock l(&mu_);
  return refusals_;
}

namespace {

struct ScopeState {
  bool open = false;
  std::vector<MemoryBudget::Grant> grants;
  std::vector<std::function<void()>> at_end;
};
thread_local ScopeState t_scope;

class ScopeCallbacks final : public grpc::Server::GlobalCallbacks {
 public:
  void PreSynchronousRequest(grpc::ServerContext* /*context*/) override { t_scope.open = true; }
  // After the handler and after gRPC sent its response and status.
  void PostSynchronousRequest(grpc::ServerContext* /*context*/) override {
    t_scope.open = false;
    t_scope.grants.clear();  // releases them
    std::vector<std::function<void()>> fns;
    fns.swap(t_scope.at_end);
    for (auto& fn : fns) fn();
  }
};

}  // namespace

void CallScope::Install() {
  static const bool installed = [] {
    // gRPC takes ownership and allows this once per process.
    grpc::Server::SetGlobalCallbacks(new ScopeCallbacks);
    return true;
  }();
  (void)installed;
}

void CallScope::KeepUntilSent(MemoryBudget::Grant grant) {
  if (t_scope.open) t_scope.grants.push_back(std::move(grant));
}

void CallScope::AtEnd(std::function<void()> fn) {
  if (t_scope.open) {
    t_scope.at_end.push_back(std::move(fn));
  } else {
    fn();
  }
}

bool ClientCalls::Enter(const std::string& client) {
  absl::MutexLock l(&mu_);
  int& n = in_flight_[client];
  if (n >= per_client_) return false;
  ++n;
  return true;
}

void ClientCalls::Leave(const std::string& client) {
  absl::MutexLock l(&mu_);
  auto it = in_flight_.find(client);
  if (it == in_flight_.end()) return;
  if (--it->second <= 0) in_flight_.erase(it);
}

}  // namespace server
}  // namespace cowkv
