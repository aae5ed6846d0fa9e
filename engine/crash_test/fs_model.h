// The crash generator's model of the file namespace, its workloads and the
// fsync contract's oracle (docs/design.md, "What fsync promises").
//
// The model is a map of full paths to model inodes; every operation either
// applies (it would succeed on a real filesystem) or is refused, so the
// generator enumerates only valid workloads. A workload is a setup (made
// durable by an engine commit) and then operations with persistence points
// (fsync, fdatasync). The oracle judges a recovered namespace against the
// history of model states the workload went through and the persistence
// points that completed before the power cut.
#ifndef COWKV_ENGINE_CRASH_TEST_FS_MODEL_H_
#define COWKV_ENGINE_CRASH_TEST_FS_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cowkv/store.h"

namespace cowkv {
namespace crashgen {

enum class OpKind {
  kCreate,
  kMkdir,
  kSymlink,  // a = target, b = path
  kLink,     // a -> b
  kUnlink,
  kRmdir,
  kRename,    // a -> b; flags
  kWrite,     // a, x = offset, y = length
  kTruncate,  // a, x = size
  kClone,     // a x -> b y, len
  kSetXattr,  // a, s1 = name, s2 = value; flags = kXattrCreate / kXattrReplace
  kRemoveXattr,
  kSetAttr,  // a; flags = which of x = mode, y = uid, len = gid, t = mtime (kAttr*)
  kFsync,
  kFdatasync,
  kCommit,
  // a, x = offset, y = length, flags = mode (kFalloc*)
  kFallocate,
  // Open handles (numbered from 0 in the order a workload opens them; a
  // handle is named "%N" where an op takes a path: write, truncate,
  // setxattr, removexattr, fsync, fdatasync, and link's source).
  kOpen,     // a = path of a regular file
  kClose,    // x = handle number
  kTmpfile,  // a = directory: a new unnamed file, opened (O_TMPFILE)
};

// kSetAttr's fields (Op::flags).
inline constexpr uint32_t kAttrMode = 1, kAttrUid = 2, kAttrGid = 4, kAttrMtime = 8;

struct Op {
  OpKind kind = OpKind::kCreate;
  std::string a, b;
  uint64_t x = 0, y = 0, len = 0;
  int64_t t = 0;
  uint32_t flags = 0;  // rename flags; fallocate mode; kSetAttr's fields; kSetXattr's flags
  std::string s1, s2;
  bool persistence() const { return kind == OpKind::kFsync || kind == OpKind::kFdatasync; }
  std::string Describe() const;
};

// A workload: `setup` is committed (and closed) before the power-cut runs;
// `ops` follow it. The bytes written by the i-th op of either list are a
// pattern keyed by its position (WriteBytes).
struct Workload {
  std::string name;
  std::vector<Op> setup;
  std::vector<Op> ops;
  std::string Describe() const;
};
std::string WriteBytes(const Op& op, size_t position);

struct MInode {
  FileKind kind = FileKind::kRegular;
  std::string data;  // file bytes or symlink target
  std::map<std::string, std::string> xattrs;
  uint64_t eng = 0;  // the engine's inode number (set by the runner)
  // Attributes (setattr). mtime only as last set explicitly on a file or
  // symlink; nullopt when unknown (created, or its data changed since).
  uint32_t mode = 0644;
  uint32_t uid = 0, gid = 0;
  std::optional<int64_t> mtime;
};

// "%N": handle N.
std::string HandleName(size_t n);

class MState {
 public:
  MState();
  // Applies `op` if it is valid here; false (state unchanged) otherwise.
  // `position` keys the bytes of a write; a created inode's id is returned
  // in *made (0 otherwise).
  bool Apply(const Op& op, size_t position, int* made = nullptr);

