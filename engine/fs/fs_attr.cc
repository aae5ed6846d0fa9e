// setattr: chmod, chown, utimes and truncate in one call (Linux's
// notify_change over btrfs_setattr). The inode item is the only item it
// changes, so an fsync logs it as it logs every inode (LogInodeKeys notes
// the item whatever changed it).
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

namespace {
constexpr uint32_t kSetUid = 04000;
constexpr uint32_t kSetGid = 02000;
constexpr uint32_t kGroupExec = 00010;
FileType TypeOf(const InodeItem& it) { return static_cast<FileType>((it.mode >> 12) & 0xf); }
}  // namespace

absl::StatusOr<Attr> FsOps::SetAttr(uint64_t ino, const AttrChange& c) {
  if (c.mode.has_value() && (*c.mode & ~07777u) != 0) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrFormat("mode 0%o has bits beyond 07777", *c.mode));
  }
  if (c.size.has_value()) {
    // The size first, through truncate's own checks (EFBIG, EISDIR, EINVAL
    // for a symlink) and path; the rest cannot fail but for ENOSPC or EIO,
    // and both run under one hold of the subvolume's tree lock, in one
    // engine transaction.
    COWKV_RETURN_IF_ERROR(Truncate(ino, *c.size));
  }
  Batch b(b_);
  if (ino == kRootDirIno) COWKV_RETURN_IF_ERROR(EnsureRoot(b));
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  if (!c.mode && !c.uid && !c.gid && !c.atime && !c.mtime) {
    return Attr{ino, it};  // nothing, or the size only (Truncate set mtime and ctime)
  }
  const int64_t now = absl::GetCurrentTimeNanos();
  const uint32_t kind_bits = it.mode & ~07777u;
  if (c.mode) it.mode = kind_bits | *c.mode;
  if (c.uid || c.gid) {
    if (c.uid) it.uid = *c.uid;
    if (c.gid) it.gid = *c.gid;
    // chown of a non-directory drops set-user-ID, and set-group-ID when
    // group execute is set (without it the bit means mandatory locking),
    // unless the same call sets the mode (Linux's ATTR_KILL_S*ID).
    if (!c.mode && TypeOf(it) != FileType::kDirectory) {
      uint32_t kill = kSetUid;
      if (it.mode & kGroupExec) kill |= kSetGid;
      it.mode &= ~kill;
    }
  }
  if (c.atime) it.atime_ns = c.atime->now ? now : c.atime->ns;
  if (c.mtime) it.mtime_ns = c.mtime->now ? now : c.mtime->ns;
  it.ctime_ns = now;
  it.transid = b_->generation();
  b.Put(InodeKey(ino), EncodeInodeItem(it));
  COWKV_RETURN_IF_ERROR(EmitInode(b, FileEvent::Type::kAttrib, ino));
  COWKV_RETURN_IF_ERROR(b.Commit());
  return Attr{ino, it};
}

}  // namespace fs
}  // namespace cowkv
