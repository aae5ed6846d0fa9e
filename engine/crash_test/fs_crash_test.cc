// Goal: fsync of the file namespace survives power loss exactly as the
// design promises (engine/fs/fs_log.cc), in the spirit of xfstests'
// generic/321-343, 376 and 498: after a power cut, the remounted namespace
// (log replayed, fix-up run) is exactly the state of the last durability
// point that completed — an Fsync or a store->Commit() — or, for a cut
// during one, that state or the next one, never a mix; and `check` is
// clean.
//
// Method: each scenario is a function that runs namespace operations on a
// fresh store (TestOptions: no background commits) mounted from a base
// image whose log chain is already set up (so every fsync is one log sync,
// never the first-sync engine commit), commits where it needs an older
// committed state, and ends in fsync(s). Every Fsync declares the exact
// namespace it makes durable (Ns: every path, its kind, inode, size,
// nlink and a hash of its bytes or symlink target, and xattrs; directory
// sizes and link counts follow from the listing); a Commit makes the live
// namespace durable. A dry run counts the flushes the scenario reaches
// (N) and checks the no-crash case (power fails after the last fsync
// returned, before the store's closing commit). Then for k in 1..N the
// device dies at its k-th flush, power fails in each of the four loss
// modes (the random ones with 3 seeds), and the remount must show one of
// the allowed states; every other cut (and one no-crash run per seed)
// first crashes the replay's commit once, so the replay and its fix-up
// run twice. The listing compares everything; what survives and why is
// noted per scenario.
//
// The loop is testing::CrashHarness (engine/testing/crash_harness.h).
//
// Replay: --seed=N. More seeds for the random loss modes, and a replay cut
// after every cut: --seeds=K (the manual fs_crash_test_long target runs
// 25).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/loss_modes.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using Mode = FaultDevice::LossMode;

constexpr uint64_t kDeviceBytes = 24ull << 20;
constexpr uint64_t kDefaultSeeds = 3;  // for kRandomSubset and kTorn
uint64_t total_cuts = 0;               // over the tests this process ran

std::string P(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed * 13 + i / 251) % 26);
  return s;
}
std::string Zeros(size_t n) { return std::string(n, '\0'); }

