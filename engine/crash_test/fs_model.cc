#include "engine/crash_test/fs_model.h"

#include <algorithm>
#include <functional>
#include <sstream>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace cowkv {
namespace crashgen {

namespace {
// A model inode of `kind` with its other attributes at their defaults.
MInode NewInode(FileKind kind, std::string data, uint64_t eng) {
  MInode m;
  m.kind = kind;
  m.data = std::move(data);
  m.eng = eng;
  return m;
}
}  // namespace

namespace {
constexpr uint64_t kMaxModelFile = 1 << 20;

bool Under(const std::string& path, const std::string& dir) {
  if (dir == "/") return path != "/";
  return path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 && path[dir.size()] == '/';
}

std::string KindName(FileKind k) {
  return k == FileKind::kDirectory ? "dir" : k == FileKind::kSymlink ? "symlink" : "file";
}
}  // namespace

std::string ParentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}
std::string BaseOf(const std::string& path) { return path.substr(path.rfind('/') + 1); }

std::string WriteBytes(const Op& op, size_t position) {
  std::string s(op.y, '\0');
  for (size_t i = 0; i < op.y; ++i) {
    s[i] = static_cast<char>('a' + (i * 7 + position * 13 + (op.x + i) / 509) % 26);
  }
  return s;
}

namespace {
// fallocate modes in workload text.
const std::vector<std::pair<std::string, uint32_t>>& FallocModes() {
  static const auto* v = new std::vector<std::pair<std::string, uint32_t>>{
      {"alloc", 0},
      {"keep-size", kFallocKeepSize},
      {"punch-hole", kFallocPunchHole | kFallocKeepSize},
      {"zero-range", kFallocZeroRange},
      {"zero-range-keep-size", kFallocZeroRange | kFallocKeepSize},
  };
  return *v;
}
std::string FallocModeName(uint32_t mode) {
  for (const auto& [name, m] : FallocModes()) {
    if (m == mode) return name;
  }
  return absl::StrCat("0x", absl::Hex(mode));
}
}  // namespace

std::string Op::Describe() const {
  switch (kind) {
    case OpKind::kCreate: return "create " + a;
    case OpKind::kMkdir: return "mkdir " + a;
    case OpKind::kSymlink: return "symlink " + a + " " + b;
    case OpKind::kLink: return "link " + a + " " + b;
    case OpKind::kUnlink: return "unlink " + a;
    case OpKind::kRmdir: return "rmdir " + a;
    case OpKind::kRename:
      return std::string(flags == kRenameExchange    ? "rename-exchange "
                         : flags == kRenameNoReplace ? "rename-noreplace "
                                                     : "rename ") +
             a + " " + b;
    case OpKind::kWrite: return absl::StrCat("write ", a, " ", x, " ", y);
    case OpKind::kTruncate: return absl::StrCat("truncate ", a, " ", x);
    case OpKind::kClone: return absl::StrCat("clone ", a, " ", x, " ", b, " ", y, " ", len);
    case OpKind::kSetXattr:
      return absl::StrCat(flags == kXattrCreate    ? "setxattr-create "
                          : flags == kXattrReplace ? "setxattr-replace "
                                                   : "setxattr ",
                          a, " ", s1, " ", s2);
    case OpKind::kRemoveXattr: return absl::StrCat("removexattr ", a, " ", s1);
    case OpKind::kSetAttr: {
      std::string out = "setattr " + a;
      if (flags & kAttrMode) absl::StrAppend(&out, " mode=", absl::StrFormat("0%o", x));
      if (flags & kAttrUid) absl::StrAppend(&out, " uid=", y);
      if (flags & kAttrGid) absl::StrAppend(&out, " gid=", len);
      if (flags & kAttrMtime) absl::StrAppend(&out, " mtime=", t);
      return out;
    }
    case OpKind::kFsync: return "fsync " + a;
    case OpKind::kFdatasync: return "fdatasync " + a;
    case OpKind::kCommit: return "commit";
    case OpKind::kFallocate:
      return absl::StrCat("fallocate ", a, " ", FallocModeName(flags), " ", x, " ", y);
    case OpKind::kOpen:
      return "open " + a;
    case OpKind::kClose:
      return absl::StrCat("close ", HandleName(x));
    case OpKind::kTmpfile:
      return "tmpfile " + a;
  }
  return "?";
}

std::string Workload::Describe() const {
  std::string s = name.empty() ? "" : name + ": ";
  std::vector<std::string> parts;
  for (const Op& o : ops) parts.push_back(o.Describe());
  return s + absl::StrJoin(parts, "; ");
}

// ---- The model -------------------------------------------------------------------

std::string HandleName(size_t n) { return absl::StrCat("%", n); }

std::optional<int> MState::Target(const std::string& p) const {
  if (p.empty() || p[0] != '%') return At(p);
  size_t n = 0;
  if (!absl::SimpleAtoi(p.substr(1), &n) || n >= handles_.size() || handles_[n] < 0) {
    return std::nullopt;
  }
  return handles_[n];
}

int MState::OpenCount(int id) const {
  return static_cast<int>(std::count(handles_.begin(), handles_.end(), id));
}

void MState::GoneIfUnnamed(int id) {
  if (!PathsOf(id).empty()) return;
  auto it = inodes_.find(id);
  if (it == inodes_.end()) return;
  if (it->second.kind != FileKind::kDirectory && OpenCount(id) > 0) orphans_[id] = it->second;
  inodes_.erase(it);
}

MInode* MState::File(const std::string& p) {
  std::optional<int> id = Target(p);
  if (!id) return nullptr;
  MInode* m = &MutableInode(*id);
  return m->kind == FileKind::kRegular ? m : nullptr;
}

MState::MState() {
  paths_["/"] = 0;
  inodes_[0] = NewInode(FileKind::kDirectory, "", kRootInode);
  inodes_[0].mode = 0755;
}

std::optional<int> MState::At(const std::string& path) const {
  auto it = paths_.find(path);
  if (it == paths_.end()) return std::nullopt;
  return it->second;
}

bool MState::IsDir(const std::string& path) const {
  std::optional<int> id = At(path);
  return id.has_value() && inodes_.at(*id).kind == FileKind::kDirectory;
}

bool MState::ParentIsDir(const std::string& path) const { return path != "/" && IsDir(ParentOf(path)); }

