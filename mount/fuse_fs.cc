// `cowkv mount`: the FUSE low-level operations over cowkv::Files. See
// fuse_fs.h and docs/mount.md.
#include "mount/fuse_fs.h"

#include <errno.h>
#include <fcntl.h>
#include <fuse3/fuse_lowlevel.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/errors.h"
#include "cowkv/files.h"
#include "cowkv/options.h"
#include "cowkv/store.h"

namespace cowkv {
namespace mount {

namespace {

constexpr uint32_t kBlock = 4096;

int ErrnoByName(absl::string_view name) {
  static const struct {
    const char* name;
    int err;
  } kTable[] = {
      {"ENOENT", ENOENT},
      {"EEXIST", EEXIST},
      {"ENOTDIR", ENOTDIR},
      {"EISDIR", EISDIR},
      {"ENOTEMPTY", ENOTEMPTY},
      {"EINVAL", EINVAL},
      {"ENAMETOOLONG", ENAMETOOLONG},
      {"EMLINK", EMLINK},
      {"EFBIG", EFBIG},
      {"ENODATA", ENODATA},
      {"EPERM", EPERM},
      {"EROFS", EROFS},
      {"ENOSPC", ENOSPC},
      {"EAGAIN", EAGAIN},
      {"ERANGE", ERANGE},
      {"E2BIG", E2BIG},
      {"EOPNOTSUPP", EOPNOTSUPP},
      {"EBADF", EBADF},
      {"EIO", EIO},
      {"ENXIO", ENXIO},
  };
  for (const auto& e : kTable) {
    if (name == e.name) return e.err;
  }
  return 0;
}

}  // namespace

int ErrnoOf(const absl::Status& status) {
  if (status.ok()) return 0;
  if (int e = ErrnoByName(ReasonPosixName(ReasonOf(status))); e != 0) return e;
  switch (status.code()) {
    case absl::StatusCode::kNotFound:
      return ENOENT;
    case absl::StatusCode::kAlreadyExists:
      return EEXIST;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
      return EINVAL;
    case absl::StatusCode::kResourceExhausted:
      return ENOSPC;
    case absl::StatusCode::kUnimplemented:
      return EOPNOTSUPP;
    case absl::StatusCode::kPermissionDenied:
      return EACCES;
    case absl::StatusCode::kFailedPrecondition:
      return EPERM;
    default:
      return EIO;
  }
}

namespace {

// The mounted subvolume. FUSE calls arrive on several threads; Files is
// thread-safe and nothing here holds state per inode, so the callbacks
// share it without a lock of their own.
class Mounted {
 public:
  Mounted(Store* store, Files files, const MountConfig& c) : store_(store), files_(files), c_(c) {}

  Files& files() { return files_; }
  Store* store() { return store_; }
  const MountConfig& options() const { return c_; }