uint64_t Fnv(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

// ---- Listings -------------------------------------------------------------------

// One path of a namespace listing.
struct Node {
  FileKind kind = FileKind::kRegular;
  uint64_t ino = 0;
  std::string data;  // file bytes, or a symlink's target
  uint64_t size = 0;
  uint32_t nlink = 0;
  std::string note;  // inconsistencies a capture saw (lookup or kind mismatch)
};

// A namespace: every path from the root. As an expectation it is built with
// Dir/File/Symlink/Xattr and Finish() derives directory sizes (2 x the
// bytes of their entries' names) and link counts (paths per inode); a
// capture fills them from stat.
class Ns {
 public:
  Ns() { nodes_["/"] = Node{FileKind::kDirectory, kRootInode, "", 0, 1, ""}; }
  explicit Ns(Node root) { nodes_["/"] = std::move(root); }
  Ns& Dir(const std::string& path, uint64_t ino) {
    nodes_[path] = Node{FileKind::kDirectory, ino, "", 0, 1, ""};
    return *this;
  }
  Ns& File(const std::string& path, uint64_t ino, std::string data = "") {
    nodes_[path] = Node{FileKind::kRegular, ino, std::move(data), 0, 0, ""};
    return *this;
  }
  Ns& Symlink(const std::string& path, uint64_t ino, std::string target) {
    nodes_[path] = Node{FileKind::kSymlink, ino, std::move(target), 0, 1, ""};
    return *this;
  }
  Ns& Xattr(uint64_t ino, const std::string& name, const std::string& value) {
    xattrs_[ino][name] = value;
    return *this;
  }
  // A second entry of one name in a directory is listed as "<path> (again)".
  void Put(std::string path, Node n) {
    while (nodes_.count(path)) path += " (again)";
    nodes_[path] = std::move(n);
  }
  void Finish();
  std::string Render() const;
  // The paths of `want` that this listing lacks or holds differently
  // (link counts and directory sizes aside: a fuller state has more names).
  std::vector<std::string> Missing(const Ns& want) const;

 private:
  std::map<std::string, Node> nodes_;
  std::map<uint64_t, std::map<std::string, std::string>> xattrs_;
};

std::string Parent(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string Base(const std::string& path) { return path.substr(path.rfind('/') + 1); }
std::string Join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

void Ns::Finish() {
  std::map<uint64_t, uint32_t> names;
  for (auto& [path, n] : nodes_) {
    if (n.kind != FileKind::kDirectory) n.size = n.data.size();
    if (n.kind == FileKind::kDirectory) n.size = 0;
    if (path != "/") ++names[n.ino];
  }
  for (auto& [path, n] : nodes_) {
    if (path == "/") continue;
    auto parent = nodes_.find(Parent(path));
    if (parent == nodes_.end() || parent->second.kind != FileKind::kDirectory) {
      ADD_FAILURE() << "the expected listing has " << path << " but not its directory";
      continue;
    }
    parent->second.size += 2 * Base(path).size();
    if (n.kind != FileKind::kDirectory) n.nlink = names[n.ino];
  }
}

std::string Render(const Node& n) {
  const char* kind = n.kind == FileKind::kDirectory ? "dir"
                     : n.kind == FileKind::kSymlink ? "symlink"
                                                    : "file";
  std::string s = absl::StrCat(kind, " ino=", n.ino, " size=", n.size, " nlink=", n.nlink);
  if (n.kind == FileKind::kSymlink) absl::StrAppend(&s, " -> ", n.data);
  if (n.kind == FileKind::kRegular) {
    absl::StrAppend(&s, " data=", n.data.size(), ":", absl::Hex(Fnv(n.data)));
    if (n.data.size() <= 16) absl::StrAppend(&s, " \"", absl::CEscape(n.data), "\"");
  }
  if (!n.note.empty()) absl::StrAppend(&s, " !", n.note);
  return s;
}

std::vector<std::string> Ns::Missing(const Ns& want) const {
  std::vector<std::string> out;
  for (const auto& [path, n] : want.nodes_) {
    auto it = nodes_.find(path);
    if (it == nodes_.end() || it->second.kind != n.kind || it->second.ino != n.ino ||
        it->second.data != n.data) {
      out.push_back(path);
    }
  }
  return out;
}

std::string Ns::Render() const {
  std::string out;
  for (const auto& [path, n] : nodes_) {
    absl::StrAppend(&out, path, " ", cowkv::Render(n));
    auto x = xattrs_.find(n.ino);
    if (x != xattrs_.end()) {
      for (const auto& [k, v] : x->second) {
        absl::StrAppend(&out, " ", k, "=");
        if (v.size() <= 16) absl::StrAppend(&out, "\"", absl::CEscape(v), "\"");
        if (v.size() > 16) absl::StrAppend(&out, v.size(), ":", absl::Hex(Fnv(v)));
      }
    }
    out += "\n";
  }
  return out;
}

// The live (or remounted) namespace, walked from the root by DIR_INDEX;
// each entry is also looked up by name (DIR_ITEM) and stat'ed.
class Capturer {
 public:
  explicit Capturer(Files f) : f_(f) {}
  absl::StatusOr<Ns> Capture() {
    Ns ns;
    absl::StatusOr<FileStat> root = f_.StatInode(kRootInode);
    if (!root.ok()) return root.status();
    ns = Ns(Node{FileKind::kDirectory, kRootInode, "", root->size, root->nlink, ""});
    absl::Status s = Walk("/", kRootInode, &ns, 0);
    if (!s.ok()) return s;
    return ns;
  }

 private:
  absl::Status Walk(const std::string& path, uint64_t dir, Ns* ns, int depth);
  absl::Status AddEntry(const std::string& path, uint64_t dir, const DirEntryInfo& e, Ns* ns,
                        int depth);
  Files f_;
};

absl::Status Capturer::Walk(const std::string& path, uint64_t dir, Ns* ns, int depth) {
  if (depth > 64) return absl::InternalError(absl::StrCat("directory loop at ", path));
  absl::StatusOr<ReadDirResult> r = f_.ReadDirInode(dir);
  if (!r.ok()) return r.status();
  for (const DirEntryInfo& e : r->entries) {
    absl::Status s = AddEntry(Join(path, e.name), dir, e, ns, depth);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status Capturer::AddEntry(const std::string& path, uint64_t dir, const DirEntryInfo& e,
                                Ns* ns, int depth) {
  absl::StatusOr<FileStat> st = f_.StatInode(e.ino);
  if (!st.ok()) return absl::Status(st.status().code(), absl::StrCat(path, ": ", st.status().message()));
  Node n{st->kind, e.ino, "", st->size, st->nlink, ""};
  absl::StatusOr<uint64_t> by_name = f_.LookupAt(dir, e.name);
  if (!by_name.ok() || *by_name != e.ino) n.note += "lookup-mismatch";
  if (e.kind != st->kind) n.note += "kind-mismatch";
  if (st->kind == FileKind::kRegular) {
    absl::StatusOr<std::string> d = f_.Read(e.ino, 0, st->size);
    if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat(path, ": ", d.status().message()));
    n.data = *std::move(d);
  } else if (st->kind == FileKind::kSymlink) {
    absl::StatusOr<std::string> t = f_.ReadLink(path);
    if (!t.ok()) return t.status();
    n.data = *std::move(t);
  }
  ns->Put(path, n);
  absl::StatusOr<std::vector<std::string>> xs = f_.ListXattrs(e.ino);
  if (!xs.ok()) return xs.status();
  for (const std::string& x : *xs) {
    absl::StatusOr<std::string> v = f_.GetXattr(e.ino, x);
    if (!v.ok()) return v.status();
    ns->Xattr(e.ino, x, *v);
  }
  if (st->kind == FileKind::kDirectory) return Walk(path, e.ino, ns, depth + 1);
  return absl::OkStatus();
}

// ---- One run of a scenario ------------------------------------------------------

// The operations a scenario uses. Until the device dies each must succeed;
// the first failed durability call with a dead device is the crash, and
// every later call is skipped (returning 0 for inode numbers).
class Run {
 public:
  // `fallbacks`: per fsync of the scenario, whether it fell back to an
  // engine commit (filled by the run without a cut, read by the others).
  Run(FaultDevice* fd, Store* store, Files f, std::vector<bool>* fallbacks)
      : fd_(fd), store_(store), f_(f), fallbacks_(fallbacks) {
    absl::StatusOr<Ns> now = Capturer(f_).Capture();
    EXPECT_TRUE(now.ok()) << now.status();
    if (now.ok()) durable_ = now->Render();
  }
  bool crashed() const { return crashed_; }
  bool fell_back() const { return fell_back_; }
  // The states a remount may show.
  std::vector<std::string> Allowed() const {
    std::vector<std::string> a = {durable_};
    if (!in_flight_.empty()) a.push_back(in_flight_);
    return a;
  }

  uint64_t Mkdir(const std::string& p) { return Made(crashed_ ? Skip() : f_.Mkdir(p), "mkdir " + p); }
  uint64_t Create(const std::string& p, const std::string& data = "");
  uint64_t Symlink(const std::string& target, const std::string& p) {
    return Made(crashed_ ? Skip() : f_.Symlink(target, p), "symlink " + p);
  }
  uint64_t Link(const std::string& from, const std::string& to) {
    return Made(crashed_ ? Skip() : f_.Link(from, to), "link " + from + " " + to);
  }
  uint64_t Ino(const std::string& p);
  void Write(uint64_t ino, uint64_t off, const std::string& d) {
    Do([&] { return f_.Write(ino, off, d); }, absl::StrCat("write ", ino));
  }
  void Truncate(uint64_t ino, uint64_t size) {
    Do([&] { return f_.Truncate(ino, size); }, absl::StrCat("truncate ", ino));
  }
  void Clone(uint64_t src, uint64_t src_off, uint64_t dst, uint64_t dst_off, uint64_t len) {
    Do([&] { return f_.Clone(src, src_off, dst, dst_off, len); }, "clone");
  }
  void Unlink(const std::string& p) { Do([&] { return f_.Unlink(p); }, "unlink " + p); }
  void Rmdir(const std::string& p) { Do([&] { return f_.Rmdir(p); }, "rmdir " + p); }
  void Rename(const std::string& from, const std::string& to, uint32_t flags = 0) {
    Do([&] { return f_.Rename(from, to, flags); }, "rename " + from + " " + to);
  }
  void SetXattr(uint64_t ino, const std::string& n, const std::string& v) {
    Do([&] { return f_.SetXattr(ino, n, v); }, "setxattr " + n);
  }
  void RemoveXattr(uint64_t ino, const std::string& n) {
    Do([&] { return f_.RemoveXattr(ino, n); }, "removexattr " + n);
  }
  void Fallocate(uint64_t ino, uint32_t mode, uint64_t off, uint64_t len) {
    Do([&] { return f_.Fallocate(ino, mode, off, len); }, absl::StrCat("fallocate ", ino));
  }
  // Open handles (0 once crashed).
  uint64_t Open(uint64_t ino) { return Opened(crashed_ ? OpenFile{} : f_.Open(ino), "open"); }
  uint64_t Tmpfile(uint64_t dir, uint64_t* ino) {
    absl::StatusOr<OpenFile> h = crashed_ ? OpenFile{} : f_.CreateTmpfile(dir);
    *ino = h.ok() ? h->ino : 0;
    return Opened(h, "tmpfile");
  }
  void Close(uint64_t handle) {
    Do([&] { return f_.Close(handle); }, "close");
  }
  void LinkAt(uint64_t ino, uint64_t dir, const std::string& name) {
    Do([&] { return f_.LinkAt(ino, dir, name).status(); }, "linkat " + name);
  }

  // Durability points.
  void Fsync(uint64_t ino, Ns want, bool datasync = false);
  void Commit();

 private:
  static absl::StatusOr<FileStat> Skip() { return FileStat{}; }
  uint64_t Opened(const absl::StatusOr<OpenFile>& h, const std::string& what) {
    if (crashed_) return 0;
    EXPECT_TRUE(h.ok()) << what << ": " << h.status();
    return h.ok() ? h->handle : 0;
  }
  uint64_t Made(const absl::StatusOr<FileStat>& st, const std::string& what) {
    if (crashed_) return 0;
    EXPECT_TRUE(st.ok()) << what << ": " << st.status();
    return st.ok() ? st->ino : 0;
  }
  void Do(const std::function<absl::Status()>& fn, const std::string& what) {
    if (crashed_) return;
    absl::Status s = fn();
    EXPECT_TRUE(s.ok()) << what << ": " << s;
  }
  void Durable(const absl::Status& s, const std::string& next, const std::string& what);

  FaultDevice* const fd_;
  Store* const store_;
  Files f_;
  bool crashed_ = false;
  std::vector<bool>* const fallbacks_;
  size_t fsyncs_ = 0;
  bool fell_back_ = false;  // an fsync was carried by an engine commit
  std::string durable_;    // the state of the last completed durability point
  std::string in_flight_;  // the state the call that crashed would have made durable
};

uint64_t Run::Create(const std::string& p, const std::string& data) {
  const uint64_t ino = Made(crashed_ ? Skip() : f_.Create(p), "create " + p);
  if (!data.empty()) Write(ino, 0, data);
  return ino;
}

uint64_t Run::Ino(const std::string& p) {
  if (crashed_) return 0;
  absl::StatusOr<uint64_t> ino = f_.Lookup(p);
  EXPECT_TRUE(ino.ok()) << p << ": " << ino.status();
  return ino.ok() ? *ino : 0;
}

void Run::Durable(const absl::Status& s, const std::string& next, const std::string& what) {
  if (s.ok()) {
    durable_ = next;
    return;
  }
  EXPECT_TRUE(fd_->dead()) << what << " failed on a live device: " << s;
  crashed_ = true;
  in_flight_ = next;
}

void Run::Fsync(uint64_t ino, Ns want, bool datasync) {
  if (crashed_) return;
  want.Finish();
  const uint64_t commits = store_->Stats().commits, flushes = fd_->flushes();
  // What the fsync makes durable when it falls back to an engine commit
  // (a name it depends on was removed or moved in this transaction):
  // everything.
  absl::StatusOr<Ns> live = Capturer(f_).Capture();
  ASSERT_TRUE(live.ok()) << live.status();
  absl::Status s = f_.Fsync(ino, datasync);
  // Whether this fsync falls back is learnt from the run without a cut
  // (the first run of every test), where every fsync returns.
  const size_t index = fsyncs_++;
  if (s.ok()) {
    const bool committed = store_->Stats().commits != commits;
    if (fallbacks_->size() <= index) fallbacks_->resize(index + 1);
    (*fallbacks_)[index] = committed;
    if (!committed) {
      EXPECT_LE(fd_->flushes() - flushes, 1u) << "fsync is at most one log sync";
    }
  }
  const bool full = index < fallbacks_->size() && (*fallbacks_)[index];
  fell_back_ = fell_back_ || full;
  // An engine commit makes everything durable: at least what the log
  // would have carried.
  if (full) {
    EXPECT_EQ(live->Missing(want), std::vector<std::string>{})
        << "the live namespace lacks what the fsync must make durable";
  }
  Durable(s, full ? live->Render() : want.Render(), absl::StrCat("fsync ", ino));
}

void Run::Commit() {
  if (crashed_) return;
  absl::StatusOr<Ns> live = Capturer(f_).Capture();
  ASSERT_TRUE(live.ok()) << live.status();
  Durable(store_->Commit(), live->Render(), "commit");
}

// ---- Scenarios --------------------------------------------------------------------
//
// Each comment says what the final fsync makes durable and why (fs_log.cc):
// fsync of an inode logs its item, every name it has (INODE_REF plus the
// parent's DIR_ITEM/DIR_INDEX), parents created in this engine transaction
// (and, through them, their names), its data extents written in this
// transaction and the keys it lost since its last log; fsync of a
// directory adds its entries added in this transaction and the children
// created in it (recursively for new directories). Nothing else of the
// running transaction survives: unfsynced changes to other inodes are
// lost, and the namespace falls back to the last commit for them. An fsync
// whose picture needs a name removed or moved in its transaction (the
// inode's own, an entry of its directory, an ancestor's) is an engine
// commit instead (scenarios marked full_commit): then everything is
// durable, and the listing given is what must be there at least.

// Create + write + fsync; a sibling created but never fsynced is lost.
void CreateWriteFsync(Run& r) {
  const uint64_t f = r.Create("/f", P(5000, 1));
  r.Create("/g", "never synced");
  r.Fsync(f, Ns().File("/f", f, P(5000, 1)));
}

// A new empty file in a new directory: the new parent is logged with it.
void EmptyFileInNewDir(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t e = r.Create("/d/e");
  r.Fsync(e, Ns().Dir("/d", d).File("/d/e", e));
}

// generic/321-style: fsync of a committed directory after adding entries
// brings back every new entry and every new child in full (data, and the
// entries of a new subdirectory, recursively); a symlink too.
void DirFsyncNewEntries(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  Ns want;
  want.Dir("/d", d);
  for (int i = 0; i < 8; ++i) {
    const std::string p = absl::StrCat("/d/e", i);
    const std::string data = i % 2 ? P(1000 + 3000 * i, i) : "";
    want.File(p, r.Create(p, data), data);
  }
  const uint64_t sub = r.Mkdir("/d/sub");
  const uint64_t x = r.Create("/d/sub/x", P(300, 9));
  const uint64_t ln = r.Symlink("../e1", "/d/ln");
  want.Dir("/d/sub", sub).File("/d/sub/x", x, P(300, 9)).Symlink("/d/ln", ln, "../e1");
  r.Fsync(d, want);
}

// generic/335-style: a committed file moved to another directory, then
// fsync of the new parent: the file is at its new name only.
void RenameFsyncNewParent(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  const uint64_t f = r.Create("/a/f", P(8000, 2));
  r.Commit();
  r.Rename("/a/f", "/b/f");
  r.Fsync(b, Ns().Dir("/a", a).Dir("/b", b).File("/b/f", f, P(8000, 2)));
}

// The same move, fsync of the old parent: the removal is durable, and so
// is the file's new name (the moved inode is logged with the parent that
// lost it).
void RenameFsyncOldParent(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  const uint64_t f = r.Create("/a/f", P(8000, 3));
  r.Commit();
  r.Rename("/a/f", "/b/f");
  r.Fsync(a, Ns().Dir("/a", a).Dir("/b", b).File("/b/f", f, P(8000, 3)));
}

// generic/322: rename of a committed file across directories, fsync of
// the file: new name only.
void RenameFsyncFile(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  const uint64_t f = r.Create("/a/f", P(20000, 4));
  r.Commit();
  r.Rename("/a/f", "/b/g");
  r.Fsync(f, Ns().Dir("/a", a).Dir("/b", b).File("/b/g", f, P(20000, 4)));
}

// Rename over an existing committed file, fsync of the renamed file: the
// target's old inode is gone.
void RenameOverExisting(Run& r) {
  const uint64_t a = r.Create("/a", P(6000, 5));
  r.Create("/b", P(7000, 6));
  r.Commit();
  r.Rename("/a", "/b");
  r.Fsync(a, Ns().File("/b", a, P(6000, 5)));
}

// generic/342: rename a committed file, create a new one under the old
// name, fsync the new one. The new file takes a name the old inode had in
// the committed tree, so the old inode is logged too (at its new name).
void RenameThenCreateOldName(Run& r) {
  const uint64_t a = r.Create("/a", P(3000, 7));
  r.Commit();
  r.Rename("/a", "/b");
  const uint64_t n = r.Create("/a", P(100, 8));
  r.Fsync(n, Ns().File("/a", n, P(100, 8)).File("/b", a, P(3000, 7)));
}

// A hard link to a committed file, fsync of the file: both names survive
// (all of an inode's names are logged), nlink 2.
void LinkFsyncOneName(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t f = r.Create("/f", P(4000, 9));
  r.Commit();
  r.Link("/f", "/d/g");
  r.Fsync(f, Ns().Dir("/d", d).File("/f", f, P(4000, 9)).File("/d/g", f, P(4000, 9)));
}

// generic/498: a committed file linked into a directory created in this
// transaction, fsync of the file: the new directory comes back.
void LinkIntoNewDir(Run& r) {
  const uint64_t a = r.Mkdir("/a");
  const uint64_t f = r.Create("/a/f", P(2500, 10));
  r.Commit();
  const uint64_t b = r.Mkdir("/b");
  r.Link("/a/f", "/b/g");
  r.Fsync(f, Ns().Dir("/a", a).File("/a/f", f, P(2500, 10)).Dir("/b", b).File("/b/g", f, P(2500, 10)));
}

// generic/336: hard link across directories, unlink of the original name,
// fsync of the file: only the new name (the lost name's key is logged).
void LinkAcrossDirsUnlinkOriginal(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  const uint64_t f = r.Create("/a/f", P(9000, 11));
  r.Commit();
  r.Link("/a/f", "/b/g");
  r.Unlink("/a/f");
  r.Fsync(f, Ns().Dir("/a", a).Dir("/b", b).File("/b/g", f, P(9000, 11)));
}

// generic/376-style: rename, then a hard link to the new name, fsync: the
// two new names, not the old one.
void RenameThenLink(Run& r) {
  const uint64_t a = r.Create("/a", P(1500, 12));
  r.Commit();
  r.Rename("/a", "/b");
  r.Link("/b", "/c");
  r.Fsync(a, Ns().File("/b", a, P(1500, 12)).File("/c", a, P(1500, 12)));
}

// A committed file with two names; one is unlinked, the file fsynced.
void UnlinkOneOfTwoLinks(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t f = r.Create("/f", P(100, 13));
  r.Link("/f", "/d/g");
  r.Commit();
  r.Unlink("/f");
  r.Fsync(f, Ns().Dir("/d", d).File("/d/g", f, P(100, 13)));
}

// A file created and fsynced (logged), then unlinked, then its parent
// fsynced: the unlink updated the log (the file was in it), the file is
// gone.
void UnlinkAfterFsyncThenFsyncParent(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  const uint64_t f = r.Create("/d/f", P(5000, 14));
  r.Fsync(f, Ns().Dir("/d", d).File("/d/f", f, P(5000, 14)));
  r.Unlink("/d/f");
  r.Fsync(d, Ns().Dir("/d", d));
}

// A committed file unlinked, its parent fsynced: gone.
void UnlinkCommittedFsyncParent(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Create("/d/f", P(5000, 15));
  const uint64_t k = r.Create("/d/k", "keep");
  r.Commit();
  r.Unlink("/d/f");
  r.Fsync(d, Ns().Dir("/d", d).File("/d/k", k, "keep"));
}

// Truncate down a committed multi-extent file, fsync: the prefix.
void TruncateDown(Run& r) {
  const uint64_t f = r.Create("/f", P(300000, 16));
  r.Commit();
  r.Truncate(f, 100001);
  r.Fsync(f, Ns().File("/f", f, P(300000, 16).substr(0, 100001)));
}

// Truncate up, fsync: the tail reads as zeros.
void TruncateUp(Run& r) {
  const uint64_t f = r.Create("/f", P(5000, 17));
  r.Commit();
  r.Truncate(f, 20000);
  r.Fsync(f, Ns().File("/f", f, P(5000, 17) + Zeros(15000)));
}

// Truncate down then up in one transaction: the cut bytes come back as
// zeros, not as the old data.
void TruncateDownThenUp(Run& r) {
  const uint64_t f = r.Create("/f", P(50000, 18));
  r.Commit();
  r.Truncate(f, 1000);
  r.Truncate(f, 40000);
  r.Fsync(f, Ns().File("/f", f, P(50000, 18).substr(0, 1000) + Zeros(39000)));
}

// Reflink into a new file, fsync of the clone: its shared extents come
// back; the source is unchanged.
void CloneIntoNewFile(Run& r) {
  const std::string data = P(256 << 10, 19);
  const uint64_t s = r.Create("/src", data);
  r.Commit();
  const uint64_t d = r.Create("/dst");
  r.Clone(s, 4096, d, 0, 200000);
  r.Fsync(d, Ns().File("/src", s, data).File("/dst", d, data.substr(4096, 200000)));
}

// Reflink over the middle of a committed file, fsync.
void CloneOverCommittedRange(Run& r) {
  const std::string src = P(128 << 10, 20), old = P(100000, 21);
  const uint64_t s = r.Create("/src", src);
  const uint64_t d = r.Create("/dst", old);
  r.Commit();
  r.Clone(s, 0, d, 32768, 65536);
  std::string want = old;
  want.replace(32768, 65536, src.substr(0, 65536));
  r.Fsync(d, Ns().File("/src", s, src).File("/dst", d, want));
}

// generic/341: a committed directory renamed, a file in it written and
// fsynced. The file must be found at its new path (btrfs persists the
// renames of an fsynced file's ancestors): the directory moved in this
// transaction, so the fsync is an engine commit.
void RenameDirFsyncFileInside(Run& r) {
  const uint64_t a = r.Mkdir("/a");
  const uint64_t f = r.Create("/a/f", P(3000, 22));
  r.Commit();
  r.Rename("/a", "/b");
  r.Write(f, 0, "new");
  std::string want = P(3000, 22);
  want.replace(0, 3, "new");
  r.Fsync(f, Ns().Dir("/b", a).File("/b/f", f, want));
}

// A new directory logged (through a child's fsync), then renamed: the
// rename updates the log (seed 004: the directory is in it), so the next
// fsync, of a new file in it, carries the rename.
void FsyncFileParentRenamedAfterLogged(Run& r) {
  const uint64_t a = r.Mkdir("/a");
  const uint64_t f = r.Create("/a/f", P(700, 23));
  r.Fsync(f, Ns().Dir("/a", a).File("/a/f", f, P(700, 23)));
  r.Rename("/a", "/b");
  const uint64_t g = r.Create("/b/g", P(800, 24));
  r.Fsync(g, Ns().Dir("/b", a).File("/b/f", f, P(700, 23)).File("/b/g", g, P(800, 24)));
}

// Seed 000: entries added in three rounds, the directory fsynced after
// each; the third round also unlinks an entry of the first (the directory
// is logged, so the unlink updates the log). Every round's entries
// survive, once each.
void DirFsyncRounds(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  Ns want;
  want.Dir("/d", d);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 5; ++i) {
      const std::string p = absl::StrCat("/d/r", round, "_", i);
      const std::string data = i % 2 ? P(600 * (i + round), i + round) : "";
      want.File(p, r.Create(p, data), data);
    }
    if (round == 2) {
      r.Unlink("/d/r0_1");
      want = Ns();
      want.Dir("/d", d);
      for (int k = 0; k < 3; ++k) {
        for (int i = 0; i < 5; ++i) {
          if (k == 0 && i == 1) continue;
          const std::string p = absl::StrCat("/d/r", k, "_", i);
          const std::string data = i % 2 ? P(600 * (i + k), i + k) : "";
          want.File(p, r.Ino(p), data);
        }
      }
    }
    r.Fsync(d, want);
  }
}

// Seed 000 with a log too big for one sector: 150 entries over three
// rounds, each sync written as log trees.
void DirFsyncRoundsLogTrees(Run& r) {
  const uint64_t d = r.Mkdir("/dir");
  r.Commit();
  Ns want;
  want.Dir("/dir", d);
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 50; ++i) {
      const std::string p = absl::StrCat("/dir/a_rather_long_entry_name_", round, "_", i);
      want.File(p, r.Create(p, i % 10 == 0 ? "x" : ""), i % 10 == 0 ? "x" : "");
    }
    r.Fsync(d, want);
  }
}

