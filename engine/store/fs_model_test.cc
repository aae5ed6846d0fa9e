// Goal: a subvolume's file namespace is exactly a simple in-memory model
// through any mix of operations, failed operations, commits, reopens and
// read-only snapshots, and `check` stays clean.
// Method: a seeded random mix (weights in kOps) of create, mkdir, symlink,
// writes (inline-sized and up to 300 KiB, at offsets that leave holes),
// truncates (down and up), reads, unlink, rmdir, renames (plain, over a
// file, over an empty directory, no-replace, exchange, a directory under
// itself), hard links, clones (between files and within one), xattrs,
// paged readdir, stat, fiemap and fsync, fallocate (allocate, KEEP_SIZE
// also past EOF, punch hole, zero range, and the modes refused), setattr
// (mode, owner with its set-ID clearing, times explicit and "now", size),
// plus operations that must fail
// (ENOENT, ENOTDIR, EISDIR, EEXIST, ENOTEMPTY, EPERM, EINVAL, ENODATA,
// ENAMETOOLONG). The model predicts every outcome, including which error;
// after a failure the touched paths are re-read and must be unchanged.
// Commits re-check that ranges cloned since are still SHARED; reopens run
// `check` and compare the whole tree (ReadDir + Stat + Read from "/") and
// every live snapshot with its model copy.
// fiemap rules: extents sorted, disjoint, inside the file (UNWRITTEN ones,
// preallocated, may pass EOF), summing to st_bytes; after a fallocate its
// range is mapped throughout (allocate, zero range: UNWRITTEN throughout)
// or not at all (punch); a freshly cloned range is SHARED in both files; a file unchanged
// since a live snapshot is SHARED; a file never cloned and in no live
// snapshot has no SHARED extent (so dropping a snapshot clears the flag).
// Odd seeds use 4 KiB nodes (deep trees), even ones 16 KiB; seeds divisible
// by 3 run with a 16-inode cache, by 4 with the seed switches off, 2 and 5
// mod 5 with one name per INODE_REF item (extended refs for the rest). Names
// include crc32c-colliding pairs (several entries in one DIR_ITEM/XATTR_ITEM,
// and, being of one length, in one extended ref item of any directory).
// Replay: --seed=N --ops=M [--seeds=K]; FS_MODEL_VERBOSE=1 prints every op.
#include <algorithm>
#include <cstdlib>
#include <deque>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/crc32c.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using Code = absl::StatusCode;

constexpr uint64_t kMaxFileBytes = 1200 << 10;
constexpr uint64_t kDataCap = 24 << 20;  // model bytes past which writes stay inside files
constexpr size_t kMaxInodes = 260;
constexpr int kMaxDepth = 10;
constexpr size_t kMaxSnapshots = 3;

// ---- The model ---------------------------------------------------------------------

struct MEntry {
  uint64_t ino = 0;
  uint64_t seq = 0;  // readdir order
};

struct MNode {
  FileKind kind = FileKind::kRegular;
  std::string data;  // a file's bytes, or a symlink's target
  uint32_t nlink = 1;
  std::map<std::string, std::string> xattrs;
  std::map<std::string, MEntry> entries;  // directories
  uint64_t next_seq = 0;
  // setattr: permission bits, owner, and the times last set explicitly
  // (nullopt: unknown, a write or truncate since moved mtime to "now").
  uint32_t mode = 0644;
  uint32_t uid = 0, gid = 0;
  std::optional<int64_t> atime, mtime;
  // fiemap bookkeeping (the live model only).
  uint64_t version = 0;           // bumped by every data change
  bool cloned = false;            // ever a clone's source or destination
  std::set<std::string> exposed;  // live snapshots that hold this inode
  std::set<std::string> intact;   // ... and whose data it has not changed since
};
using Model = std::map<uint64_t, MNode>;

// An expected outcome: OK, or a code and the POSIX name the message starts with.
struct Want {
  Code code = Code::kOk;
  std::string posix;
  bool ok() const { return code == Code::kOk; }
};

Want Posix(const char* name) {
  const absl::string_view n(name);
  if (n == "ENOENT" || n == "ENODATA") return {Code::kNotFound, name};
  if (n == "EEXIST") return {Code::kAlreadyExists, name};
  if (n == "EINVAL" || n == "ENAMETOOLONG" || n == "ERANGE") return {Code::kInvalidArgument, name};
  return {Code::kFailedPrecondition, name};  // ENOTDIR EISDIR ENOTEMPTY EPERM EROFS
}

std::vector<std::string> Parts(absl::string_view path) {
  return absl::StrSplit(path, '/', absl::SkipEmpty());
}
std::string Join(absl::string_view dir, absl::string_view name) {
  return dir == "/" ? absl::StrCat("/", name) : absl::StrCat(dir, "/", name);
}
uint64_t DirSize(const MNode& n) {
  uint64_t s = 0;
  for (const auto& [name, e] : n.entries) s += 2 * name.size();
  return s;
}
uint64_t SizeOf(const MNode& n) {
  return n.kind == FileKind::kDirectory ? DirSize(n) : n.data.size();
}
std::string Diff(const std::string& got, const std::string& want) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  return absl::StrCat("got ", got.size(), " bytes, want ", want.size(), "; first difference at ",
                      i);
}

std::string Extents(const std::vector<FiemapExtent>& es) {
  std::string out;
  for (const FiemapExtent& e : es) {
    absl::StrAppend(&out, "  [", e.logical, ", +", e.length, ") at ", e.physical, " flags 0x",
                    absl::Hex(e.flags), "\n");
  }
  return out;
}

// Names whose hashes collide (crc32c: the DIR_ITEM and XATTR_ITEM key
// offset), so one item holds several entries: a birthday search over
// "<prefix><n>", done once.
const std::vector<std::string>& Colliding(const std::string& prefix) {
  static std::map<std::string, std::vector<std::string>>* found =
      new std::map<std::string, std::vector<std::string>>();
  std::vector<std::string>& out = (*found)[prefix];
  absl::flat_hash_map<uint32_t, std::string> seen;
  for (uint64_t i = 0; out.size() < 6; ++i) {
    std::string n = absl::StrCat(prefix, i);
    auto [it, fresh] = seen.emplace(Crc32c(n.data(), n.size()), n);
    if (!fresh) {
      out.push_back(it->second);
      out.push_back(n);
    }
  }
  return out;
}

// Mirrors FsOps::Lookup (SplitPath's name check included).
Want MLookup(const Model& m, absl::string_view path, uint64_t* ino) {
  const std::vector<std::string> parts = Parts(path);
  for (const std::string& p : parts) {
    if (p.size() > 255) return Posix("ENAMETOOLONG");
  }
  *ino = kRootInode;
  for (const std::string& p : parts) {
    const MNode& n = m.at(*ino);
    if (n.kind != FileKind::kDirectory) return Posix("ENOTDIR");
    auto e = n.entries.find(p);
    if (e == n.entries.end()) return Posix("ENOENT");
    *ino = e->second.ino;
  }
  return {};
}

struct MRes {
  uint64_t parent = 0;
  std::string name;
  uint64_t ino = 0;  // 0 = absent
};

// Mirrors FsOps::ResolveParent.
Want MResolve(const Model& m, absl::string_view path, MRes* r) {
  std::vector<std::string> parts = Parts(path);
  if (parts.empty()) return Posix("EINVAL");
  for (const std::string& p : parts) {
    if (p.size() > 255) return Posix("ENAMETOOLONG");
  }
  r->name = parts.back();
  parts.pop_back();
  Want w = MLookup(m, absl::StrJoin(parts, "/"), &r->parent);
  if (!w.ok()) return w;
  const MNode& p = m.at(r->parent);
  if (p.kind != FileKind::kDirectory) return Posix("ENOTDIR");
  auto e = p.entries.find(r->name);
  r->ino = e == p.entries.end() ? 0 : e->second.ino;
  return {};
}

// Mirrors LoadInode + CheckRegular.
Want MRegular(const Model& m, uint64_t ino) {
  auto it = m.find(ino);
  if (it == m.end()) return Posix("ENOENT");
  if (it->second.kind == FileKind::kDirectory) return Posix("EISDIR");
  if (it->second.kind == FileKind::kSymlink) return Posix("EINVAL");
  return {};
}

void MAddName(Model& m, uint64_t dir, const std::string& name, uint64_t ino) {
  MNode& d = m.at(dir);
  d.entries[name] = {ino, d.next_seq++};
}

// Mirrors FsOps::DropLink; true when the inode went.
bool MDropLink(Model& m, uint64_t ino) {
  MNode& n = m.at(ino);
  if (n.kind == FileKind::kDirectory || n.nlink <= 1) {
    m.erase(ino);
    return true;
  }
  --n.nlink;
  return false;
}

uint64_t MParent(const Model& m, uint64_t dir) {
  for (const auto& [ino, n] : m) {
    for (const auto& [name, e] : n.entries) {
      if (e.ino == dir) return ino;
    }
  }
  return 0;
}

bool MIsAncestor(const Model& m, uint64_t a, uint64_t dir) {
  for (; dir != 0; dir = dir == kRootInode ? 0 : MParent(m, dir)) {
    if (dir == a) return true;
  }
  return false;
}

int MHeight(const Model& m, uint64_t ino) {
  int h = 0;
  for (const auto& [name, e] : m.at(ino).entries) {
    if (m.at(e.ino).kind == FileKind::kDirectory) h = std::max(h, MHeight(m, e.ino));
  }
  return h + 1;
}

