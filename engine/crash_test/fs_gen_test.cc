// Goal: fsync of the file namespace keeps the contract of docs/design.md
// ("What fsync promises") after a power cut at any flush, for every
// workload of a bounded space (CrashMonkey's ACE), for the log-replay tests
// ported from xfstests and CrashMonkey (ported_workloads.txt), and for the
// three failures issue 13 found.
//
// Method: a workload is a setup, committed and closed into a base image,
// then operations with persistence points (fsync, fdatasync). It runs on
// the base image once without a cut (its model history, and the flushes it
// reaches), then once per flush point k and loss mode (drop, keep, torn):
// the device dies at its k-th flush, power fails, the image is mounted
// (log replay and fix-up; some cuts also crash the replay's commit once),
// the namespace is captured and judged by the oracle (fs_model.cc: the
// fsynced objects as at their fsync or later, their full paths, the
// related operations btrfs persists, no name set or bytes an inode never
// had, nothing committed lost, link counts and directory sizes), and
// `check` must be clean.
//
// The generated space: from GeneratorSetup() (committed: /A, /B, /A/foo
// = /A/bar with 8 KiB in an extent, /B/foo with 100 inline bytes), for
// each length L = 1..--max_ops (3), L core operations (CoreOps: create,
// mkdir, symlink, link, unlink, rename plain / over a file / over an
// empty directory / exchange, write append / overwrite, truncate down /
// up, fallocate (KEEP_SIZE past EOF, allocate growing the file, punch
// hole, zero range with and without KEEP_SIZE), xattr create / replace /
// remove, setattr (chmod + chown + mtime), over the names /A/foo, /A/bar,
// /B/foo, /A/C/foo and /A/C, and moving /B into /A/C and back; the third
// op a namespace op only, as ACE's seq-3 metadata set), each but the last
// followed by nothing, an fsync of its primary object or (L < 3) of that
// object's parent; the last by an fsync or (L < 3) fdatasync of any object
// the workload involved (the ops' paths, their parents and the root).
//
// The default run takes a seeded sample (--seed, --samples); the manual
// target fs_gen_test_full enumerates the whole space (--full), sharded by
// workload index. --plant=N switches on a planted bug in the oracle's
// input to show the generator catches it (see PlantedBugsAreCaught).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/status_macros.h"
#include "cowkv/store.h"
#include "engine/crash_test/fs_model.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

#ifdef COWKV_FS_GEN_MOUNT
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "mount/fuse_fs.h"
#endif

namespace cowkv {
namespace crashgen {
namespace {

using Mode = FaultDevice::LossMode;
constexpr uint64_t kDeviceBytes = 16ull << 20;

uint64_t MaxOps() { return testing::Flags().max_ops ? testing::Flags().max_ops : 3; }

// The store's options for every run and mount; PlantedBugsAreCaught sets
// a planted bug here, ExtendedRefs one name per INODE_REF item (so
// /A/bar, the setup's second name of /A/foo, is an extended ref).
Options::TestHooks::PlantedBug planted = Options::TestHooks::PlantedBug::kNone;
size_t ref_item_names = 0;
Options StoreOptions() {
  Options o = testing::TestOptions();
  o.test_hooks.planted_bug = planted;
  o.test_hooks.ref_item_names =
      ref_item_names != 0 ? ref_item_names : testing::Flags().ref_item_names;
  return o;
}

// ---- Base images ------------------------------------------------------------------

struct Base {
  std::string image;
  MState model;
};

// The engine's handles of a run, by the model's handle number.
using Handles = std::vector<OpenFile>;
absl::Status ApplyEngine(Store* store, Files f, const Op& op, size_t position, uint64_t* made,
                         Handles* handles);

// The setup committed and closed (the close's commit starts a log chain,
// so every run's first fsync is a log sync); cached by setup.
const Base& BaseFor(const std::vector<Op>& setup) {
  static auto* cache = new std::map<std::string, Base>;
  std::string key = absl::StrCat("ref_item_names ", StoreOptions().test_hooks.ref_item_names, "\n");
  for (const Op& o : setup) key += o.Describe() + "\n";
  auto it = cache->find(key);
  if (it != cache->end()) return it->second;
  MemDevice mem(kDeviceBytes);
  Base b;
  absl::Status s = Store::Mkfs(&mem, testing::TestMkfs(4096));
  auto store = Store::Open(&mem, StoreOptions());
  if (!s.ok() || !store.ok()) std::abort();
  Files f = (*store)->DefaultSubvolume().value()->files();
  if (!f.Create("/.warm").ok() || !f.Unlink("/.warm").ok()) std::abort();
  Handles handles;
  for (size_t i = 0; i < setup.size(); ++i) {
    int made = 0;
    if (!b.model.Apply(setup[i], i, &made)) {
      ADD_FAILURE() << "setup op " << setup[i].Describe() << " is invalid in the model";
      break;
    }
    uint64_t ino = 0;
    absl::Status st = ApplyEngine(store->get(), f, setup[i], i, &ino, &handles);
    if (!st.ok()) {
      ADD_FAILURE() << "setup op " << setup[i].Describe() << ": " << st;
      break;
    }
    if (made) b.model.MutableInode(made).eng = ino;
  }
  if (!(*store)->Close().ok()) std::abort();
  b.image = mem.Snapshot();
  return cache->emplace(key, std::move(b)).first->second;
}

absl::Status ApplyEngine(Store* store, Files f, const Op& op, size_t position, uint64_t* made,
                         Handles* handles) {
  *made = 0;
  auto handle = [&](size_t n) -> absl::StatusOr<OpenFile> {
    if (n >= handles->size()) return absl::InternalError(absl::StrCat("no handle ", n));
    return (*handles)[n];
  };
  // A path, or "%N": the inode of handle N.
  auto ino_of = [&](const std::string& p) -> absl::StatusOr<uint64_t> {
    if (p.empty() || p[0] != '%') return f.Lookup(p);
    COWKV_ASSIGN_OR_RETURN(OpenFile h, handle(std::stoul(p.substr(1))));
    return h.ino;
  };
  auto keep = [&](const absl::StatusOr<FileStat>& st) {
    if (st.ok()) *made = st->ino;
    return st.status();
  };
  switch (op.kind) {
    case OpKind::kCreate: return keep(f.Create(op.a));
    case OpKind::kMkdir: return keep(f.Mkdir(op.a));
    case OpKind::kSymlink: return keep(f.Symlink(op.a, op.b));
    case OpKind::kLink: {
      if (op.a.empty() || op.a[0] != '%') return f.Link(op.a, op.b).status();
      COWKV_ASSIGN_OR_RETURN(uint64_t ino, ino_of(op.a));
      COWKV_ASSIGN_OR_RETURN(uint64_t dir, f.Lookup(ParentOf(op.b)));
      return f.LinkAt(ino, dir, BaseOf(op.b)).status();  // linkat(AT_EMPTY_PATH)
    }
    case OpKind::kUnlink: return f.Unlink(op.a);
    case OpKind::kRmdir: return f.Rmdir(op.a);
    case OpKind::kRename: return f.Rename(op.a, op.b, op.flags);
    case OpKind::kWrite: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      return f.Write(*ino, op.x, WriteBytes(op, position));
    }
    case OpKind::kTruncate: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      return f.Truncate(*ino, op.x);
    }
    case OpKind::kClone: {
      absl::StatusOr<uint64_t> src = ino_of(op.a), dst = ino_of(op.b);
      if (!src.ok()) return src.status();
      if (!dst.ok()) return dst.status();
      return f.Clone(*src, op.x, *dst, op.y, op.len);
    }
    case OpKind::kSetXattr: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      return f.SetXattr(*ino, op.s1, op.s2, op.flags);
    }
    case OpKind::kRemoveXattr: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      return f.RemoveXattr(*ino, op.s1);
    }
    case OpKind::kSetAttr: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      SetAttrSpec spec;
      if (op.flags & kAttrMode) spec.mode = static_cast<uint32_t>(op.x);
      if (op.flags & kAttrUid) spec.uid = static_cast<uint32_t>(op.y);
      if (op.flags & kAttrGid) spec.gid = static_cast<uint32_t>(op.len);
      if (op.flags & kAttrMtime) spec.mtime = AttrTime::At(op.t);
      return f.SetAttr(*ino, spec).status();
    }
    case OpKind::kFsync:
    case OpKind::kFdatasync: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      return f.Fsync(*ino, op.kind == OpKind::kFdatasync);
    }
    case OpKind::kCommit: return store->Commit();
    case OpKind::kFallocate: {
      absl::StatusOr<uint64_t> ino = ino_of(op.a);
      if (!ino.ok()) return ino.status();
      return f.Fallocate(*ino, op.flags, op.x, op.y);
    }
    case OpKind::kOpen: {
      COWKV_ASSIGN_OR_RETURN(OpenFile h, f.OpenPath(op.a));
      handles->push_back(h);
      return absl::OkStatus();
    }
    case OpKind::kClose: {
      COWKV_ASSIGN_OR_RETURN(OpenFile h, handle(op.x));
      return f.Close(h.handle);
    }
    case OpKind::kTmpfile: {
      COWKV_ASSIGN_OR_RETURN(uint64_t dir, f.Lookup(op.a));
      COWKV_ASSIGN_OR_RETURN(OpenFile h, f.CreateTmpfile(dir));
      handles->push_back(h);
      *made = h.ino;
      return absl::OkStatus();
    }
  }
  return absl::InternalError("unknown op");
}