 private:
  Store* store_;
  Files files_;
  MountConfig c_;
};

Mounted* M(fuse_req_t req) { return static_cast<Mounted*>(fuse_req_userdata(req)); }

// FUSE's root is inode 1; the engine's root directory is 256 and no
// engine inode is below it.
uint64_t Eng(fuse_ino_t ino) { return ino == FUSE_ROOT_ID ? kRootInode : ino; }
fuse_ino_t Fuse(uint64_t ino) { return ino == kRootInode ? FUSE_ROOT_ID : ino; }

mode_t TypeBits(FileKind k) {
  switch (k) {
    case FileKind::kDirectory:
      return S_IFDIR;
    case FileKind::kSymlink:
      return S_IFLNK;
    case FileKind::kRegular:
      break;
  }
  return S_IFREG;
}

timespec Ts(int64_t ns) {
  timespec t;
  t.tv_sec = ns / 1000000000;
  t.tv_nsec = ns % 1000000000;
  if (t.tv_nsec < 0) {
    t.tv_nsec += 1000000000;
    --t.tv_sec;
  }
  return t;
}

struct stat ToStat(const FileStat& f) {
  struct stat s;
  memset(&s, 0, sizeof s);
  s.st_ino = f.ino;  // the engine's number, also for the root
  s.st_mode = TypeBits(f.kind) | (f.mode & 07777);
  // A directory's own count as Linux filesystems report it is 2 + its
  // subdirectories; btrfs reports 1, as the engine does: tools (find)
  // take 1 to mean "unknown", which is right for both.
  s.st_nlink = f.nlink;
  s.st_uid = f.uid;
  s.st_gid = f.gid;
  s.st_size = static_cast<off_t>(f.size);
  s.st_blksize = kBlock;
  s.st_blocks = static_cast<blkcnt_t>((f.bytes + 511) / 512);
  s.st_atim = Ts(f.atime_ns);
  s.st_mtim = Ts(f.mtime_ns);
  s.st_ctim = Ts(f.ctime_ns);
  return s;
}

void ReplyErr(fuse_req_t req, const absl::Status& s) { fuse_reply_err(req, ErrnoOf(s)); }

fuse_entry_param Entry(const Mounted* m, const FileStat& st) {
  fuse_entry_param e;
  memset(&e, 0, sizeof e);
  e.ino = Fuse(st.ino);
  e.generation = st.generation;
  e.attr = ToStat(st);
  e.attr_timeout = m->options().attr_timeout_s;
  e.entry_timeout = m->options().attr_timeout_s;
  return e;
}

void ReplyEntry(fuse_req_t req, const absl::StatusOr<FileStat>& st) {
  if (!st.ok()) return ReplyErr(req, st.status());
  const fuse_entry_param e = Entry(M(req), *st);
  fuse_reply_entry(req, &e);
}

// A new inode belongs to the process that made it (the engine creates
// inodes as root): its uid and gid set in a second step. A failure there
// leaves a root-owned inode, and the call fails.
absl::StatusOr<FileStat> OwnedByCaller(fuse_req_t req, absl::StatusOr<FileStat> st) {
  if (!st.ok()) return st;
  const fuse_ctx* ctx = fuse_req_ctx(req);
  if (ctx->uid == st->uid && ctx->gid == st->gid) return st;
  SetAttrSpec spec;
  spec.uid = ctx->uid;
  spec.gid = ctx->gid;
  spec.mode = st->mode;  // chown would clear set-ID bits the caller asked for
  return M(req)->files().SetAttr(st->ino, spec);
}

// The file's (or directory's) attributes, by the engine's inode.
void ReplyAttr(fuse_req_t req, const absl::StatusOr<FileStat>& st) {
  if (!st.ok()) return ReplyErr(req, st.status());
  const struct stat s = ToStat(*st);
  fuse_reply_attr(req, &s, M(req)->options().attr_timeout_s);
}

void OpInit(void* userdata, fuse_conn_info* conn) {
  // Writes arrive as the application made them (no writeback cache), so
  // fsync and close see every byte already in the engine.
  if (conn->capable & FUSE_CAP_SPLICE_READ) conn->want &= ~FUSE_CAP_SPLICE_READ;
  if (conn->capable & FUSE_CAP_READDIRPLUS) conn->want |= FUSE_CAP_READDIRPLUS;
  if (conn->capable & FUSE_CAP_READDIRPLUS_AUTO) conn->want |= FUSE_CAP_READDIRPLUS_AUTO;
  conn->max_write = std::min<unsigned>(conn->max_write == 0 ? 1u << 20 : conn->max_write, 1u << 20);
}

void OpLookup(fuse_req_t req, fuse_ino_t parent, const char* name) {
  Files& f = M(req)->files();
  absl::StatusOr<uint64_t> ino = f.LookupAt(Eng(parent), name);
  if (!ino.ok()) return ReplyErr(req, ino.status());
  ReplyEntry(req, f.StatInode(*ino));
}

void OpGetattr(fuse_req_t req, fuse_ino_t ino, fuse_file_info*) {
  ReplyAttr(req, M(req)->files().StatInode(Eng(ino)));
}

void OpSetattr(fuse_req_t req, fuse_ino_t ino, struct stat* attr, int to_set,
               fuse_file_info*) {
  SetAttrSpec spec;
  if (to_set & FUSE_SET_ATTR_MODE) spec.mode = attr->st_mode & 07777;
  if (to_set & FUSE_SET_ATTR_UID) spec.uid = attr->st_uid;
  if (to_set & FUSE_SET_ATTR_GID) spec.gid = attr->st_gid;
  if (to_set & FUSE_SET_ATTR_SIZE) {
    if (attr->st_size < 0) return (void)fuse_reply_err(req, EINVAL);
    spec.size = static_cast<uint64_t>(attr->st_size);
  }
  auto ns = [](const timespec& t) { return static_cast<int64_t>(t.tv_sec) * 1000000000 + t.tv_nsec; };
  if (to_set & FUSE_SET_ATTR_ATIME_NOW) {
    spec.atime = AttrTime::Now();
  } else if (to_set & FUSE_SET_ATTR_ATIME) {
    spec.atime = AttrTime::At(ns(attr->st_atim));
  }
  if (to_set & FUSE_SET_ATTR_MTIME_NOW) {
    spec.mtime = AttrTime::Now();
  } else if (to_set & FUSE_SET_ATTR_MTIME) {
    spec.mtime = AttrTime::At(ns(attr->st_mtim));
  }
  // FUSE_SET_ATTR_CTIME: the engine sets ctime itself on every change.
  ReplyAttr(req, M(req)->files().SetAttr(Eng(ino), spec));
}

void OpReadlink(fuse_req_t req, fuse_ino_t ino) {
  absl::StatusOr<std::string> t = M(req)->files().ReadLinkInode(Eng(ino));
  if (!t.ok()) return ReplyErr(req, t.status());
  fuse_reply_readlink(req, t->c_str());
}

void OpMknod(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode, dev_t) {
  // Regular files only: fifos, sockets and devices have no engine kind.
  if (!S_ISREG(mode)) return (void)fuse_reply_err(req, EPERM);
  ReplyEntry(req, OwnedByCaller(req, M(req)->files().CreateAt(Eng(parent), name, mode & 07777)));
}

void OpMkdir(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode) {
  ReplyEntry(req, OwnedByCaller(req, M(req)->files().MkdirAt(Eng(parent), name, mode & 07777)));
}

void OpSymlink(fuse_req_t req, const char* link, fuse_ino_t parent, const char* name) {
  ReplyEntry(req, OwnedByCaller(req, M(req)->files().SymlinkAt(link, Eng(parent), name)));
}

void OpUnlink(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, ErrnoOf(M(req)->files().UnlinkAt(Eng(parent), name)));
}

void OpRmdir(fuse_req_t req, fuse_ino_t parent, const char* name) {
  fuse_reply_err(req, ErrnoOf(M(req)->files().RmdirAt(Eng(parent), name)));
}

void OpRename(fuse_req_t req, fuse_ino_t parent, const char* name, fuse_ino_t newparent,
              const char* newname, unsigned int flags) {
  // Linux's RENAME_NOREPLACE (1) and RENAME_EXCHANGE (2) are the engine's.
  static_assert(kRenameNoReplace == 1 && kRenameExchange == 2, "renameat2 flags");
  if ((flags & ~(kRenameNoReplace | kRenameExchange)) != 0)
    return (void)fuse_reply_err(req, EINVAL);  // RENAME_WHITEOUT
  fuse_reply_err(
      req, ErrnoOf(M(req)->files().RenameAt(Eng(parent), name, Eng(newparent), newname, flags)));
}

void OpLink(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char* newname) {
  ReplyEntry(req, M(req)->files().LinkAt(Eng(ino), Eng(newparent), newname));
}

void OpOpen(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  Files& f = M(req)->files();
  absl::StatusOr<FileStat> st = f.StatInode(Eng(ino));
  if (!st.ok()) return ReplyErr(req, st.status());
  if (st->kind == FileKind::kDirectory) return (void)fuse_reply_err(req, EISDIR);
  if ((fi->flags & O_ACCMODE) != O_RDONLY && M(req)->options().read_only)
    return (void)fuse_reply_err(req, EROFS);
  // O_TRUNC arrives as a setattr of the size before the open (no
  // FUSE_CAP_ATOMIC_O_TRUNC). The engine's handle keeps the inode alive as
  // an orphan if its last name goes while it is open.
  absl::StatusOr<OpenFile> h = f.Open(Eng(ino));
  if (!h.ok()) return ReplyErr(req, h.status());
  fi->fh = h->handle;
  if (fuse_reply_open(req, fi) != 0) (void)f.Close(h->handle);  // the opener went away
}

void OpCreate(fuse_req_t req, fuse_ino_t parent, const char* name, mode_t mode,
              fuse_file_info* fi) {
  if (!S_ISREG(mode)) return (void)fuse_reply_err(req, EPERM);
  Files& f = M(req)->files();
  absl::StatusOr<FileStat> st =
      OwnedByCaller(req, f.CreateAt(Eng(parent), name, mode & 07777));
  if (!st.ok()) return ReplyErr(req, st.status());
  absl::StatusOr<OpenFile> h = f.Open(st->ino);
  if (!h.ok()) return ReplyErr(req, h.status());
  fi->fh = h->handle;
  const fuse_entry_param e = Entry(M(req), *st);
  if (fuse_reply_create(req, &e, fi) != 0) (void)f.Close(h->handle);
}

void OpRead(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  absl::StatusOr<std::string> data =
      M(req)->files().Read(Eng(ino), static_cast<uint64_t>(off), size);
  if (!data.ok()) return ReplyErr(req, data.status());
  fuse_reply_buf(req, data->data(), data->size());
}

void OpWrite(fuse_req_t req, fuse_ino_t ino, const char* buf, size_t size, off_t off,
             fuse_file_info*) {
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  absl::Status s =
      M(req)->files().Write(Eng(ino), static_cast<uint64_t>(off), absl::string_view(buf, size));
  if (!s.ok()) return ReplyErr(req, s);
  fuse_reply_write(req, size);
}

void OpFlush(fuse_req_t req, fuse_ino_t, fuse_file_info*) {
  // Every write is in the engine when it returns; close promises nothing
  // more (as on btrfs, durability is fsync's).
  fuse_reply_err(req, 0);
}

void OpRelease(fuse_req_t req, fuse_ino_t, fuse_file_info* fi) {
  // The last close of an orphan deletes it.
  fuse_reply_err(req, ErrnoOf(M(req)->files().Close(fi->fh)));
}

void OpFsync(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  fuse_reply_err(req, ErrnoOf(M(req)->files().Fsync(Eng(ino), datasync != 0)));
}

// Directory offsets: "." is followed by 1, ".." by 2, and an entry of
// index i (the engine's DIR_INDEX, from 2 up) by i + 1, so `off` is the
// first index still to return.
void ReadDirCommon(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, bool plus) {
  Mounted* m = M(req);
  Files& f = m->files();
  if (off < 0) return (void)fuse_reply_err(req, EINVAL);
  std::string buf(size, '\0');
  size_t used = 0;
  auto add = [&](const char* name, const FileStat* st, mode_t type, uint64_t ino_shown,
                 off_t next) -> bool {
    size_t n;
    if (plus) {
      fuse_entry_param e;
      memset(&e, 0, sizeof e);
      if (st != nullptr) {
        e = Entry(m, *st);
      } else {
        e.attr.st_ino = ino_shown;
        e.attr.st_mode = type;
      }
      n = fuse_add_direntry_plus(req, &buf[used], size - used, name, &e, next);
    } else {
      struct stat s;
      memset(&s, 0, sizeof s);
      s.st_ino = ino_shown;
      s.st_mode = type;
      n = fuse_add_direntry(req, &buf[used], size - used, name, &s, next);
    }
    if (n > size - used) return false;
    used += n;
    return true;
  };
  const uint64_t dir = Eng(ino);
  if (off == 0 && !add(".", nullptr, S_IFDIR, dir, 1))
    return (void)fuse_reply_buf(req, buf.data(), 0);
  if (off <= 1 && !add("..", nullptr, S_IFDIR, dir, 2))
    return (void)fuse_reply_buf(req, buf.data(), used);
  uint64_t cookie = std::max<uint64_t>(static_cast<uint64_t>(off), 2);
  // A batch about what fits the buffer (names are short on average).
  const uint64_t batch = std::max<size_t>(8, std::min<size_t>(size / 32, 1024));
  for (;;) {
    absl::StatusOr<ReadDirResult> r = f.ReadDirInode(dir, cookie, batch);
    if (!r.ok()) {
      if (used > 0) break;  // what fit; the next call reports the error
      return ReplyErr(req, r.status());
    }
    for (const DirEntryInfo& e : r->entries) {
      const off_t next = static_cast<off_t>(e.cookie + 1);
      if (plus) {
        absl::StatusOr<FileStat> st = f.StatInode(e.ino);
        if (!st.ok()) continue;  // removed since the listing
        if (!add(e.name.c_str(), &*st, TypeBits(e.kind), e.ino, next)) {
          // readdirplus counts a lookup for each entry it returns; one
          // that did not fit was not returned.
          return (void)fuse_reply_buf(req, buf.data(), used);
        }
      } else if (!add(e.name.c_str(), nullptr, TypeBits(e.kind), e.ino, next)) {
        return (void)fuse_reply_buf(req, buf.data(), used);
      }
    }
    if (!r->more || r->entries.empty()) break;
    cookie = r->next_cookie;
  }
  fuse_reply_buf(req, buf.data(), used);
}

void OpOpendir(fuse_req_t req, fuse_ino_t ino, fuse_file_info* fi) {
  absl::StatusOr<FileStat> st = M(req)->files().StatInode(Eng(ino));
  if (!st.ok()) return ReplyErr(req, st.status());
  if (st->kind != FileKind::kDirectory) return (void)fuse_reply_err(req, ENOTDIR);
  fi->fh = 0;
  fuse_reply_open(req, fi);
}

void OpReaddir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  ReadDirCommon(req, ino, size, off, false);
}

void OpReaddirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, fuse_file_info*) {
  ReadDirCommon(req, ino, size, off, true);
}

