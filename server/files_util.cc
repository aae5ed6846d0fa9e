// Files handler helpers; see files_util.h.
#include "server/files_util.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "server/validate.h"

namespace cowkv {
namespace server {

absl::StatusOr<Files> OpenFiles(ServiceEnv* env, absl::string_view name) {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Subvolume> sv, env->OpenSubvolume("subvolume", name));
  return sv->files();
}

absl::StatusOr<uint64_t> Resolve(Files& files, absl::string_view path_field,
                                 absl::string_view path, uint64_t ino) {
  if (ino != 0) return ino;
  COWKV_RETURN_IF_ERROR(ValidatePath(path_field, path));
  return files.Lookup(path);
}

absl::Status CheckRegularFile(const FileStat& st) {
  if (st.kind == FileKind::kDirectory) {
    return PosixError(ErrorReason::kEISDIR, absl::StrCat("inode ", st.ino, " is a directory"));
  }
  if (st.kind != FileKind::kRegular) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat("inode ", st.ino, " is not a regular file"));
  }
  return absl::OkStatus();
}

absl::Status CheckWritable(ServiceEnv* env, absl::string_view name) {
  const std::string sv = name.empty() ? "default" : std::string(name);
  COWKV_RETURN_IF_ERROR(ServiceEnv::RequireSubvolume(sv));
  COWKV_ASSIGN_OR_RETURN(SubvolumeInfo info, env->store().ShowSubvolume(sv));
  if (info.read_only) {
    return WithReason(PosixError(ErrorReason::kEROFS,
                                 absl::StrCat("subvolume '", sv, "' is a read-only snapshot")),
                      ErrorReason::kReadOnlySnapshot);
  }
  return absl::OkStatus();
}

absl::Status ValidateMode(uint32_t mode) {
  if (mode > 07777) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("mode: ", mode, " is not within 07777"));
  }
  return absl::OkStatus();
}

}  // namespace server
}  // namespace cowkv
