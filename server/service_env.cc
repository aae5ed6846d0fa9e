// The per-call wrapper and shared helpers; see service_env.h.
#include "server/service_env.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/connections.h"
#include "server/log.h"
#include "server/status_mapping.h"
#include "server/validate.h"

namespace cowkv {
namespace server {
namespace {

// The principal of the call running on this thread (set by Run around its
// body); nullptr = authentication off or no call.
thread_local const Principal* t_caller = nullptr;

absl::Status Denied(absl::string_view what) {
  return WithServerReason(absl::PermissionDeniedError(what), "PERMISSION_DENIED");
}

}  // namespace

ServiceEnv::ServiceEnv(Store* store, BlockDevice* device, RpcMetrics* metrics, TxnRegistry* txns,
                       TokenTable tokens, bool default_durable, RequestLimits limits)
    : store_(store),
      device_(device),
      metrics_(metrics),
      txns_(txns),
      tokens_(std::move(tokens)),
      default_durable_(default_durable),
      limits_(limits),
      budget_(limits.inflight_bytes),
      client_calls_(limits.max_calls_per_client) {}

absl::StatusOr<const Principal*> ServiceEnv::Authenticate(grpc::ServerContextBase* ctx) const {
  if (tokens_.empty()) return nullptr;
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return absl::UnauthenticatedError("missing authorization metadata");
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(value, kBearer)) {
    return absl::UnauthenticatedError("authorization metadata is not 'Bearer <token>'");
  }
  value.remove_prefix(kBearer.size());
  const Principal* p = tokens_.Find(value);
  if (p == nullptr) return absl::UnauthenticatedError("wrong bearer token");
  return p;
}

absl::Status ServiceEnv::RequireAccess(Access access) {
  if (t_caller == nullptr || t_caller->Allows(access)) return absl::OkStatus();
  return Denied(absl::StrCat("this token (", t_caller->Describe(), ") may not ",
                             access == Access::kWrite ? "write" : "administer the store"));
}

absl::Status ServiceEnv::RequireSubvolume(absl::string_view name) {
  if (t_caller == nullptr || t_caller->MaySee(name)) return absl::OkStatus();
  return Denied(absl::StrCat("this token (", t_caller->Describe(), ") may not use subvolume '",
                             name.empty() ? "default" : name, "'"));
}

absl::Status ServiceEnv::CheckAlive(grpc::ServerContextBase* ctx) {
  if (ctx->IsCancelled()) return absl::CancelledError("the call was cancelled");
  if (ctx->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::OkStatus();
}

// The checks before any body, in order: the server is stopping, the client
// has too many calls, (callback writes) too many writes wait for durability,
// the caller's token. OK with `*caller` set (nullptr: authentication off),
// or the refusal to answer with.
grpc::Status ServiceEnv::Admit(grpc::ServerContextBase* ctx, absl::string_view method,
                               const std::string& client, bool entered, bool over_waiting_bound,
                               const Principal** caller) {
  if (stopping()) return StoppingStatus();
  if (!entered) {
    return ToGrpcStatus(WithServerReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "client ", client, " has ", client_calls_.per_client(),
            " calls in flight (cowkvd --max-calls-per-client): finish or read some first")),
        "TOO_MANY_CALLS"));
  }
  if (over_waiting_bound) {
    return ToGrpcStatus(WithServerReason(
        absl::ResourceExhaustedError(absl::StrCat(
            "server busy: ", limits_.max_waiting_writes,
            " writes already wait for durability (cowkvd --max-waiting-writes); retry with "
            "backoff")),
        "SERVER_BUSY"));
  }
  absl::StatusOr<const Principal*> auth = Authenticate(ctx);
  if (!auth.ok()) {
    uint64_t suppressed = 0;
    if (auth_log_.Admit(&suppressed)) {
      Log(LogLevel::kWarn, "auth_failed", auth.status().message())
          .Str("method", method)
          .Str("peer", ctx->peer())
          .Num("suppressed", suppressed);
    }
    return UnauthenticatedStatus(auth.status().message());
  }
  *caller = *auth;
  return grpc::Status::OK;
}

grpc::Status ServiceEnv::Run(grpc::ServerContext* ctx, absl::string_view method, Errors errors,
                             const std::function<absl::Status()>& body) {
  const absl::Time start = absl::Now();
  metrics_->Started(method);
  grpc::Status out;
  // Counted until gRPC has sent the response (CallScope), not only while
  // the body runs: an unread response holds its thread too.
  const std::string client = PeerAddress(ctx->peer());
  const bool entered = client_calls_.Enter(client);
  if (entered) CallScope::AtEnd([this, client] { client_calls_.Leave(client); });
  const Principal* caller = nullptr;
  out = Admit(ctx, method, client, entered, /*over_waiting_bound=*/false, &caller);
  if (out.ok()) {
    // The caller is known to this thread while the body runs (RequireAccess,
    // RequireSubvolume); bodies run on the calling thread.
    const Principal* const outer = t_caller;
    t_caller = caller;
    absl::Status s = CheckAlive(ctx);
    if (s.ok()) s = RequireAccess(MethodAccess(method));
    if (s.ok()) s = body();
    t_caller = outer;
    if (!s.ok()) LogIfOperatorError(ctx, method, s);
    out = errors == Errors::kPosix ? ToGrpcFileStatus(s) : ToGrpcStatus(s);
  }
  metrics_->Record(method, out.error_code(), absl::Now() - start);
  return out;
}