// Mirrors FsOps::Rename and RenameChecks; applies the rename when it holds.
Want MRename(Model& m, const std::string& from, const std::string& to, uint32_t flags, MRes* f,
             MRes* t) {
  Want w = MResolve(m, from, f);
  if (!w.ok()) return w;
  if (f->ino == 0) return Posix("ENOENT");
  w = MResolve(m, to, t);
  if (!w.ok()) return w;
  if ((flags & kRenameNoReplace) && t->ino != 0) return Posix("EEXIST");
  if (f->ino == t->ino) return {};  // two names of one inode
  if ((flags & kRenameExchange) && t->ino == 0) return Posix("ENOENT");
  const bool fdir = m.at(f->ino).kind == FileKind::kDirectory;
  const bool tdir = t->ino != 0 && m.at(t->ino).kind == FileKind::kDirectory;
  if (fdir && MIsAncestor(m, f->ino, t->parent)) return Posix("EINVAL");
  if ((flags & kRenameExchange) && tdir && MIsAncestor(m, t->ino, f->parent)) {
    return Posix("EINVAL");
  }
  if (t->ino != 0 && !(flags & kRenameExchange)) {
    if (fdir && !tdir) return Posix("ENOTDIR");
    if (!fdir && tdir) return Posix("EISDIR");
    if (tdir && !m.at(t->ino).entries.empty()) return Posix("ENOTEMPTY");
  }
  m.at(f->parent).entries.erase(f->name);
  if (flags & kRenameExchange) {
    m.at(t->parent).entries.erase(t->name);
    MAddName(m, t->parent, t->name, f->ino);
    MAddName(m, f->parent, f->name, t->ino);
  } else {
    if (t->ino != 0) {
      m.at(t->parent).entries.erase(t->name);
      MDropLink(m, t->ino);
    }
    MAddName(m, t->parent, t->name, f->ino);
  }
  return {};
}

// ---- The run ------------------------------------------------------------------------

struct PathEntry {
  std::string path;
  uint64_t ino = 0;
  FileKind kind = FileKind::kRegular;
  int depth = 0;
};

constexpr uint32_t kFile = 1, kDir = 2, kLink = 4, kAny = 7;
uint32_t Bit(FileKind k) {
  return k == FileKind::kRegular ? kFile : k == FileKind::kDirectory ? kDir : kLink;
}

struct CloneCheck {
  uint64_t src, soff, dst, doff, len, src_version, dst_version;
};

class FsRun {
 public:
  FsRun(uint64_t seed, uint32_t nodesize);
  void Run(uint64_t ops);

  // Operations (kOps).
  void OpCreate() { CreateAs(FileKind::kRegular); }
  void OpMkdir() { CreateAs(FileKind::kDirectory); }
  void OpSymlink() { CreateAs(FileKind::kSymlink); }
  void OpWrite();
  void OpTruncate();
  void OpRead();
  void OpUnlink();
  void OpRmdir();
  void OpRename();
  void OpLink();
  void OpClone();
  void OpXattr();
  void OpSetAttr();
  void OpReadDir();
  void OpStat();
  void OpFiemap();
  void OpFsync();
  void OpError();
  void OpCommit();
  void OpSnapshot();
  void OpDropSnapshot();
  void OpFallocate();
  // Open handles and orphans (issue 17).
  void OpOpen();
  void OpClose();
  void OpOrphanIo();
  void OpTmpfile();
  int OpenCount(uint64_t ino) const;
  // After `ino`'s last name went: an orphan if a handle is open on it.
  void Orphaned(uint64_t ino, const MNode& before);

 private:
  Files f() { return *files_; }
  uint64_t R(uint64_t n) { return n == 0 ? 0 : rng_() % n; }
  bool P(int percent) { return R(100) < static_cast<uint64_t>(percent); }
  std::string Name(bool allow_long);
  std::string Bytes(size_t n);
  std::vector<PathEntry> Paths() const;
  std::optional<PathEntry> Pick(uint32_t kinds, bool root = false);
  std::string FreshPath(bool allow_long);
  std::string AnyPath();
  uint64_t PickIno(uint32_t kinds);
  uint64_t DeadIno();
  uint64_t TotalData() const;
  void Note(std::string what);
  bool Outcome(const std::string& op, const absl::Status& s, const Want& w);
  void Changed(uint64_t ino);

  void CreateAs(FileKind kind);
  void DoCreate(FileKind kind, const std::string& path, const std::string& target);
  void DoUnlink(const std::string& path, bool dir);
  void DoRename(const std::string& from, const std::string& to, uint32_t flags);
  std::optional<std::pair<std::string, std::string>> RenamePick(int scenario, uint32_t* flags);
  bool TooDeep(const std::string& from, const std::string& to, uint32_t flags);
  void DoLink(const std::string& existing, const std::string& path);
  void DoWrite(uint64_t ino, uint64_t off, const std::string& data, const std::string& tag);
  void DoTruncate(uint64_t ino, uint64_t size);
  void DoRead(uint64_t ino, uint64_t off, uint64_t len);
  void DoClone(uint64_t src, uint64_t soff, uint64_t dst, uint64_t doff, uint64_t len);
  void DoXattr(uint64_t ino, int sub);
  void DoStat(const std::string& path);
  void DoReadDir(const std::string& path, uint64_t limit);
  void DoReadLink(const std::string& path);
  void DoFallocate(uint64_t ino, uint32_t mode, uint64_t off, uint64_t len);

  void VerifyInode(Files f, const Model& m, uint64_t ino, const std::string& path);
  void VerifyDir(Files f, const Model& m, uint64_t dir);
  void VerifyTree(Files f, const Model& m, const std::string& what);
  void VerifyPath(const std::string& path);
  void VerifyRange(uint64_t ino, uint64_t off, uint64_t len);
  void CheckFiemap(uint64_t ino);
  void CheckFiemapRange(uint64_t ino);
  void CheckCloneShared(const CloneCheck& c);
  Options StoreOptions() const;
  void Open();
  void Reopen();
  void Finish();
  void PrintMix(double seconds);

  const uint64_t seed_;
  const uint32_t nodesize_;
  std::mt19937_64 rng_;
  MemDevice dev_{256ull << 20};
  std::unique_ptr<Store> store_;
  std::optional<Files> files_;
  Model m_;
  std::vector<uint64_t> dead_;
  std::map<uint64_t, uint64_t> handles_;  // engine handle -> inode
  Model orphans_;                         // files without names kept by handles
  std::set<uint64_t> linkable_;           // O_TMPFILE orphans never linked
  std::map<std::string, Model> snaps_;
  int next_snap_ = 0;
  std::vector<CloneCheck> clone_checks_;
  std::map<std::string, uint64_t> mix_;
  std::deque<std::string> trail_;
  std::string random_;
  uint64_t op_ = 0;
};

struct OpSpec {
  int weight;
  void (FsRun::*fn)();
};
// clang-format off
const OpSpec kOps[] = {
    {60, &FsRun::OpCreate},  {30, &FsRun::OpMkdir},       {12, &FsRun::OpSymlink},
    {160, &FsRun::OpWrite},  {45, &FsRun::OpTruncate},    {100, &FsRun::OpRead},
    {45, &FsRun::OpUnlink},  {25, &FsRun::OpRmdir},       {80, &FsRun::OpRename},
    {30, &FsRun::OpLink},    {55, &FsRun::OpClone},       {50, &FsRun::OpXattr},
    {35, &FsRun::OpReadDir}, {50, &FsRun::OpStat},        {40, &FsRun::OpFiemap},
    {8, &FsRun::OpFsync},    {70, &FsRun::OpError},       {3, &FsRun::OpCommit},
    {1, &FsRun::OpSnapshot}, {1, &FsRun::OpDropSnapshot},
    {35, &FsRun::OpFallocate}, {8, &FsRun::OpOpen},
    {8, &FsRun::OpClose},    {10, &FsRun::OpOrphanIo},    {3, &FsRun::OpTmpfile},
    {40, &FsRun::OpSetAttr},
};
// clang-format on

FsRun::FsRun(uint64_t seed, uint32_t nodesize) : seed_(seed), nodesize_(nodesize), rng_(seed) {
  random_.resize(2 << 20);
  for (char& c : random_) c = static_cast<char>(rng_());
  MNode root;
  root.kind = FileKind::kDirectory;
  root.mode = 0755;
  m_[kRootInode] = root;
}

