// Open handles and orphans (btrfs's orphan items): an inode whose last
// name is removed while a handle is open on it stays, with nlink 0 and an
// ORPHAN_ITEM ('f', ORPHAN_OBJECTID, ORPHAN_ITEM, ino), until its last
// handle closes; a crash leaves the item behind and the next mount deletes
// the inode (CleanupOrphans). O_TMPFILE inodes are orphans from birth
// until LinkInode names them.
//
// Handle numbers and counts are memory only (FsState::open_mu); the
// ORPHAN_ITEM is what survives. Close of the last handle of an orphan
// deletes it under the exclusive tree lock, where no Open (shared lock)
// can run in between.
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

namespace {
absl::Status BadHandle(uint64_t handle) {
  return absl::NotFoundError(absl::StrCat("EBADF: no open file handle ", handle));
}
}  // namespace

bool FsOps::IsOpen(uint64_t ino) {
  absl::MutexLock l(&st_->open_mu);
  auto it = st_->open_count.find(ino);
  return it != st_->open_count.end() && it->second > 0;
}

void FsOps::MakeOrphan(Batch& b, uint64_t ino, InodeItem* item) {
  item->nlink = 0;
  item->ctime_ns = absl::GetCurrentTimeNanos();
  item->transid = b_->generation();
  b.Put(InodeKey(ino), EncodeInodeItem(*item));
  b.Put(OrphanKey(ino), "");
  st_->orphans.insert(ino);
}

absl::StatusOr<uint64_t> FsOps::Open(uint64_t ino) {
  Batch b(b_);
  COWKV_RETURN_IF_ERROR(LoadInode(b, ino).status());
  absl::MutexLock l(&st_->open_mu);
  const uint64_t handle = st_->next_handle++;
  st_->handles[handle] = ino;
  ++st_->open_count[ino];
  return handle;
}

absl::StatusOr<uint64_t> FsOps::HandleInode(uint64_t handle) {
  absl::MutexLock l(&st_->open_mu);
  auto it = st_->handles.find(handle);
  if (it == st_->handles.end()) return BadHandle(handle);
  return it->second;
}

absl::Status FsOps::Close(uint64_t handle, bool may_delete, bool* last_orphan) {
  *last_orphan = false;
  uint64_t ino = 0;
  {
    absl::MutexLock l(&st_->open_mu);
    auto h = st_->handles.find(handle);
    if (h == st_->handles.end()) return BadHandle(handle);
    ino = h->second;
    auto c = st_->open_count.find(ino);
    const bool last = c == st_->open_count.end() || c->second <= 1;
    if (!last || !st_->orphans.count(ino)) {
      st_->handles.erase(h);
      if (c != st_->open_count.end() && --c->second == 0) st_->open_count.erase(c);
      return absl::OkStatus();
    }
    if (!may_delete) {
      *last_orphan = true;  // the caller comes back under the exclusive lock
      return absl::OkStatus();
    }
  }
  // The last handle of an orphan (under the exclusive lock: no Open runs
  // meanwhile): the inode goes, as it would have at its unlink. The
  // handle is dropped only once that is applied, so a retry finds it.
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* v, b.Find(InodeKey(ino)));
  if (v->has_value()) {
    COWKV_ASSIGN_OR_RETURN(InodeItem it, DecodeInodeItem(**v, ino));
    if (it.nlink == 0) COWKV_RETURN_IF_ERROR(DeleteInode(b, ino));
  }
  b.Del(OrphanKey(ino));
  COWKV_RETURN_IF_ERROR(b.Commit());
  st_->orphans.erase(ino);
  st_->linkable.erase(ino);
  absl::MutexLock l(&st_->open_mu);
  st_->handles.erase(handle);
  st_->open_count.erase(ino);
  return absl::OkStatus();
}

absl::StatusOr<std::pair<uint64_t, Attr>> FsOps::CreateTmpfile(uint64_t dir, uint32_t mode) {
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(InodeItem dit, LoadInode(b, dir));
  if (static_cast<FileType>((dit.mode >> 12) & 0xf) != FileType::kDirectory) {
    return PosixError(ErrorReason::kENOTDIR, absl::StrCat("inode ", dir, " is not a directory"));
  }
  COWKV_RETURN_IF_ERROR(EnsureRoot(b));
  COWKV_ASSIGN_OR_RETURN(uint64_t ino, AllocIno());
  {
    std::shared_ptr<InodeMem> m = Mem(ino);
    m->logged_gen = b_->generation();
    m->logged = false;
  }
  InodeItem it;
  it.generation = it.transid = b_->generation();
  it.nlink = 0;
  it.mode = (static_cast<uint32_t>(FileType::kRegular) << 12) | (mode & 07777);
  it.atime_ns = it.ctime_ns = it.mtime_ns = it.otime_ns = absl::GetCurrentTimeNanos();
  b.Put(InodeKey(ino), EncodeInodeItem(it));
  b.Put(OrphanKey(ino), "");
  COWKV_RETURN_IF_ERROR(b.Commit());
  st_->orphans.insert(ino);
  st_->linkable.insert(ino);
  absl::MutexLock l(&st_->open_mu);
  const uint64_t handle = st_->next_handle++;
  st_->handles[handle] = ino;
  ++st_->open_count[ino];
  return std::make_pair(handle, Attr{ino, it});
}

absl::StatusOr<std::vector<uint64_t>> FsOps::ListOrphans() {
  std::vector<uint64_t> out;
  absl::Status bad;
  COWKV_RETURN_IF_ERROR(b_->Scan(OrphanKey(0), ItemKey(FsKey{kOrphanObjectid, kOrphanItem + 1, 0}),
                                 false, [&](absl::string_view k, absl::string_view v) {
                                   FsKey fk;
                                   DecodeFsKey(k, &fk);
                                   bad = ValidateItem(fk, v);
                                   if (!bad.ok()) return false;
                                   out.push_back(fk.offset);
                                   return true;
                                 }));
  COWKV_RETURN_IF_ERROR(bad);
  return out;
}

absl::StatusOr<uint64_t> FsOps::CleanupOrphans() {
  if (opt_.bug_skip_orphan_cleanup) return 0;
  COWKV_ASSIGN_OR_RETURN(std::vector<uint64_t> orphans, ListOrphans());
  uint64_t deleted = 0;
  for (uint64_t ino : orphans) {
    if (IsOpen(ino)) continue;  // not at mount; kept for a caller that runs it later
    Batch b(b_);
    COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* v, b.Find(InodeKey(ino)));
    if (v->has_value()) {
      COWKV_ASSIGN_OR_RETURN(InodeItem it, DecodeInodeItem(**v, ino));
      if (it.nlink == 0) {
        COWKV_RETURN_IF_ERROR(DeleteInode(b, ino));
        ++deleted;
      }
    }
    b.Del(OrphanKey(ino));
    COWKV_RETURN_IF_ERROR(b.Commit());
    st_->orphans.erase(ino);
    st_->linkable.erase(ino);
  }
  return deleted;
}

}  // namespace fs
}  // namespace cowkv
