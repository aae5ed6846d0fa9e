// Engine status -> gRPC status. See status_mapping.h for the rules.
#include "server/status_mapping.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

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

grpc::Status Make(absl::StatusCode code, absl::string_view message) {
  return grpc::Status(static_cast<grpc::StatusCode>(code), std::string(message));
}

}  // namespace

grpc::Status ToGrpcStatus(const absl::Status& status) {
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
    return Make(absl::StatusCode::kInternal, absl::StrCat(prefix, "device unavailable: ", msg));
  }
  const int code = static_cast<int>(status.code());
  if (code < 0 || code > static_cast<int>(absl::StatusCode::kUnauthenticated)) {
    return Make(absl::StatusCode::kUnknown, status.message());
  }
  return Make(status.code(), status.message());
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
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return "ENOENT";
    case absl::StatusCode::kAlreadyExists: return "EEXIST";
    case absl::StatusCode::kInvalidArgument: return "EINVAL";
    case absl::StatusCode::kOutOfRange: return "EINVAL";
    case absl::StatusCode::kResourceExhausted: return "ENOSPC";
    case absl::StatusCode::kFailedPrecondition:
      return absl::StrContains(status.message(), "read-only") ? "EROFS" : "EPERM";
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
  if (status.ok() || HasPosixName(status.message())) return ToGrpcStatus(status);
  // Rule 2: the POSIX name first, then rule 1 on the code.
  return ToGrpcStatus(absl::Status(
      status.code(), absl::StrCat(PosixNameFor(status), ": ", status.message())));
}

grpc::Status StoppingStatus() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "cowkvd is stopping: retry the call once it is back");
}

grpc::Status UnauthenticatedStatus(absl::string_view why) {
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      absl::StrCat(why, " (send metadata 'authorization: Bearer <token>')"));
}

grpc::Status UnparsableRequestStatus(absl::string_view method, absl::string_view request_type,
                                     absl::string_view grpc_message) {
  absl::string_view name = absl::StripPrefix(method, "/");
  std::string msg = absl::StrCat(
      absl::StartsWith(name, "cowkv.v1.Files/") ? "EINVAL: " : "", name,
      ": the request does not parse as ", request_type,
      ": a string field (a name, path or symlink target) holds invalid UTF-8, or the bytes "
      "are not a protobuf message of that type");
  if (!grpc_message.empty()) absl::StrAppend(&msg, " (gRPC: ", grpc_message, ")");
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, msg);
}

}  // namespace server
}  // namespace cowkv