  // Lookups.
  std::optional<int> At(const std::string& path) const;
  bool IsDir(const std::string& path) const;
  bool Exists(int id) const { return inodes_.count(id) > 0; }
  const MInode& Inode(int id) const { return inodes_.count(id) ? inodes_.at(id) : orphans_.at(id); }
  MInode& MutableInode(int id) { return inodes_.count(id) ? inodes_.at(id) : orphans_.at(id); }
  // The inode a path or an open handle ("%N") names.
  std::optional<int> Target(const std::string& path_or_handle) const;
  // Files whose last name went while a handle was open on them (or
  // O_TMPFILEs not linked yet): alive, but reached only by handle; on a
  // real filesystem they vanish at the last close or at the next mount.
  bool IsOrphan(int id) const { return orphans_.count(id) > 0; }
  const std::map<int, MInode>& orphans() const { return orphans_; }
  // handles()[n]: the inode handle n is open on, or -1 once closed.
  const std::vector<int>& handles() const { return handles_; }
  int OpenCount(int id) const;
  const std::map<std::string, int>& paths() const { return paths_; }
  const std::map<int, MInode>& inodes() const { return inodes_; }
  std::vector<std::string> PathsOf(int id) const;
  // A directory's entries: name -> inode.
  std::map<std::string, int> Entries(const std::string& dir) const;
  std::map<std::string, int> EntriesOf(int dir_id) const;
  int next_id() const { return next_id_; }

 private:
  bool Create(const std::string& path, FileKind kind, std::string data, int* made);
  bool ParentIsDir(const std::string& path) const;
  bool Rename(const Op& op);
  bool ApplyData(const Op& op, size_t position);
  bool ApplyFallocate(const Op& op);
  bool ApplySetAttr(const Op& op);
  bool ApplyHandle(const Op& op, int* made);  // open, close, O_TMPFILE
  void MoveSubtree(const std::string& from, const std::string& to);
  void DropSubtreePaths(const std::string& from);
  // After `id` lost a name: gone if it has none left (an orphan if open).
  void GoneIfUnnamed(int id);
  MInode* File(const std::string& path_or_handle);

  std::map<std::string, int> paths_;  // "/" is inode 0
  std::map<int, MInode> inodes_;
  std::map<int, MInode> orphans_;
  std::set<int> linkable_;  // O_TMPFILE orphans never linked
  std::vector<int> handles_;
  int next_id_ = 1;
};

std::string ParentOf(const std::string& path);
std::string BaseOf(const std::string& path);

// What a remount showed: every path reached from the root through
// DIR_INDEX, with each entry's inode stat'ed, looked up by name and read.
struct RNode {
  FileKind kind = FileKind::kRegular;
  uint64_t ino = 0;
  std::string data;
  uint64_t size = 0;
  uint32_t nlink = 0;
  std::map<std::string, std::string> xattrs;
  uint32_t mode = 0;
  uint32_t uid = 0, gid = 0;
  int64_t mtime = 0;
};
struct Recovered {
  std::map<std::string, RNode> paths;  // without "/"
  uint64_t root_size = 0;
  RNode root;                         // the root directory's attributes
  std::vector<std::string> problems;  // lookups or kinds that disagree
};
absl::StatusOr<Recovered> CaptureNamespace(Files f);

// A persistence point of a run: the op index after which it ran (the model
// state it saw is history[state]), what it persisted, whether it returned.
struct Point {
  size_t state = 0;  // index into the history: 0 = the committed setup
  int inode = 0;     // model inode
  bool datasync = false;
  // It committed the engine transaction (a commit, or an fsync the log
  // could not carry): the states after it start a new transaction.
  bool commit = false;
};

// The oracle. `history[0]` is the committed state, `history[j]` the state
// after the j-th workload op. `completed` persistence points returned
// before the cut; `in_flight` (if any) was running when power failed.
// Returns every violation of the contract (empty: the image is allowed).
std::vector<std::string> Judge(const std::vector<MState>& history,
                               const std::vector<Point>& completed,
                               const std::optional<Point>& in_flight, const Recovered& r);

// The generator's namespace and core operations (engine/crash_test/
// fs_gen_test.cc): the committed setup, and every valid core op in a state.
// An op of kind `k` on paths `a`, `b` with numbers `x`, `y` (Op's fields).
Op MakeOp(OpKind k, std::string a, std::string b = "", uint64_t x = 0, uint64_t y = 0);

std::vector<Op> GeneratorSetup();
// `metadata_only`: namespace operations only (the third op of a workload).
std::vector<Op> CoreOps(const MState& s, bool metadata_only);
// Objects (paths) an op involves, for its persistence point: its paths as
// they are after the op, their parents, and the root.
std::vector<std::string> InvolvedPaths(const MState& after, const Op& op);

// Text workloads (ported_workloads.txt): "workload NAME" / op lines / "end".
absl::StatusOr<std::vector<Workload>> ParseWorkloads(const std::string& text);

}  // namespace crashgen
}  // namespace cowkv

#endif  // COWKV_ENGINE_CRASH_TEST_FS_MODEL_H_