#ifdef COWKV_FS_GEN_MOUNT
// The op as syscalls on the mount at `mp`; a failed syscall is an error
// status carrying the errno's name (the oracle only asks whether it failed).
//
// Handles ("%N") are file descriptors on the mount, kept in OpenFile.handle
// with kFdBit set. O_TMPFILE has no FUSE request in libfuse 3.14, so a
// tmpfile is made through the engine (an engine handle, no kFdBit) and the
// ops on it go through the engine too.
constexpr uint64_t kFdBit = 1ull << 63;

absl::Status ApplyMount(Store* store, Files f, const std::string& mp, const Op& op,
                        size_t position, uint64_t* made, Handles* handles) {
  *made = 0;
  auto P = [&](const std::string& p) { return mp + p; };
  auto err = [&](const char* call) {
    return absl::UnknownError(absl::StrCat(call, " ", op.Describe(), ": ", strerror(errno)));
  };
  const bool by_handle = !op.a.empty() && op.a[0] == '%';
  if (by_handle || op.kind == OpKind::kClose || op.kind == OpKind::kTmpfile) {
    const size_t n = op.kind == OpKind::kClose ? op.x
                     : op.kind == OpKind::kTmpfile ? 0
                                                   : std::stoul(op.a.substr(1));
    if (op.kind != OpKind::kTmpfile && n >= handles->size())
      return absl::InternalError(absl::StrCat("no handle ", n));
    const bool fd_handle =
        op.kind != OpKind::kTmpfile && ((*handles)[n].handle & kFdBit) != 0;
    if (!fd_handle) return ApplyEngine(store, f, op, position, made, handles);
    const int fd = static_cast<int>((*handles)[n].handle & ~kFdBit);
    switch (op.kind) {
      case OpKind::kClose:
        (*handles)[n].handle = 0;  // closed: the end of the run skips it
        return close(fd) == 0 ? absl::OkStatus() : err("close");
      case OpKind::kWrite: {
        const std::string data = WriteBytes(op, position);
        const ssize_t wrote = pwrite(fd, data.data(), data.size(),  // NOLINT(mount-io)
                                     static_cast<off_t>(op.x));
        return wrote == static_cast<ssize_t>(data.size()) ? absl::OkStatus() : err("pwrite");
      }
      case OpKind::kTruncate:
        return ftruncate(fd, static_cast<off_t>(op.x)) == 0 ? absl::OkStatus() : err("ftruncate");
      case OpKind::kFallocate:
        return fallocate(fd, static_cast<int>(op.flags), static_cast<off_t>(op.x),
                         static_cast<off_t>(op.y)) == 0
                   ? absl::OkStatus()
                   : err("fallocate");
      case OpKind::kSetXattr:
        return fsetxattr(fd, op.s1.c_str(), op.s2.data(), op.s2.size(),
                         static_cast<int>(op.flags)) == 0
                   ? absl::OkStatus()
                   : err("fsetxattr");
      case OpKind::kRemoveXattr:
        return fremovexattr(fd, op.s1.c_str()) == 0 ? absl::OkStatus() : err("fremovexattr");
      case OpKind::kFsync:
        return fsync(fd) == 0 ? absl::OkStatus() : err("fsync");  // NOLINT(mount-io)
      case OpKind::kFdatasync:
        return fdatasync(fd) == 0 ? absl::OkStatus() : err("fdatasync");  // NOLINT(mount-io)
      case OpKind::kLink:  // linkat(AT_EMPTY_PATH)
        return linkat(fd, "", AT_FDCWD, P(op.b).c_str(), AT_EMPTY_PATH) == 0 ? absl::OkStatus()
                                                                             : err("linkat");
      default:
        return ApplyEngine(store, f, op, position, made, handles);
    }
  }
  auto made_ino = [&](const std::string& p) {
    struct stat st;
    if (lstat(P(p).c_str(), &st) != 0) return err("lstat");
    *made = st.st_ino;
    return absl::OkStatus();
  };
  switch (op.kind) {
    case OpKind::kCreate: {
      const int fd = open(P(op.a).c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
      if (fd < 0) return err("open");
      close(fd);
      return made_ino(op.a);
    }
    case OpKind::kMkdir:
      if (mkdir(P(op.a).c_str(), 0755) != 0) return err("mkdir");
      return made_ino(op.a);
    case OpKind::kSymlink:
      if (symlink(op.a.c_str(), P(op.b).c_str()) != 0) return err("symlink");
      return made_ino(op.b);
    case OpKind::kLink:
      return link(P(op.a).c_str(), P(op.b).c_str()) == 0 ? absl::OkStatus() : err("link");
    case OpKind::kUnlink:
      return unlink(P(op.a).c_str()) == 0 ? absl::OkStatus() : err("unlink");
    case OpKind::kRmdir:
      return rmdir(P(op.a).c_str()) == 0 ? absl::OkStatus() : err("rmdir");
    case OpKind::kRename:
      return renameat2(AT_FDCWD, P(op.a).c_str(), AT_FDCWD, P(op.b).c_str(), op.flags) == 0
                 ? absl::OkStatus()
                 : err("renameat2");
    case OpKind::kWrite: {
      const int fd = open(P(op.a).c_str(), O_WRONLY);
      if (fd < 0) return err("open");
      const std::string data = WriteBytes(op, position);
      const ssize_t n =
          pwrite(fd, data.data(), data.size(), static_cast<off_t>(op.x));  // NOLINT(mount-io)
      const int e = errno;
      close(fd);
      errno = e;
      return n == static_cast<ssize_t>(data.size()) ? absl::OkStatus() : err("pwrite");
    }
    case OpKind::kTruncate:
      return truncate(P(op.a).c_str(), static_cast<off_t>(op.x)) == 0 ? absl::OkStatus()
                                                                      : err("truncate");
    case OpKind::kClone: {
      // copy_file_range: the mount clones aligned ranges (as Clone) and
      // copies the rest; len 0 is "to the source's end", as Clone's.
      struct stat st;
      if (stat(P(op.a).c_str(), &st) != 0) return err("stat");
      uint64_t len = op.len;
      if (len == 0) len = static_cast<uint64_t>(st.st_size) > op.x ? st.st_size - op.x : 0;
      const int in = open(P(op.a).c_str(), O_RDONLY);
      if (in < 0) return err("open");
      const int out = open(P(op.b).c_str(), O_WRONLY);
      if (out < 0) {
        close(in);
        return err("open");
      }
      loff_t off_in = static_cast<loff_t>(op.x), off_out = static_cast<loff_t>(op.y);
      absl::Status s;
      while (len > 0) {
        const ssize_t n = copy_file_range(in, &off_in, out, &off_out, len, 0);
        if (n < 0) {
          s = err("copy_file_range");
          break;
        }
        if (n == 0) break;
        len -= static_cast<uint64_t>(n);
      }
      close(in);
      close(out);
      return s;
    }
    case OpKind::kSetXattr:
      return setxattr(P(op.a).c_str(), op.s1.c_str(), op.s2.data(), op.s2.size(),
                      static_cast<int>(op.flags)) == 0
                 ? absl::OkStatus()
                 : err("setxattr");
    case OpKind::kRemoveXattr:
      return removexattr(P(op.a).c_str(), op.s1.c_str()) == 0 ? absl::OkStatus()
                                                              : err("removexattr");
    case OpKind::kFsync:
    case OpKind::kFdatasync: {
      struct stat st;
      if (lstat(P(op.a).c_str(), &st) != 0) return err("lstat");
      if (S_ISLNK(st.st_mode)) {
        // No syscall fsyncs a symlink itself (open follows it, O_PATH
        // cannot fsync): the engine's, by the inode the mount showed.
        return f.Fsync(st.st_ino, op.kind == OpKind::kFdatasync);
      }
      const int fd = open(P(op.a).c_str(), O_RDONLY);
      if (fd < 0) return err("open");
      const int r = op.kind == OpKind::kFsync ? fsync(fd) : fdatasync(fd);  // NOLINT(mount-io)
      const int e = errno;
      close(fd);
      errno = e;
      return r == 0 ? absl::OkStatus() : err(op.kind == OpKind::kFsync ? "fsync" : "fdatasync");
    }
    case OpKind::kCommit:
      return store->Commit();  // no syscall reaches a FUSE file system's commit
    case OpKind::kSetAttr: {
      // chown, then chmod (so chown's clearing of set-ID bits does not
      // undo the mode the op sets, as one setattr with both would not),
      // then utimensat for mtime: three FUSE setattrs, no flush between.
      struct stat st;
      if (lstat(P(op.a).c_str(), &st) != 0) return err("lstat");
      if ((op.flags & (kAttrUid | kAttrGid)) &&
          lchown(P(op.a).c_str(),
                 (op.flags & kAttrUid) ? static_cast<uid_t>(op.y) : static_cast<uid_t>(-1),
                 (op.flags & kAttrGid) ? static_cast<gid_t>(op.len) : static_cast<gid_t>(-1)) != 0)
        return err("lchown");
      if (op.flags & kAttrMode) {
        if (S_ISLNK(st.st_mode)) {
          // No syscall changes a symlink's mode: the engine's, by inode.
          SetAttrSpec spec;
          spec.mode = static_cast<uint32_t>(op.x);
          COWKV_RETURN_IF_ERROR(f.SetAttr(st.st_ino, spec).status());
        } else if (chmod(P(op.a).c_str(), static_cast<mode_t>(op.x)) != 0) {
          return err("chmod");
        }
      }
      if (op.flags & kAttrMtime) {
        timespec ts[2];
        ts[0].tv_sec = 0;
        ts[0].tv_nsec = UTIME_OMIT;
        ts[1].tv_sec = op.t / 1000000000;
        ts[1].tv_nsec = op.t % 1000000000;
        if (utimensat(AT_FDCWD, P(op.a).c_str(), ts, AT_SYMLINK_NOFOLLOW) != 0)
          return err("utimensat");
      }
      return absl::OkStatus();
    }
    case OpKind::kFallocate: {
      const int fd = open(P(op.a).c_str(), O_WRONLY);
      if (fd < 0) return err("open");
      const int r = fallocate(fd, static_cast<int>(op.flags), static_cast<off_t>(op.x),
                              static_cast<off_t>(op.y));
      const int e = errno;
      close(fd);
      errno = e;
      return r == 0 ? absl::OkStatus() : err("fallocate");
    }
    case OpKind::kOpen: {
      const int fd = open(P(op.a).c_str(), O_RDWR);
      if (fd < 0) return err("open");
      struct stat st;
      if (fstat(fd, &st) != 0) return err("fstat");
      handles->push_back(OpenFile{kFdBit | static_cast<uint64_t>(fd), st.st_ino});
      return absl::OkStatus();
    }
    case OpKind::kClose:
    case OpKind::kTmpfile:
      break;  // above
  }
  return absl::InternalError("unknown op");
}

// A mount of the run's store for the length of the run.
class RunMount {
 public:
  RunMount(Store* store, Files f) {
    char dir[] = "/tmp/cowkv-gen.XXXXXX";
    if (mkdtemp(dir) == nullptr) std::abort();
    mp_ = dir;
    mount::MountConfig c;
    c.mountpoint = mp_;
    c.max_threads = 2;
    absl::StatusOr<std::unique_ptr<mount::FuseMount>> m = mount::FuseMount::Mount(store, f, c);
    if (!m.ok()) {
      ADD_FAILURE() << "mount: " << m.status();
      std::abort();
    }
    m_ = std::move(*m);
    m_->ServeInBackground();
  }
  ~RunMount() {
    (void)m_->Unmount();
    rmdir(mp_.c_str());
  }
  const std::string& dir() const { return mp_; }

 private:
  std::string mp_;
  std::unique_ptr<mount::FuseMount> m_;
};
#endif

// ---- Runs ---------------------------------------------------------------------------

// What one run of a workload saw.
struct Outcome {
  std::vector<MState> history;  // [0] = the base; [j] after op j-1
  std::vector<Point> completed;
  std::optional<Point> in_flight;
};

// One run of `w` on `fd` (holding `base`), which dies at flush cut.at (0:
// never); the engine refusing a valid op on a live device goes to `errors`.
Outcome RunOnce(const Workload& w, const Base& base, FaultDevice* fd,
                std::vector<std::string>* errors) {
  Outcome o;
  auto store = Store::Open(fd, StoreOptions());
  if (!store.ok()) {
    errors->push_back(absl::StrCat("open: ", store.status().ToString()));
    return o;
  }
  Files f = (*store)->DefaultSubvolume().value()->files();
#ifdef COWKV_FS_GEN_MOUNT
  auto mnt = std::make_unique<RunMount>(store->get(), f);
#endif
  o.history.push_back(base.model);
  bool crashed = false;
  Handles handles;
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const Op& op = w.ops[i];
    const size_t position = w.setup.size() + i;
    MState next = o.history.back();
    int made = 0;
    if (!next.Apply(op, position, &made)) {
      errors->push_back(absl::StrCat("op ", i, " (", op.Describe(), ") is invalid in the model"));
      break;
    }
    if (crashed) {
      o.history.push_back(std::move(next));
      continue;
    }
    uint64_t ino = 0;
    const uint64_t commits = (*store)->Stats().commits;
#ifdef COWKV_FS_GEN_MOUNT
    absl::Status s = ApplyMount(store->get(), f, mnt->dir(), op, position, &ino, &handles);
#else
    absl::Status s = ApplyEngine(store->get(), f, op, position, &ino, &handles);
#endif
    if (made) next.MutableInode(made).eng = ino;
    o.history.push_back(std::move(next));
    Point p;
    if (op.persistence()) {
      p.state = o.history.size() - 1;
      p.inode = *o.history.back().Target(op.a);
      p.datasync = op.kind == OpKind::kFdatasync;
    }
    if (s.ok()) {
      p.commit = (*store)->Stats().commits != commits;
      if (op.persistence()) o.completed.push_back(p);
      if (op.kind == OpKind::kCommit) o.completed.push_back(Point{o.history.size() - 1, 0, false, true});
      continue;
    }
    if (!fd->dead()) {
      errors->push_back(
          absl::StrCat("op ", i, " (", op.Describe(), ") failed on a live device: ", s.ToString()));
      break;
    }
    crashed = true;
    if (op.persistence()) o.in_flight = p;
    // A commit cut short may have reached its superblock.
    if (op.kind == OpKind::kCommit) o.in_flight = Point{o.history.size() - 1, 0, false, true};
  }
#ifdef COWKV_FS_GEN_MOUNT
  // Descriptors still open are closed (a process ending), then unmounted
  // before power fails: nothing in flight.
  for (const OpenFile& h : handles) {
    if (h.handle & kFdBit) close(static_cast<int>(h.handle & ~kFdBit));
  }
  mnt.reset();
#endif
  // Power fails before the close's commit can write a superblock.
  if (!fd->dead()) fd->CrashAtFlush(1);
  (void)(*store)->Close();
  return o;
}

