// Status helpers shared by every engine layer.
//
// The engine's one error type is absl::Status / absl::StatusOr, with the
// status macros of status_macros.h, error reasons (error.h) and
// CorruptionError(), the single constructor for "a byte read from the device
// is wrong" (code DATA_LOSS), so every corruption message has one shape:
//   corrupt node: bytenr=… owner=… level=… slot=…, <reason>, have=… want=…
#ifndef COWKV_ENGINE_BASE_STATUS_H_
#define COWKV_ENGINE_BASE_STATUS_H_

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"

namespace cowkv {

// Where a corrupt byte was found. Fields that do not apply stay at their
// "unknown" values and are left out of the message.
struct CorruptionSite {
  absl::string_view what = "node";  // "node", "superblock", "item", ...
  uint64_t bytenr = UINT64_MAX;
  uint64_t owner = UINT64_MAX;
  int level = -1;
  int slot = -1;
  uint64_t inode = UINT64_MAX;  // file-tree items: the inode they belong to
  // False where a check failing is an expected answer, not damage: a log
  // chain ends at the first block that does not verify (never written, torn
  // or stale). The status is the same; CorruptionsDetected() does not count it.
  bool counted = true;
};

// Builds the DATA_LOSS status for corrupt on-device data and counts it in
// CorruptionsDetected(). `file`/`line` record where it was first detected
// (SQLite's SQLITE_CORRUPT_BKPT); use the COWKV_CORRUPTION macro. The
// message: "corrupt <what>: <fields>, <reason>, have=<have> want=<want>
// [<file>:<line>]", each part left out when empty.
absl::Status CorruptionError(const CorruptionSite& site, absl::string_view reason,
                             absl::string_view have, absl::string_view want,
                             const char* file, int line);

#define COWKV_CORRUPTION(site, reason, have, want) \
  ::cowkv::CorruptionError((site), (reason), (have), (want), __FILE__, __LINE__)

// Process-wide count of CorruptionError() calls (a metric for `stats`).
uint64_t CorruptionsDetected();

// Convenience constructors with errno-like meaning used across layers.
inline absl::Status NoSpaceError(absl::string_view msg) {
  return WithReason(absl::ResourceExhaustedError(absl::StrCat("no space left on device: ", msg)),
                    ErrorReason::kENOSPC);
}

// FAILED_PRECONDITION with ErrorReason::kEROFS: the store takes no writes
// (opened read-only, or after a failed commit).
inline absl::Status ReadOnlyStoreError(absl::string_view msg) {
  return WithReason(absl::FailedPreconditionError(msg), ErrorReason::kEROFS);
}

// RESOURCE_EXHAUSTED for a request over a per-call bound (a Txn's response
// budget): unlike a lack of space, committing and retrying cannot help, so
// it carries ErrorReason::kLimit (IsLimitError).
inline absl::Status LimitError(absl::string_view msg) {
  return WithReason(absl::ResourceExhaustedError(msg), ErrorReason::kLimit);
}
inline bool IsLimitError(const absl::Status& s) {
  return absl::IsResourceExhausted(s) && ReasonOf(s) == ErrorReason::kLimit;
}

}  // namespace cowkv

#endif  // COWKV_ENGINE_BASE_STATUS_H_