void OpReleasedir(fuse_req_t req, fuse_ino_t, fuse_file_info*) { fuse_reply_err(req, 0); }

void OpFsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, fuse_file_info*) {
  fuse_reply_err(req, ErrnoOf(M(req)->files().Fsync(Eng(ino), datasync != 0)));
}

void OpStatfs(fuse_req_t req, fuse_ino_t) {
  const StoreStats st = M(req)->store()->Stats();
  struct statvfs v;
  memset(&v, 0, sizeof v);
  v.f_bsize = kBlock;
  v.f_frsize = kBlock;
  v.f_blocks = st.total_bytes / kBlock;
  v.f_bfree = st.free_bytes / kBlock;
  v.f_bavail = st.free_bytes / kBlock;
  // Inodes are items, not a fixed table: as btrfs, report none used of
  // none (df -i shows 0).
  v.f_files = 0;
  v.f_ffree = 0;
  v.f_namemax = 255;
  if (M(req)->options().read_only) v.f_flag |= ST_RDONLY;
  fuse_reply_statfs(req, &v);
}

void OpSetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, const char* value, size_t size,
                int flags) {
  // XATTR_CREATE (1) and XATTR_REPLACE (2) are the engine's flags.
  static_assert(kXattrCreate == 1 && kXattrReplace == 2, "setxattr flags");
  if ((flags & ~(kXattrCreate | kXattrReplace)) != 0) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_err(req,
                 ErrnoOf(M(req)->files().SetXattr(Eng(ino), name, absl::string_view(value, size),
                                                  static_cast<uint32_t>(flags))));
}