// Judges the remounted image of a run (fs_model.cc's oracle).
void VerifyImage(Store* store, const Outcome& o, std::vector<std::string>* problems) {
  absl::StatusOr<Recovered> r = CaptureNamespace(store->DefaultSubvolume().value()->files());
  if (!r.ok()) {
    problems->push_back(absl::StrCat("capture: ", r.status().ToString()));
    return;
  }
  for (std::string& p : Judge(o.history, o.completed, o.in_flight, *r)) {
    problems->push_back(std::move(p));
  }
  // No inode outlives the mount without a name: orphans (open files whose
  // last name went, O_TMPFILEs) are deleted by the mount's cleanup, or by
  // replay when their fsync logged them without names; either way their
  // space is free (check).
  Files f = store->DefaultSubvolume().value()->files();
  std::set<uint64_t> reached;
  for (const auto& [path, n] : r->paths) reached.insert(n.ino);
  std::set<uint64_t> asked;
  for (const MState& s : o.history) {
    for (const auto* m : {&s.inodes(), &s.orphans()}) {
      for (const auto& [id, in] : *m) {
        if (in.eng == 0 || in.eng == kRootInode || reached.count(in.eng) ||
            !asked.insert(in.eng).second) {
          continue;
        }
        absl::StatusOr<FileStat> st = f.StatInode(in.eng);
        if (st.ok()) {
          problems->push_back(absl::StrCat("#", id, " (inode ", in.eng, ", nlink ", st->nlink,
                                           ") survives the mount without a name"));
        } else if (!absl::IsNotFound(st.status())) {
          problems->push_back(absl::StrCat("stat of inode ", in.eng, ": ", st.status().ToString()));
        }
      }
    }
  }
  absl::StatusOr<std::vector<uint64_t>> orphans = f.Orphans();
  if (!orphans.ok() || !orphans->empty()) {
    problems->push_back(
        absl::StrCat("orphan items after the mount: ",
                     orphans.ok() ? absl::StrJoin(*orphans, ", ") : orphans.status().ToString()));
  }
}