std::string FsRun::Name(bool allow_long) {
  static const char* const kPool[] = {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"};
  if (allow_long && P(2)) return std::string(255, static_cast<char>('A' + R(26)));
  if (P(8)) {
    const std::vector<std::string>& c = Colliding("x");
    return c[R(c.size())];
  }
  if (P(15)) return absl::StrCat("n", R(40));
  return kPool[R(10)];
}

std::string FsRun::Bytes(size_t n) {
  if (P(5)) return std::string(n, '\0');
  return random_.substr(R(random_.size() - n), n);
}

std::vector<PathEntry> FsRun::Paths() const {
  std::vector<PathEntry> out;
  std::vector<PathEntry> stack = {{"/", kRootInode, FileKind::kDirectory, 0}};
  while (!stack.empty()) {
    PathEntry e = stack.back();
    stack.pop_back();
    const MNode& n = m_.at(e.ino);
    for (const auto& [name, me] : n.entries) {
      stack.push_back({Join(e.path, name), me.ino, m_.at(me.ino).kind, e.depth + 1});
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::optional<PathEntry> FsRun::Pick(uint32_t kinds, bool root) {
  std::vector<PathEntry> ok;
  for (PathEntry& e : Paths()) {
    if ((kinds & Bit(e.kind)) && (root || e.ino != kRootInode)) ok.push_back(std::move(e));
  }
  if (ok.empty()) return std::nullopt;
  return ok[R(ok.size())];
}

// A name in a random directory (not too deep); it may exist.
std::string FsRun::FreshPath(bool allow_long) {
  std::vector<PathEntry> dirs;
  for (PathEntry& e : Paths()) {
    if (e.kind == FileKind::kDirectory && e.depth < kMaxDepth - 2) dirs.push_back(std::move(e));
  }
  return Join(dirs[R(dirs.size())].path, Name(allow_long));
}

std::string FsRun::AnyPath() {
  std::optional<PathEntry> e = Pick(kAny);
  return e ? e->path : FreshPath(false);
}

uint64_t FsRun::PickIno(uint32_t kinds) {
  std::vector<uint64_t> inos;
  for (const auto& [ino, n] : m_) {
    if (kinds & Bit(n.kind)) inos.push_back(ino);
  }
  return inos.empty() ? 0 : inos[R(inos.size())];
}

// An inode number that is not in use (deleted, or never allocated).
uint64_t FsRun::DeadIno() {
  if (!dead_.empty() && P(80)) {
    const uint64_t ino = dead_[R(dead_.size())];
    if (m_.count(ino) == 0 && orphans_.count(ino) == 0) return ino;
  }
  const uint64_t top =
      std::max(m_.rbegin()->first, orphans_.empty() ? 0 : orphans_.rbegin()->first);
  return top + 1000 + R(1000);
}

uint64_t FsRun::TotalData() const {
  uint64_t t = 0;
  for (const auto& [ino, n] : m_) t += n.data.size();
  return t;
}

void FsRun::Note(std::string what) {
  static const bool verbose = std::getenv("FS_MODEL_VERBOSE") != nullptr;
  if (verbose) std::cout << "#" << op_ << " " << what << "\n";
  trail_.push_back(absl::StrCat("#", op_, " ", what));
  if (trail_.size() > 40) trail_.pop_front();
}

// Compares an outcome with the model's and counts it; true when both are OK.
bool FsRun::Outcome(const std::string& op, const absl::Status& s, const Want& w) {
  ++mix_[w.ok() ? op : absl::StrCat(op, " ", w.posix)];
  EXPECT_EQ(s.code(), w.code) << op << ": " << s << " (the model says " << (w.ok() ? "OK" : w.posix)
                              << ")";
  if (!w.ok() && s.code() == w.code) {
    EXPECT_TRUE(absl::StartsWith(s.message(), w.posix)) << op << ": " << s;
  }
  return s.ok() && w.ok();
}

void FsRun::Changed(uint64_t ino) {
  MNode& n = m_.at(ino);
  ++n.version;
  n.intact.clear();
  n.mtime.reset();
}

// ---- Verification -------------------------------------------------------------------

void FsRun::VerifyInode(Files f, const Model& m, uint64_t ino, const std::string& path) {
  SCOPED_TRACE(absl::StrCat("inode ", ino, " ", path));
  const MNode& n = m.at(ino);
  ASSERT_OK_AND_ASSIGN(FileStat st, f.StatInode(ino));
  ASSERT_EQ(st.ino, ino);
  ASSERT_EQ(st.kind, n.kind);
  ASSERT_EQ(st.nlink, n.nlink);
  ASSERT_EQ(st.size, SizeOf(n));
  ASSERT_EQ(st.mode, n.mode);
  ASSERT_EQ(st.uid, n.uid);
  ASSERT_EQ(st.gid, n.gid);
  if (n.atime) {
    ASSERT_EQ(st.atime_ns, *n.atime);
  }
  if (n.mtime && n.kind != FileKind::kDirectory) {
    ASSERT_EQ(st.mtime_ns, *n.mtime);
  }
  if (n.kind == FileKind::kRegular) {
    ASSERT_OK_AND_ASSIGN(std::string d, f.Read(ino, 0, n.data.size() + 10));
    ASSERT_TRUE(d == n.data) << Diff(d, n.data);
  } else if (n.kind == FileKind::kSymlink && !path.empty()) {
    ASSERT_OK_AND_ASSIGN(std::string t, f.ReadLink(path));
    ASSERT_EQ(t, n.data);
  }
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, f.ListXattrs(ino));
  std::vector<std::string> want;
  for (const auto& [k, v] : n.xattrs) want.push_back(k);
  ASSERT_EQ(names, want);
  for (const auto& [k, v] : n.xattrs) {
    ASSERT_OK_AND_ASSIGN(std::string got, f.GetXattr(ino, k));
    ASSERT_TRUE(got == v) << k << ": " << Diff(got, v);
  }
}

// ReadDir returns the model's entries in creation order.
void FsRun::VerifyDir(Files f, const Model& m, uint64_t dir) {
  SCOPED_TRACE(absl::StrCat("directory ", dir));
  const MNode& n = m.at(dir);
  std::vector<std::pair<uint64_t, std::string>> want;
  for (const auto& [name, e] : n.entries) want.push_back({e.seq, name});
  std::sort(want.begin(), want.end());
  ASSERT_OK_AND_ASSIGN(ReadDirResult r, f.ReadDirInode(dir));
  ASSERT_FALSE(r.more);
  ASSERT_EQ(r.entries.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const DirEntryInfo& e = r.entries[i];
    ASSERT_EQ(e.name, want[i].second) << "entry " << i;
    const MEntry& me = n.entries.at(e.name);
    ASSERT_EQ(e.ino, me.ino) << e.name;
    ASSERT_EQ(e.kind, m.at(me.ino).kind) << e.name;
  }
}

// The whole tree from "/": every directory's listing, every inode, every path.
void FsRun::VerifyTree(Files f, const Model& m, const std::string& what) {
  SCOPED_TRACE(absl::StrCat("tree of ", what));
  std::set<uint64_t> seen;
  std::vector<std::pair<uint64_t, std::string>> stack = {{kRootInode, "/"}};
  while (!stack.empty()) {
    const auto [ino, path] = stack.back();
    stack.pop_back();
    ASSERT_OK_AND_ASSIGN(uint64_t got, f.Lookup(path));
    ASSERT_EQ(got, ino) << path;
    if (!seen.insert(ino).second) continue;  // another name of a hard-linked file
    ASSERT_NO_FATAL_FAILURE(VerifyInode(f, m, ino, path));
    const MNode& n = m.at(ino);
    if (n.kind != FileKind::kDirectory) continue;
    ASSERT_NO_FATAL_FAILURE(VerifyDir(f, m, ino));
    for (const auto& [name, e] : n.entries) stack.push_back({e.ino, Join(path, name)});
  }
  ASSERT_EQ(seen.size(), m.size()) << "model inodes unreachable from /";
}

// Engine and model agree on `path`: the lookup's outcome, the inode, and the
// listings of the directory it names and of its parent.
void FsRun::VerifyPath(const std::string& path) {
  SCOPED_TRACE(absl::StrCat("path ", path.substr(0, 300)));
  uint64_t ino = 0;
  const Want w = MLookup(m_, path, &ino);
  absl::StatusOr<uint64_t> got = f().Lookup(path);
  ASSERT_EQ(got.status().code(), w.code) << got.status();
  if (w.ok()) {
    ASSERT_EQ(*got, ino);
    ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, path));
    if (m_.at(ino).kind == FileKind::kDirectory) {
      ASSERT_NO_FATAL_FAILURE(VerifyDir(f(), m_, ino));
    }
  }
  MRes r;
  if (MResolve(m_, path, &r).ok()) {
    ASSERT_NO_FATAL_FAILURE(VerifyDir(f(), m_, r.parent));
  }
}

void FsRun::VerifyRange(uint64_t ino, uint64_t off, uint64_t len) {
  SCOPED_TRACE(absl::StrCat("inode ", ino, " [", off, ", +", len, ")"));
  const std::string& d = m_.at(ino).data;
  ASSERT_OK_AND_ASSIGN(std::string got, f().Read(ino, off, len));
  const std::string want = off >= d.size() ? "" : d.substr(off, len);
  ASSERT_TRUE(got == want) << Diff(got, want);
  ASSERT_OK_AND_ASSIGN(FileStat st, f().StatInode(ino));
  ASSERT_EQ(st.size, d.size());
}

void FsRun::CheckFiemap(uint64_t ino) {
  SCOPED_TRACE(absl::StrCat("fiemap of inode ", ino));
  const MNode& n = m_.at(ino);
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> es, f().Fiemap(ino));
  ASSERT_OK_AND_ASSIGN(FileStat st, f().StatInode(ino));
  uint64_t end = 0, total = 0, written = 0;
  bool shared = false;
  for (size_t i = 0; i < es.size(); ++i) {
    const FiemapExtent& e = es[i];
    SCOPED_TRACE(absl::StrCat("extent ", i, " [", e.logical, ", +", e.length, ") flags ", e.flags));
    ASSERT_GT(e.length, 0u);
    ASSERT_GE(e.logical, end) << "extents out of order or overlapping";
    end = e.logical + e.length;
    const bool unwritten = (e.flags & kFiemapExtentUnwritten) != 0;
    if (!unwritten) {
      ASSERT_LE(end, n.data.size()) << "extent past EOF";
      written += e.length;
    }
    total += e.length;
    ASSERT_EQ((e.flags & kFiemapExtentLast) != 0, i + 1 == es.size());
    const bool inl = (e.flags & kFiemapExtentInline) != 0;
    const bool sh = (e.flags & kFiemapExtentShared) != 0;
    if (!inl && !n.intact.empty()) {
      ASSERT_TRUE(sh) << "data unchanged since snapshot " << *n.intact.begin() << " not SHARED";
    }
    shared = shared || sh;
  }
  ASSERT_LE(written, n.data.size());
  ASSERT_EQ(total, st.bytes) << "st_bytes differs from the bytes fiemap maps";
  if (!n.cloned && n.exposed.empty()) {
    ASSERT_FALSE(shared) << "SHARED on a file never cloned and in no live snapshot:\n"
                         << Extents(es);
  }
  ++mix_[shared ? "~fiemap shared" : "~fiemap unshared"];
}

// Both sides of a clone whose files have not changed since are SHARED
// (unless the source was inline: those bytes were copied).
void FsRun::CheckCloneShared(const CloneCheck& c) {
  SCOPED_TRACE(absl::StrCat("clone ", c.src, "@", c.soff, " -> ", c.dst, "@", c.doff, " +", c.len));
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> se, f().Fiemap(c.src, c.soff, c.len));
  for (const FiemapExtent& e : se) {
    if (e.flags & kFiemapExtentInline) return;
  }
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> de, f().Fiemap(c.dst, c.doff, c.len));
  ASSERT_EQ(se.empty(), de.empty());
  for (const FiemapExtent& e : se) {
    ASSERT_TRUE(e.flags & kFiemapExtentShared) << "source extent at " << e.logical;
  }
  for (const FiemapExtent& e : de) {
    ASSERT_TRUE(e.flags & kFiemapExtentShared) << "clone extent at " << e.logical;
  }
  ++mix_[se.empty() ? "~clone of a hole" : "~clone checked SHARED"];
}

// ---- Namespace operations -----------------------------------------------------------