void OpGetxattr(fuse_req_t req, fuse_ino_t ino, const char* name, size_t size) {
  absl::StatusOr<std::string> v = M(req)->files().GetXattr(Eng(ino), name);
  if (!v.ok()) return ReplyErr(req, v.status());  // an absent name: the engine's ENODATA
  if (size == 0) return (void)fuse_reply_xattr(req, v->size());
  if (size < v->size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, v->data(), v->size());
}

void OpListxattr(fuse_req_t req, fuse_ino_t ino, size_t size) {
  absl::StatusOr<std::vector<std::string>> names = M(req)->files().ListXattrs(Eng(ino));
  if (!names.ok()) return ReplyErr(req, names.status());
  std::string out;
  for (const std::string& n : *names) {
    out += n;
    out.push_back('\0');
  }
  if (size == 0) return (void)fuse_reply_xattr(req, out.size());
  if (size < out.size()) return (void)fuse_reply_err(req, ERANGE);
  fuse_reply_buf(req, out.data(), out.size());
}

void OpRemovexattr(fuse_req_t req, fuse_ino_t ino, const char* name) {
  fuse_reply_err(req, ErrnoOf(M(req)->files().RemoveXattr(Eng(ino), name)));
}

// copy_file_range: a reflink (Clone) where the ranges are block aligned,
// else a copy through the engine.
void OpCopyFileRange(fuse_req_t req, fuse_ino_t ino_in, off_t off_in, fuse_file_info*,
                     fuse_ino_t ino_out, off_t off_out, fuse_file_info*, size_t len, int flags) {
  Files& f = M(req)->files();
  if (flags != 0 || off_in < 0 || off_out < 0) return (void)fuse_reply_err(req, EINVAL);
  const uint64_t src = Eng(ino_in), dst = Eng(ino_out);
  absl::StatusOr<FileStat> sst = f.StatInode(src);
  if (!sst.ok()) return ReplyErr(req, sst.status());
  const uint64_t in = static_cast<uint64_t>(off_in), out = static_cast<uint64_t>(off_out);
  if (in >= sst->size || len == 0) return (void)fuse_reply_write(req, 0);
  uint64_t n = std::min<uint64_t>(len, sst->size - in);
  const bool to_eof = in + n == sst->size;
  const bool aligned = in % kBlock == 0 && out % kBlock == 0 && (n % kBlock == 0 || to_eof);
  if (aligned && !(src == dst && in < out + n && out < in + n)) {
    absl::Status s = f.Clone(src, in, dst, out, to_eof ? 0 : n);
    if (s.ok()) return (void)fuse_reply_write(req, n);
    if (ErrnoOf(s) != EINVAL) return ReplyErr(req, s);
    // The engine refused this pair as a clone (an inline extent, say):
    // copy the bytes instead.
  }
  constexpr uint64_t kChunk = 1 << 20;
  n = std::min<uint64_t>(n, 16 * kChunk);  // a short copy; the caller loops
  uint64_t done = 0;
  while (done < n) {
    absl::StatusOr<std::string> data = f.Read(src, in + done, std::min(kChunk, n - done));
    if (!data.ok())
      return done > 0 ? (void)fuse_reply_write(req, done) : ReplyErr(req, data.status());
    if (data->empty()) break;
    if (absl::Status s = f.Write(dst, out + done, *data); !s.ok())
      return done > 0 ? (void)fuse_reply_write(req, done) : ReplyErr(req, s);
    done += data->size();
  }
  fuse_reply_write(req, done);
}

void OpFallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                 fuse_file_info*) {
  // FALLOC_FL_KEEP_SIZE, PUNCH_HOLE and ZERO_RANGE are the engine's values;
  // the engine answers EOPNOTSUPP for the rest.
  static_assert(kFallocKeepSize == 0x01 && kFallocPunchHole == 0x02 && kFallocZeroRange == 0x10,
                "fallocate modes");
  if (offset < 0 || length <= 0) return (void)fuse_reply_err(req, EINVAL);
  fuse_reply_err(req, ErrnoOf(M(req)->files().Fallocate(Eng(ino), static_cast<uint32_t>(mode),
                                                        static_cast<uint64_t>(offset),
                                                        static_cast<uint64_t>(length))));
}

// lseek SEEK_DATA / SEEK_HOLE from the file's extents (fiemap).
void OpLseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, fuse_file_info*) {
  Files& f = M(req)->files();
  if (whence != SEEK_DATA && whence != SEEK_HOLE) return (void)fuse_reply_err(req, EINVAL);
  if (off < 0) return (void)fuse_reply_err(req, ENXIO);
  absl::StatusOr<FileStat> st = f.StatInode(Eng(ino));
  if (!st.ok()) return ReplyErr(req, st.status());
  const uint64_t pos = static_cast<uint64_t>(off);
  if (pos >= st->size) return (void)fuse_reply_err(req, ENXIO);
  absl::StatusOr<std::vector<FiemapExtent>> ext = f.Fiemap(Eng(ino), pos, st->size - pos);
  if (!ext.ok()) return ReplyErr(req, ext.status());
  // Preallocated extents read as zeros: holes to lseek, as on btrfs.
  ext->erase(std::remove_if(ext->begin(), ext->end(),
                            [](const FiemapExtent& e) {
                              return (e.flags & kFiemapExtentUnwritten) != 0;
                            }),
             ext->end());
  if (whence == SEEK_DATA) {
    for (const FiemapExtent& e : *ext) {
      if (e.logical + e.length > pos) return (void)fuse_reply_lseek(req, std::max(pos, e.logical));
    }
    return (void)fuse_reply_err(req, ENXIO);
  }
  uint64_t at = pos;
  for (const FiemapExtent& e : *ext) {
    if (e.logical + e.length <= at) continue;
    if (e.logical > at) break;  // a hole starts at `at`
    at = e.logical + e.length;
  }
  fuse_reply_lseek(req, static_cast<off_t>(std::min<uint64_t>(at, st->size)));
}