// One callback call: holds what Run's CallScope holds for a synchronous
// one (the per-client count, a response grant) until gRPC is done with it.
class ServiceEnv::CallReactor final : public grpc::ServerUnaryReactor {
 public:
  CallReactor(ServiceEnv* env, std::string client, bool entered)
      : env_(env), client_(std::move(client)), entered_(entered) {}
  // Answers the call; the write no longer waits (the response, until
  // sent, is small: the count of waiting writes drops now, not at OnDone,
  // which gRPC may run after the client's next call has arrived).
  void Answer(const grpc::Status& out) {
    env_->async_calls_.fetch_sub(1, std::memory_order_relaxed);
    Finish(out);
  }
  void OnDone() override {
    grant.Release();
    if (entered_) env_->client_calls_.Leave(client_);
    delete this;
  }
  // A cancelled write is still applied; its answer comes when it is durable
  // (gRPC drops it), so there is nothing to stop here.
  void OnCancel() override {}
  // Both reactions above are short and never block (a budget release, a
  // count, a delete), so gRPC may run them on the thread that ends the
  // call. Otherwise it hands every OnDone to its executor thread: a thread
  // wake-up per call (11 % of cowkvd's cycles at 16 clients, most of them
  // the wake-up). gRPC marks this hook "not API"; its signature is that of
  // the pinned Debian gRPC 1.51, and `override` makes a change to it a
  // compile error, not a silent slowdown.
  bool InternalInlineable() override { return true; }

  MemoryBudget::Grant grant;

 private:
  ServiceEnv* const env_;
  const std::string client_;
  const bool entered_;
};

grpc::ServerUnaryReactor* ServiceEnv::RunAsync(grpc::CallbackServerContext* ctx,
                                               absl::string_view method, Errors errors,
                                               const AsyncBody& body) {
  const absl::Time start = absl::Now();
  metrics_->Started(method);
  std::string client = PeerAddress(ctx->peer());
  const bool entered = client_calls_.Enter(client);
  const int running = async_calls_.fetch_add(1, std::memory_order_relaxed) + 1;
  auto* reactor = new CallReactor(this, client, entered);
  auto finish = [this, reactor, ctx, method, errors, start](const absl::Status& s) {
    if (!s.ok()) LogIfOperatorError(ctx, method, s);
    const grpc::Status out = errors == Errors::kPosix ? ToGrpcFileStatus(s) : ToGrpcStatus(s);
    metrics_->Record(method, out.error_code(), absl::Now() - start);
    reactor->Answer(out);
  };
  const Principal* caller = nullptr;
  const grpc::Status refused =
      Admit(ctx, method, client, entered, running > limits_.max_waiting_writes, &caller);
  if (!refused.ok()) {
    metrics_->Record(method, refused.error_code(), absl::Now() - start);
    reactor->Answer(refused);
  } else {
    const Principal* const outer = t_caller;
    t_caller = caller;
    absl::Status s = CheckAlive(ctx);
    if (s.ok()) s = RequireAccess(MethodAccess(method));
    if (s.ok()) s = body(finish, &reactor->grant);
    t_caller = outer;
    // OK: the body answers (perhaps already has); an error: it never will.
    if (!s.ok()) finish(s);
  }
  return reactor;
}

void ServiceEnv::LogIfOperatorError(grpc::ServerContextBase* ctx, absl::string_view method,
                                    const absl::Status& s) {
  const ErrorReason reason = ReasonOf(s);
  const bool data_loss = absl::IsDataLoss(s);
  const bool no_space = reason == ErrorReason::kENOSPC;
  const bool read_only = reason == ErrorReason::kEROFS || reason == ErrorReason::kDeviceChanged;
  if (!data_loss && !no_space && !read_only) return;
  uint64_t suppressed = 0;
  if (!error_log_.Admit(&suppressed)) return;
  // The message names what and where (subvolume, path or inode, key, bytenr).
  Log(data_loss || read_only ? LogLevel::kError : LogLevel::kWarn,
      data_loss  ? "data_loss"
      : no_space ? "enospc"
                 : "write_refused",
      s.message())
      .Str("method", method)
      .Str("reason", ReasonName(reason))
      .Str("peer", ctx->peer())
      .Num("suppressed", suppressed);
}

absl::StatusOr<std::unique_ptr<Subvolume>> ServiceEnv::OpenSubvolume(absl::string_view field,
                                                                     absl::string_view name) {
  if (name.empty()) {
    COWKV_RETURN_IF_ERROR(RequireSubvolume(name));
    return store_->DefaultSubvolume();
  }
  absl::Status valid = ValidateSubvolumeName(field, name);
  if (!valid.ok()) return valid;
  COWKV_RETURN_IF_ERROR(RequireSubvolume(name));
  return store_->OpenSubvolume(name);
}

}  // namespace server
}  // namespace cowkv