void FsRun::CreateAs(FileKind kind) {
  if (m_.size() >= kMaxInodes && !P(5)) return;
  const std::string path = P(85) ? FreshPath(kind != FileKind::kSymlink) : AnyPath();
  std::string target;
  if (kind == FileKind::kSymlink) {
    target =
        absl::StrCat(P(50) ? "/" : "", std::string(1 + R(150), static_cast<char>('a' + R(26))));
  }
  DoCreate(kind, path, target);
}

void FsRun::DoCreate(FileKind kind, const std::string& path, const std::string& target) {
  const char* op = kind == FileKind::kDirectory ? "mkdir"
                   : kind == FileKind::kSymlink ? "symlink"
                                                : "create";
  Note(absl::StrCat(op, " ", path.substr(0, 200)));
  MRes r;
  Want w = MResolve(m_, path, &r);
  // A resolvable parent: by path or by the parent's inode (mkdirat & co.).
  const bool at = w.ok() && P(40);
  if (w.ok() && r.ino != 0) w = Posix("EEXIST");
  absl::StatusOr<FileStat> st =
      at ? (kind == FileKind::kDirectory ? f().MkdirAt(r.parent, r.name)
            : kind == FileKind::kSymlink ? f().SymlinkAt(target, r.parent, r.name)
                                         : f().CreateAt(r.parent, r.name))
         : (kind == FileKind::kDirectory ? f().Mkdir(path)
            : kind == FileKind::kSymlink ? f().Symlink(target, path)
                                         : f().Create(path));
  if (!Outcome(op, st.status(), w)) {
    if (!w.ok()) {
      ASSERT_NO_FATAL_FAILURE(VerifyPath(path));
    }
    return;
  }
  ASSERT_EQ(m_.count(st->ino), 0u) << "inode " << st->ino << " handed out while in use";
  ASSERT_EQ(st->kind, kind);
  ASSERT_EQ(st->nlink, 1u);
  MNode n;
  n.kind = kind;
  n.data = target;
  n.mode = kind == FileKind::kDirectory ? 0755 : kind == FileKind::kSymlink ? 0777 : 0644;
  m_[st->ino] = n;
  MAddName(m_, r.parent, r.name, st->ino);
  dead_.erase(std::remove(dead_.begin(), dead_.end(), st->ino), dead_.end());
  ASSERT_NO_FATAL_FAILURE(VerifyPath(path));
}

void FsRun::OpUnlink() { DoUnlink(P(85) ? AnyPath() : FreshPath(false), false); }

void FsRun::OpRmdir() {
  std::optional<PathEntry> d = Pick(kDir);
  DoUnlink(d && P(75) ? d->path : P(70) ? AnyPath() : FreshPath(false), true);
}

// Mirrors FsOps::Unlink (unlink and rmdir).
void FsRun::DoUnlink(const std::string& path, bool dir) {
  const char* op = dir ? "rmdir" : "unlink";
  Note(absl::StrCat(op, " ", path.substr(0, 200)));
  MRes r;
  Want w = MResolve(m_, path, &r);
  const bool at = w.ok() && P(40);
  if (w.ok() && r.ino == 0) w = Posix("ENOENT");
  if (w.ok()) {
    const MNode& n = m_.at(r.ino);
    const bool is_dir = n.kind == FileKind::kDirectory;
    if (dir && !is_dir) w = Posix("ENOTDIR");
    if (!dir && is_dir) w = Posix("EISDIR");
    if (dir && is_dir && !n.entries.empty()) w = Posix("ENOTEMPTY");
  }
  const absl::Status s = at ? (dir ? f().RmdirAt(r.parent, r.name) : f().UnlinkAt(r.parent, r.name))
                            : (dir ? f().Rmdir(path) : f().Unlink(path));
  if (!Outcome(op, s, w)) {
    if (!w.ok()) {
      ASSERT_NO_FATAL_FAILURE(VerifyPath(path));
    }
    return;
  }
  m_.at(r.parent).entries.erase(r.name);
  const MNode before = m_.at(r.ino);
  const bool gone = MDropLink(m_, r.ino);
  ASSERT_NO_FATAL_FAILURE(VerifyPath(path));
  if (gone && !dir && OpenCount(r.ino) > 0) {
    ASSERT_NO_FATAL_FAILURE(Orphaned(r.ino, before));
  } else if (gone) {
    dead_.push_back(r.ino);
    ASSERT_THAT(f().StatInode(r.ino), testing::StatusIs(Code::kNotFound));
  } else {
    ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, r.ino, ""));
  }
}

// Scenarios: 0 move to a new name, 1 over a file, 2 a directory over an
// empty one, 3 no-replace, 4 exchange, 5 a directory under itself, 6 any
// two paths, 7 from a missing path.
std::optional<std::pair<std::string, std::string>> FsRun::RenamePick(int scenario,
                                                                     uint32_t* flags) {
  *flags = 0;
  std::optional<PathEntry> a = Pick(scenario == 2 || scenario == 5 ? kDir
                                    : scenario == 1                ? kFile
                                                                   : kAny);
  if (!a) return std::nullopt;
  std::string to;
  if (scenario == 0) to = FreshPath(false);
  if (scenario == 1) {
    std::optional<PathEntry> b = Pick(kFile);
    to = b ? b->path : FreshPath(false);
  }
  if (scenario == 2) {
    std::vector<PathEntry> empty;
    for (PathEntry& e : Paths()) {
      if (e.kind == FileKind::kDirectory && e.ino != kRootInode && m_.at(e.ino).entries.empty()) {
        empty.push_back(std::move(e));
      }
    }
    if (empty.empty()) return std::nullopt;
    to = empty[R(empty.size())].path;
  }
  if (scenario == 3 || scenario == 4 || scenario == 6) to = P(80) ? AnyPath() : FreshPath(false);
  if (scenario == 3) *flags = kRenameNoReplace;
  if (scenario == 4) *flags = kRenameExchange;
  if (scenario == 5) {
    std::vector<PathEntry> under;
    for (PathEntry& e : Paths()) {
      if (e.kind == FileKind::kDirectory && absl::StartsWith(Join(e.path, ""), Join(a->path, ""))) {
        under.push_back(std::move(e));
      }
    }
    to = Join(under[R(under.size())].path, Name(false));
    *flags = R(3);
  }
  if (scenario == 7) {
    std::string missing = Join(FreshPath(false), "zz");
    return std::make_pair(P(50) ? missing : a->path, P(50) ? Join("/nodir", "x") : missing);
  }
  return std::make_pair(a->path, to);
}

// Whether the rename would make the tree deeper than the test keeps it.
bool FsRun::TooDeep(const std::string& from, const std::string& to, uint32_t flags) {
  uint64_t fi = 0, ti = 0;
  if (!MLookup(m_, from, &fi).ok()) return false;
  const int fdepth = static_cast<int>(Parts(from).size()),
            tdepth = static_cast<int>(Parts(to).size());
  if (m_.at(fi).kind == FileKind::kDirectory && tdepth + MHeight(m_, fi) > kMaxDepth) return true;
  if ((flags & kRenameExchange) && MLookup(m_, to, &ti).ok() &&
      m_.at(ti).kind == FileKind::kDirectory && fdepth + MHeight(m_, ti) > kMaxDepth) {
    return true;
  }
  return false;
}

void FsRun::OpRename() {
  uint32_t flags = 0;
  const auto p = RenamePick(static_cast<int>(R(8)), &flags);
  if (!p || TooDeep(p->first, p->second, flags)) return;
  DoRename(p->first, p->second, flags);
}

void FsRun::DoRename(const std::string& from, const std::string& to, uint32_t flags) {
  Note(absl::StrCat("rename ", from.substr(0, 200), " -> ", to.substr(0, 200), " flags ", flags));
  uint64_t over = 0, self = 0;
  const bool to_ok = MLookup(m_, to, &over).ok();
  const bool to_dir = to_ok && m_.at(over).kind == FileKind::kDirectory;
  const bool same = to_ok && MLookup(m_, from, &self).ok() && over == self;
  MRes fr, tr;
  // Both parents resolvable: renameat2 by the parents' inodes, sometimes.
  const bool at = MResolve(m_, from, &fr).ok() && MResolve(m_, to, &tr).ok() && P(40);
  const MRes at_from = fr, at_to = tr;
  std::optional<MNode> victim;
  if (to_ok && !same) victim = m_.at(over);
  const Want w = MRename(m_, from, to, flags, &fr, &tr);
  std::string op = flags == kRenameExchange    ? "rename.exchange"
                   : flags == kRenameNoReplace ? "rename.noreplace"
                                               : "rename";
  if (w.ok() && flags == 0 && tr.ino != 0 && !same)
    op = to_dir ? "rename.over_dir" : "rename.over_file";
  if (same) op += ".same_inode";
  const absl::Status s =
      at ? f().RenameAt(at_from.parent, at_from.name, at_to.parent, at_to.name, flags)
         : f().Rename(from, to, flags);
  if (!Outcome(op, s, w)) {
    if (!w.ok()) {
      ASSERT_NO_FATAL_FAILURE(VerifyPath(from));
      ASSERT_NO_FATAL_FAILURE(VerifyPath(to));
    }
    return;
  }
  ASSERT_NO_FATAL_FAILURE(VerifyDir(f(), m_, fr.parent));
  ASSERT_NO_FATAL_FAILURE(VerifyDir(f(), m_, tr.parent));
  ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, fr.ino, ""));
  if (tr.ino != 0 && m_.count(tr.ino)) {
    ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, tr.ino, ""));
  }
  if (tr.ino != 0 && !m_.count(tr.ino) && victim && victim->kind != FileKind::kDirectory &&
      OpenCount(tr.ino) > 0) {
    ASSERT_NO_FATAL_FAILURE(Orphaned(tr.ino, *victim));
  } else if (tr.ino != 0 && !m_.count(tr.ino)) {
    dead_.push_back(tr.ino);
    ASSERT_THAT(f().StatInode(tr.ino), testing::StatusIs(Code::kNotFound));
  }
}

void FsRun::OpLink() {
  std::optional<PathEntry> a = Pick(P(90) ? kFile | kLink : kAny);
  const std::string existing = a && P(95) ? a->path : FreshPath(false);
  DoLink(existing, P(85) ? FreshPath(false) : AnyPath());
}