// Seed 004: after an unrelated fsync put the log in use, renames of inodes
// that were never logged, in directories that were never logged, do not
// touch the log: they are lost (the second fsync of /e/x touches none of
// their directories, so it stays a log sync). With the precise check off
// (btrfs before seed 004), an unknown inode changed in this transaction
// counts as logged: /d's item changed with the first rename, so the second
// one (/d/b -> /d/c) updates the log and survives; the root's item was
// not changed before /q's rename, which is lost in both modes.
void RenamesOfUnloggedInodesImpl(Run& r, bool precise) {
  const uint64_t d = r.Mkdir("/d"), e = r.Mkdir("/e");
  const uint64_t a = r.Create("/d/a", P(100, 25));
  const uint64_t b = r.Create("/d/b", P(200, 26));
  const uint64_t q = r.Create("/q", P(300, 27));
  r.Commit();
  const uint64_t x = r.Create("/e/x", "x");
  Ns before;
  before.Dir("/d", d).Dir("/e", e).File("/e/x", x, "x");
  before.File("/q", q, P(300, 27));
  r.Fsync(x, Ns(before).File("/d/a", a, P(100, 25)).File("/d/b", b, P(200, 26)));
  r.Rename("/d/a", "/d/a2");
  r.Rename("/d/b", "/d/c");
  r.Rename("/q", "/q2");
  // Seeds off, /d counts as logged after the first rename, so the second
  // updates the log: its tombstone for "b" brings the inodes that lost a
  // name in /d along, a at "a2" too (the state after the second rename).
  if (precise) {
    r.Fsync(x, Ns(before).File("/d/a", a, P(100, 25)).File("/d/b", b, P(200, 26)));
  } else {
    r.Fsync(x, Ns(before).File("/d/a2", a, P(100, 25)).File("/d/c", b, P(200, 26)));
  }
}
void RenamesOfUnloggedInodes(Run& r) { RenamesOfUnloggedInodesImpl(r, true); }
void RenamesOfUnloggedInodesImprecise(Run& r) { RenamesOfUnloggedInodesImpl(r, false); }