std::vector<std::string> MState::PathsOf(int id) const {
  std::vector<std::string> out;
  for (const auto& [p, i] : paths_) {
    if (i == id && p != "/") out.push_back(p);
  }
  return out;
}

std::map<std::string, int> MState::Entries(const std::string& dir) const {
  std::map<std::string, int> out;
  for (auto it = paths_.upper_bound(dir); it != paths_.end(); ++it) {
    if (!Under(it->first, dir)) {
      if (dir != "/") break;
      continue;
    }
    if (ParentOf(it->first) == dir) out[BaseOf(it->first)] = it->second;
  }
  return out;
}

std::map<std::string, int> MState::EntriesOf(int dir_id) const {
  std::vector<std::string> ps = dir_id == 0 ? std::vector<std::string>{"/"} : PathsOf(dir_id);
  if (ps.empty()) return {};
  return Entries(ps.front());
}

bool MState::Create(const std::string& path, FileKind kind, std::string data, int* made) {
  if (!ParentIsDir(path) || paths_.count(path)) return false;
  const int id = next_id_++;
  inodes_[id] = NewInode(kind, std::move(data), 0);
  inodes_[id].mode = kind == FileKind::kDirectory ? 0755 : kind == FileKind::kSymlink ? 0777 : 0644;
  paths_[path] = id;
  if (made) *made = id;
  return true;
}