// Mirrors FsOps::Link.
void FsRun::DoLink(const std::string& existing, const std::string& path) {
  Note(absl::StrCat("link ", existing.substr(0, 200), " ", path.substr(0, 200)));
  uint64_t ino = 0;
  MRes t;
  Want w = MLookup(m_, existing, &ino);
  if (w.ok()) w = MResolve(m_, path, &t);
  // linkat(AT_EMPTY_PATH) by the inode and the new parent's inode, sometimes.
  const bool at = w.ok() && P(40);
  if (w.ok() && m_.at(ino).kind == FileKind::kDirectory) w = Posix("EPERM");
  if (w.ok() && t.ino != 0) w = Posix("EEXIST");
  absl::StatusOr<FileStat> st = at ? f().LinkAt(ino, t.parent, t.name) : f().Link(existing, path);
  if (!Outcome("link", st.status(), w)) {
    if (!w.ok()) {
      ASSERT_NO_FATAL_FAILURE(VerifyPath(existing));
      ASSERT_NO_FATAL_FAILURE(VerifyPath(path));
    }
    return;
  }
  ++m_.at(ino).nlink;
  MAddName(m_, t.parent, t.name, ino);
  ASSERT_EQ(st->nlink, m_.at(ino).nlink);
  ASSERT_NO_FATAL_FAILURE(VerifyPath(path));
}

void FsRun::OpReadDir() {
  std::optional<PathEntry> d = Pick(P(90) ? kDir : kAny, true);
  DoReadDir(d && P(95) ? d->path : FreshPath(false), P(50) ? 0 : 1 + R(5));
}

// Pages through the directory `limit` entries at a time (0 = all at once).
void FsRun::DoReadDir(const std::string& path, uint64_t limit) {
  Note(absl::StrCat("readdir ", path.substr(0, 200), " limit ", limit));
  uint64_t ino = 0;
  Want w = MLookup(m_, path, &ino);
  if (w.ok() && m_.at(ino).kind != FileKind::kDirectory) w = Posix("ENOTDIR");
  std::vector<std::string> names;
  uint64_t cookie = 0;
  absl::Status s;
  for (int pages = 0; s.ok(); ++pages) {
    absl::StatusOr<ReadDirResult> r = f().ReadDir(path, cookie, limit);
    s = r.status();
    if (!r.ok()) break;
    ASSERT_LE(r->entries.size(), limit == 0 ? ~0ull : limit);
    for (const DirEntryInfo& e : r->entries) names.push_back(e.name);
    if (!r->more) break;
    ASSERT_LT(pages, 1000);
    cookie = r->next_cookie;
  }
  if (!Outcome(limit == 0 ? "readdir" : "readdir.paged", s, w)) return;
  const MNode& n = m_.at(ino);
  std::vector<std::pair<uint64_t, std::string>> want;
  for (const auto& [name, e] : n.entries) want.push_back({e.seq, name});
  std::sort(want.begin(), want.end());
  ASSERT_EQ(names.size(), want.size());
  for (size_t i = 0; i < names.size(); ++i) ASSERT_EQ(names[i], want[i].second);
}

void FsRun::OpStat() {
  std::optional<PathEntry> e = Pick(kAny, true);
  DoStat(e && P(90) ? e->path : FreshPath(false));
}

void FsRun::DoStat(const std::string& path) {
  Note(absl::StrCat("stat ", path.substr(0, 200)));
  uint64_t ino = 0;
  const Want w = MLookup(m_, path, &ino);
  absl::StatusOr<FileStat> st = f().Stat(path);
  if (!Outcome("stat", st.status(), w)) return;
  const MNode& n = m_.at(ino);
  ASSERT_EQ(st->ino, ino);
  ASSERT_EQ(st->kind, n.kind);
  ASSERT_EQ(st->nlink, n.nlink);
  ASSERT_EQ(st->size, SizeOf(n));
  MRes r;
  if (MResolve(m_, path, &r).ok()) {
    ASSERT_OK_AND_ASSIGN(uint64_t at, f().LookupAt(r.parent, r.name));
    ASSERT_EQ(at, ino);
  }
}

void FsRun::DoReadLink(const std::string& path) {
  Note(absl::StrCat("readlink ", path.substr(0, 200)));
  uint64_t ino = 0;
  Want w = MLookup(m_, path, &ino);
  if (w.ok() && m_.at(ino).kind != FileKind::kSymlink) w = Posix("EINVAL");
  absl::StatusOr<std::string> t = f().ReadLink(path);
  if (!Outcome("readlink", t.status(), w)) return;
  ASSERT_EQ(*t, m_.at(ino).data);
}

// ---- Data operations ----------------------------------------------------------------

void FsRun::OpWrite() {
  const uint64_t ino = PickIno(P(97) ? kFile : kAny);
  if (ino == 0) return;
  const uint64_t size = m_.at(ino).kind == FileKind::kRegular ? m_.at(ino).data.size() : 0;
  const uint64_t r = R(10);
  const uint64_t len = r < 5 ? 1 + R(200) : r < 8 ? 200 + R(16 << 10) : (16 << 10) + R(284 << 10);
  std::string tag = r < 5 ? "write.small" : r < 8 ? "write.medium" : "write.large";
  const uint64_t o = R(10);
  uint64_t off = o < 4 ? R(size + 1) : o < 6 ? size : o < 9 ? size + 1 + R(200 << 10) : R(1 << 20);
  if (TotalData() > kDataCap && off + len > size) off = size > len ? R(size - len) : 0;
  if (off + len > kMaxFileBytes) off = R(kMaxFileBytes - len);
  if (off > size) tag += ".hole";
  DoWrite(ino, off, Bytes(len), tag);
}

void FsRun::DoWrite(uint64_t ino, uint64_t off, const std::string& data, const std::string& tag) {
  Note(absl::StrCat(tag, " ", ino, " [", off, ", +", data.size(), ")"));
  const Want w = MRegular(m_, ino);
  if (!Outcome(tag, f().Write(ino, off, data), w)) {
    if (!w.ok() && m_.count(ino)) {
      ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
    }
    return;
  }
  std::string& d = m_.at(ino).data;
  if (d.size() < off + data.size()) d.resize(off + data.size(), '\0');
  d.replace(off, data.size(), data);
  Changed(ino);
  ASSERT_NO_FATAL_FAILURE(VerifyRange(ino, off > 300 ? off - 300 : 0, data.size() + 600));
  if (P(3)) {
    ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
  }
}

void FsRun::OpTruncate() {
  const uint64_t ino = PickIno(P(95) ? kFile : kAny);
  if (ino == 0) return;
  const uint64_t size = m_.at(ino).data.size();
  const uint64_t r = R(10);
  uint64_t to = r < 3 ? R(size + 1) : r < 5 ? 0 : r < 8 ? size + R(200 << 10) : R(3000);
  if (TotalData() > kDataCap) to = std::min(to, size);
  DoTruncate(ino, std::min(to, kMaxFileBytes));
}

void FsRun::DoTruncate(uint64_t ino, uint64_t size) {
  const Want w = MRegular(m_, ino);
  const uint64_t old = w.ok() ? m_.at(ino).data.size() : 0;
  const char* tag = size < old ? "truncate.down" : size > old ? "truncate.up" : "truncate.same";
  Note(absl::StrCat(tag, " ", ino, " ", old, " -> ", size));
  if (!Outcome(tag, f().Truncate(ino, size), w)) {
    if (!w.ok() && m_.count(ino)) {
      ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
    }
    return;
  }
  m_.at(ino).data.resize(size, '\0');
  Changed(ino);
  const uint64_t lo = std::min(old, size);
  ASSERT_NO_FATAL_FAILURE(VerifyRange(ino, lo > 5000 ? lo - 5000 : 0, 10000 + (size - lo)));
}

void FsRun::OpRead() {
  const uint64_t ino = P(92) ? PickIno(kFile) : P(50) ? DeadIno() : PickIno(kAny);
  const uint64_t size = m_.count(ino) ? m_.at(ino).data.size() : 0;
  const uint64_t off = P(90) ? R(size + 1) : size + R(10000);
  DoRead(ino, off, P(10) ? 0 : P(20) ? kMaxFileBytes : 1 + R(P(50) ? 5000 : 400 << 10));
}

void FsRun::DoRead(uint64_t ino, uint64_t off, uint64_t len) {
  Note(absl::StrCat("read ", ino, " [", off, ", +", len, ")"));
  const Want w = MRegular(m_, ino);
  absl::StatusOr<std::string> got = f().Read(ino, off, len);
  if (!Outcome("read", got.status(), w)) return;
  const std::string& d = m_.at(ino).data;
  const std::string want = off >= d.size() ? "" : d.substr(off, len);
  ASSERT_TRUE(*got == want) << Diff(*got, want);
}

void FsRun::OpClone() {
  const uint64_t src = PickIno(P(97) ? kFile : kAny);
  const uint64_t dst = P(30) ? src : PickIno(P(97) ? kFile : kAny);
  if (src == 0 || dst == 0) return;
  const uint64_t ssize = SizeOf(m_.at(src)), dsize = SizeOf(m_.at(dst));
  const bool align = P(50);
  auto a = [&](uint64_t x) { return align ? x / 4096 * 4096 : x; };
  const uint64_t soff = a(R(ssize + 1));
  uint64_t len = P(10) ? 0 : R(ssize - soff + 1);
  const uint64_t eff = len == 0 ? ssize - soff : len;
  uint64_t doff = a(R(dsize + (64 << 10)));
  if (src == dst) {
    if (P(10)) {
      doff = soff + R(eff + 1);  // overlapping: refused (unless empty)
    } else if (soff >= eff && P(50)) {
      doff = a(R(soff - eff + 1));
    } else {
      doff = soff + eff + a(R(64 << 10));
    }
  }
  if (P(4)) len = ssize - soff + 1 + R(100);  // past the source's EOF
  if (doff + std::max(len, eff) > kMaxFileBytes) return;
  DoClone(src, soff, dst, doff, len);
}

