// Error classes as values: the reason an engine error carries beside its
// absl::StatusCode, set where the engine decides it and read by the server
// (google.rpc.ErrorInfo.reason) — never parsed back out of a message.
//
//   return PosixError(ErrorReason::kENOENT, "no such file: /a/b");
//   ...
//   if (ReasonOf(status) == ErrorReason::kEROFS) ...
//
// The reason travels as an absl::Status payload (kReasonPayloadUrl, the
// reason's name as bytes), so it survives every copy and RETURN_IF_ERROR
// on the way up. A status without one has ErrorReason::kNone; the server
// then names the reason after the code (docs/api.md, "Errors").
//
// Thread-safe (pure functions on values).
#ifndef COWKV_INCLUDE_COWKV_ERRORS_H_
#define COWKV_INCLUDE_COWKV_ERRORS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cowkv {

// The POSIX names are the errno a file operation would set; the others are
// cowkv's own classes. Names (ReasonName) are part of the API: append only.
enum class ErrorReason : uint8_t {
  kNone = 0,
  // POSIX, for the file tree (and EROFS/ENOSPC everywhere).
  kENOENT,
  kEEXIST,
  kENOTDIR,
  kEISDIR,
  kENOTEMPTY,
  kEINVAL,
  kENAMETOOLONG,
  kEMLINK,
  kEFBIG,
  kENODATA,
  kEPERM,
  kEROFS,   // the store is read-only (opened so, or after a failed commit)
  kENOSPC,  // the device is full
  kERANGE,  // an xattr value over the limit (INVALID_ARGUMENT)
  // cowkv's own.
  kReadOnlySnapshot,  // a write to a read-only snapshot
  kConflict,          // a transaction lost a write conflict: retry it
  kTooOld,            // a revision older than what is kept
  kLimit,             // a request over a per-call bound: retrying cannot help
  kCorruption,        // a byte read from the device is wrong (DATA_LOSS)
  kDeviceChanged,     // the device was changed or taken by someone else
  kEOPNOTSUPP,        // POSIX: a file operation's mode is not supported (fallocate)
  kCompacted,         // a read at a revision the history no longer keeps (OUT_OF_RANGE)
  kFutureRevision,    // a read at a revision not reached yet (OUT_OF_RANGE)
  kLeaseNotFound,     // no lease with that id (etcd's ErrLeaseNotFound; NOT_FOUND)
  // Send streams (docs/format.md "Send stream").
  kStreamCorrupt,   // a record's crc, framing or the end digest is wrong, or truncated (DATA_LOSS)
  kStreamVersion,   // a stream of a newer format version (FAILED_PRECONDITION)
  kParentMismatch,  // an incremental stream's parent is missing or differs (NOT_FOUND /
                    // FAILED_PRECONDITION)
  // Resumable receive (docs/format.md "Resume token").
  kResumeToken,     // a resume token that is malformed, tampered or of a newer version
                    // (INVALID_ARGUMENT)
  kResumeMismatch,  // a token that names no partial receive here, another position in it, or a
                    // snapshot the sender has not (NOT_FOUND / FAILED_PRECONDITION)
  kPartialReceive,  // a partial receive holds that name (ALREADY_EXISTS) or another receive is
                    // resuming it now (FAILED_PRECONDITION)
};
inline constexpr int kErrorReasonCount = static_cast<int>(ErrorReason::kPartialReceive) + 1;

inline constexpr char kReasonPayloadUrl[] = "type.cowkv.dev/cowkv.reason";
// With kCompacted: the compact revision (the oldest revision still
// readable), as decimal ASCII; the server puts it into
// ErrorInfo.metadata["compact_revision"], as etcd's ErrCompacted carries it.
inline constexpr char kCompactRevisionPayloadUrl[] = "type.cowkv.dev/cowkv.compact_revision";

// "ENOENT", "READ_ONLY_SNAPSHOT", ...; "" for kNone.
absl::string_view ReasonName(ErrorReason reason);

// The errno a file operation reports for `reason` ("EROFS" for
// kReadOnlySnapshot, "EAGAIN" for kConflict, ...); "" when none fits and
// the caller should go by the status code.
absl::string_view ReasonPosixName(ErrorReason reason);

// The reason `status` carries; kNone when it carries none (or OK).
ErrorReason ReasonOf(const absl::Status& status);

// `status` with `reason` attached (replacing any earlier one). OK stays OK.
absl::Status WithReason(absl::Status status, ErrorReason reason);

// `status` with `context` in front of its message ("<context>: <message>"),
// its code and payloads (the reason) kept: for a caller that says which
// object it was working on when an error from below reached it (a status
// rebuilt from code and message would lose the reason). Adds context
// only: it never counts or reclassifies. OK stays OK.
absl::Status WithContext(const absl::Status& status, absl::string_view context);

// A file-tree error: message "<POSIX name>: <what>", a code that matches
// the errno (NOT_FOUND for ENOENT/ENODATA, ALREADY_EXISTS, INVALID_ARGUMENT
// for EINVAL/ENAMETOOLONG/EFBIG/ERANGE, RESOURCE_EXHAUSTED for ENOSPC,
// UNIMPLEMENTED for EOPNOTSUPP, FAILED_PRECONDITION otherwise) and the
// reason attached.
absl::Status PosixError(ErrorReason reason, absl::string_view what);

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_ERRORS_H_
