// Engine status -> gRPC status. See status_mapping.h for the rules.
#include "server/status_mapping.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cowkv/errors.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"

namespace cowkv {
namespace server {
namespace {

#define COWKV_SAME_CODE(absl_name, grpc_name)                                   \
  static_assert(static_cast<int>(absl::StatusCode::k##absl_name) ==               \
                    static_cast<int>(grpc::StatusCode::grpc_name),                 \
                "absl and gRPC disagree on " #grpc_name)

// The two enums must stay numerically equal for the pass-through below.
COWKV_SAME_CODE(Ok, OK);
COWKV_SAME_CODE(Cancelled, CANCELLED);
COWKV_SAME_CODE(Unknown, UNKNOWN);
COWKV_SAME_CODE(InvalidArgument, INVALID_ARGUMENT);
COWKV_SAME_CODE(DeadlineExceeded, DEADLINE_EXCEEDED);
COWKV_SAME_CODE(NotFound, NOT_FOUND);
COWKV_SAME_CODE(AlreadyExists, ALREADY_EXISTS);
COWKV_SAME_CODE(PermissionDenied, PERMISSION_DENIED);
COWKV_SAME_CODE(Unauthenticated, UNAUTHENTICATED);
COWKV_SAME_CODE(ResourceExhausted, RESOURCE_EXHAUSTED);
COWKV_SAME_CODE(FailedPrecondition, FAILED_PRECONDITION);
COWKV_SAME_CODE(Aborted, ABORTED);
COWKV_SAME_CODE(OutOfRange, OUT_OF_RANGE);
COWKV_SAME_CODE(Unimplemented, UNIMPLEMENTED);
COWKV_SAME_CODE(Internal, INTERNAL);
COWKV_SAME_CODE(Unavailable, UNAVAILABLE);
COWKV_SAME_CODE(DataLoss, DATA_LOSS);
#undef COWKV_SAME_CODE

// A status with google.rpc.Status{code, message, [ErrorInfo]} in its
// details (the grpc-status-details-bin trailer).
grpc::Status Make(absl::StatusCode code, absl::string_view message, absl::string_view reason,
                  absl::string_view posix = "", const absl::Status* from = nullptr) {
  google::rpc::ErrorInfo info;
  info.set_reason(std::string(reason));
  info.set_domain(std::string(kErrorDomain));
  if (!posix.empty()) (*info.mutable_metadata())["errno"] = std::string(posix);
  if (from != nullptr) {
    // A read below the history's compact revision carries it (etcd's
    // ErrCompacted), for a client to restart from without parsing text.
    absl::optional<absl::Cord> rev = from->GetPayload(kCompactRevisionPayloadUrl);
    if (rev.has_value()) (*info.mutable_metadata())["compact_revision"] = std::string(*rev);
  }
  google::rpc::Status details;
  details.set_code(static_cast<int>(code));
  details.set_message(std::string(message));
  details.add_details()->PackFrom(info);
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(message),
                      details.SerializeAsString());
}

// The reason a status carries (engine or server), else its code's name.
std::string ReasonFor(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kReasonPayloadUrl);
  if (payload.has_value() && !payload->empty()) return std::string(*payload);
  return absl::StatusCodeToString(status.code());
}

}  // namespace

// As ToGrpcStatus, with ErrorInfo.metadata["errno"] = `posix` when given.
grpc::Status ToGrpcStatusImpl(const absl::Status& status, absl::string_view posix);

absl::Status WithServerReason(absl::Status status, absl::string_view reason) {
  if (!status.ok()) status.SetPayload(kReasonPayloadUrl, absl::Cord(reason));
  return status;
}

grpc::Status ToGrpcStatus(const absl::Status& status) { return ToGrpcStatusImpl(status, ""); }

grpc::Status ToGrpcStatusImpl(const absl::Status& status, absl::string_view posix) {
  if (status.ok()) return grpc::Status::OK;
  if (absl::IsUnavailable(status)) {
    // Rule 1: UNAVAILABLE is reserved for "stopping". A POSIX name stays first.
    absl::string_view msg = status.message();
    std::string prefix;
    if (HasPosixName(msg)) {
      const size_t colon = msg.find(": ");
      prefix = std::string(msg.substr(0, colon + 2));
      msg.remove_prefix(colon + 2);
    }
    return Make(absl::StatusCode::kInternal, absl::StrCat(prefix, "device unavailable: ", msg),
                "DEVICE_UNAVAILABLE", posix);
  }
  const int code = static_cast<int>(status.code());
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return Make(absl::StatusCode::kUnknown, status.message(), "UNKNOWN", posix);
  }
  return Make(status.code(), status.message(), ReasonFor(status), posix, &status);
}

bool HasPosixName(absl::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == absl::string_view::npos || colon < 2 || message[0] != 'E') return false;
  for (size_t i = 1; i < colon; ++i) {
    if (!absl::ascii_isupper(message[i]) && !absl::ascii_isdigit(message[i])) return false;
  }
  return true;
}