fuse_lowlevel_ops MakeOps() {
  fuse_lowlevel_ops ops;
  memset(&ops, 0, sizeof ops);
  ops.init = OpInit;
  ops.lookup = OpLookup;
  ops.getattr = OpGetattr;
  ops.setattr = OpSetattr;
  ops.readlink = OpReadlink;
  ops.mknod = OpMknod;
  ops.mkdir = OpMkdir;
  ops.symlink = OpSymlink;
  ops.unlink = OpUnlink;
  ops.rmdir = OpRmdir;
  ops.rename = OpRename;
  ops.link = OpLink;
  ops.open = OpOpen;
  ops.create = OpCreate;
  ops.read = OpRead;
  ops.write = OpWrite;
  ops.flush = OpFlush;
  ops.release = OpRelease;
  ops.fsync = OpFsync;
  ops.opendir = OpOpendir;
  ops.readdir = OpReaddir;
  ops.readdirplus = OpReaddirplus;
  ops.releasedir = OpReleasedir;
  ops.fsyncdir = OpFsyncdir;
  ops.statfs = OpStatfs;
  ops.setxattr = OpSetxattr;
  ops.getxattr = OpGetxattr;
  ops.listxattr = OpListxattr;
  ops.removexattr = OpRemovexattr;
  ops.copy_file_range = OpCopyFileRange;
  ops.fallocate = OpFallocate;
  ops.lseek = OpLseek;
  return ops;
}

}  // namespace