// Exchange of two committed files, fsync of one: the exchange is durable
// for both (the other inode held the name in the committed tree and is
// logged with it).
void ExchangeRename(Run& r) {
  const uint64_t a = r.Create("/a", P(1111, 28));
  const uint64_t b = r.Create("/b", P(2222, 29));
  r.Commit();
  r.Rename("/a", "/b", kRenameExchange);
  r.Fsync(a, Ns().File("/a", b, P(2222, 29)).File("/b", a, P(1111, 28)));
}

// A new directory logged by its own fsync, removed, the parent fsynced:
// gone (the rmdir updated the log).
void RmdirAfterFsync(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  const uint64_t sub = r.Mkdir("/d/sub");
  r.Fsync(sub, Ns().Dir("/d", d).Dir("/d/sub", sub));
  r.Rmdir("/d/sub");
  r.Fsync(d, Ns().Dir("/d", d));
}

// Overwrite in the middle of a committed file, fdatasync: the new bytes
// (names of an older inode are not logged, and need not be).
void OverwriteMiddleFdatasync(Run& r) {
  const uint64_t f = r.Create("/f", P(300000, 30));
  r.Commit();
  r.Write(f, 100003, P(50000, 31));
  std::string want = P(300000, 30);
  want.replace(100003, 50000, P(50000, 31));
  r.Fsync(f, Ns().File("/f", f, want), /*datasync=*/true);
}