void MState::MoveSubtree(const std::string& from, const std::string& to) {
  std::vector<std::pair<std::string, int>> moved;
  for (auto it = paths_.begin(); it != paths_.end();) {
    if (it->first == from || Under(it->first, from)) {
      moved.push_back({to + it->first.substr(from.size()), it->second});
      it = paths_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto& [p, id] : moved) paths_[p] = id;
}

void MState::DropSubtreePaths(const std::string& from) {
  for (auto it = paths_.begin(); it != paths_.end();) {
    it = (it->first == from || Under(it->first, from)) ? paths_.erase(it) : std::next(it);
  }
}

bool MState::Rename(const Op& op) {
  std::optional<int> f = At(op.a);
  if (!f || op.a == "/" || op.b == "/" || !ParentIsDir(op.b)) return false;
  std::optional<int> t = At(op.b);
  const bool fdir = inodes_[*f].kind == FileKind::kDirectory;
  if (fdir && (op.b == op.a || Under(op.b, op.a))) return false;  // into itself
  if ((op.flags & kRenameNoReplace) && t) return false;
  if (op.flags & kRenameExchange) {
    if (!t) return false;
    const bool tdir = inodes_[*t].kind == FileKind::kDirectory;
    if (tdir && Under(op.a, op.b)) return false;
    if (*f == *t) return true;
    // Swap the two subtrees through a temporary prefix.
    const std::string tmp = "/\x01swap";
    MoveSubtree(op.a, tmp);
    MoveSubtree(op.b, op.a);
    MoveSubtree(tmp, op.b);
    return true;
  }
  if (t && *t == *f) return true;  // two names of one inode: nothing happens
  if (t) {
    const bool tdir = inodes_[*t].kind == FileKind::kDirectory;
    if (fdir != tdir) return false;
    if (tdir && !Entries(op.b).empty()) return false;
    paths_.erase(op.b);
    GoneIfUnnamed(*t);
  }
  MoveSubtree(op.a, op.b);
  return true;
}

// Writes, truncates, clones and xattrs.
bool MState::ApplyFallocate(const Op& op) {
  // The five supported modes; the bytes inside the size read as zeros
  // after punch and zero range; without KEEP_SIZE the file grows.
  MInode* m = File(op.a);
  bool known = false;
  for (const auto& [name, mode] : FallocModes()) known = known || mode == op.flags;
  if (!m || !known || op.y == 0 || op.x + op.y > kMaxModelFile) return false;
  const uint64_t end = op.x + op.y;
  if ((op.flags & (kFallocPunchHole | kFallocZeroRange)) && op.x < m->data.size()) {
    const uint64_t hi = std::min<uint64_t>(end, m->data.size());
    m->data.replace(op.x, hi - op.x, hi - op.x, '\0');
  }
  if (!(op.flags & kFallocKeepSize) && m->data.size() < end) m->data.resize(end, '\0');
  // Punch and zero range change the contents: mtime is now (as Linux's
  // file_modified in fallocate; FsOps::Fallocate), so no longer known.
  if (op.flags & (kFallocPunchHole | kFallocZeroRange)) m->mtime.reset();
  return true;
}

bool MState::ApplySetAttr(const Op& op) {
  std::optional<int> id = At(op.a);
  if (!id || op.flags == 0 || (op.flags & ~(kAttrMode | kAttrUid | kAttrGid | kAttrMtime)) ||
      op.x > 07777) {
    return false;
  }
  MInode& m = inodes_[*id];
  if (op.flags & kAttrMode) m.mode = static_cast<uint32_t>(op.x);
  if (op.flags & kAttrUid) m.uid = static_cast<uint32_t>(op.y);
  if (op.flags & kAttrGid) m.gid = static_cast<uint32_t>(op.len);
  // chown of a non-directory clears the set-ID bits (FsOps::SetAttr).
  if ((op.flags & (kAttrUid | kAttrGid)) && !(op.flags & kAttrMode) &&
      m.kind != FileKind::kDirectory) {
    m.mode &= ~(04000u | ((m.mode & 010) ? 02000u : 0u));
  }
  // A directory's mtime moves with its entries: the model keeps none.
  if ((op.flags & kAttrMtime) && m.kind != FileKind::kDirectory) m.mtime = op.t;
  return true;
}

bool MState::ApplyData(const Op& op, size_t position) {
  auto file = [&](const std::string& p) { return File(p); };
  switch (op.kind) {
    case OpKind::kWrite: {
      MInode* m = file(op.a);
      if (!m || op.y == 0 || op.x + op.y > kMaxModelFile) return false;
      if (m->data.size() < op.x + op.y) m->data.resize(op.x + op.y, '\0');
      m->data.replace(op.x, op.y, WriteBytes(op, position));
      m->mtime.reset();
      return true;
    }
    case OpKind::kTruncate: {
      MInode* m = file(op.a);
      if (!m || op.x > kMaxModelFile) return false;
      m->data.resize(op.x, '\0');
      m->mtime.reset();
      return true;
    }
    case OpKind::kClone: {
      MInode* src = file(op.a);
      MInode* dst = file(op.b);
      if (!src || !dst || op.len == 0 || op.x + op.len > src->data.size()) return false;
      if (op.y + op.len > kMaxModelFile) return false;
      if (Target(op.a) == Target(op.b) && op.x < op.y + op.len && op.y < op.x + op.len) {
        return false;
      }
      const std::string bytes = src->data.substr(op.x, op.len);
      if (dst->data.size() < op.y + op.len) dst->data.resize(op.y + op.len, '\0');
      dst->data.replace(op.y, op.len, bytes);
      dst->mtime.reset();
      return true;
    }
    case OpKind::kSetXattr: {
      std::optional<int> id = Target(op.a);
      if (!id || op.s1.empty()) return false;
      const bool has = MutableInode(*id).xattrs.count(op.s1) > 0;
      if (((op.flags & kXattrCreate) && has) || ((op.flags & kXattrReplace) && !has)) return false;
      MutableInode(*id).xattrs[op.s1] = op.s2;
      return true;
    }
    case OpKind::kRemoveXattr: {
      std::optional<int> id = Target(op.a);
      if (!id || MutableInode(*id).xattrs.erase(op.s1) == 0) return false;
      return true;
    }
    case OpKind::kFallocate:
      return ApplyFallocate(op);
    case OpKind::kSetAttr:
      return ApplySetAttr(op);
    default:
      return false;
  }
}

bool MState::ApplyHandle(const Op& op, int* made) {
  switch (op.kind) {
    case OpKind::kOpen: {
      std::optional<int> id = At(op.a);
      if (!id || inodes_[*id].kind != FileKind::kRegular) return false;
      handles_.push_back(*id);
      return true;
    }
    case OpKind::kClose: {
      if (op.x >= handles_.size() || handles_[op.x] < 0) return false;
      const int id = handles_[op.x];
      handles_[op.x] = -1;
      if (OpenCount(id) == 0 && orphans_.erase(id)) linkable_.erase(id);
      return true;
    }
    case OpKind::kTmpfile: {
      if (!IsDir(op.a)) return false;
      const int id = next_id_++;
      orphans_[id] = NewInode(FileKind::kRegular, "", 0);
      linkable_.insert(id);
      handles_.push_back(id);
      if (made) *made = id;
      return true;
    }
    default:
      return false;
  }
}

bool MState::Apply(const Op& op, size_t position, int* made) {
  if (made) *made = 0;
  switch (op.kind) {
    case OpKind::kCreate: return Create(op.a, FileKind::kRegular, "", made);
    case OpKind::kMkdir: return Create(op.a, FileKind::kDirectory, "", made);
    case OpKind::kSymlink:
      return !op.a.empty() && Create(op.b, FileKind::kSymlink, op.a, made);
    case OpKind::kLink: {
      std::optional<int> id = Target(op.a);
      if (!id || *id == 0 || Inode(*id).kind == FileKind::kDirectory) return false;
      if (!ParentIsDir(op.b) || paths_.count(op.b)) return false;
      if (IsOrphan(*id)) {
        // linkat of an orphan: only an O_TMPFILE one (else ENOENT).
        if (!linkable_.count(*id)) return false;
        inodes_[*id] = orphans_[*id];
        orphans_.erase(*id);
        linkable_.erase(*id);
      }
      paths_[op.b] = *id;
      return true;
    }
    case OpKind::kUnlink: {
      std::optional<int> id = At(op.a);
      if (!id || *id == 0 || inodes_[*id].kind == FileKind::kDirectory) return false;
      paths_.erase(op.a);
      GoneIfUnnamed(*id);
      return true;
    }
    case OpKind::kRmdir: {
      if (op.a == "/" || !IsDir(op.a) || !Entries(op.a).empty()) return false;
      const int id = *At(op.a);
      paths_.erase(op.a);
      inodes_.erase(id);
      return true;
    }
    case OpKind::kRename: return Rename(op);
    case OpKind::kWrite:
    case OpKind::kTruncate:
    case OpKind::kClone:
    case OpKind::kSetXattr:
    case OpKind::kRemoveXattr:
    case OpKind::kFallocate:
    case OpKind::kSetAttr:
      return ApplyData(op, position);
    case OpKind::kFsync:
    case OpKind::kFdatasync:
      return Target(op.a).has_value();
    case OpKind::kCommit: return true;
    case OpKind::kOpen:
    case OpKind::kClose:
    case OpKind::kTmpfile:
      return ApplyHandle(op, made);
  }
  return false;
}

// ---- Capture ---------------------------------------------------------------------

namespace {
absl::Status Walk(Files f, const std::string& path, uint64_t dir, int depth, Recovered* out) {
  if (depth > 32) return absl::InternalError(absl::StrCat("directory loop at ", path));
  absl::StatusOr<ReadDirResult> r = f.ReadDirInode(dir);
  if (!r.ok()) return r.status();
  for (const DirEntryInfo& e : r->entries) {
    std::string p = (path == "/" ? "/" : path + "/") + e.name;
    absl::StatusOr<FileStat> st = f.StatInode(e.ino);
    if (!st.ok()) return absl::Status(st.status().code(), absl::StrCat(p, ": ", st.status().message()));
    RNode n{st->kind, e.ino, "", st->size, st->nlink, {}, st->mode, st->uid, st->gid, st->mtime_ns};
    absl::StatusOr<uint64_t> by_name = f.LookupAt(dir, e.name);
    if (!by_name.ok() || *by_name != e.ino) out->problems.push_back(p + ": lookup by name disagrees");
    if (e.kind != st->kind) out->problems.push_back(p + ": entry kind disagrees with the inode");
    if (st->kind == FileKind::kRegular) {
      absl::StatusOr<std::string> d = f.Read(e.ino, 0, st->size);
      if (!d.ok()) return absl::Status(d.status().code(), absl::StrCat(p, ": ", d.status().message()));
      n.data = *std::move(d);
    } else if (st->kind == FileKind::kSymlink) {
      absl::StatusOr<std::string> t = f.ReadLink(p);
      if (!t.ok()) return t.status();
      n.data = *std::move(t);
    }
    absl::StatusOr<std::vector<std::string>> xs = f.ListXattrs(e.ino);
    if (!xs.ok()) return xs.status();
    for (const std::string& x : *xs) {
      absl::StatusOr<std::string> v = f.GetXattr(e.ino, x);
      if (!v.ok()) return v.status();
      n.xattrs[x] = *v;
    }
    if (out->paths.count(p)) {
      out->problems.push_back(p + ": two entries of one name");
      continue;
    }
    out->paths[p] = n;
    if (st->kind == FileKind::kDirectory) {
      absl::Status s = Walk(f, p, e.ino, depth + 1, out);
      if (!s.ok()) return s;
    }
  }
  return absl::OkStatus();
}
}  // namespace

absl::StatusOr<Recovered> CaptureNamespace(Files f) {
  Recovered r;
  absl::StatusOr<FileStat> root = f.StatInode(kRootInode);
  if (!root.ok()) return root.status();
  r.root_size = root->size;
  r.root = RNode{root->kind, root->ino,  "",        root->size, root->nlink,
                 {},         root->mode, root->uid, root->gid,  root->mtime_ns};
  absl::Status s = Walk(f, "/", kRootInode, 0, &r);
  if (!s.ok()) return s;
  return r;
}

// ---- The oracle ------------------------------------------------------------------

namespace {

// One inode as the oracle compares it; fields not asked for stay empty.
struct Proj {
  bool exists = false;
  FileKind kind = FileKind::kRegular;
  std::string data;
  std::vector<std::string> paths;
  std::map<std::string, std::string> xattrs;
  std::map<std::string, int> entries;  // directories
  // kAttrs: mode, owner, and mtime where the model knows it (nullopt on
  // either side: any).
  uint32_t mode = 0, uid = 0, gid = 0;
  std::optional<int64_t> mtime;
  bool operator==(const Proj& o) const {
    return exists == o.exists && kind == o.kind && data == o.data && paths == o.paths &&
           xattrs == o.xattrs && entries == o.entries && mode == o.mode && uid == o.uid &&
           gid == o.gid && (!mtime || !o.mtime || *mtime == *o.mtime);
  }
};

enum Parts : unsigned {
  kExists = 0,
  kPaths = 1,
  kData = 2,     // file bytes, symlink target, xattrs
  kEntries = 4,  // a directory's entries
  kAttrs = 8,    // mode, owner, a known mtime (not promised by fdatasync)
};

std::string Render(const Proj& p) {
  if (!p.exists) return "(absent)";
  std::string s = KindName(p.kind);
  if (!p.paths.empty()) absl::StrAppend(&s, " at {", absl::StrJoin(p.paths, ", "), "}");
  if (p.kind != FileKind::kDirectory && (!p.data.empty())) {
    absl::StrAppend(&s, " data ", p.data.size(), " bytes");
    if (p.data.size() <= 12) absl::StrAppend(&s, " \"", absl::CEscape(p.data), "\"");
  }
  for (const auto& [k, v] : p.xattrs) absl::StrAppend(&s, " ", k, "=", v);
  if (p.mode != 0 || p.uid != 0 || p.gid != 0) {
    absl::StrAppend(&s, " mode ", absl::StrFormat("0%o", p.mode), " owner ", p.uid, ":", p.gid);
  }
  if (p.mtime) absl::StrAppend(&s, " mtime ", *p.mtime);
  if (p.kind == FileKind::kDirectory) {
    std::vector<std::string> es;
    for (const auto& [n, id] : p.entries) es.push_back(absl::StrCat(n, "->#", id));
    absl::StrAppend(&s, " entries [", absl::StrJoin(es, " "), "]");
  }
  return s;
}

Proj FromModel(const MState& s, int id, unsigned parts) {
  Proj p;
  if (!s.Exists(id)) return p;
  const MInode& m = s.Inode(id);
  p.exists = true;
  p.kind = m.kind;
  if (parts & kPaths) p.paths = id == 0 ? std::vector<std::string>{"/"} : s.PathsOf(id);
  if (parts & kData) {
    p.data = m.data;
    p.xattrs = m.xattrs;
  }
  if ((parts & kEntries) && m.kind == FileKind::kDirectory) p.entries = s.EntriesOf(id);
  if (parts & kAttrs) {
    p.mode = m.mode;
    p.uid = m.uid;
    p.gid = m.gid;
    p.mtime = m.mtime;
  }
  return p;
}

// The recovered namespace indexed by model inode.
struct RIndex {
  std::map<int, std::vector<std::string>> paths;
  std::map<int, const RNode*> node;
  std::map<std::string, int> id_at;  // path -> model inode
};

Proj FromRecovered(const Recovered& r, const RIndex& ix, int id, unsigned parts) {
  Proj p;
  if (id == 0) {
    p.exists = true;
    p.kind = FileKind::kDirectory;
    if (parts & kPaths) p.paths = {"/"};
    if (parts & kAttrs) {
      p.mode = r.root.mode;
      p.uid = r.root.uid;
      p.gid = r.root.gid;
    }
  } else {
    auto n = ix.node.find(id);
    if (n == ix.node.end()) return p;
    p.exists = true;
    p.kind = n->second->kind;
    if (parts & kPaths) p.paths = ix.paths.at(id);
    if (parts & kData) {
      p.data = n->second->data;
      p.xattrs = n->second->xattrs;
    }
    if (parts & kAttrs) {
      p.mode = n->second->mode;
      p.uid = n->second->uid;
      p.gid = n->second->gid;
      p.mtime = n->second->mtime;
    }
  }
  if ((parts & kEntries) && p.kind == FileKind::kDirectory) {
    std::string dir = id == 0 ? "/" : ix.paths.at(id).front();
    for (const auto& [path, rid] : ix.id_at) {
      if (path != "/" && ParentOf(path) == dir) p.entries[BaseOf(path)] = rid;
    }
  }
  return p;
}

}  // namespace

namespace {

// One judgement of a recovered namespace (Judge).
class Judgement {
 public:
  Judgement(const std::vector<MState>& history, const std::vector<Point>& completed,
            const std::optional<Point>& in_flight, const Recovered& r)
      : history_(history), completed_(completed), r_(r) {
    for (const Point& p : completed) hi_ = std::max(hi_, p.state);
    last_done_ = hi_;
    if (in_flight) hi_ = std::max(hi_, in_flight->state);
  }
  std::vector<std::string> Run() {
    bad_ = r_.problems;
    Index();
    CheckShape();
    // The committed state each point's transaction started from: the
    // setup, or the state of the last completed point that committed.
    size_t base = 0;
    for (const Point& p : completed_) {
      CheckPoint(p, history_[base]);
      if (p.commit) base = p.state;
    }
    CheckEveryInode(history_[base]);
    return bad_;
  }

 private:
  void Index();
  void CheckShape();
  void CheckPoint(const Point& p, const MState& s0);
  void CheckEveryInode(const MState& s0);
  std::set<int> ChangedDirs(const Point& p, const MState& s0) const;
  // The recovered projection of `id` must equal its projection in one of
  // the states from `lo` to the latest a point reached.
  void ExpectIn(int id, unsigned parts, size_t lo, const std::string& why);

  const std::vector<MState>& history_;
  const std::vector<Point>& completed_;
  const Recovered& r_;
  size_t hi_ = 0;         // the latest state a point (completed or in flight) reached
  size_t last_done_ = 0;  // the latest state a completed point reached
  RIndex ix_;
  std::vector<std::string> bad_;
};

// Engine inode -> model inode, over every inode the workload ever had.
void Judgement::Index() {
  std::map<uint64_t, int> by_eng;
  for (const MState& s : history_) {
    for (const auto& [id, m] : s.inodes()) by_eng[m.eng] = id;
    for (const auto& [id, m] : s.orphans()) by_eng[m.eng] = id;
  }
  for (const auto& [path, n] : r_.paths) {
    auto id = by_eng.find(n.ino);
    if (id == by_eng.end()) {
      bad_.push_back(absl::StrCat(path, ": inode ", n.ino, " the workload never had"));
      continue;
    }
    ix_.paths[id->second].push_back(path);
    ix_.node[id->second] = &n;
    ix_.id_at[path] = id->second;
  }
}

// Link counts equal names; directory sizes are 2 x their names' bytes; a
// directory has one name.
void Judgement::CheckShape() {
  std::map<std::string, uint64_t> names_bytes;
  for (const auto& [path, n] : r_.paths) names_bytes[ParentOf(path)] += 2 * BaseOf(path).size();
  if (r_.root_size != names_bytes["/"]) {
    bad_.push_back(absl::StrCat("/: size ", r_.root_size, ", its names take ", names_bytes["/"]));
  }
  for (const auto& [id, n] : ix_.node) {
    const std::vector<std::string>& ps = ix_.paths[id];
    if (n->kind != FileKind::kDirectory && n->nlink != ps.size()) {
      bad_.push_back(absl::StrCat(ps.front(), ": nlink ", n->nlink, " with ", ps.size(), " names"));
    }
    if (n->kind != FileKind::kDirectory) continue;
    if (ps.size() != 1) bad_.push_back(absl::StrCat(ps.front(), ": a directory with ", ps.size(), " names"));
    if (n->size != names_bytes[ps.front()]) {
      bad_.push_back(absl::StrCat(ps.front(), ": size ", n->size, ", its names take ",
                                  names_bytes[ps.front()]));
    }
  }
}

// A directory's entries are judged name by name: each name is as in one of
// the states (absent, or the same inode), not the whole listing as in one
// state. Names added after a point are separate operations, and a later
// fsync may persist one of them without the others (an fsync of a new
// file persists its own entry, not its new siblings, as btrfs's does); a
// name persisting twice or half a rename is caught by the inodes' paths.
void Judgement::ExpectIn(int id, unsigned parts, size_t lo, const std::string& why) {
  const Proj got = FromRecovered(r_, ix_, id, parts);
  Proj got_rest = got;
  got_rest.entries.clear();
  bool rest_ok = false;
  std::set<std::string> names;
  for (const auto& [name, child] : got.entries) names.insert(name);
  for (size_t m = lo; m <= hi_; ++m) {
    Proj want = FromModel(history_[m], id, parts);
    for (const auto& [name, child] : want.entries) names.insert(name);
    want.entries.clear();
    rest_ok = rest_ok || want == got_rest;
  }
  std::vector<std::string> bad_names;
  for (const std::string& name : names) {
    // Present with the same value, or absent in both (no std::optional:
    // GCC 12 warns, wrongly, that its value may be read uninitialised).
    auto g = got.entries.find(name);
    const bool has = g != got.entries.end();
    bool seen = false;
    for (size_t m = lo; m <= hi_ && !seen; ++m) {
      const Proj want = FromModel(history_[m], id, parts);
      auto w = want.entries.find(name);
      const bool wants = w != want.entries.end();
      seen = wants == has && (!has || w->second == g->second);
    }
    if (!seen) bad_names.push_back(name);
  }
  if (rest_ok && bad_names.empty()) return;
  std::string allowed;
  if (!bad_names.empty()) absl::StrAppend(&allowed, " (names in no allowed state: ", absl::StrJoin(bad_names, ", "), ")");
  for (size_t m = lo; m <= hi_; ++m) {
    absl::StrAppend(&allowed, "\n      state ", m, ": ", Render(FromModel(history_[m], id, parts)));
  }
  bad_.push_back(absl::StrCat("#", id, " (", why, "): recovered ", Render(got), "; allowed:", allowed));
}

// Directories whose entries the point persists exactly: where the inode
// gained a name by a link or a rename (an inode created in this
// transaction with one name gained none) or lost one, and a fsynced
// directory with its new subdirectories, recursively (btrfs logs the
// parents of new and removed links, xfstests generic/104, 343, 336, and
// new subdirectories' entries, log_new_dir_dentries).
std::set<int> Judgement::ChangedDirs(const Point& p, const MState& s0) const {
  const MState& at = history_[p.state];
  std::set<int> dirs;
  if (at.Inode(p.inode).kind == FileKind::kDirectory) {
    std::vector<int> todo = {p.inode};
    while (!todo.empty()) {
      const int d = todo.back();
      todo.pop_back();
      if (!dirs.insert(d).second) continue;
      for (const auto& [name, child] : at.EntriesOf(d)) {
        if (!s0.Exists(child) && at.Inode(child).kind == FileKind::kDirectory) todo.push_back(child);
      }
    }
  }
  const bool old = s0.Exists(p.inode);
  std::vector<std::string> before = s0.PathsOf(p.inode), now = at.PathsOf(p.inode);
  std::set<std::string> b(before.begin(), before.end()), n(now.begin(), now.end());
  for (const std::string& x : b) {
    std::optional<int> d = s0.At(ParentOf(x));
    if (!n.count(x) && d && at.Exists(*d)) dirs.insert(*d);
  }
  for (const std::string& x : n) {
    if (!b.count(x) && (old || n.size() >= 2)) dirs.insert(*at.At(ParentOf(x)));
  }
  return dirs;
}

void Judgement::CheckPoint(const Point& p, const MState& s0) {
  const MState& at = history_[p.state];
  if (at.IsOrphan(p.inode)) {
    // fsync of an open file whose last name went (or of an O_TMPFILE):
    // after the crash it must not be back under any name it had (btrfs:
    // the log carries the inode without names, replay deletes it), unless
    // a later state linked it again.
    ExpectIn(p.inode, kPaths, p.state,
             absl::StrCat(p.datasync ? "fdatasync" : "fsync", " of an orphan after op ", p.state));
    return;
  }
  if (!at.Exists(p.inode)) return;  // fsync of something already gone is a no-op
  const bool old = s0.Exists(p.inode);
  const std::string what = absl::StrCat(p.datasync ? "fdatasync" : "fsync", " after op ", p.state);
  // The object itself: data, and (unless fdatasync of an old inode) its
  // full paths; a directory's entries.
  unsigned parts = kData | kEntries;
  if (!(p.datasync && old)) parts |= kPaths | kAttrs;
  ExpectIn(p.inode, parts, p.state, what);
  if (p.datasync && old) return;
  // Names this inode had in the committed state and lost, now held by
  // another inode: that inode is persisted at its names (btrfs logs the
  // conflicting inode; xfstests generic/342).
  std::set<int> related;
  for (const std::string& path : s0.PathsOf(p.inode)) {
    std::optional<int> now = at.At(path);
    if (now && *now != p.inode) related.insert(*now);
  }
  // The changed directories' entries persist exactly, and the inodes that
  // entered or left them are at their names.
  for (int d : ChangedDirs(p, s0)) {
    if (d != p.inode) ExpectIn(d, kEntries, p.state, what + ", a directory it changed");
    std::map<std::string, int> e0 = s0.EntriesOf(d), e1 = at.EntriesOf(d);
    for (const auto& [name, id] : e0) {
      if (e1.count(name) == 0 || e1[name] != id) related.insert(id);
    }
    for (const auto& [name, id] : e1) {
      if (e0.count(name) == 0 || e0[name] != id) related.insert(id);
    }
  }
  related.erase(p.inode);
  for (int id : related) {
    if (at.Exists(id)) ExpectIn(id, kPaths, p.state, what + ", an inode it moved");
  }
}

// Every inode, fsynced or not: present only at a set of names it had at
// one time (never a mix, never a duplicate), with bytes it had at one
// time; one that existed in the committed state and through the last
// completed point is not lost.
void Judgement::CheckEveryInode(const MState& s0) {
  for (const auto& [id, node] : ix_.node) {
    bool names_ok = false, data_ok = false;
    for (const MState& s : history_) {
      if (!s.Exists(id)) continue;
      names_ok = names_ok || s.PathsOf(id) == ix_.paths[id];
      data_ok = data_ok || (s.Inode(id).data == node->data && s.Inode(id).kind == node->kind);
    }
    if (!names_ok) {
      bad_.push_back(absl::StrCat("#", id, " at {", absl::StrJoin(ix_.paths[id], ", "),
                                  "}: a set of names it never had"));
    }
    if (!data_ok) {
      bad_.push_back(absl::StrCat("#", id, " at ", ix_.paths[id].front(), ": ", node->data.size(),
                                  " bytes it never had"));
    }
  }
  for (const auto& [id, m] : s0.inodes()) {
    if (id == 0 || ix_.node.count(id)) continue;
    bool always = true;
    for (size_t k = last_done_; k <= hi_; ++k) always = always && history_[k].Exists(id);
    if (always) {
      bad_.push_back(absl::StrCat("#", id, " (committed at ", absl::StrJoin(s0.PathsOf(id), ", "),
                                  "): lost"));
    }
  }
}

}  // namespace

std::vector<std::string> Judge(const std::vector<MState>& history,
                               const std::vector<Point>& completed,
                               const std::optional<Point>& in_flight, const Recovered& r) {
  return Judgement(history, completed, in_flight, r).Run();
}

// ---- The generator's space ----------------------------------------------------------

Op MakeOp(OpKind k, std::string a, std::string b, uint64_t x, uint64_t y) {
  Op o;
  o.kind = k;
  o.a = std::move(a);
  o.b = std::move(b);
  o.x = x;
  o.y = y;
  return o;
}

namespace {
Op Mk(OpKind k, std::string a, std::string b = "", uint64_t x = 0, uint64_t y = 0) {
  return MakeOp(k, std::move(a), std::move(b), x, y);
}
// The names the generator uses: two levels under the committed /A and /B.
const std::vector<std::string>& FileNames() {
  static const auto* v = new std::vector<std::string>{"/A/foo", "/A/bar", "/B/foo", "/A/C/foo"};
  return *v;
}
const std::vector<std::string>& DirNames() {
  static const auto* v = new std::vector<std::string>{"/A/C"};
  return *v;
}
}  // namespace

// Committed before every generated workload: two directories, a file with
// two names in one of them (8 KiB: data in an extent) and a small inline
// file in the other.
std::vector<Op> GeneratorSetup() {
  return {Mk(OpKind::kMkdir, "/A"),          Mk(OpKind::kMkdir, "/B"),
          Mk(OpKind::kCreate, "/A/foo"),     Mk(OpKind::kWrite, "/A/foo", "", 0, 8192),
          Mk(OpKind::kLink, "/A/foo", "/A/bar"), Mk(OpKind::kCreate, "/B/foo"),
          Mk(OpKind::kWrite, "/B/foo", "", 0, 100)};
}

namespace {
// The generator's xattr and setattr ops (CoreOps).
void AttrOps(const MState& s, const std::function<void(Op)>& add) {
  // Each inode once (at its first path; the committed top directories
  // too): create user.g, or replace and remove it where an earlier op set
  // it; chmod + chown, with an explicit mtime but for directories.
  std::set<int> done;
  for (const auto& [path, id] : s.paths()) {
    if (path == "/" || !done.insert(id).second) continue;
    Op x = Mk(OpKind::kSetXattr, path);
    x.s1 = "user.g";
    if (s.Inode(id).xattrs.count("user.g")) {
      x.flags = kXattrReplace;
      x.s2 = "w";
      add(x);
      Op r = Mk(OpKind::kRemoveXattr, path);
      r.s1 = "user.g";
      add(r);
    } else {
      x.flags = kXattrCreate;
      x.s2 = "v";
      add(x);
    }
    Op a = Mk(OpKind::kSetAttr, path);
    a.flags = kAttrMode | kAttrUid | kAttrGid;
    a.x = s.Inode(id).mode == 0600 ? 0640 : 0600;
    a.y = 1000;
    a.len = 100;
    if (s.Inode(id).kind != FileKind::kDirectory) {
      a.flags |= kAttrMtime;
      a.t = 1'000'000'000 + id;
    }
    add(a);
  }
}
}  // namespace

// The data ops of the generated space on a regular file of `size` bytes.
template <typename Add>
void DataOps(const std::string& path, uint64_t size, const Add& add) {
  add(Mk(OpKind::kWrite, path, "", size, 3000));  // append
  if (size > 0) add(Mk(OpKind::kWrite, path, "", size / 3, std::max<uint64_t>(1, size / 3)));
  if (size > 0) add(Mk(OpKind::kTruncate, path, "", size / 2));  // down
  add(Mk(OpKind::kTruncate, path, "", size + 5000));             // up
  // fallocate in every mode: past EOF (KEEP_SIZE, and growing the
  // file), and over the data (punch hole, zero range).
  auto falloc = [&](uint32_t mode, uint64_t off, uint64_t len) {
    Op o = Mk(OpKind::kFallocate, path, "", off, len);
    o.flags = mode;
    add(o);
  };
  falloc(kFallocKeepSize, size, 20000);
  falloc(0, size / 2, size / 2 + 6000);
  if (size > 0) {
    falloc(kFallocPunchHole | kFallocKeepSize, size / 4, size / 2);
    falloc(kFallocZeroRange, size / 3, size);
    falloc(kFallocZeroRange | kFallocKeepSize, size / 2, size);
  }
}

template <typename Add>
void HandleOps(const MState& s, bool metadata_only, const Add& add) {
  // Open handles: one per workload, on a file of the pool or an O_TMPFILE
  // in /A; then (the unlinks and renames above make it an orphan) its
  // close, and on an orphan a write, a truncate and (an O_TMPFILE) a link.
  if (s.handles().empty()) {
    for (const std::string& f : FileNames()) add(Mk(OpKind::kOpen, f));
    add(Mk(OpKind::kTmpfile, "/A"));
  } else if (s.handles()[0] >= 0) {
    Op close = Mk(OpKind::kClose, "");
    close.x = 0;
    add(close);
    const std::string h = HandleName(0);
    if (s.IsOrphan(s.handles()[0])) {
      for (const std::string& to : FileNames()) add(Mk(OpKind::kLink, h, to));
      if (!metadata_only) {
        const uint64_t size = s.Inode(s.handles()[0]).data.size();
        add(Mk(OpKind::kWrite, h, "", size, 3000));
        if (size > 0) add(Mk(OpKind::kTruncate, h, "", size / 2));
      }
    }
  }
}

std::vector<Op> CoreOps(const MState& s, bool metadata_only) {
  std::vector<Op> out;
  auto add = [&](Op o) {
    MState t = s;
    if (t.Apply(o, 0)) out.push_back(std::move(o));
  };
  for (const std::string& f : FileNames()) add(Mk(OpKind::kCreate, f));
  for (const std::string& d : DirNames()) add(Mk(OpKind::kMkdir, d));
  if (!metadata_only) {
    for (const std::string& f : FileNames()) add(Mk(OpKind::kSymlink, "foo", f));
  }
  // Every existing name (but the committed top directories) to every name
  // of the pool: plain renames, renames over files and empty directories,
  // exchanges; links of files to free names; unlinks. Two names of one
  // inode are one object: renames and exchanges between them are skipped.
  std::vector<std::string> pool = FileNames();
  pool.insert(pool.end(), DirNames().begin(), DirNames().end());
  std::set<int> data_done;
  for (const auto& [path, id] : s.paths()) {
    if (path == "/" || path == "/A" || path == "/B") continue;
    const FileKind k = s.Inode(id).kind;
    if (k != FileKind::kDirectory) add(Mk(OpKind::kUnlink, path));
    for (const std::string& to : pool) {
      std::optional<int> there = s.At(to);
      if (to == path || (there && *there == id)) continue;
      add(Mk(OpKind::kRename, path, to));
      if (path < to && there) {
        Op x = Mk(OpKind::kRename, path, to);
        x.flags = kRenameExchange;
        add(x);
      }
      if (k != FileKind::kDirectory && !there) add(Mk(OpKind::kLink, path, to));
    }
    if (k == FileKind::kRegular && !metadata_only && data_done.insert(id).second) {
      DataOps(path, s.Inode(id).data.size(), add);
    }
  }
  if (!metadata_only) AttrOps(s, add);
  // Moving a committed top directory into the other one, and back.
  add(Mk(OpKind::kRename, "/B", "/A/C"));
  add(Mk(OpKind::kRename, "/A/C", "/B"));
  HandleOps(s, metadata_only, add);
  return out;
}

std::vector<std::string> InvolvedPaths(const MState& after, const Op& op) {
  std::vector<std::string> out;
  auto add = [&](const std::string& p) {
    if (p.empty() || !after.Target(p)) return;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  };
  const std::string last_handle =
      after.handles().empty() ? "" : HandleName(after.handles().size() - 1);
  std::vector<std::string> own;
  switch (op.kind) {
    case OpKind::kSymlink: own = {op.b}; break;
    case OpKind::kLink: own = {op.b, op.a}; break;
    case OpKind::kRename: own = {op.b, op.a}; break;
    case OpKind::kClone: own = {op.b, op.a}; break;
    case OpKind::kOpen:
      own = {op.a, last_handle};
      break;
    case OpKind::kTmpfile:
      own = {last_handle, op.a};
      break;
    case OpKind::kClose:
      break;
    default: own = {op.a}; break;
  }
  for (const std::string& p : own) add(p);
  for (const std::string& p : own) {
    if (p != "/" && !p.empty() && p[0] == '/') add(ParentOf(p));
  }
  add("/");
  // An open handle's inode (an orphan's fsync goes by handle).
  for (size_t n = 0; n < after.handles().size(); ++n) add(HandleName(n));
  return out;
}

// ---- Text workloads -----------------------------------------------------------------

namespace {

// chmod PATH OCTAL | chown PATH UID GID | utime PATH MTIME_NS
bool ParseSetAttr(const std::vector<std::string>& w, Op* o) {
  if (w[0] == "chmod") {
    o->flags = kAttrMode;
    if (w[2].empty() || w[2].size() > 5 ||
        w[2].find_first_not_of("01234567") != std::string::npos) {
      return false;
    }
    o->x = std::stoull(w[2], nullptr, 8);
    return true;
  }
  if (w[0] == "chown") {
    o->flags = kAttrUid | kAttrGid;
    return absl::SimpleAtoi(w[2], &o->y) && absl::SimpleAtoi(w[3], &o->len);
  }
  o->flags = kAttrMtime;
  return absl::SimpleAtoi(w[2], &o->t);
}

// One op line, split into words.
// fallocate PATH MODE OFFSET LENGTH (a mode word: FallocModes).
absl::StatusOr<Op> ParseFallocate(const std::vector<std::string>& w) {
  if (w.size() != 5) return absl::InvalidArgumentError("expected 4 arguments");
  Op o = MakeOp(OpKind::kFallocate, w[1]);
  bool known = false;
  for (const auto& [name, mode] : FallocModes()) {
    if (name == w[2]) {
      o.flags = mode;
      known = true;
    }
  }
  if (!known) return absl::InvalidArgumentError("unknown fallocate mode");
  if (!absl::SimpleAtoi(w[3], &o.x) || !absl::SimpleAtoi(w[4], &o.y)) {
    return absl::InvalidArgumentError("bad numbers");
  }
  return o;
}

absl::StatusOr<Op> ParseOp(const std::vector<std::string>& w) {
  static const auto* verbs = new std::map<std::string, std::pair<OpKind, size_t>>{
      {"mkdir", {OpKind::kMkdir, 2}},
      {"create", {OpKind::kCreate, 2}},
      {"unlink", {OpKind::kUnlink, 2}},
      {"rmdir", {OpKind::kRmdir, 2}},
      {"fsync", {OpKind::kFsync, 2}},
      {"fdatasync", {OpKind::kFdatasync, 2}},
      {"commit", {OpKind::kCommit, 1}},
      {"link", {OpKind::kLink, 3}},
      {"symlink", {OpKind::kSymlink, 3}},
      {"rename", {OpKind::kRename, 3}},
      {"rename-exchange", {OpKind::kRename, 3}},
      {"rename-noreplace", {OpKind::kRename, 3}},
      {"write", {OpKind::kWrite, 4}},
      {"truncate", {OpKind::kTruncate, 3}},
      {"clone", {OpKind::kClone, 6}},
      {"setxattr", {OpKind::kSetXattr, 4}},
      {"removexattr", {OpKind::kRemoveXattr, 3}},
      {"open", {OpKind::kOpen, 2}},
      {"close", {OpKind::kClose, 2}},
      {"tmpfile", {OpKind::kTmpfile, 2}},
      {"setxattr-create", {OpKind::kSetXattr, 4}},
      {"setxattr-replace", {OpKind::kSetXattr, 4}},
      {"chmod", {OpKind::kSetAttr, 3}},
      {"chown", {OpKind::kSetAttr, 4}},
      {"utime", {OpKind::kSetAttr, 3}},
  };
  if (w[0] == "fallocate") return ParseFallocate(w);
  auto v = verbs->find(w[0]);
  if (v == verbs->end()) return absl::InvalidArgumentError("unknown verb");
  if (w.size() != v->second.second) {
    return absl::InvalidArgumentError(absl::StrCat("expected ", v->second.second - 1, " arguments"));
  }
  Op o;
  o.kind = v->second.first;
  if (w[0] == "rename-exchange") o.flags = kRenameExchange;
  if (w[0] == "rename-noreplace") o.flags = kRenameNoReplace;
  if (w[0] == "setxattr-create") o.flags = kXattrCreate;
  if (w[0] == "setxattr-replace") o.flags = kXattrReplace;
  if (w.size() >= 2) o.a = w[1];
  auto num = [&](size_t i, uint64_t* x) { return absl::SimpleAtoi(w[i], x); };
  bool ok = true;
  switch (o.kind) {
    case OpKind::kLink:
    case OpKind::kSymlink:
    case OpKind::kRename: o.b = w[2]; break;
    case OpKind::kWrite: ok = num(2, &o.x) && num(3, &o.y); break;
    case OpKind::kTruncate: ok = num(2, &o.x); break;
    case OpKind::kClone:
      o.b = w[3];
      ok = num(2, &o.x) && num(4, &o.y) && num(5, &o.len);
      break;
    case OpKind::kSetXattr:
      o.s1 = w[2];
      o.s2 = w[3];
      break;
    case OpKind::kRemoveXattr: o.s1 = w[2]; break;
    case OpKind::kClose:
      o.a.clear();
      ok = absl::SimpleAtoi(absl::StripPrefix(w[1], "%"), &o.x);
      break;
    case OpKind::kSetAttr:
      ok = ParseSetAttr(w, &o);
      break;
    default: break;
  }
  if (!ok) return absl::InvalidArgumentError("bad numbers");
  return o;
}

}  // namespace

absl::StatusOr<std::vector<Workload>> ParseWorkloads(const std::string& text) {
  std::vector<Workload> out;
  Workload cur;
  bool in = false;
  int line_no = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++line_no;
    absl::string_view line = raw;
    const size_t hash = line.find('#');
    if (hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<std::string> w = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto fail = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_no, ": ", why, ": ", line));
    };
    if (w[0] == "workload") {
      if (in || w.size() != 2) return fail("unexpected workload");
      cur = Workload{w[1], {}, {}};
      in = true;
    } else if (!in) {
      return fail("outside a workload");
    } else if (w[0] == "end") {
      // Everything up to the last commit is the setup.
      size_t last_commit = 0;
      for (size_t i = 0; i < cur.ops.size(); ++i) {
        if (cur.ops[i].kind == OpKind::kCommit) last_commit = i + 1;
      }
      cur.setup.assign(cur.ops.begin(), cur.ops.begin() + last_commit);
      cur.ops.erase(cur.ops.begin(), cur.ops.begin() + last_commit);
      out.push_back(cur);
      in = false;
    } else {
      absl::StatusOr<Op> o = ParseOp(w);
      if (!o.ok()) return fail(o.status().message());
      cur.ops.push_back(*std::move(o));
    }
  }
  if (in) return absl::InvalidArgumentError("the last workload has no end");
  return out;
}

}  // namespace crashgen
}  // namespace cowkv
