// Files' open handles, orphans and O_TMPFILE (engine/fs/fs_open.cc does
// the work under the store's locks).
#include <utility>
#include <vector>

#include "cowkv/files.h"
#include "engine/base/status.h"
#include "engine/fs/fs_ops.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<OpenFile> Files::Open(uint64_t ino) {
  OpenFile out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(out.handle, o.Open(ino));
    out.ino = ino;
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<OpenFile> Files::OpenPath(absl::string_view path) {
  OpenFile out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(out.ino, o.Lookup(path));
    COWKV_ASSIGN_OR_RETURN(out.handle, o.Open(out.ino));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status Files::Close(uint64_t handle) {
  bool last_orphan = false;
  COWKV_RETURN_IF_ERROR(
      store_->FsRead(subvol_, [&](fs::FsOps& o) { return o.Close(handle, false, &last_orphan); }));
  if (!last_orphan) return absl::OkStatus();
  // The last handle of an orphan: deleting it writes.
  return store_->FsWrite(subvol_,
                         [&](fs::FsOps& o) { return o.Close(handle, true, &last_orphan); });
}

absl::StatusOr<uint64_t> Files::HandleInode(uint64_t handle) {
  uint64_t ino = 0;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(ino, o.HandleInode(handle));
    return absl::OkStatus();
  }));
  return ino;
}

absl::StatusOr<OpenFile> Files::CreateTmpfile(uint64_t dir, uint32_t mode) {
  OpenFile out;
  COWKV_RETURN_IF_ERROR(store_->FsWrite(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(auto made, o.CreateTmpfile(dir, mode));
    out.handle = made.first;
    out.ino = made.second.ino;
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<std::vector<uint64_t>> Files::Orphans() {
  std::vector<uint64_t> out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(out, o.ListOrphans());
    return absl::OkStatus();
  }));
  return out;
}

}  // namespace cowkv