// Mirrors FsOps::Clone and CloneChecks.
void FsRun::DoClone(uint64_t src, uint64_t soff, uint64_t dst, uint64_t doff, uint64_t len) {
  Note(absl::StrCat("clone ", src, " [", soff, ", +", len, ") -> ", dst, " @", doff));
  Want w = MRegular(m_, src);
  if (m_.count(src) && !m_.count(dst)) w = Posix("ENOENT");
  if (w.ok()) w = MRegular(m_, dst);
  const uint64_t ssize = w.ok() ? m_.at(src).data.size() : 0;
  if (w.ok() && len == 0 && soff < ssize) len = ssize - soff;
  if (w.ok() && (soff > ssize || len > ssize - soff)) w = Posix("EINVAL");
  if (w.ok() && src == dst && soff < doff + len && doff < soff + len) w = Posix("EINVAL");
  const std::string tag = src == dst ? "clone.same_file" : "clone";
  if (!Outcome(tag, f().Clone(src, soff, dst, doff, len), w)) {
    if (!w.ok() && m_.count(src)) {
      ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, src, ""));
    }
    if (!w.ok() && m_.count(dst)) {
      ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, dst, ""));
    }
    return;
  }
  if (len == 0) return;
  const std::string piece = m_.at(src).data.substr(soff, len);
  std::string& d = m_.at(dst).data;
  if (d.size() < doff + len) d.resize(doff + len, '\0');
  d.replace(doff, len, piece);
  Changed(dst);
  m_.at(src).cloned = m_.at(dst).cloned = true;
  ASSERT_NO_FATAL_FAILURE(VerifyRange(dst, doff > 100 ? doff - 100 : 0, len + 200));
  ASSERT_NO_FATAL_FAILURE(VerifyRange(src, soff, len));
  if (src == dst) return;
  CloneCheck c{src, soff, dst, doff, len, m_.at(src).version, m_.at(dst).version};
  ASSERT_NO_FATAL_FAILURE(CheckCloneShared(c));
  clone_checks_.push_back(c);
}

void FsRun::OpXattr() {
  const int sub = static_cast<int>(R(4));
  std::vector<uint64_t> with;
  for (const auto& [ino, n] : m_) {
    if (!n.xattrs.empty()) with.push_back(ino);
  }
  // Gets, lists and removes mostly go where there are xattrs.
  if (sub != 0 && !with.empty() && P(75)) return DoXattr(with[R(with.size())], sub);
  DoXattr(P(97) ? PickIno(kAny) : DeadIno(), sub);
}

// 0 set, 1 get, 2 list, 3 remove.
void FsRun::DoXattr(uint64_t ino, int sub) {
  static const char* const kNames[] = {"user.a", "user.b", "user.checksum", "trusted.x",
                                       "security.selinux"};
  std::string name = kNames[R(5)];
  if (P(30)) {
    const std::vector<std::string>& c = Colliding("user.c");
    name = c[R(c.size())];
  }
  if (m_.count(ino) && !m_.at(ino).xattrs.empty() && P(60)) {
    auto x = m_.at(ino).xattrs.begin();
    std::advance(x, R(m_.at(ino).xattrs.size()));
    name = x->first;
  }
  Note(absl::StrCat("xattr ", sub, " ", ino, " ", name));
  Want w = m_.count(ino) ? Want() : Posix("ENOENT");
  const bool has = w.ok() && m_.at(ino).xattrs.count(name) > 0;
  if (w.ok() && (sub == 1 || sub == 3) && !has) w = Posix("ENODATA");
  if (sub == 0) {
    // setxattr's flags, and now and then a name or value over the limit
    // (checked in this order before the inode, as FsOps::SetXattr does).
    if (P(3)) name = std::string(256, 'n');
    const std::string v = Bytes(P(3) ? kMaxXattrValue + 1 : R(400));
    const uint32_t flags = P(20) ? kXattrCreate : P(25) ? kXattrReplace : 0;
    if (name.size() > 255) {
      w = Posix("ENAMETOOLONG");
    } else if (v.size() > kMaxXattrValue) {
      w = Posix("ERANGE");
    } else if (w.ok() && (flags & kXattrCreate) && has) {
      w = Posix("EEXIST");
    } else if (w.ok() && (flags & kXattrReplace) && !has) {
      w = Posix("ENODATA");
    }
    const char* tag = flags == kXattrCreate    ? "xattr.set.create"
                      : flags == kXattrReplace ? "xattr.set.replace"
                                               : "xattr.set";
    if (Outcome(tag, f().SetXattr(ino, name, v, flags), w)) m_.at(ino).xattrs[name] = v;
  } else if (sub == 1) {
    absl::StatusOr<std::string> v = f().GetXattr(ino, name);
    if (Outcome("xattr.get", v.status(), w)) {
      ASSERT_TRUE(*v == m_.at(ino).xattrs.at(name));
    }
  } else if (sub == 2) {
    absl::StatusOr<std::vector<std::string>> names = f().ListXattrs(ino);
    if (!Outcome("xattr.list", names.status(), w)) return;
    std::vector<std::string> want;
    for (const auto& [k, v] : m_.at(ino).xattrs) want.push_back(k);
    ASSERT_EQ(*names, want);
  } else if (Outcome("xattr.remove", f().RemoveXattr(ino, name), w)) {
    m_.at(ino).xattrs.erase(name);
  }
  if (m_.count(ino)) {
    ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
  }
}

// setattr: a random subset of the fields, now and then a mode with bits
// beyond 07777 (EINVAL, nothing changes) or a size (as truncate).
void FsRun::OpSetAttr() {
  const uint64_t ino = P(97) ? PickIno(kAny) : DeadIno();
  SetAttrSpec s;
  if (P(50)) s.mode = static_cast<uint32_t>(P(5) ? 010000 | R(07777) : R(07777 + 1));
  if (P(40)) s.uid = static_cast<uint32_t>(R(3) * 1000);
  if (P(40)) s.gid = static_cast<uint32_t>(R(3) * 100);
  if (P(30)) s.atime = P(30) ? AttrTime::Now() : AttrTime::At(static_cast<int64_t>(R(1ull << 40)));
  if (P(30))
    s.mtime = P(30) ? AttrTime::Now() : AttrTime::At(static_cast<int64_t>(R(1ull << 40)) - 5);
  if (P(10)) s.size = P(5) ? (1ull << 62) : R(20000);
  Note(absl::StrCat("setattr ", ino, s.mode ? absl::StrCat(" mode ", *s.mode) : "",
                    s.uid ? absl::StrCat(" uid ", *s.uid) : "",
                    s.gid ? absl::StrCat(" gid ", *s.gid) : "",
                    s.size ? absl::StrCat(" size ", *s.size) : ""));
  // In FsOps::SetAttr's order: the mode, then Truncate's (EFBIG, the
  // inode, its kind), then the inode.
  Want w;
  if (s.mode && (*s.mode & ~07777u)) {
    w = Posix("EINVAL");
  } else if (s.size && *s.size > kMaxFileSize) {
    w = {Code::kInvalidArgument, "EFBIG"};
  } else if (s.size) {
    w = MRegular(m_, ino);
  } else if (!m_.count(ino)) {
    w = Posix("ENOENT");
  }
  absl::StatusOr<FileStat> st = f().SetAttr(ino, s);
  if (!Outcome("setattr", st.status(), w)) {
    if (m_.count(ino)) {
      ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
    }
    return;
  }
  MNode& n = m_.at(ino);
  if (s.size) {
    n.data.resize(*s.size, '\0');
    Changed(ino);
  }
  if (s.mode) n.mode = *s.mode;
  if (s.uid) n.uid = *s.uid;
  if (s.gid) n.gid = *s.gid;
  if ((s.uid || s.gid) && !s.mode && n.kind != FileKind::kDirectory) {
    n.mode &= ~(04000u | ((n.mode & 010) ? 02000u : 0u));
  }
  if (s.atime) n.atime = s.atime->now ? st->atime_ns : s.atime->ns;
  if (s.mtime) n.mtime = s.mtime->now ? st->mtime_ns : s.mtime->ns;
  ASSERT_EQ(st->mode, n.mode);
  ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
}

void FsRun::OpFiemap() {
  const uint64_t ino = PickIno(P(95) ? kFile : kLink);
  if (ino == 0) return;
  Note(absl::StrCat("fiemap ", ino));
  ++mix_["fiemap"];
  ASSERT_NO_FATAL_FAILURE(CheckFiemap(ino));
  ASSERT_NO_FATAL_FAILURE(CheckFiemapRange(ino));
}

// A range's fiemap is the whole file's, cut to the extents that overlap
// it (flags included: LAST only when the file's last extent is in it).
void FsRun::CheckFiemapRange(uint64_t ino) {
  const uint64_t size = m_.at(ino).data.size();
  const uint64_t off = R(size + 100), len = P(20) ? 0 : 1 + R(P(50) ? 10000 : size + 1);
  SCOPED_TRACE(absl::StrCat("fiemap of inode ", ino, " [", off, ", +", len, ")"));
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> all, f().Fiemap(ino));
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> part, f().Fiemap(ino, off, len));
  std::vector<FiemapExtent> want;
  for (const FiemapExtent& e : all) {
    if (e.logical + e.length > off && (len == 0 || e.logical < off + len)) want.push_back(e);
  }
  ASSERT_EQ(part.size(), want.size()) << "whole file:\n"
                                      << Extents(all) << "range:\n"
                                      << Extents(part);
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(part[i].logical, want[i].logical);
    ASSERT_EQ(part[i].physical, want[i].physical);
    ASSERT_EQ(part[i].length, want[i].length);
    ASSERT_EQ(part[i].flags, want[i].flags) << "extent at " << part[i].logical;
  }
  ++mix_["~fiemap range"];
}

void FsRun::OpFsync() {
  const uint64_t ino = PickIno(kAny);
  const bool datasync = P(30);
  Note(absl::StrCat("fsync ", ino, datasync ? " datasync" : ""));
  Outcome(datasync ? "fdatasync" : "fsync", f().Fsync(ino, datasync), Want());
}

