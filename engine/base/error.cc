// Error reasons; see error.h.
#include <string>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"

namespace cowkv {
namespace {

struct ReasonRow {
  absl::string_view name;
  absl::string_view posix;
};

// Indexed by ErrorReason.
constexpr ReasonRow kReasons[kErrorReasonCount] = {
    {"", ""},
    {"ENOENT", "ENOENT"},
    {"EEXIST", "EEXIST"},
    {"ENOTDIR", "ENOTDIR"},
    {"EISDIR", "EISDIR"},
    {"ENOTEMPTY", "ENOTEMPTY"},
    {"EINVAL", "EINVAL"},
    {"ENAMETOOLONG", "ENAMETOOLONG"},
    {"EMLINK", "EMLINK"},
    {"EFBIG", "EFBIG"},
    {"ENODATA", "ENODATA"},
    {"EPERM", "EPERM"},
    {"EROFS", "EROFS"},
    {"ENOSPC", "ENOSPC"},
    {"ERANGE", "ERANGE"},
    {"READ_ONLY_SNAPSHOT", "EROFS"},
    {"CONFLICT", "EAGAIN"},
    {"TOO_OLD", "EINVAL"},
    {"LIMIT", "E2BIG"},
    {"CORRUPTION", "EIO"},
    {"DEVICE_CHANGED", "EIO"},
    {"EOPNOTSUPP", "EOPNOTSUPP"},
    {"COMPACTED", "EINVAL"},
    {"FUTURE_REVISION", "EINVAL"},
    {"LEASE_NOT_FOUND", "ENOENT"},
    {"STREAM_CORRUPT", "EIO"},
    {"STREAM_VERSION", "EOPNOTSUPP"},
    {"PARENT_MISMATCH", "ENOENT"},
    {"RESUME_TOKEN", "EINVAL"},
    {"RESUME_MISMATCH", "ENOENT"},
    {"PARTIAL_RECEIVE", "EEXIST"},
};

}  // namespace

absl::string_view ReasonName(ErrorReason reason) {
  const int i = static_cast<int>(reason);
  return i < kErrorReasonCount ? kReasons[i].name : "";
}

absl::string_view ReasonPosixName(ErrorReason reason) {
  const int i = static_cast<int>(reason);
  return i < kErrorReasonCount ? kReasons[i].posix : "";
}

ErrorReason ReasonOf(const absl::Status& status) {
  if (status.ok()) return ErrorReason::kNone;
  const absl::optional<absl::Cord> payload = status.GetPayload(kReasonPayloadUrl);
  if (!payload.has_value()) return ErrorReason::kNone;
  const std::string name(*payload);
  for (int i = 1; i < kErrorReasonCount; ++i) {
    if (kReasons[i].name == name) return static_cast<ErrorReason>(i);
  }
  return ErrorReason::kNone;
}

absl::Status WithReason(absl::Status status, ErrorReason reason) {
  if (status.ok()) return status;
  if (reason == ErrorReason::kNone) {
    status.ErasePayload(kReasonPayloadUrl);
  } else {
    status.SetPayload(kReasonPayloadUrl, absl::Cord(ReasonName(reason)));
  }
  return status;
}

absl::Status WithContext(const absl::Status& status, absl::string_view context) {
  if (status.ok()) return status;
  absl::Status out(status.code(), absl::StrCat(context, ": ", status.message()));
  status.ForEachPayload(
      [&out](absl::string_view url, const absl::Cord& payload) { out.SetPayload(url, payload); });
  return out;
}

absl::Status PosixError(ErrorReason reason, absl::string_view what) {
  const std::string msg = absl::StrCat(ReasonPosixName(reason), ": ", what);
  absl::StatusCode code =
      absl::StatusCode::kFailedPrecondition;  // ENOTDIR EISDIR ENOTEMPTY EPERM EMLINK EROFS
  switch (reason) {
    case ErrorReason::kENOENT:
    case ErrorReason::kENODATA:
      code = absl::StatusCode::kNotFound;
      break;
    case ErrorReason::kEEXIST:
      code = absl::StatusCode::kAlreadyExists;
      break;
    case ErrorReason::kENOSPC:
      code = absl::StatusCode::kResourceExhausted;
      break;
    case ErrorReason::kEOPNOTSUPP:
      code = absl::StatusCode::kUnimplemented;
      break;
    case ErrorReason::kEINVAL:
    case ErrorReason::kENAMETOOLONG:
    case ErrorReason::kEFBIG:
    case ErrorReason::kERANGE:
      code = absl::StatusCode::kInvalidArgument;
      break;
    default:
      break;
  }
  return WithReason(absl::Status(code, msg), reason);
}

}  // namespace cowkv
