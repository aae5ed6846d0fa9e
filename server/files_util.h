// Helpers shared by the Files handlers: open a subvolume's file tree and
// resolve the (path, ino) pair a request names a file by.
//
// Thread-safe (no state).
#ifndef COWKV_SERVER_FILES_UTIL_H_
#define COWKV_SERVER_FILES_UTIL_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/store.h"
#include "cowkv/v1/files.pb.h"
#include "server/service_env.h"

namespace cowkv {
namespace server {

// The file tree of subvolume `name` ("" = "default").
absl::StatusOr<Files> OpenFiles(ServiceEnv* env, absl::string_view name);

// `ino` when non-zero, else the inode `path` names (checked first).
absl::StatusOr<uint64_t> Resolve(Files& files, absl::string_view path_field,
                                 absl::string_view path, uint64_t ino);

// Permission bits: 0 (the default) or within 07777.
absl::Status ValidateMode(uint32_t mode);

// Data calls need a regular file: EISDIR (FAILED_PRECONDITION) for a
// directory, EINVAL for a symlink, whatever the offset and length.
absl::Status CheckRegularFile(const FileStat& st);

// EROFS (FAILED_PRECONDITION) when subvolume `name` ("" = "default") is a
// read-only snapshot: for calls that would otherwise find nothing to write
// (an empty Write stream) and still must refuse.
absl::Status CheckWritable(ServiceEnv* env, absl::string_view name);

// Open file handles (files_handle_service.cc). A request names its file by
// `handle` (non-zero: an open file, in the subvolume it was opened in; the
// call renews its lease), else `ino`, else `path` in `subvolume`.
struct FileTarget {
  Files files;
  uint64_t ino = 0;
};
absl::StatusOr<FileTarget> ResolveTarget(ServiceEnv* env, absl::string_view subvolume,
                                         absl::string_view path_field, absl::string_view path,
                                         uint64_t ino, uint64_t handle);
// Link by `existing`, or (linkat with AT_EMPTY_PATH) by `ino` or `handle`.
absl::StatusOr<FileStat> LinkByTarget(ServiceEnv* env, const v1::LinkRequest& req);
// ValidatePathOrIno, and nothing to check when `handle` is set.
absl::Status ValidateTarget(absl::string_view path_field, absl::string_view path, uint64_t ino,
                            uint64_t handle);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_FILES_UTIL_H_