struct Stats {
  uint64_t workloads = 0;
  uint64_t images = 0;
  uint64_t violations = 0;  // workloads with at least one bad image
  uint64_t fallbacks = 0;   // persistence points that took more than one flush
  std::vector<std::string> reports;
};

// Every cut of one workload: each flush point in three loss modes (drop,
// keep, torn), every third cut also crashing the replay's first or second
// flush, and the run without a cut; up to the first bad image. Returns false
// when it found a violation.
bool RunWorkload(const Workload& w, Stats* stats) {
  const Base& base = BaseFor(w.setup);
  ++stats->workloads;
  testing::CrashPlan plan;
  plan.image = &base.image;
  plan.mount = StoreOptions();
  plan.modes = {Mode::kDropAll, Mode::kKeepAll, Mode::kTorn};
  plan.seed_scale = 0;  // power-loss seeds k * 7 + mode, whatever the sample's seed
  plan.k_scale = 7;
  plan.replay_cut = [](uint64_t, uint64_t k, size_t i) -> uint64_t {
    return k > 0 && (k + i) % 3 == 0 ? 1 + k % 2 : 0;
  };
  plan.judge_uncut = true;
  testing::CrashHarness<Outcome> harness(
      std::move(plan),
      [&](FaultDevice* fd, const testing::Cut&, std::vector<std::string>* errors) {
        return RunOnce(w, base, fd, errors);
      },
      [](Store* store, const Outcome& run, const Outcome&, std::vector<std::string>* problems) {
        VerifyImage(store, run, problems);
      });
  const testing::CrashReport report = harness.Sweep();
  size_t persistence = 0;
  for (const Op& op : w.ops) persistence += op.persistence() ? 1 : 0;
  if (report.flush_points > persistence) ++stats->fallbacks;
  stats->images += report.images;
  if (report.ok()) return true;
  ++stats->violations;
  if (stats->reports.size() < 20) {
    std::string setup;
    for (const Op& o : w.setup) setup += o.Describe() + "; ";
    stats->reports.push_back(absl::StrCat("workload ", w.Describe(), "\n  (setup: ", setup, ")\n  ",
                                          absl::StrJoin(report.failures, "\n  ")));
  }
  return false;
}