// Operations that must fail, each with the error the model predicts.
void FsRun::OpError() {
  std::optional<PathEntry> file = Pick(kFile), dir = Pick(kDir), link = Pick(kLink);
  const std::string missing = Join(FreshPath(false), "nope");
  switch (R(12)) {
    case 0:
      return DoStat(missing);
    case 1:
      return DoCreate(FileKind::kRegular, Join(file ? file->path : missing, "x"), "");
    case 2:
      return DoCreate(FileKind::kDirectory, Join(missing, "x"), "");
    case 3: {
      const uint64_t symlink = PickIno(kLink);
      return DoWrite(P(50) || symlink == 0 ? PickIno(kDir) : symlink, R(100), "x", "write");
    }
    case 4:
      return DoTruncate(P(50) ? PickIno(kDir) : DeadIno(), R(5000));
    case 5:
      if (P(50)) return DoRead(DeadIno(), 0, 10);
      return DoXattr(DeadIno(), static_cast<int>(R(4)));
    case 6:
      return DoLink(dir ? dir->path : "/", FreshPath(false));
    case 7:
      return DoReadLink(P(50) && link ? link->path : file ? file->path : missing);
    case 8:
      return DoReadDir(file ? file->path : missing, 0);
    case 9:
      return DoCreate(FileKind::kRegular, Join(dir ? dir->path : "/", std::string(256, 'L')), "");
    case 10:
      return P(50) ? DoUnlink("/", true) : DoRename("/", FreshPath(false), 0);
    default: {
      const uint64_t ino = PickIno(kAny);
      return DoXattr(ino, P(50) ? 1 : 3);
    }
  }
}

// ---- fallocate ------------------------------------------------------------------------

// Mostly valid modes on files, over holes, data and EOF; now and then a
// mode refused (EOPNOTSUPP, or EINVAL for punch with zero), length 0, a
// directory, a symlink or a dead inode.
void FsRun::OpFallocate() {
  static const uint32_t kModes[] = {0, kFallocKeepSize, kFallocPunchHole | kFallocKeepSize,
                                    kFallocZeroRange, kFallocZeroRange | kFallocKeepSize};
  const uint64_t ino = P(94) ? PickIno(kFile) : P(50) ? DeadIno() : PickIno(kAny);
  if (ino == 0) return;
  uint32_t mode = kModes[R(std::size(kModes))];
  if (P(4)) {
    static const uint32_t kBad[] = {kFallocPunchHole,
                                    0x04,
                                    0x08,
                                    0x20,
                                    0x40,
                                    kFallocPunchHole | kFallocZeroRange | kFallocKeepSize};
    mode = kBad[R(std::size(kBad))];
  }
  const uint64_t size = m_.count(ino) ? SizeOf(m_.at(ino)) : 0;
  uint64_t off = P(60) ? R(size + 1) : size + R(100 << 10);
  uint64_t len = P(2) ? 0 : 1 + R(P(50) ? 5000 : 300 << 10);
  if (TotalData() > kDataCap && !(mode & kFallocKeepSize) && off + len > size) {
    off = size > len ? R(size - len) : 0;
  }
  if (off + len > kMaxFileBytes) return;
  DoFallocate(ino, mode, off, len);
}

void FsRun::DoFallocate(uint64_t ino, uint32_t mode, uint64_t off, uint64_t len) {
  const bool keep = (mode & kFallocKeepSize) != 0;
  const std::string tag = absl::StrCat("fallocate.",
                                       mode & kFallocPunchHole   ? "punch"
                                       : mode & kFallocZeroRange ? "zero"
                                                                 : "alloc",
                                       keep ? "_keep" : "");
  Note(absl::StrCat(tag, " 0x", absl::Hex(mode), " ", ino, " [", off, ", +", len, ")"));
  // The request is checked before the inode is looked up.
  Want w;
  const uint32_t known = kFallocKeepSize | kFallocPunchHole | kFallocZeroRange;
  if ((mode & kFallocPunchHole) && (mode & kFallocZeroRange)) {
    w = Posix("EINVAL");
  } else if ((mode & ~known) || ((mode & kFallocPunchHole) && !keep)) {
    w = {Code::kUnimplemented, "EOPNOTSUPP"};
  } else if (len == 0) {
    w = Posix("EINVAL");
  } else {
    w = MRegular(m_, ino);
  }
  if (!Outcome(tag, f().Fallocate(ino, mode, off, len), w)) {
    if (!w.ok() && m_.count(ino)) {
      ASSERT_NO_FATAL_FAILURE(VerifyInode(f(), m_, ino, ""));
    }
    return;
  }
  std::string& d = m_.at(ino).data;
  const uint64_t end = off + len;
  if (mode & (kFallocPunchHole | kFallocZeroRange)) {
    if (off < d.size())
      d.replace(off, std::min(end, d.size()) - off, std::min(end, d.size()) - off, '\0');
  }
  if (!keep && d.size() < end) d.resize(end, '\0');
  Changed(ino);
  ASSERT_NO_FATAL_FAILURE(VerifyRange(ino, off > 300 ? off - 300 : 0, len + 600));
  // The range is mapped throughout (allocate: data or preallocated; zero
  // range: preallocated), or not at all (punch).
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> es, f().Fiemap(ino, off, len));
  uint64_t covered = off;
  for (const FiemapExtent& e : es) {
    const uint64_t lo = std::max(e.logical, off), hi = std::min(e.logical + e.length, end);
    if (lo >= hi) continue;
    SCOPED_TRACE(
        absl::StrCat("extent [", e.logical, ", +", e.length, ") flags 0x", absl::Hex(e.flags)));
    ASSERT_FALSE(mode & kFallocPunchHole) << "mapped inside a punched hole";
    ASSERT_EQ(lo, covered) << "a hole left in a fallocated range";
    if (mode & kFallocZeroRange) {
      ASSERT_TRUE(e.flags & kFiemapExtentUnwritten) << "zero range not UNWRITTEN";
    }
    covered = hi;
  }
  if (!(mode & kFallocPunchHole)) {
    ASSERT_EQ(covered, end) << "a hole left at the end of a fallocated range";
  }
  ++mix_[es.empty() ? "~fallocate unmapped" : "~fallocate mapped"];
}

// ---- Commits, reopens, snapshots ----------------------------------------------------

void FsRun::OpCommit() {
  Note("commit");
  ++mix_["~commit"];
  ASSERT_OK(store_->Commit());
  for (const CloneCheck& c : clone_checks_) {
    if (!m_.count(c.src) || !m_.count(c.dst) || m_.at(c.src).version != c.src_version ||
        m_.at(c.dst).version != c.dst_version) {
      continue;
    }
    ASSERT_NO_FATAL_FAILURE(CheckCloneShared(c));
  }
  clone_checks_.clear();
}

// Seeds 3, 6, 9, ...: a 16-inode cache (evictions: DIR_INDEX counters
// reloaded, "logged?" asked of the log); seeds 4, 8, ...: the seed switches
// off; seeds 2, 5, 7, 10, ...: one name per INODE_REF item (a file's other
// names in a directory in extended refs).
Options FsRun::StoreOptions() const {
  Options o = testing::TestOptions();
  if (seed_ % 3 == 0) o.inode_cache_entries = 16;
  if (seed_ % 5 == 0 || seed_ % 5 == 2) o.test_hooks.ref_item_names = 1;
  if (seed_ % 4 == 0) {
    o.fs_dir_index_offset = false;
    o.fs_precise_logged_check = false;
    o.fiemap_path_cache = false;
  }
  return o;
}

void FsRun::Open() {
  ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, StoreOptions()));
  ASSERT_OK_AND_ASSIGN(auto sv, store_->DefaultSubvolume());
  files_.emplace(sv->files());
}

int FsRun::OpenCount(uint64_t ino) const {
  int n = 0;
  for (const auto& [h, i] : handles_) n += i == ino ? 1 : 0;
  return n;
}

void FsRun::Orphaned(uint64_t ino, const MNode& before) {
  MNode n = before;
  n.nlink = 0;
  orphans_[ino] = n;
  ASSERT_OK_AND_ASSIGN(FileStat st, f().StatInode(ino));
  ASSERT_EQ(st.nlink, 0u) << "an open file whose last name went";
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> items, f().Orphans());
  ASSERT_TRUE(std::count(items.begin(), items.end(), ino)) << "no orphan item for " << ino;
}

// Opens a file (or symlink) by inode; a dead inode is ENOENT.
void FsRun::OpOpen() {
  const bool dead = P(10);
  const uint64_t ino = dead ? DeadIno() : PickIno(kFile | kLink);
  if (ino == 0 || handles_.size() >= 16) return;
  Note(absl::StrCat("open ", ino));
  absl::StatusOr<OpenFile> h = f().Open(ino);
  if (!Outcome("open", h.status(), dead ? Posix("ENOENT") : Want{})) return;
  handles_[h->handle] = ino;
}

// Closes a handle; the last one of an orphan deletes it.
void FsRun::OpClose() {
  if (handles_.empty() || P(5)) {
    Note("close of an unknown handle");
    ASSERT_THAT(f().Close(1ull << 60), testing::StatusIs(Code::kNotFound));
    return;
  }
  auto it = handles_.begin();
  std::advance(it, R(handles_.size()));
  const auto [handle, ino] = *it;
  Note(absl::StrCat("close ", handle, " (inode ", ino, ")"));
  ++mix_["close"];
  ASSERT_OK(f().Close(handle));
  handles_.erase(it);
  if (OpenCount(ino) > 0 || !orphans_.count(ino)) return;
  orphans_.erase(ino);
  linkable_.erase(ino);
  dead_.push_back(ino);
  ++mix_["close.deletes_orphan"];
  ASSERT_THAT(f().StatInode(ino), testing::StatusIs(Code::kNotFound));
}

