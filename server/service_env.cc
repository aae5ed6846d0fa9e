// The per-call wrapper and shared helpers; see service_env.h.
#include "server/service_env.h"

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/error.h"
#include "server/log.h"
#include "server/status_mapping.h"
#include "server/validate.h"

namespace cowkv {
namespace server {
namespace {

// Compares in time independent of where the strings differ.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  for (size_t i = 0; i < n; ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

ServiceEnv::ServiceEnv(Store* store, BlockDevice* device, RpcMetrics* metrics,
                       TxnRegistry* txns, std::string auth_token, bool default_durable,
                       RequestLimits limits)
    : store_(store),
      device_(device),
      metrics_(metrics),
      txns_(txns),
      auth_token_(std::move(auth_token)),
      default_durable_(default_durable),
      limits_(limits),
      budget_(limits.inflight_bytes) {}

absl::Status ServiceEnv::Authenticate(grpc::ServerContext* ctx) const {
  if (auth_token_.empty()) return absl::OkStatus();
  const auto& md = ctx->client_metadata();
  auto it = md.find("authorization");
  if (it == md.end()) return absl::UnauthenticatedError("missing authorization metadata");
  absl::string_view value(it->second.data(), it->second.size());
  constexpr absl::string_view kBearer = "Bearer ";
  if (!absl::StartsWith(value, kBearer)) {
    return absl::UnauthenticatedError("authorization metadata is not 'Bearer <token>'");
  }
  value.remove_prefix(kBearer.size());
  if (!ConstantTimeEqual(value, auth_token_)) {
    return absl::UnauthenticatedError("wrong bearer token");
  }
  return absl::OkStatus();
}

absl::Status ServiceEnv::CheckAlive(grpc::ServerContext* ctx) {
  if (ctx->IsCancelled()) return absl::CancelledError("the call was cancelled");
  if (ctx->deadline() <= std::chrono::system_clock::now()) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::OkStatus();
}

grpc::Status ServiceEnv::Run(grpc::ServerContext* ctx, absl::string_view method, Errors errors,
                             const std::function<absl::Status()>& body) {
  const absl::Time start = absl::Now();
  metrics_->Started(method);
  grpc::Status out;
  if (stopping()) {
    out = StoppingStatus();
  } else if (absl::Status auth = Authenticate(ctx); !auth.ok()) {
    out = UnauthenticatedStatus(auth.message());
    uint64_t suppressed = 0;
    if (auth_log_.Admit(&suppressed)) {
      Log(LogLevel::kWarn, "auth_failed", auth.message())
          .Str("method", method)
          .Str("peer", ctx->peer())
          .Num("suppressed", suppressed);
    }
  } else {
    absl::Status s = CheckAlive(ctx);
    if (s.ok()) s = body();
    if (!s.ok()) LogIfOperatorError(ctx, method, s);
    out = errors == Errors::kPosix ? ToGrpcFileStatus(s) : ToGrpcStatus(s);
  }
  metrics_->Record(method, out.error_code(), absl::Now() - start);
  return out;
}

void ServiceEnv::LogIfOperatorError(grpc::ServerContext* ctx, absl::string_view method,
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
  if (name.empty()) return store_->DefaultSubvolume();
  absl::Status valid = ValidateSubvolumeName(field, name);
  if (!valid.ok()) return valid;
  return store_->OpenSubvolume(name);
}

}  // namespace server
}  // namespace cowkv