// A file created and fsynced, committed, then written (growing past the
// inline limit) and fsynced in the next transaction.
void WriteAfterCommitOfFsyncedFile(Run& r) {
  const uint64_t f = r.Create("/f", P(2000, 32));
  r.Fsync(f, Ns().File("/f", f, P(2000, 32)));
  r.Commit();
  r.Write(f, 1000, P(3000, 33));
  r.Fsync(f, Ns().File("/f", f, P(2000, 32).substr(0, 1000) + P(3000, 33)));
}

// Nested new directories, fsync of the deepest file: every new ancestor
// comes back; an unsynced sibling in one of them does not.
void NestedNewDirsFsyncDeepest(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/a/b"), c = r.Mkdir("/a/b/c");
  r.Create("/a/b/other", "lost");
  const uint64_t f = r.Create("/a/b/c/f", P(4096, 34));
  r.Fsync(f, Ns().Dir("/a", a).Dir("/a/b", b).Dir("/a/b/c", c).File("/a/b/c/f", f, P(4096, 34)));
}

// A committed sibling unlinked, then another file fsynced: its directory
// lost an entry in this transaction, so the fsync is an engine commit and
// the unlink is durable with it (btrfs logs the parent of an fsynced
// inode whose directory had an unlink; CrashMonkey's btrfs_link_unlink).
void FsyncAfterCommittedSiblingUnlinked(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Create("/d/s", P(500, 35));
  const uint64_t f = r.Create("/d/f", P(600, 36));
  r.Commit();
  r.Unlink("/d/s");
  r.Write(f, 0, "F");
  std::string want = P(600, 36);
  want[0] = 'F';
  r.Fsync(f, Ns().Dir("/d", d).File("/d/f", f, want));
}

// A sibling created and fsynced (so logged), then unlinked (the unlink
// updates the log), then another file fsynced: the sibling stays gone.
void FsyncAfterLoggedSiblingUnlinked(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t f = r.Create("/d/f", P(600, 37));
  r.Commit();
  const uint64_t s = r.Create("/d/s", P(500, 38));
  r.Fsync(s, Ns().Dir("/d", d).File("/d/f", f, P(600, 37)).File("/d/s", s, P(500, 38)));
  r.Unlink("/d/s");
  r.Write(f, 600, "tail");
  r.Fsync(f, Ns().Dir("/d", d).File("/d/f", f, P(600, 37) + "tail"));
}

// A symlink in a committed directory, fsync of the directory.
void SymlinkFsyncParent(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  const uint64_t ln = r.Symlink("/some/where/else", "/d/ln");
  r.Fsync(d, Ns().Dir("/d", d).Symlink("/d/ln", ln, "/some/where/else"));
}

// Xattrs set and removed on a committed file, fsync: exactly the new set.
void XattrFsync(Run& r) {
  const uint64_t f = r.Create("/f", "data");
  r.SetXattr(f, "user.old", "o");
  r.SetXattr(f, "user.keep", "k");
  r.Commit();
  r.SetXattr(f, "user.a", "1");
  r.SetXattr(f, "user.big", P(500, 39));
  r.RemoveXattr(f, "user.old");
  r.Fsync(f, Ns().File("/f", f, "data").Xattr(f, "user.a", "1").Xattr(f, "user.big", P(500, 39))
                 .Xattr(f, "user.keep", "k"));
}

// A file fsynced in one transaction, renamed in the next (its old name
// committed), fsynced again.
void RenameInNextTransaction(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t f = r.Create("/d/f", P(3000, 40));
  r.Fsync(f, Ns().Dir("/d", d).File("/d/f", f, P(3000, 40)));
  r.Commit();
  r.Rename("/d/f", "/d/g");
  r.Fsync(f, Ns().Dir("/d", d).File("/d/g", f, P(3000, 40)));
}

// fdatasync of a file created in this transaction still logs its names
// (and its new parent).
void FdatasyncNewFile(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t f = r.Create("/d/f", P(10000, 41));
  r.Fsync(f, Ns().Dir("/d", d).File("/d/f", f, P(10000, 41)), /*datasync=*/true);
}

// A directory fsync logs its new child; a rename of that child then
// updates the log (seed 004), and an unrelated fsync carries it.
void RenameOfChildLoggedByDirFsync(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  const uint64_t a = r.Create("/d/a", P(900, 42));
  r.Fsync(d, Ns().Dir("/d", d).File("/d/a", a, P(900, 42)));
  r.Rename("/d/a", "/d/b");
  const uint64_t x = r.Create("/x", "x");
  r.Fsync(x, Ns().Dir("/d", d).File("/d/b", a, P(900, 42)).File("/x", x, "x"));
}

// A large committed file overwritten across extents and extended, with a
// fsync after each change.
void BigFileOverwriteAndExtend(Run& r) {
  std::string model = P(600000, 43);
  const uint64_t f = r.Create("/f", model);
  r.Commit();
  r.Write(f, 200000, P(300000, 44));
  model.replace(200000, 300000, P(300000, 44));
  r.Fsync(f, Ns().File("/f", f, model));
  r.Write(f, 590000, P(50000, 45));
  model.resize(590000);
  model += P(50000, 45);
  r.Fsync(f, Ns().File("/f", f, model));
}

