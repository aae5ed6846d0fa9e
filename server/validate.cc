// Edge checks of request fields; see validate.h.
#include "server/validate.h"

#include <limits>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/limits.h"

namespace cowkv {
namespace server {

absl::Status ValidateSubvolumeName(absl::string_view field, absl::string_view name) {
  if (name.empty() || name.size() > kMaxNameLen) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": a subvolume name is 1..", kMaxNameLen, " bytes, not ", name.size()));
  }
  if (name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": a subvolume name may not contain '/' or NUL: \"", absl::CHexEscape(name), "\""));
  }
  return absl::OkStatus();
}

absl::Status ValidateKey(absl::string_view field, absl::string_view key) {
  if (key.empty() || key.size() > kMaxKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": a key is 1..", kMaxKeySize, " bytes, not ", key.size()));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view value) {
  if (value.size() > kMaxValueSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("value: at most ", kMaxValueSize, " bytes, not ", value.size()));
  }
  return absl::OkStatus();
}

absl::Status ValidateBound(absl::string_view field, absl::string_view bound) {
  if (bound.size() > kMaxKeySize + 1) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": a range bound is at most ",
                                                   kMaxKeySize + 1, " bytes, not ", bound.size()));
  }
  return absl::OkStatus();
}

absl::Status ValidatePath(absl::string_view field, absl::string_view path) {
  if (path.size() > kMaxPathLen) {
    return PosixError(
        ErrorReason::kENAMETOOLONG,
        absl::StrCat(field, ": a path is at most ", kMaxPathLen, " bytes, not ", path.size()));
  }
  if (path.find('\0') != absl::string_view::npos) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat(field, ": a path may not contain NUL"));
  }
  size_t depth = 0;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == "." || part == "..") {
      return PosixError(ErrorReason::kEINVAL,
                        absl::StrCat(field, ": \"", part, "\" is not allowed in a path"));
    }
    if (part.size() > kMaxNameLen) {
      return PosixError(
          ErrorReason::kENAMETOOLONG,
          absl::StrCat(field, ": a name is at most ", kMaxNameLen, " bytes, not ", part.size()));
    }
    if (++depth > kMaxPathDepth) {
      return PosixError(ErrorReason::kEINVAL,
                        absl::StrCat(field, ": a path has at most ", kMaxPathDepth, " components"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateNamedPath(absl::string_view field, absl::string_view path) {
  COWKV_RETURN_IF_ERROR(ValidatePath(field, path));
  if (path.find_first_not_of('/') == absl::string_view::npos) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat(field, ": the root directory has no name to change"));
  }
  return absl::OkStatus();
}

absl::Status ValidatePathOrIno(absl::string_view field, absl::string_view path, uint64_t ino) {
  if (ino != 0) return absl::OkStatus();
  return ValidatePath(field, path);
}

absl::Status ValidateSymlinkTarget(absl::string_view target) {
  if (target.empty() || target.size() > kMaxSymlinkLen) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat("target: a symlink target is 1..", kMaxSymlinkLen,
                                   " bytes, not ", target.size()));
  }
  if (target.find('\0') != absl::string_view::npos) {
    return PosixError(ErrorReason::kEINVAL, "target: a symlink target may not contain NUL");
  }
  return absl::OkStatus();
}

absl::Status ValidateFileEnd(absl::string_view what, uint64_t offset, uint64_t length) {
  if (offset > kMaxFileSize || length > kMaxFileSize - offset) {
    return PosixError(ErrorReason::kEFBIG,
                      absl::StrCat(what, ": offset ", offset, " + length ", length,
                                   " is past the largest file (", kMaxFileSize, " bytes)"));
  }
  return absl::OkStatus();
}

absl::Status ValidateByteRange(absl::string_view what, uint64_t offset, uint64_t length) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (offset > kMax || length > kMax - offset) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat(what, ": offset ", offset, " + length ", length, " overflows"));
  }
  return absl::OkStatus();
}

std::string KeyForMessage(absl::string_view key) {
  constexpr size_t kShown = 64;
  std::string out = absl::CHexEscape(key.substr(0, kShown));
  if (key.size() > kShown) absl::StrAppend(&out, "...(", key.size(), " bytes)");
  return out;
}

}  // namespace server
}  // namespace cowkv