absl::string_view PosixNameFor(const absl::Status& status) {
  const absl::string_view by_reason = ReasonPosixName(ReasonOf(status));
  if (!by_reason.empty()) return by_reason;
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return "ENOENT";
    case absl::StatusCode::kAlreadyExists: return "EEXIST";
    case absl::StatusCode::kInvalidArgument: return "EINVAL";
    case absl::StatusCode::kOutOfRange: return "EINVAL";
    case absl::StatusCode::kResourceExhausted: return "ENOSPC";
    case absl::StatusCode::kFailedPrecondition:
      return "EPERM";
    case absl::StatusCode::kAborted: return "EAGAIN";
    case absl::StatusCode::kDeadlineExceeded: return "ETIMEDOUT";
    case absl::StatusCode::kCancelled: return "ECANCELED";
    case absl::StatusCode::kUnauthenticated: return "EACCES";
    case absl::StatusCode::kPermissionDenied: return "EACCES";
    case absl::StatusCode::kUnimplemented: return "ENOSYS";
    default: return "EIO";  // DATA_LOSS, INTERNAL, UNAVAILABLE, UNKNOWN
  }
}

grpc::Status ToGrpcFileStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // Rule 2: the POSIX name first (the engine's messages already have it),
  // then rule 1 on the code.
  absl::string_view posix = PosixNameFor(status);
  // A message that names its own errno (EBADF, EMFILE, ENFILE for open
  // files) keeps it.
  if (HasPosixName(status.message())) {
    posix = status.message().substr(0, status.message().find(": "));
  }
  if (absl::StartsWith(status.message(), absl::StrCat(posix, ": "))) {
    return ToGrpcStatusImpl(status, posix);
  }
  absl::Status named(status.code(), absl::StrCat(posix, ": ", status.message()));
  status.ForEachPayload([&named](absl::string_view url, const absl::Cord& payload) {
    named.SetPayload(url, payload);
  });
  return ToGrpcStatusImpl(named, posix);
}

ErrorInfoFields ErrorInfoOf(const grpc::Status& status) {
  ErrorInfoFields out;
  google::rpc::Status details;
  if (status.error_details().empty() || !details.ParseFromString(status.error_details()))
    return out;
  for (const google::protobuf::Any& any : details.details()) {
    google::rpc::ErrorInfo info;
    if (!any.UnpackTo(&info)) continue;
    out.reason = info.reason();
    out.domain = info.domain();
    auto it = info.metadata().find("errno");
    if (it != info.metadata().end()) out.errno_name = it->second;
    for (const auto& [k, v] : info.metadata()) out.metadata[k] = v;
  }
  return out;
}

grpc::Status StoppingStatus() {
  return Make(absl::StatusCode::kUnavailable, "cowkvd is stopping: retry the call once it is back",
              "STOPPING");
}

grpc::Status UnauthenticatedStatus(absl::string_view why) {
  return Make(absl::StatusCode::kUnauthenticated,
              absl::StrCat(why, " (send metadata 'authorization: Bearer <token>')"),
              "UNAUTHENTICATED");
}

namespace {

std::string UnparsableMessage(absl::string_view name, absl::string_view request_type) {
  return absl::StrCat(
      absl::StartsWith(name, "cowkv.v1.Files/") ? "EINVAL: " : "", name,
      ": the request does not parse as ", request_type,
      ": a string field (a name, path or symlink target) holds invalid UTF-8, or the bytes "
      "are not a protobuf message of that type");
}

}  // namespace

absl::Status UnparsableRequestError(absl::string_view method, absl::string_view request_type) {
  absl::string_view name = absl::StripPrefix(method, "/");
  return WithServerReason(absl::InvalidArgumentError(UnparsableMessage(name, request_type)),
                          "UNPARSABLE_REQUEST");
}

grpc::Status UnparsableRequestStatus(absl::string_view method, absl::string_view request_type,
                                     absl::string_view grpc_message) {
  absl::string_view name = absl::StripPrefix(method, "/");
  std::string msg = UnparsableMessage(name, request_type);
  if (!grpc_message.empty()) absl::StrAppend(&msg, " (gRPC: ", grpc_message, ")");
  const bool files = absl::StartsWith(name, "cowkv.v1.Files/");
  return Make(absl::StatusCode::kInvalidArgument, msg, "UNPARSABLE_REQUEST", files ? "EINVAL" : "");
}

}  // namespace server
}  // namespace cowkv