// Data and fsync on an orphan, by inode: it behaves as a file; an
// O_TMPFILE among them may be linked (linkat), any other is ENOENT.
void FsRun::OpOrphanIo() {
  if (orphans_.empty()) return;
  auto it = orphans_.begin();
  std::advance(it, R(orphans_.size()));
  const uint64_t ino = it->first;
  MNode& n = it->second;
  if (P(25)) {
    const std::string name = Name(false);
    const bool linkable = linkable_.count(ino) > 0;
    Note(absl::StrCat("linkat ", ino, " /", name));
    Want w;
    if (m_.at(kRootInode).entries.count(name)) w = Posix("EEXIST");
    if (!linkable) w = Posix("ENOENT");
    absl::StatusOr<FileStat> st = f().LinkAt(ino, kRootInode, name);
    if (!Outcome(linkable ? "linkat.tmpfile" : "linkat.orphan", st.status(), w)) return;
    n.nlink = 1;
    n.cloned = true;  // a snapshot may hold it unnamed: the model cannot say if it is shared
    m_[ino] = n;
    MAddName(m_, kRootInode, name, ino);
    orphans_.erase(ino);
    linkable_.erase(ino);
    ASSERT_NO_FATAL_FAILURE(VerifyPath(Join("/", name)));
    return;
  }
  if (n.kind == FileKind::kRegular && P(70)) {
    const uint64_t off = R(n.data.size() + 1);
    const std::string data = Bytes(1 + R(20000));
    Note(absl::StrCat("orphan write ", ino, " [", off, ", +", data.size(), ")"));
    ++mix_["orphan.write"];
    ASSERT_OK(f().Write(ino, off, data));
    if (n.data.size() < off + data.size()) n.data.resize(off + data.size(), '\0');
    n.data.replace(off, data.size(), data);
  }
  if (P(20)) {
    Note(absl::StrCat("orphan fsync ", ino));
    ++mix_["orphan.fsync"];
    ASSERT_OK(f().Fsync(ino, P(50)));
  }
  ASSERT_OK_AND_ASSIGN(FileStat st, f().StatInode(ino));
  ASSERT_EQ(st.nlink, 0u);
  ASSERT_EQ(st.size, n.data.size());
  if (n.kind == FileKind::kRegular) {
    ASSERT_OK_AND_ASSIGN(std::string got, f().Read(ino, 0, n.data.size()));
    ASSERT_TRUE(got == n.data) << "orphan " << ino << " data differs";
  }
}

// O_TMPFILE in a random directory (a file is ENOTDIR).
void FsRun::OpTmpfile() {
  if (handles_.size() >= 16) return;
  const bool bad = P(10);
  const uint64_t dir = bad ? PickIno(kFile) : PickIno(kDir);
  if (dir == 0) return;
  Note(absl::StrCat("tmpfile in ", dir));
  absl::StatusOr<OpenFile> t = f().CreateTmpfile(dir);
  if (!Outcome("tmpfile", t.status(), bad ? Posix("ENOTDIR") : Want{})) return;
  ASSERT_EQ(m_.count(t->ino) + orphans_.count(t->ino), 0u) << "inode handed out while in use";
  MNode n;
  n.nlink = 0;
  orphans_[t->ino] = n;
  linkable_.insert(t->ino);
  handles_[t->handle] = t->ino;
  dead_.erase(std::remove(dead_.begin(), dead_.end(), t->ino), dead_.end());
}

void FsRun::Reopen() {
  Note("reopen");
  ++mix_["~reopen + check"];
  files_.reset();
  ASSERT_OK(store_->Close());
  store_.reset();
  ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&dev_));
  // Handles die with the store; the mount deletes the orphans they kept
  // (checked with the other dead inodes below).
  for (const auto& [ino, n] : orphans_) dead_.push_back(ino);
  orphans_.clear();
  handles_.clear();
  linkable_.clear();
  ASSERT_NO_FATAL_FAILURE(Open());
  ASSERT_NO_FATAL_FAILURE(VerifyTree(f(), m_, "default"));
  for (const auto& [name, m] : snaps_) {
    ASSERT_OK_AND_ASSIGN(auto sv, store_->OpenSubvolume(name));
    ASSERT_NO_FATAL_FAILURE(VerifyTree(sv->files(), m, name));
  }
  for (uint64_t ino : dead_) {
    if (!m_.count(ino)) {
      ASSERT_THAT(f().StatInode(ino), testing::StatusIs(Code::kNotFound)) << ino;
    }
  }
}

void FsRun::OpSnapshot() {
  if (snaps_.size() >= kMaxSnapshots) return;
  const std::string name = absl::StrCat("snap", next_snap_++);
  Note(absl::StrCat("snapshot ", name));
  ++mix_["~snapshot create"];
  ASSERT_OK(store_->CreateSnapshot("default", name, true).status());
  for (auto& [ino, n] : m_) {
    n.exposed.insert(name);
    n.intact.insert(name);
  }
  snaps_[name] = m_;
  // Every data extent is SHARED now; the snapshot reads the same and is read-only.
  for (const auto& [ino, n] : m_) {
    if (n.kind == FileKind::kRegular) {
      ASSERT_NO_FATAL_FAILURE(CheckFiemap(ino));
    }
  }
  ASSERT_OK_AND_ASSIGN(auto sv, store_->OpenSubvolume(name));
  Files sf = sv->files();
  const absl::Status rofs = sf.Create("/rofs").status();
  ASSERT_TRUE(absl::StartsWith(rofs.message(), "EROFS")) << rofs;
  const uint64_t ino = PickIno(kFile);
  if (ino != 0) {
    const absl::Status w = sf.Write(ino, 0, "x");
    ASSERT_TRUE(absl::StartsWith(w.message(), "EROFS")) << w;
  }
  if (P(50)) {
    ASSERT_NO_FATAL_FAILURE(VerifyTree(sf, snaps_[name], name));
  }
}

void FsRun::OpDropSnapshot() {
  if (snaps_.empty()) return;
  auto it = snaps_.begin();
  std::advance(it, R(snaps_.size()));
  const std::string name = it->first;
  Note(absl::StrCat("drop snapshot ", name));
  ++mix_["~snapshot drop"];
  {
    ASSERT_OK_AND_ASSIGN(auto sv, store_->OpenSubvolume(name));
    ASSERT_NO_FATAL_FAILURE(VerifyTree(sv->files(), it->second, name));
  }
  ASSERT_OK(store_->DeleteSubvolume(name));
  ASSERT_OK(store_->DropDeletedSubvolumes());
  snaps_.erase(it);
  std::vector<uint64_t> freed;
  for (auto& [ino, n] : m_) {
    if (n.exposed.erase(name) && n.exposed.empty() && !n.cloned && n.kind == FileKind::kRegular) {
      freed.push_back(ino);
    }
    n.intact.erase(name);
  }
  // SHARED clears on files only the dropped snapshot shared.
  for (uint64_t ino : freed) ASSERT_NO_FATAL_FAILURE(CheckFiemap(ino));
  mix_["~files unshared by a drop"] += freed.size();
}

void FsRun::Finish() {
  ASSERT_OK(store_->Commit());
  ASSERT_NO_FATAL_FAILURE(VerifyTree(f(), m_, "default"));
  while (!snaps_.empty()) ASSERT_NO_FATAL_FAILURE(OpDropSnapshot());
  for (const auto& [ino, n] : m_) {
    if (n.kind == FileKind::kRegular) {
      ASSERT_NO_FATAL_FAILURE(CheckFiemap(ino));
    }
  }
  ASSERT_NO_FATAL_FAILURE(Reopen());
  files_.reset();
  ASSERT_OK(store_->Close());
  store_.reset();
  ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&dev_));
}

void FsRun::PrintMix(double seconds) {
  uint64_t regular = 0, dirs = 0;
  for (const auto& [ino, n] : m_) (n.kind == FileKind::kDirectory ? dirs : regular) += 1;
  std::cout << "fs_model seed " << seed_ << " (nodesize " << nodesize_ << "): " << op_ << " ops in "
            << seconds << " s; at the end " << m_.size() << " inodes (" << dirs << " directories), "
            << (TotalData() >> 10) << " KiB of file data\n";
  std::string line;
  for (const auto& [k, v] : mix_) {
    std::string cell = absl::StrCat(k, " ", v);
    cell.resize(std::max<size_t>(cell.size() + 1, 34), ' ');
    if (line.size() + cell.size() > 104) {
      std::cout << "  " << line << "\n";
      line.clear();
    }
    line += cell;
  }
  std::cout << "  " << line << std::endl;
}

void FsRun::Run(uint64_t ops) {
  ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(nodesize_)));
  ASSERT_NO_FATAL_FAILURE(Open());
  int total = 0;
  for (const OpSpec& s : kOps) total += s.weight;
  const absl::Time start = absl::Now();
  for (op_ = 0; op_ < ops; ++op_) {
    int r = static_cast<int>(R(total));
    const OpSpec* spec = kOps;
    while (r >= spec->weight) r -= (spec++)->weight;
    (this->*spec->fn)();
    if (!::testing::Test::HasFailure() && op_ % 300 == 299) OpCommit();
    if (!::testing::Test::HasFailure() && op_ % 2500 == 2499) Reopen();
    if (::testing::Test::HasFailure()) {
      std::cout << "fs_model seed " << seed_ << " failed at op " << op_ << "; the last ops:\n";
      for (const std::string& t : trail_) std::cout << "  " << t << "\n";
      return;
    }
  }
  Finish();
  PrintMix(absl::ToDoubleSeconds(absl::Now() - start));
}

// ---- Tests --------------------------------------------------------------------------

constexpr uint64_t kDefaultOps = 20000;

class FsModelTest : public ::testing::TestWithParam<uint64_t> {};

TEST_P(FsModelTest, MatchesModel) {
  uint64_t first = GetParam(), seeds = 1, ops = kDefaultOps;
  if (testing::Flags().seed != 0) {
    if (GetParam() != 1) GTEST_SKIP() << "replaying --seed";
    first = testing::Flags().seed;
    seeds = std::max<uint64_t>(1, testing::Flags().seeds);
  }
  if (testing::Flags().ops != 0) ops = testing::Flags().ops;
  for (uint64_t seed = first; seed < first + seeds && !HasFailure(); ++seed) {
    SCOPED_TRACE(absl::StrCat("replay: --seed=", seed, " --ops=", ops));
    FsRun(seed, seed % 2 == 1 ? 4096 : 16384).Run(ops);
  }
}

// Odd seeds: 4 KiB nodes (deep trees); even seeds: 16 KiB.
INSTANTIATE_TEST_SUITE_P(Seeds, FsModelTest, ::testing::Values(1, 2, 3, 4, 5, 6));

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