struct FuseMount::State {
  State(Store* store, Files files, const MountConfig& c) : mounted(store, files, c) {}
  Mounted mounted;
  fuse_lowlevel_ops ops;
  fuse_session* se = nullptr;
  bool signals = false;
  std::thread thread;
  int loop_result = 0;
};

absl::StatusOr<std::unique_ptr<FuseMount>> FuseMount::Mount(Store* store, Files files,
                                                            const MountConfig& c) {
  auto st = std::make_unique<State>(store, files, c);
  st->ops = MakeOps();
  std::vector<std::string> argv_s = {"cowkv-mount"};
  std::vector<std::string> opts = {absl::StrCat("fsname=", c.fsname), "subtype=cowkv",
                                   "default_permissions"};
  if (c.read_only) opts.push_back("ro");
  for (const std::string& x : c.fuse_options) opts.push_back(x);
  argv_s.push_back("-o");
  argv_s.push_back(absl::StrJoin(opts, ","));
  if (c.debug) argv_s.push_back("-d");
  std::vector<char*> argv;
  for (std::string& a : argv_s) argv.push_back(a.data());
  fuse_args args = FUSE_ARGS_INIT(static_cast<int>(argv.size()), argv.data());
  st->se = fuse_session_new(&args, &st->ops, sizeof st->ops, &st->mounted);
  fuse_opt_free_args(&args);
  if (st->se == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("libfuse refused the options ", absl::StrJoin(opts, ",")));
  }
  if (fuse_session_mount(st->se, c.mountpoint.c_str()) != 0) {
    fuse_session_destroy(st->se);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot mount at ", c.mountpoint,
                     " (is it an existing directory, and not mounted already?)"));
  }
  return std::unique_ptr<FuseMount>(new FuseMount(std::move(st)));
}

FuseMount::FuseMount(std::unique_ptr<State> st) : st_(std::move(st)) {}

FuseMount::~FuseMount() { (void)Unmount(); }

absl::Status FuseMount::Serve(bool signals) {
  if (signals) {
    if (fuse_set_signal_handlers(st_->se) != 0)
      return absl::InternalError("cannot install the signal handlers");
    st_->signals = true;
  }
  fuse_loop_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.clone_fd = 0;
  cfg.max_idle_threads = std::max(1u, st_->mounted.options().max_threads);
  st_->loop_result = fuse_session_loop_mt(st_->se, &cfg);
  if (st_->loop_result < 0)
    return absl::InternalError(absl::StrCat("FUSE loop: ", strerror(-st_->loop_result)));
  return absl::OkStatus();
}

void FuseMount::ServeInBackground() {
  st_->thread = std::thread([this] { (void)Serve(false); });
}

absl::Status FuseMount::Unmount() {
  if (st_ == nullptr || st_->se == nullptr) return absl::OkStatus();
  // The loop ends when the kernel lets go of the mount (its read of
  // /dev/fuse fails); the flag ends it if it was between requests.
  fuse_session_exit(st_->se);
  fuse_session_unmount(st_->se);
  if (st_->thread.joinable()) st_->thread.join();
  if (st_->signals) fuse_remove_signal_handlers(st_->se);
  fuse_session_destroy(st_->se);
  st_->se = nullptr;
  return absl::OkStatus();
}

}  // namespace mount
}  // namespace cowkv