// ---- The generated space ------------------------------------------------------------

// Calls `emit` with every workload of the space, in a fixed order: for
// each length L = 1..max_ops, L core ops (CoreOps; the third one of a
// namespace op only), each but the last followed by nothing, an fsync of
// its primary object or (L < 3) an fsync of that object's parent; the
// last by an fsync or (L < 3) fdatasync of any object the workload
// involved (their paths, parents and the root).
void Enumerate(uint64_t max_ops, const std::function<void(const Workload&)>& emit) {
  const std::vector<Op> setup = GeneratorSetup();
  MState s0;
  for (size_t i = 0; i < setup.size(); ++i) s0.Apply(setup[i], i);
  Workload w{"", setup, {}};
  auto point = [](OpKind k, const std::string& p) {
    Op o;
    o.kind = k;
    o.a = p;
    return o;
  };
  std::function<void(const MState&, const std::vector<std::string>&, uint64_t, uint64_t)> step;
  step = [&](const MState& s, const std::vector<std::string>& involved, uint64_t depth,
             uint64_t len) {
    for (const Op& op : CoreOps(s, depth >= 2)) {
      MState t = s;
      t.Apply(op, setup.size() + w.ops.size());
      w.ops.push_back(op);
      const std::vector<std::string> inv = InvolvedPaths(t, op);
      std::vector<std::string> all = involved;
      for (const std::string& p : inv) {
        if (std::find(all.begin(), all.end(), p) == all.end()) all.push_back(p);
      }
      if (depth + 1 == len) {
        for (const std::string& x : all) {
          if (!t.Target(x)) continue;
          w.ops.push_back(point(OpKind::kFsync, x));
          emit(w);
          w.ops.pop_back();
          if (len < 3 && !t.IsDir(x)) {
            w.ops.push_back(point(OpKind::kFdatasync, x));
            emit(w);
            w.ops.pop_back();
          }
        }
      } else {
        std::vector<std::string> after = {""};  // "": no persistence point
        after.push_back(inv.front());
        if (len < 3 && inv.front() != "/" && inv.front()[0] == '/') {
          after.push_back(ParentOf(inv.front()));
        }
        for (const std::string& p : after) {
          if (!p.empty()) w.ops.push_back(point(OpKind::kFsync, p));
          step(t, all, depth + 1, len);
          if (!p.empty()) w.ops.pop_back();
        }
      }
      w.ops.pop_back();
    }
  };
  for (uint64_t len = 1; len <= max_ops; ++len) step(s0, {}, 0, len);
}