// Two files fsynced one after the other; the second fsync must not lose
// the first one's state even though the first file changed since (its
// later, unsynced write is lost).
void TwoFilesSequentialFsyncs(Run& r) {
  const uint64_t a = r.Create("/a", P(3000, 46));
  r.Fsync(a, Ns().File("/a", a, P(3000, 46)));
  r.Write(a, 0, "unsynced");
  const uint64_t b = r.Create("/b", P(4000, 47));
  r.Fsync(b, Ns().File("/a", a, P(3000, 46)).File("/b", b, P(4000, 47)));
}

// A committed file renamed within its directory, fsync of the directory:
// the new entry's child is older than the transaction and is logged with
// its names, so the old name goes.
void RenameWithinDirFsyncDir(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t a = r.Create("/d/a", P(5000, 48));
  r.Commit();
  r.Rename("/d/a", "/d/b");
  r.Fsync(d, Ns().Dir("/d", d).File("/d/b", a, P(5000, 48)));
}

// A committed directory (with a file) moved into another, fsync of the
// new parent: the directory at its new name, its contents with it.
void MoveDirFsyncNewParent(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b"), sub = r.Mkdir("/a/sub");
  const uint64_t x = r.Create("/a/sub/x", P(3000, 49));
  r.Commit();
  r.Rename("/a/sub", "/b/sub");
  r.Fsync(b, Ns().Dir("/a", a).Dir("/b", b).Dir("/b/sub", sub).File("/b/sub/x", x, P(3000, 49)));
}

// One of two committed hard links unlinked, fsync of its directory: the
// inode keeps its other name, nlink 1.
void UnlinkOneLinkFsyncDir(Run& r) {
  const uint64_t d = r.Mkdir("/d"), e = r.Mkdir("/e");
  const uint64_t f = r.Create("/d/a", P(700, 50));
  r.Link("/d/a", "/e/b");
  r.Commit();
  r.Unlink("/d/a");
  r.Fsync(d, Ns().Dir("/d", d).Dir("/e", e).File("/e/b", f, P(700, 50)));
}

// Rename over an existing committed file, fsync of the directory.
void RenameOverExistingFsyncDir(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t a = r.Create("/d/a", P(400, 51));
  r.Create("/d/b", P(500, 52));
  r.Commit();
  r.Rename("/d/a", "/d/b");
  r.Fsync(d, Ns().Dir("/d", d).File("/d/b", a, P(400, 51)));
}

// A file fsynced (logged), another renamed over it: the rename updates
// the log (its target is in it), and an unrelated fsync carries it — with
// the renamed file's data, since it is logged in full as a new inode.
void RenameOverLoggedFile(Run& r) {
  const uint64_t a = r.Create("/a", P(1200, 53));
  const uint64_t b = r.Create("/b", P(1300, 54));
  r.Fsync(b, Ns().File("/b", b, P(1300, 54)));
  r.Rename("/a", "/b");
  const uint64_t x = r.Create("/x", "x");
  r.Fsync(x, Ns().File("/b", a, P(1200, 53)).File("/x", x, "x"));
}

// fsync of a symlink itself, in a new directory.
void FsyncSymlinkItself(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t ln = r.Symlink(std::string(300, 't'), "/d/ln");
  r.Fsync(ln, Ns().Dir("/d", d).Symlink("/d/ln", ln, std::string(300, 't')));
}

// A directory made and removed in one transaction, a file beside it,
// fsync of the parent: the file only.
void MkdirRmdirSameTransaction(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  r.Mkdir("/d/t");
  const uint64_t f = r.Create("/d/f", "f");
  r.Rmdir("/d/t");
  r.Fsync(d, Ns().Dir("/d", d).File("/d/f", f, "f"));
}

// Exchange of a file and a directory in different committed directories,
// fsync of one parent: both sides of the exchange are durable (the moved
// inodes are logged, and each took a name the other lost).
void ExchangeAcrossDirsFsyncDir(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  const uint64_t x = r.Create("/a/x", P(2100, 55));
  const uint64_t y = r.Mkdir("/b/y");
  const uint64_t z = r.Create("/b/y/z", "z");
  r.Commit();
  r.Rename("/a/x", "/b/y", kRenameExchange);
  r.Fsync(a, Ns().Dir("/a", a).Dir("/b", b).Dir("/a/x", y).File("/a/x/z", z, "z")
                 .File("/b/y", x, P(2100, 55)));
}

// An inline file truncated to zero, fsync.
void TruncateInlineToZero(Run& r) {
  const uint64_t f = r.Create("/f", P(1000, 56));
  r.Commit();
  r.Truncate(f, 0);
  r.Fsync(f, Ns().File("/f", f, ""));
}

// A new file logged by its directory's fsync, then moved to another
// committed directory (updating the log), then that directory fsynced.
void RenameLoggedFileFsyncNewParent(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  r.Commit();
  const uint64_t f = r.Create("/a/f", P(2600, 57));
  r.Fsync(a, Ns().Dir("/a", a).Dir("/b", b).File("/a/f", f, P(2600, 57)));
  r.Rename("/a/f", "/b/f");
  r.Fsync(b, Ns().Dir("/a", a).Dir("/b", b).File("/b/f", f, P(2600, 57)));
}

// A committed file moved to another directory and a new file created
// under its old name, fsync of the new file: the moved inode lost the name
// the new one took, so it is logged too, at its new place.
void MoveThenCreateOldNameOtherDir(Run& r) {
  const uint64_t a = r.Mkdir("/a"), b = r.Mkdir("/b");
  const uint64_t f = r.Create("/a/f", P(3500, 58));
  r.Commit();
  r.Rename("/a/f", "/b/f");
  const uint64_t n = r.Create("/a/f", P(50, 59));
  r.Fsync(n, Ns().Dir("/a", a).Dir("/b", b).File("/a/f", n, P(50, 59)).File("/b/f", f, P(3500, 58)));
}

// A committed directory with files renamed over an empty committed one,
// fsync of the renamed directory: it holds the name, with its files; the
// replaced directory is gone.
void RenameDirOverEmptyDir(Run& r) {
  const uint64_t a = r.Mkdir("/a");
  r.Mkdir("/b");
  const uint64_t x = r.Create("/a/x", "x");
  r.Commit();
  r.Rename("/a", "/b");
  r.Fsync(a, Ns().Dir("/b", a).File("/b/x", x, "x"));
}

// A hard link in the same committed directory, fsync of the directory:
// both names, nlink 2.
void LinkSameDirFsyncDir(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  const uint64_t f = r.Create("/d/f", P(1800, 60));
  r.Commit();
  r.Link("/d/f", "/d/g");
  r.Fsync(d, Ns().Dir("/d", d).File("/d/f", f, P(1800, 60)).File("/d/g", f, P(1800, 60)));
}

// ---- fallocate (issue 17) ------------------------------------------------------------

// btrfs/261-like: preallocated extents past EOF (KEEP_SIZE), a write into
// them that grows the file, fsync: the data and size come back, and the
// extents left past EOF too (`check`: nbytes adds up).
void FallocKeepSizeWriteFsync(Run& r) {
  const uint64_t f = r.Create("/f", P(5000, 61));
  r.Commit();
  r.Fallocate(f, kFallocKeepSize, 5000, 60536);
  r.Write(f, 20000, P(100, 62));
  r.Fsync(f, Ns().File("/f", f, P(5000, 61) + Zeros(15000) + P(100, 62)));
}