void PrintStats(const char* what, const Stats& st, double seconds) {
  std::printf("%s: %llu workloads, %llu crash images, %llu with violations, %llu with a full-commit "
              "fallback, %.1f s\n",
              what, static_cast<unsigned long long>(st.workloads),
              static_cast<unsigned long long>(st.images),
              static_cast<unsigned long long>(st.violations),
              static_cast<unsigned long long>(st.fallbacks), seconds);
  for (const std::string& r : st.reports) std::printf("%s\n", r.c_str());
}

// The sample (default) or the whole space (--full), this shard's part.
TEST(FsGen, GeneratedWorkloads) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t total = 0;
  Enumerate(MaxOps(), [&](const Workload&) { ++total; });
  testing::WorkloadSample sample(total, MaxOps(), 250, testing::Flags().full);
  const uint64_t seed = sample.seed();
  Stats st;
  uint64_t index = 0;
  Enumerate(MaxOps(), [&](const Workload& w) {
    if (sample.Runs(static_cast<int>(index++ % testing::ShardCount()),
                    [&] { return w.Describe(); }))
      RunWorkload(w, &st);
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintStats(testing::Flags().full ? "full enumeration (this shard)" : "sample (this shard)", st,
             secs);
  RecordProperty("workloads", static_cast<int>(st.workloads));
  RecordProperty("images", static_cast<int>(st.images));
  EXPECT_EQ(st.violations, 0u) << "replay one: --seed=" << seed << " --only='<workload>'";
}

// ---- Named workloads ----------------------------------------------------------------

std::string ReadFileOrDie(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return "";
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The log-replay tests of xfstests and CrashMonkey's bugs, ported.
TEST(FsGen, PortedWorkloads) {
  absl::StatusOr<std::vector<Workload>> ws =
      ParseWorkloads(ReadFileOrDie("engine/crash_test/ported_workloads.txt"));
  ASSERT_TRUE(ws.ok()) << ws.status();
  ASSERT_GE(ws->size(), 10u);
  const auto start = std::chrono::steady_clock::now();
  Stats st;
  for (size_t i = 0; i < ws->size(); ++i) {
    if (static_cast<int>(i % testing::ShardCount()) != testing::ShardIndex()) continue;
    RunWorkload((*ws)[i], &st);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  PrintStats("ported workloads (this shard)", st, secs);
  EXPECT_EQ(st.violations, 0u);
}

// Issue 13's three failures, as found by an outside power-loss harness.
Workload Issue13(const std::string& name, std::vector<Op> setup, std::vector<Op> ops) {
  return Workload{name, std::move(setup), std::move(ops)};
}
Op O(OpKind k, std::string a, std::string b = "", uint64_t x = 0, uint64_t y = 0) {
  return MakeOp(k, std::move(a), std::move(b), x, y);
}
std::vector<Workload> RegressionWorkloads() {
  using K = OpKind;
  std::vector<Workload> out;
  // 1. mkdir /dir; write 64 KiB to /foo; fsync /foo; link /foo /dir/bar;
  // fsync /: /dir was missing from / and check failed.
  out.push_back(Issue13("LinkAfterFsyncIntoNewDirThenFsyncRoot", {O(K::kCreate, "/foo"), O(K::kCommit, "")},
                        {O(K::kMkdir, "/dir"), O(K::kWrite, "/foo", "", 0, 65536),
                         O(K::kFsync, "/foo"), O(K::kLink, "/foo", "/dir/bar"),
                         O(K::kFsync, "/")}));
  // 2. A file with many names in one directory: unlink one, link a new
  // one, link the removed one again, unlink another, link two more, fsync:
  // the name removed and added again was lost.
  {
    std::vector<Op> setup = {O(K::kMkdir, "/d"), O(K::kCreate, "/d/f0"), O(K::kWrite, "/d/f0", "", 0, 3000)};
    for (int i = 1; i < 8; ++i) setup.push_back(O(K::kLink, "/d/f0", absl::StrCat("/d/f", i)));
    setup.push_back(O(K::kCommit, ""));
    out.push_back(Issue13("NameRemovedAndAddedAgain", setup,
                          {O(K::kUnlink, "/d/f3"), O(K::kLink, "/d/f0", "/d/n1"),
                           O(K::kLink, "/d/f0", "/d/f3"), O(K::kUnlink, "/d/f5"),
                           O(K::kLink, "/d/f0", "/d/n2"), O(K::kLink, "/d/f0", "/d/n3"),
                           O(K::kFsync, "/d/f0")}));
  }
  // 3. mkdir /A /B /A/C; create /B/foo; fsync /B/foo; link /B/foo
  // /A/C/foo; fsync /A: /A/C came back empty.
  out.push_back(Issue13("LinkIntoDirCreatedInTransaction", {O(K::kCreate, "/.x"), O(K::kCommit, "")},
                        {O(K::kMkdir, "/A"), O(K::kMkdir, "/B"), O(K::kMkdir, "/A/C"),
                         O(K::kCreate, "/B/foo"), O(K::kFsync, "/B/foo"),
                         O(K::kLink, "/B/foo", "/A/C/foo"), O(K::kFsync, "/A")}));
  // Found by the generator after the fix: a logged file's name exchanged
  // away, then taken back by a rename over it (a new DIR_INDEX for the same
  // name): replay dropped the name's DIR_ITEM with the old index.
  out.push_back(Issue13("ExchangeThenRenameOverLoggedName", GeneratorSetup(),
                        {O(K::kLink, "/A/bar", "/A/C"), O(K::kFsync, "/A/C"),
                         O(K::kRename, "/A/bar", "/B/foo"), O(K::kRename, "/A/foo", "/A/bar"),
                         O(K::kFsync, "/")}));
  out.back().ops[2].flags = kRenameExchange;
  // Found by the full enumeration: a logged file renamed over an inode
  // that had moved out of /B in the same transaction: replay dropped /B's
  // entry with the deleted inode but left /B's size (check failed).
  out.push_back(Issue13("RenameOverMovedInodeKeepsDirSizes", GeneratorSetup(),
                        {O(K::kWrite, "/A/bar", "", 8192, 3000), O(K::kFsync, "/A/bar"),
                         O(K::kRename, "/B/foo", "/A/C"), O(K::kRename, "/A/bar", "/A/C"),
                         O(K::kFsync, "/")}));
  // Found by the full enumeration: a rename into a logged directory removed
  // /B/foo, a name the other inode of an earlier exchange held at the last
  // commit; the log carried the tombstone but not that inode's new name,
  // and replay left it nameless (lost). A log update that removes an entry
  // now logs the inodes that lost a name in that directory, with their names.
  out.push_back(Issue13("RenameAfterExchangeIntoLoggedDir", GeneratorSetup(),
                        {O(K::kMkdir, "/A/C"), O(K::kFsync, "/A/C"),
                         O(K::kRename, "/A/bar", "/B/foo"), O(K::kRename, "/B/foo", "/A/C/foo"),
                         O(K::kFsync, "/")}));
  out.back().ops[2].flags = kRenameExchange;
  return out;
}

// Open files and orphans (issue 17): a file unlinked or renamed over
// while open, written and fsynced by handle, closed or not; an O_TMPFILE
// fsynced unnamed, or linked and fsynced; a committed orphan. After the
// crash no orphan is back under a name or left on disk (VerifyImage), and
// check is clean (its space freed).
std::vector<Workload> OrphanWorkloads() {
  using K = OpKind;
  std::vector<Workload> out;
  auto close = [](size_t n) {
    Op o = O(K::kClose, "");
    o.x = n;
    return o;
  };
  const std::vector<Op> setup = GeneratorSetup();
  // Unlinked while open, written and fsynced by handle (generic/321-ish:
  // the fsync must not bring the name back, replay deletes the inode).
  out.push_back({"OrphanWriteFsync",
                 setup,
                 {O(K::kOpen, "/B/foo"), O(K::kUnlink, "/B/foo"), O(K::kWrite, "%0", "", 100, 9000),
                  O(K::kFsync, "%0"), O(K::kFsync, "/B")}});
  // Its last name goes in a later transaction than its fsync.
  out.push_back({"FsyncedThenUnlinkedWhileOpen",
                 setup,
                 {O(K::kOpen, "/B/foo"), O(K::kWrite, "%0", "", 0, 5000), O(K::kFsync, "%0"),
                  O(K::kUnlink, "/B/foo"), O(K::kFdatasync, "%0"), O(K::kFsync, "/A/foo")}});
  // Both names of /A/foo go (one by a rename over it), then a commit with
  // the orphan open: the committed image holds it; the mount deletes it.
  out.push_back({"CommittedOrphan",
                 setup,
                 {O(K::kOpen, "/A/foo"), O(K::kUnlink, "/A/foo"), O(K::kRename, "/B/foo", "/A/bar"),
                  O(K::kCommit, ""), O(K::kWrite, "%0", "", 0, 4096), O(K::kFsync, "%0"),
                  O(K::kFsync, "/A/bar")}});
  // Closed after a commit: the last close deletes it in the next transaction.
  out.push_back({"OrphanClosedAfterCommit",
                 setup,
                 {O(K::kOpen, "/B/foo"), O(K::kUnlink, "/B/foo"), O(K::kCommit, ""), close(0),
                  O(K::kCreate, "/B/new"), O(K::kFsync, "/B/new"), O(K::kCommit, "")}});
  // O_TMPFILE (generic/004's shape): written and fsynced unnamed, linked,
  // fsynced again.
  out.push_back({"TmpfileFsyncLinkFsync",
                 setup,
                 {O(K::kTmpfile, "/A"), O(K::kWrite, "%0", "", 0, 6000), O(K::kFsync, "%0"),
                  O(K::kLink, "%0", "/A/C"), O(K::kFsync, "%0"), close(0)}});
  // An O_TMPFILE committed unnamed, linked in the next transaction: the
  // committed orphan item is stale once the log names it.
  out.push_back({"CommittedTmpfileLinkedLater",
                 setup,
                 {O(K::kTmpfile, "/B"), O(K::kWrite, "%0", "", 0, 3000), O(K::kCommit, ""),
                  O(K::kLink, "%0", "/B/t"), O(K::kFsync, "%0"), O(K::kFsync, "/B")}});
  // An O_TMPFILE never linked, fsynced, committed, closed.
  out.push_back({"TmpfileNeverLinked",
                 setup,
                 {O(K::kTmpfile, "/A"), O(K::kWrite, "%0", "", 0, 200), O(K::kFdatasync, "%0"),
                  O(K::kCommit, ""), close(0), O(K::kFsync, "/A")}});
  return out;
}

TEST(FsGen, OrphanWorkloads) {
  Stats st;
  for (const Workload& w : OrphanWorkloads()) RunWorkload(w, &st);
  PrintStats("orphan workloads", st, 0);
  EXPECT_EQ(st.violations, 0u);
}

TEST(FsGen, Issue13Regressions) {
  Stats st;
  for (const Workload& w : RegressionWorkloads()) RunWorkload(w, &st);
  PrintStats("issue 13 regressions", st, 0);
  EXPECT_EQ(st.violations, 0u);
}

// The generator's own test: each bug it found, planted back into the
// engine (Options::TestHooks::planted_bug), is caught by a sample of the generated
// space, the ported workloads and the regressions together, and without a
// planted bug the same runs are clean (the other tests show that).
TEST(FsGen, PlantedBugsAreCaught) {
  std::vector<Workload> sample;
  uint64_t index = 0;
  Enumerate(2, [&](const Workload& w) {
    if (index++ % 23 == 0) sample.push_back(w);
  });
  absl::StatusOr<std::vector<Workload>> ported =
      ParseWorkloads(ReadFileOrDie("engine/crash_test/ported_workloads.txt"));
  ASSERT_TRUE(ported.ok()) << ported.status();
  sample.insert(sample.end(), ported->begin(), ported->end());
  for (const Workload& w : RegressionWorkloads()) sample.push_back(w);
  for (const Workload& w : OrphanWorkloads()) sample.push_back(w);
  const std::pair<Options::TestHooks::PlantedBug, const char*> bugs[] = {
      {Options::TestHooks::PlantedBug::kNoFullCommit, "no full commit"},
      {Options::TestHooks::PlantedBug::kItemCountsAsNames, "item counts as names"},
      {Options::TestHooks::PlantedBug::kLateInodeCounter, "late inode counter"},
      {Options::TestHooks::PlantedBug::kEagerReplayDrops, "eager replay drops"},
      {Options::TestHooks::PlantedBug::kReplayDropsNewName, "replay drops a new name's item"},
      {Options::TestHooks::PlantedBug::kDropsPrealloc, "replay drops KEEP_SIZE extents"},
      {Options::TestHooks::PlantedBug::kSkipOrphanCleanup, "mount skips the orphan cleanup"},
      {Options::TestHooks::PlantedBug::kLoggedInodeSkipsItem, "logged inode skips its item"},
      {Options::TestHooks::PlantedBug::kXattrRemovalNotLogged, "xattr removal not logged"},
      {Options::TestHooks::PlantedBug::kExtrefNotLogged, "extended refs not logged"},
  };
  testing::TouchShardFile();
  for (size_t i = 0; i < std::size(bugs); ++i) {
    if (static_cast<int>(i % testing::ShardCount()) != testing::ShardIndex())
      continue;  // one bug per shard
    const auto& [bug, name] = bugs[i];
    planted = bug;
    // Extended refs need a store that makes them (as ExtendedRefs runs).
    ref_item_names = bug == Options::TestHooks::PlantedBug::kExtrefNotLogged ? 1 : 0;
    Stats st;
    for (const Workload& w : sample) RunWorkload(w, &st);
    std::printf("planted bug \"%s\": %llu of %llu workloads caught it\n", name,
                static_cast<unsigned long long>(st.violations),
                static_cast<unsigned long long>(st.workloads));
    EXPECT_GT(st.violations, 0u) << "the generator missed the planted bug \"" << name << "\"";
  }
  planted = Options::TestHooks::PlantedBug::kNone;
  ref_item_names = 0;
}

// Extended refs: the same sample as PlantedBugsAreCaught's, the ported
// workloads, the regressions and the orphan workloads, on stores whose
// INODE_REF items hold one name each, so every second name of a file in a
// directory (the setup's /A/bar, links, renames next to a name) lives in
// an INODE_EXTREF item. (--ref_item_names=1 runs any other test so.)
TEST(FsGen, ExtendedRefs) {
  std::vector<Workload> sample;
  uint64_t index = 0;
  Enumerate(2, [&](const Workload& w) {
    if (index++ % 17 == 0) sample.push_back(w);
  });
  absl::StatusOr<std::vector<Workload>> ported =
      ParseWorkloads(ReadFileOrDie("engine/crash_test/ported_workloads.txt"));
  ASSERT_TRUE(ported.ok()) << ported.status();
  sample.insert(sample.end(), ported->begin(), ported->end());
  for (const Workload& w : RegressionWorkloads()) sample.push_back(w);
  for (const Workload& w : OrphanWorkloads()) sample.push_back(w);
  ref_item_names = 1;
  Stats st;
  for (size_t i = 0; i < sample.size(); ++i) {
    if (static_cast<int>(i % testing::ShardCount()) != testing::ShardIndex()) continue;
    RunWorkload(sample[i], &st);
  }
  ref_item_names = 0;
  PrintStats("extended refs (this shard)", st, 0);
  EXPECT_EQ(st.violations, 0u);
}

// setattr's own case: with fsync skipping the item of a file logged
// already in the transaction, the workload that changes only attributes
// after an fsync is caught (by mode, owner and mtime, its data intact), and
// without the bug it passes.
TEST(FsGen, SetAttrAfterFsyncCatchesTheSkippedItem) {
  absl::StatusOr<std::vector<Workload>> ported =
      ParseWorkloads(ReadFileOrDie("engine/crash_test/ported_workloads.txt"));
  ASSERT_TRUE(ported.ok()) << ported.status();
  const Workload* w = nullptr;
  for (const Workload& x : *ported) {
    if (x.name == "Attr_SetAttrAfterFsync") w = &x;
  }
  ASSERT_NE(w, nullptr);
  Stats clean;
  EXPECT_TRUE(RunWorkload(*w, &clean)) << absl::StrJoin(clean.reports, "\n");
  planted = Options::TestHooks::PlantedBug::kLoggedInodeSkipsItem;
  Stats caught;
  EXPECT_FALSE(RunWorkload(*w, &caught)) << "the planted bug went unnoticed";
  planted = Options::TestHooks::PlantedBug::kNone;
  ASSERT_FALSE(caught.reports.empty());
  EXPECT_NE(caught.reports.front().find("mode 0600"), std::string::npos) << caught.reports.front();
}

}  // namespace
}  // namespace crashgen
}  // namespace cowkv

COWKV_SELF_SHARDED_TEST_MAIN()