// Punch hole and zero range over committed data (zero range growing the
// file), fsync: the ranges read as zeros after replay.
void FallocPunchAndZeroRangeFsync(Run& r) {
  const std::string data = P(100000, 63);
  const uint64_t f = r.Create("/f", data);
  r.Commit();
  r.Fallocate(f, kFallocPunchHole | kFallocKeepSize, 4096, 16000);
  r.Fallocate(f, kFallocZeroRange, 50000, 60000);
  std::string want = data.substr(0, 50000) + Zeros(60000);
  want.replace(4096, 16000, Zeros(16000));
  r.Fsync(f, Ns().File("/f", f, want));
}

// A committed preallocated file, written into in two places (each write
// splits a prealloc extent), fdatasync.
void FallocCommittedWriteIntoFdatasync(Run& r) {
  const uint64_t f = r.Create("/f");
  r.Fallocate(f, 0, 0, 200000);
  r.Commit();
  r.Write(f, 1000, P(5000, 64));
  r.Write(f, 150000, P(100, 65));
  std::string want = Zeros(200000);
  want.replace(1000, 5000, P(5000, 64));
  want.replace(150000, 100, P(100, 65));
  r.Fsync(f, Ns().File("/f", f, want), /*datasync=*/true);
}

// Open files and orphans (fs_open.cc). A committed file unlinked while
// open, then written and fsynced by inode: the fsync depends on the name
// it lost (a full commit), and after the crash the file is not back and
// its inode is gone (VerifyNamespace: no orphan item left by the mount).
void OrphanFsync(Run& r) {
  const uint64_t f = r.Create("/f", P(9000, 61));
  const uint64_t g = r.Create("/g", P(100, 62));
  r.Commit();
  const uint64_t h = r.Open(f);
  r.Unlink("/f");
  r.Write(f, 0, P(5000, 63));
  r.Fsync(f, Ns().File("/g", g, P(100, 62)));
  r.Close(h);
  r.Fsync(g, Ns().File("/g", g, P(100, 62)));
}

// An orphan committed (its last name went while open, then a commit): the
// image holds the inode with nlink 0 and its ORPHAN_ITEM; whichever state
// survives, the mount deletes the inode.
void CommittedOrphan(Run& r) {
  const uint64_t f = r.Create("/f", P(20000, 64));
  r.Commit();
  const uint64_t h = r.Open(f);
  r.Unlink("/f");
  r.Commit();
  const uint64_t g = r.Create("/g", P(300, 65));
  r.Fsync(g, Ns().File("/g", g, P(300, 65)));
  r.Close(h);
}

// O_TMPFILE: fsynced without a name (replay deletes it), then linked
// (linkat) and fsynced: it is at its name with its data.
void TmpfileFsyncLinkFsync(Run& r) {
  const uint64_t d = r.Mkdir("/d");
  r.Commit();
  uint64_t t = 0;
  const uint64_t h = r.Tmpfile(d, &t);
  r.Write(t, 0, P(7000, 66));
  r.Fsync(t, Ns().Dir("/d", d));
  r.LinkAt(t, d, "t");
  r.Fsync(t, Ns().Dir("/d", d).File("/d/t", t, P(7000, 66)));
  r.Close(h);
}

// ---- The sweep --------------------------------------------------------------------

struct Scenario {
  const char* name;
  void (*fn)(Run&);
  std::function<void(Options*)> tweak = nullptr;  // store options for the scenario's runs
  // An fsync of the scenario depends on a name removed or moved in its
  // transaction: the log cannot carry it and it falls back to an engine
  // commit (docs/design.md, "What fsync promises"). Every other fsync is
  // at most one log sync.
  bool full_commit = false;
};

void SeedsOff(Options* o) {
  o->fs_dir_index_offset = false;
  o->fs_precise_logged_check = false;
}
void TinyInodeCache(Options* o) { o->inode_cache_entries = 2; }

const std::vector<Scenario>& Scenarios() {
  static const auto* all = new std::vector<Scenario>{
      {"CreateWriteFsync", CreateWriteFsync},
      {"EmptyFileInNewDir", EmptyFileInNewDir},
      {"DirFsyncNewEntries", DirFsyncNewEntries},
      {"RenameFsyncNewParent", RenameFsyncNewParent, nullptr, true},
      {"RenameFsyncOldParent", RenameFsyncOldParent, nullptr, true},
      {"RenameFsyncFile", RenameFsyncFile, nullptr, true},
      {"RenameOverExisting", RenameOverExisting, nullptr, true},
      {"RenameThenCreateOldName", RenameThenCreateOldName, nullptr, true},
      {"LinkFsyncOneName", LinkFsyncOneName},
      {"LinkIntoNewDir", LinkIntoNewDir},
      {"LinkAcrossDirsUnlinkOriginal", LinkAcrossDirsUnlinkOriginal, nullptr, true},
      {"RenameThenLink", RenameThenLink, nullptr, true},
      {"UnlinkOneOfTwoLinks", UnlinkOneOfTwoLinks, nullptr, true},
      {"UnlinkAfterFsyncThenFsyncParent", UnlinkAfterFsyncThenFsyncParent, nullptr, true},
      {"UnlinkCommittedFsyncParent", UnlinkCommittedFsyncParent, nullptr, true},
      {"TruncateDown", TruncateDown},
      {"TruncateUp", TruncateUp},
      {"TruncateDownThenUp", TruncateDownThenUp},
      {"CloneIntoNewFile", CloneIntoNewFile},
      {"CloneOverCommittedRange", CloneOverCommittedRange},
      {"RenameDirFsyncFileInside", RenameDirFsyncFileInside, nullptr, true},
      {"FsyncFileParentRenamedAfterLogged", FsyncFileParentRenamedAfterLogged, nullptr, true},
      {"DirFsyncRounds", DirFsyncRounds, nullptr, true},
      {"DirFsyncRoundsSeedsOff", DirFsyncRounds, SeedsOff, true},
      {"DirFsyncRoundsLogTrees", DirFsyncRoundsLogTrees},
      {"RenamesOfUnloggedInodes", RenamesOfUnloggedInodes},
      {"RenamesOfUnloggedInodesTinyCache", RenamesOfUnloggedInodes, TinyInodeCache},
      {"RenamesOfUnloggedInodesSeedsOff", RenamesOfUnloggedInodesImprecise, SeedsOff},
      {"ExchangeRename", ExchangeRename, nullptr, true},
      {"RmdirAfterFsync", RmdirAfterFsync, nullptr, true},
      {"OverwriteMiddleFdatasync", OverwriteMiddleFdatasync},
      {"WriteAfterCommitOfFsyncedFile", WriteAfterCommitOfFsyncedFile},
      {"NestedNewDirsFsyncDeepest", NestedNewDirsFsyncDeepest},
      {"FsyncAfterCommittedSiblingUnlinked", FsyncAfterCommittedSiblingUnlinked, nullptr, true},
      {"FsyncAfterLoggedSiblingUnlinked", FsyncAfterLoggedSiblingUnlinked, nullptr, true},
      {"SymlinkFsyncParent", SymlinkFsyncParent},
      {"XattrFsync", XattrFsync},
      {"RenameInNextTransaction", RenameInNextTransaction, nullptr, true},
      {"FdatasyncNewFile", FdatasyncNewFile},
      {"RenameOfChildLoggedByDirFsync", RenameOfChildLoggedByDirFsync},
      {"BigFileOverwriteAndExtend", BigFileOverwriteAndExtend},
      {"TwoFilesSequentialFsyncs", TwoFilesSequentialFsyncs},
      {"RenameWithinDirFsyncDir", RenameWithinDirFsyncDir, nullptr, true},
      {"MoveDirFsyncNewParent", MoveDirFsyncNewParent, nullptr, true},
      {"UnlinkOneLinkFsyncDir", UnlinkOneLinkFsyncDir, nullptr, true},
      {"RenameOverExistingFsyncDir", RenameOverExistingFsyncDir, nullptr, true},
      {"RenameOverLoggedFile", RenameOverLoggedFile, nullptr, true},
      {"FsyncSymlinkItself", FsyncSymlinkItself},
      {"MkdirRmdirSameTransaction", MkdirRmdirSameTransaction, nullptr, true},
      {"ExchangeAcrossDirsFsyncDir", ExchangeAcrossDirsFsyncDir, nullptr, true},
      {"TruncateInlineToZero", TruncateInlineToZero},
      {"RenameLoggedFileFsyncNewParent", RenameLoggedFileFsyncNewParent, nullptr, true},
      {"MoveThenCreateOldNameOtherDir", MoveThenCreateOldNameOtherDir, nullptr, true},
      {"RenameDirOverEmptyDir", RenameDirOverEmptyDir, nullptr, true},
      {"LinkSameDirFsyncDir", LinkSameDirFsyncDir},
      {"FallocKeepSizeWriteFsync", FallocKeepSizeWriteFsync},
      {"FallocPunchAndZeroRangeFsync", FallocPunchAndZeroRangeFsync},
      {"FallocCommittedWriteIntoFdatasync", FallocCommittedWriteIntoFdatasync},
      {"OrphanFsync", OrphanFsync, nullptr, true},
      {"CommittedOrphan", CommittedOrphan},
      {"TmpfileFsyncLinkFsync", TmpfileFsyncLinkFsync},
  };
  return *all;
}

// Mkfs, then a mount that creates the root directory's item and a close
// whose commit starts a log chain: every run's first fsync is a log sync.
const std::string& BaseImage() {
  static const std::string* image = [] {
    MemDevice mem(kDeviceBytes);
    absl::Status s = Store::Mkfs(&mem, testing::TestMkfs(4096));
    auto store = Store::Open(&mem, testing::TestOptions());
    if (!s.ok() || !store.ok()) std::abort();
    Files f = (*store)->DefaultSubvolume().value()->files();
    if (!f.Create("/warm").ok() || !f.Unlink("/warm").ok() || !(*store)->Close().ok()) std::abort();
    return new std::string(mem.Snapshot());
  }();
  return *image;
}

// One run of the scenario from the base image on `fd`, which dies at its
// cut.at-th flush (0: power fails after the last fsync returned, before the
// store's closing commit). Returns the namespaces a remount may show.
std::vector<std::string> RunScenario(const Scenario& sc, FaultDevice* fd, const testing::Cut& c) {
  Options o = testing::TestOptions();
  if (sc.tweak) sc.tweak(&o);
  auto store = Store::Open(fd, o);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return {};
  auto sv = (*store)->DefaultSubvolume();
  EXPECT_TRUE(sv.ok()) << sv.status();
  if (!sv.ok()) return {};
  static auto* fallbacks = new std::map<std::string, std::vector<bool>>;
  Run r(fd, store->get(), (*sv)->files(), &(*fallbacks)[sc.name]);
  sc.fn(r);
  if (c.at == 0) {
    EXPECT_EQ(r.fell_back(), sc.full_commit)
        << (sc.full_commit ? "no fsync fell back to an engine commit"
                           : "an fsync fell back to an engine commit");
  }
  EXPECT_EQ(r.crashed(), c.at > 0) << "the scenario reached " << fd->flushes() << " flushes";
  // Power fails before the close's commit can write a superblock.
  if (!fd->dead()) fd->CrashAtFlush(1);
  (void)(*store)->Close();
  return r.Allowed();
}

// The remounted namespace must be one of the allowed states.
void VerifyNamespace(Store* store, const std::vector<std::string>& allowed,
                     const std::vector<std::string>&, std::vector<std::string>* problems) {
  absl::StatusOr<std::unique_ptr<Subvolume>> sv = store->DefaultSubvolume();
  if (!sv.ok()) {
    problems->push_back(absl::StrCat("default subvolume: ", sv.status().ToString()));
    return;
  }
  absl::StatusOr<Ns> got = Capturer((*sv)->files()).Capture();
  if (!got.ok()) {
    problems->push_back(absl::StrCat("capture: ", got.status().ToString()));
    return;
  }
  // The mount deleted every orphan (files open when power failed).
  absl::StatusOr<std::vector<uint64_t>> orphans = (*sv)->files().Orphans();
  if (!orphans.ok() || !orphans->empty()) {
    problems->push_back(
        absl::StrCat("orphan items after the mount: ",
                     orphans.ok() ? absl::StrJoin(*orphans, ", ") : orphans.status().ToString()));
  }
  const std::string g = got->Render();
  if (std::find(allowed.begin(), allowed.end(), g) == allowed.end()) {
    problems->push_back(absl::StrCat("remounted namespace:\n", g, "allowed:\n",
                                     absl::StrJoin(allowed, "-- or --\n")));
  }
}

// (loss mode, scenario): mode first, so that shards get every mode.
class FsCrash : public ::testing::TestWithParam<std::tuple<Mode, size_t>> {};

TEST_P(FsCrash, EveryFlushPoint) {
  const Scenario& sc = Scenarios()[std::get<1>(GetParam())];
  const Mode mode = std::get<0>(GetParam());
  const bool random = mode == Mode::kRandomSubset || mode == Mode::kTorn;
  // The random modes run kDefaultSeeds seeds (--seeds=K: K), and every
  // other cut also cuts the remount's replay commit (with --seeds: every
  // cut), as does a second run without a cut.
  const bool many = testing::Flags().seeds != 0;
  testing::CrashPlan plan;
  plan.image = &BaseImage();
  plan.modes = {mode};
  plan.seed = testing::Flags().seed ? testing::Flags().seed : 1;
  plan.seeds = !random ? 1 : many ? testing::Flags().seeds : kDefaultSeeds;
  plan.judge_uncut = true;
  plan.replay_cut = [many](uint64_t s, uint64_t k, size_t) -> uint64_t {
    if (k == 0) return 1 + s % 2;
    return many || k % 2 == 0 ? 1 + (k + s) / 2 % 2 : 0;
  };
  testing::CrashHarness<std::vector<std::string>> harness(
      std::move(plan),
      [&sc](FaultDevice* fd, const testing::Cut& c, std::vector<std::string>*) {
        return RunScenario(sc, fd, c);
      },
      VerifyNamespace);
  const testing::CrashReport report = harness.Sweep();
  EXPECT_GT(report.flush_points, 0u);
  EXPECT_TRUE(report.ok()) << report.Failures();
  total_cuts += report.cuts;
  std::printf("%s: %llu flush points, %llu cuts\n", sc.name,
              static_cast<unsigned long long>(report.flush_points),
              static_cast<unsigned long long>(report.cuts));
  RecordProperty("cuts", static_cast<int>(report.cuts));
}

std::string Name(const ::testing::TestParamInfo<std::tuple<Mode, size_t>>& info) {
  return absl::StrCat(
      Scenarios()[std::get<1>(info.param)].name, "_",
      testing::LossModeName(::testing::TestParamInfo<Mode>(std::get<0>(info.param), 0)));
}

class CutCounter : public ::testing::EmptyTestEventListener {
  void OnTestProgramEnd(const ::testing::UnitTest&) override {
    std::printf("fs_crash_test: %llu power cuts (flush points x loss modes x seeds)\n",
                static_cast<unsigned long long>(total_cuts));
  }
};
const bool kCounterInstalled = [] {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CutCounter);
  return true;
}();

INSTANTIATE_TEST_SUITE_P(All, FsCrash,
                         ::testing::Combine(testing::AllLossModes(),
                                            ::testing::Range<size_t>(0, Scenarios().size())),
                         Name);

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
