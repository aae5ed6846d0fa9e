#include "engine/fs/fs_ops.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/types/span.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"

namespace cowkv {
namespace fs {

// ---- Keys and errors ----------------------------------------------------------------

ItemKey InodeKey(uint64_t ino) { return ItemKey(FsKey{ino, kInodeItem, 0}); }
ItemKey RefKey(uint64_t ino, uint64_t parent) { return ItemKey(FsKey{ino, kInodeRef, parent}); }
ItemKey DirItemKey(uint64_t dir, absl::string_view name) {
  return ItemKey(FsKey{dir, kDirItem, NameHash(name)});
}
ItemKey DirIndexKey(uint64_t dir, uint64_t index) {
  return ItemKey(FsKey{dir, kDirIndex, index});
}
ItemKey ExtentKey(uint64_t ino, uint64_t offset) {
  return ItemKey(FsKey{ino, kExtentData, offset});
}
ItemKey InodeStart(uint64_t ino) { return ItemKey(FsKey{ino, 0, 0}); }
ItemKey TypeStart(uint64_t ino, uint8_t type) { return ItemKey(FsKey{ino, type, 0}); }
ItemKey OrphanKey(uint64_t ino) { return ItemKey(FsKey{kOrphanObjectid, kOrphanItem, ino}); }

absl::Status DirectoryWithoutParent(uint64_t dir, int line) {
  CorruptionSite site;
  site.what = "directory";
  site.inode = dir;
  return CorruptionError(site, "no parent on the way to the root", "", "", __FILE__, line);
}

absl::Status DirectoryChainTooDeep(uint64_t dir, int line) {
  CorruptionSite site;
  site.what = "directory";
  site.inode = dir;
  return CorruptionError(site, "the way to the root is deeper than the path limit (a cycle?)", "",
                         absl::StrCat("at most ", kMaxPathDepth, " levels"), __FILE__, line);
}

FileType Attr::type() const { return static_cast<FileType>((item.mode >> 12) & 0xf); }

namespace {

constexpr uint32_t kTypeMask = 0170000;

int64_t NowNs() { return absl::GetCurrentTimeNanos(); }

FileType TypeOf(const InodeItem& it) { return static_cast<FileType>((it.mode >> 12) & 0xf); }
bool IsDir(const InodeItem& it) { return TypeOf(it) == FileType::kDirectory; }

InodeItem RootItem() {
  InodeItem it;
  it.nlink = 1;
  it.mode = (static_cast<uint32_t>(FileType::kDirectory) << 12) | 0755;
  return it;
}

// Splits a path into validated components.
absl::StatusOr<PathParts> SplitPath(absl::string_view path) {
  if (path.size() > kMaxPathLen) {
    return PosixError(ErrorReason::kENAMETOOLONG,
                      absl::StrCat("a path is at most ", kMaxPathLen, " bytes"));
  }
  if (path.find('\0') != absl::string_view::npos) {
    return PosixError(ErrorReason::kEINVAL, "a path may not contain NUL");
  }
  PathParts parts;
  for (absl::string_view p : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (p == "." || p == "..") {
      return PosixError(ErrorReason::kEINVAL, absl::StrCat("\"", p, "\" is not allowed in a path"));
    }
    COWKV_RETURN_IF_ERROR(ValidateName(p));
    parts.push_back(p);
  }
  if (parts.size() > kMaxPathDepth) {
    return PosixError(ErrorReason::kEINVAL,
                      absl::StrCat("a path has at most ", kMaxPathDepth, " components"));
  }
  return parts;
}

}  // namespace

// ---- Inodes, names, directories -----------------------------------------------------

FsOps::FsOps(FsBackend* backend, FsState* state, const FsOptions& options)
    : b_(backend), st_(state), opt_(options) {}

void FsOps::BeginWrite() {
  if (st_->gen != b_->generation()) {
    st_->gen = b_->generation();
    st_->deleted.clear();
    st_->ref_losers.clear();
    st_->lost_name.clear();
    st_->lost_entry.clear();
    st_->new_subdirs.clear();
  }
}

std::shared_ptr<InodeMem> FsOps::Mem(uint64_t ino) {
  std::shared_ptr<InodeMem> m = st_->cache.Lookup(ino);
  if (m != nullptr) {
    st_->counters.inode_cache_hits.fetch_add(1, std::memory_order_relaxed);
    return m;
  }
  st_->counters.inode_cache_misses.fetch_add(1, std::memory_order_relaxed);
  return st_->cache.Insert(ino, std::make_shared<InodeMem>());
}

absl::StatusOr<InodeItem> FsOps::LoadInode(Batch& b, uint64_t ino) {
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* v, b.Find(InodeKey(ino)));
  if (!v->has_value()) {
    if (ino == kRootDirIno) return RootItem();
    return PosixError(ErrorReason::kENOENT, absl::StrCat("no inode ", ino));
  }
  return DecodeInodeItem(**v, ino);
}

absl::Status FsOps::CheckDir(Batch& b, uint64_t ino) {
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  if (!IsDir(it))
    return PosixError(ErrorReason::kENOTDIR, absl::StrCat("inode ", ino, " is not a directory"));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<DirEntry>> FsOps::FindEntry(Batch& b, uint64_t dir,
                                                        absl::string_view name) {
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* v, b.Find(DirItemKey(dir, name)));
  if (!v->has_value()) return std::optional<DirEntry>();
  return FindDirEntry(**v, dir, name);
}

absl::StatusOr<uint64_t> FsOps::LookupAt(uint64_t dir, absl::string_view name) {
  COWKV_RETURN_IF_ERROR(ValidateName(name));
  Batch b(b_);
  COWKV_RETURN_IF_ERROR(CheckDir(b, dir));
  COWKV_ASSIGN_OR_RETURN(std::optional<DirEntry> e, FindEntry(b, dir, name));
  if (!e.has_value())
    return PosixError(ErrorReason::kENOENT, absl::StrCat("no entry \"", name, "\""));
  return e->child;
}

absl::StatusOr<uint64_t> FsOps::Lookup(absl::string_view path) {
  Batch b(b_);
  return LookupIn(b, path);
}

namespace {
std::string JoinParts(absl::Span<const absl::string_view> parts) {
  return absl::StrCat("/", absl::StrJoin(parts, "/"));
}
}  // namespace

// The inode `parts` name, walking from the root directory; `path` names
// them in errors.
absl::StatusOr<uint64_t> FsOps::Walk(Batch& b, absl::Span<const absl::string_view> parts,
                                     absl::string_view path) {
  uint64_t ino = kRootDirIno;
  for (size_t i = 0; i < parts.size(); ++i) {
    COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
    if (!IsDir(it)) {
      return PosixError(ErrorReason::kENOTDIR, absl::StrCat("\"", JoinParts(parts.subspan(0, i)),
                                                            "\" is not a directory"));
    }
    COWKV_ASSIGN_OR_RETURN(std::optional<DirEntry> e, FindEntry(b, ino, parts[i]));
    if (!e.has_value()) {
      return PosixError(ErrorReason::kENOENT, absl::StrCat("no such file: ", path));
    }
    ino = e->child;
  }
  return ino;
}

absl::StatusOr<uint64_t> FsOps::LookupIn(Batch& b, absl::string_view path) {
  COWKV_ASSIGN_OR_RETURN(PathParts parts, SplitPath(path));
  return Walk(b, parts, path);
}

std::string Place::Describe() const {
  if (!at()) return std::string(path);
  return absl::StrCat("<", dir, ">/", name);
}

absl::StatusOr<FsOps::Resolved> FsOps::ResolveParent(Batch& b, const Place& place,
                                                     const Resolved* sibling) {
  Resolved r;
  if (place.at()) {
    COWKV_RETURN_IF_ERROR(ValidateName(place.name));
    r.name = std::string(place.name);
    r.at_dir = r.parent = place.dir;
    if (sibling == nullptr || sibling->at_dir != place.dir) {
      COWKV_ASSIGN_OR_RETURN(InodeItem pit, LoadInode(b, r.parent));
      if (!IsDir(pit)) {
        return PosixError(ErrorReason::kENOTDIR,
                          absl::StrCat("inode ", place.dir, " is not a directory"));
      }
    }
  } else {
    COWKV_ASSIGN_OR_RETURN(PathParts parts, SplitPath(place.path));
    if (parts.empty())
      return PosixError(ErrorReason::kEINVAL, "the root directory has no name to change");
    r.name = std::string(parts.back());
    const absl::Span<const absl::string_view> dir_parts =
        absl::MakeConstSpan(parts).subspan(0, parts.size() - 1);
    r.dir_parts.assign(dir_parts.begin(), dir_parts.end());
    if (sibling != nullptr && sibling->at_dir == 0 && sibling->dir_parts == r.dir_parts) {
      // Same directory path, resolved by this operation already: the same
      // parent (nothing can have changed under the operation's lock).
      r.parent = sibling->parent;
    } else {
      COWKV_ASSIGN_OR_RETURN(r.parent, Walk(b, dir_parts, place.path));
      COWKV_ASSIGN_OR_RETURN(InodeItem pit, LoadInode(b, r.parent));
      if (!IsDir(pit)) {
        return PosixError(ErrorReason::kENOTDIR,
                          absl::StrCat("\"", JoinParts(dir_parts), "\" is not a directory"));
      }
    }
  }
  COWKV_ASSIGN_OR_RETURN(std::optional<DirEntry> e, FindEntry(b, r.parent, r.name));
  if (e.has_value()) {
    r.ino = e->child;
    r.type = e->type;
  }
  return r;
}

absl::StatusOr<Attr> FsOps::Stat(uint64_t ino) {
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  return Attr{ino, it};
}

// Inode numbers come from one counter, loaded from the highest objectid in
// the tree. It must be loaded before the first inode is deleted: loaded
// after, it would hand out the deleted inode's number again in the same
// transaction, while the committed tree and the log still hold that
// inode (DeleteInode loads it first).
absl::Status FsOps::LoadNextIno() {
  if (st_->next_ino != 0) return absl::OkStatus();
  uint64_t next = kRootDirIno + 1;
  // Inode numbers end below the reserved objectids (orphan items).
  COWKV_RETURN_IF_ERROR(b_->Scan(InodeStart(0), InodeStart(kLastFreeObjectid), true,
                                 [&](absl::string_view k, absl::string_view) {
                                   FsKey fk;
                                   if (DecodeFsKey(k, &fk)) next = std::max(next, fk.objectid + 1);
                                   return false;
                                 }));
  st_->next_ino = next;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FsOps::AllocIno() {
  COWKV_RETURN_IF_ERROR(LoadNextIno());
  const uint64_t ino = st_->next_ino++;
  // Files and directories are numbered after the root directory (btrfs's
  // BTRFS_FIRST_FREE_OBJECTID); lower numbers are never handed out.
  COWKV_CHECK(ino > kRootDirIno);
  return ino;
}

absl::StatusOr<uint64_t> FsOps::NextIndex(Batch& b, uint64_t dir) {
  COWKV_RETURN_IF_ERROR(LoadNextIndex(b, dir));
  std::shared_ptr<InodeMem> m = Mem(dir);
  if (m->first_index_gen != b_->generation()) {
    m->first_index_gen = b_->generation();
    m->first_index = m->next_index;
  }
  return m->next_index++;
}

// A directory's index counter, loaded from its highest DIR_INDEX. Loaded
// before the directory loses an entry (RemoveName), so that a removed
// last index is not handed out again in the same transaction.
absl::Status FsOps::LoadNextIndex(Batch& b, uint64_t dir) {
  std::shared_ptr<InodeMem> m = Mem(dir);
  if (m->next_index == 0) {
    uint64_t next = 2;  // btrfs starts at 2 ("." and "..")
    COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(dir, kDirIndex), TypeStart(dir, kDirIndex + 1), true,
                                 [&](absl::string_view k, absl::string_view) {
                                   FsKey fk;
                                   if (DecodeFsKey(k, &fk)) next = fk.offset + 1;
                                   return false;
                                 }));
    m->next_index = next;
  }
  return absl::OkStatus();
}

absl::Status FsOps::TouchDir(Batch& b, uint64_t dir, int64_t size_delta) {
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, dir));
  it.size = static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(it.size) + size_delta));
  it.mtime_ns = it.ctime_ns = NowNs();
  it.transid = b_->generation();
  b.Put(InodeKey(dir), EncodeInodeItem(it));
  return absl::OkStatus();
}

absl::Status FsOps::AddName(Batch& b, uint64_t parent, absl::string_view name, uint64_t ino,
                            FileType type, int64_t* touch_later) {
  COWKV_ASSIGN_OR_RETURN(uint64_t index, NextIndex(b, parent));
  // First: an EMLINK (the name's extended ref item full) stages nothing
  // (an index skipped is harmless: indexes only order readdir).
  COWKV_RETURN_IF_ERROR(AddRef(b, ino, parent, InodeRef{index, std::string(name)}));
  const uint64_t gen = b_->generation();
  DirEntry e{ino, type, gen, std::string(name)};
  const ItemKey dk = DirItemKey(parent, name);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* cur, b.Find(dk));
  std::vector<DirEntry> entries;
  if (cur->has_value()) {
    COWKV_ASSIGN_OR_RETURN(entries, DecodeDirEntries(**cur, parent));
  }
  entries.push_back(e);
  b.Put(dk, EncodeDirEntries(entries));
  b.Put(DirIndexKey(parent, index), EncodeDirEntries({e}));
  const int64_t grow = 2 * static_cast<int64_t>(name.size());
  if (touch_later != nullptr) {
    *touch_later += grow;
    return absl::OkStatus();
  }
  return TouchDir(b, parent, grow);
}

absl::Status FsOps::RemoveName(Batch& b, uint64_t parent, absl::string_view name, uint64_t ino,
                               int64_t* touch_later) {
  COWKV_RETURN_IF_ERROR(LoadNextIndex(b, parent));
  const ItemKey dk = DirItemKey(parent, name);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* cur, b.Find(dk));
  std::vector<DirEntry> entries;
  if (cur->has_value()) {
    COWKV_ASSIGN_OR_RETURN(entries, DecodeDirEntries(**cur, parent));
  }
  auto e = std::find_if(entries.begin(), entries.end(),
                        [&](const DirEntry& d) { return d.name == name && d.child == ino; });
  if (e == entries.end()) {
    CorruptionSite site;
    site.what = "directory";
    site.inode = parent;
    return COWKV_CORRUPTION(site, absl::StrCat("no entry \"", name, "\" for inode ", ino), "", "");
  }
  entries.erase(e);
  if (entries.empty()) {
    b.Del(dk);
  } else {
    b.Put(dk, EncodeDirEntries(entries));
  }
  COWKV_ASSIGN_OR_RETURN(std::optional<InodeRef> r, TakeRef(b, ino, parent, name));
  if (!r.has_value()) {
    CorruptionSite site;
    site.what = "inode ref";
    site.inode = ino;
    return COWKV_CORRUPTION(site, absl::StrCat("no name \"", name, "\" in directory ", parent), "",
                            "");
  }
  const ItemKey ik = DirIndexKey(parent, r->index);
  b.Del(ik);
  const ItemKey rk = RefKey(ino, parent);
  if (r->extref) {
    // The extended ref's tombstone (or what is left in it) goes to the log
    // with the inode; the INODE_REF key stands for "lost a name in parent"
    // (LostNameOwners, ref_losers) whichever item held the name.
    const ItemKey xk = ExtrefKey(ino, parent, name);
    RecordDeleted(ino, xk);
    RecordDeleted(parent, xk);
  }
  RecordDeleted(parent, dk);
  RecordDeleted(parent, ik);
  RecordDeleted(ino, rk);
  RecordDeleted(parent, rk);  // a later fsync of the directory logs the inode that lost it
  st_->lost_entry.insert(parent);
  st_->lost_name.insert(ino);
  const int64_t shrink = -2 * static_cast<int64_t>(name.size());
  if (touch_later != nullptr) {
    *touch_later += shrink;
    return absl::OkStatus();
  }
  return TouchDir(b, parent, shrink);
}

absl::Status FsOps::DeleteInode(Batch& b, uint64_t ino) {
  if (!opt_.bug_late_inode_counter) COWKV_RETURN_IF_ERROR(LoadNextIno());
  std::vector<std::string> keys;
  COWKV_RETURN_IF_ERROR(b.Scan(InodeStart(ino), InodeStart(ino + 1), false,
                               [&](absl::string_view k, absl::string_view) {
                                 keys.emplace_back(k);
                                 return true;
                               }));
  for (const std::string& k : keys) b.Del(k);
  st_->ForgetDeleted(ino);
  st_->cache.Erase(ino);
  st_->orphans.erase(ino);
  st_->linkable.erase(ino);
  return absl::OkStatus();
}

absl::Status FsOps::DropLink(Batch& b, uint64_t ino, InodeItem* item) {
  if (!IsDir(*item) && item->nlink <= 1 && IsOpen(ino)) {
    MakeOrphan(b, ino, item);
    return absl::OkStatus();
  }
  if (IsDir(*item) || item->nlink <= 1) return DeleteInode(b, ino);
  --item->nlink;
  COWKV_DCHECK(item->nlink >= 1);  // the last link deletes the inode instead
  item->ctime_ns = NowNs();
  item->transid = b_->generation();
  b.Put(InodeKey(ino), EncodeInodeItem(*item));
  return absl::OkStatus();
}

void FsOps::RecordDeleted(uint64_t ino, absl::string_view key) {
  FsKey k;
  const bool fs_key = DecodeFsKey(key, &k);
  COWKV_CHECK(fs_key);  // every key the fs layer deletes is an fs key
  st_->deleted[ino].insert(k);
  if (k.type == kInodeRef && k.objectid == ino) st_->ref_losers[k.offset].insert(ino);
}

absl::Status FsOps::EnsureRoot(Batch& b) {
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, b.Get(InodeKey(kRootDirIno)));
  if (v.has_value()) return absl::OkStatus();
  InodeItem it = RootItem();
  it.generation = it.transid = b_->generation();
  it.atime_ns = it.ctime_ns = it.mtime_ns = it.otime_ns = NowNs();
  b.Put(InodeKey(kRootDirIno), EncodeInodeItem(it));
  return absl::OkStatus();
}

absl::StatusOr<Attr> FsOps::Create(const Place& place, FileType type, uint32_t mode,
                                   absl::string_view symlink_target) {
  if (type == FileType::kSymlink &&
      (symlink_target.empty() || symlink_target.size() > kMaxSymlinkLen ||
       symlink_target.find('\0') != absl::string_view::npos)) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("a symlink target is 1..", kMaxSymlinkLen,
                                                         " bytes without NUL"));
  }
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(Resolved r, ResolveParent(b, place));
  if (r.ino != 0)
    return PosixError(ErrorReason::kEEXIST, absl::StrCat(place.Describe(), " exists"));
  COWKV_RETURN_IF_ERROR(EnsureRoot(b));
  COWKV_ASSIGN_OR_RETURN(uint64_t ino, AllocIno());
  {
    // The new inode enters the cache (seed 003) knowing it is in no log.
    std::shared_ptr<InodeMem> m = Mem(ino);
    m->logged_gen = b_->generation();
    m->logged = false;
  }
  InodeItem it;
  it.generation = it.transid = b_->generation();
  it.nlink = 1;
  it.mode = (static_cast<uint32_t>(type) << 12) | (mode & 07777);
  it.atime_ns = it.ctime_ns = it.mtime_ns = it.otime_ns = NowNs();
  if (type == FileType::kSymlink) {
    FileExtent e;
    e.generation = it.generation;
    e.inline_data = std::string(symlink_target);
    b.Put(ExtentKey(ino, 0), EncodeFileExtent(e));
    it.size = it.nbytes = symlink_target.size();
  }
  b.Put(InodeKey(ino), EncodeInodeItem(it));
  COWKV_RETURN_IF_ERROR(AddName(b, r.parent, r.name, ino, type));
  COWKV_RETURN_IF_ERROR(Emit(b,
                             type == FileType::kDirectory ? FileEvent::Type::kMkdir
                             : type == FileType::kSymlink ? FileEvent::Type::kSymlink
                                                          : FileEvent::Type::kCreate,
                             ino, r));
  COWKV_RETURN_IF_ERROR(b.Commit());
  if (type == FileType::kDirectory) st_->new_subdirs[r.parent].push_back(ino);
  return Attr{ino, it};
}

absl::Status FsOps::Unlink(const Place& place, bool dir) {
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(Resolved r, ResolveParent(b, place));
  if (r.ino == 0)
    return PosixError(ErrorReason::kENOENT, absl::StrCat("no such file: ", place.Describe()));
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, r.ino));
  if (dir && !IsDir(it))
    return PosixError(ErrorReason::kENOTDIR, absl::StrCat(place.Describe(), " is not a directory"));
  if (!dir && IsDir(it))
    return PosixError(ErrorReason::kEISDIR, absl::StrCat(place.Describe(), " is a directory"));
  if (dir) {
    bool empty = true;
    COWKV_RETURN_IF_ERROR(
        b.Scan(TypeStart(r.ino, kDirIndex), TypeStart(r.ino, kDirIndex + 1), false,
               [&](absl::string_view, absl::string_view) { return empty = false; }));
    if (!empty)
      return PosixError(ErrorReason::kENOTEMPTY, absl::StrCat(place.Describe(), " is not empty"));
  }
  COWKV_RETURN_IF_ERROR(
      Emit(b, dir ? FileEvent::Type::kRmdir : FileEvent::Type::kUnlink, r.ino, r));
  COWKV_ASSIGN_OR_RETURN(bool log, AnyLogged(b, {r.ino, r.parent}));
  COWKV_RETURN_IF_ERROR(RemoveName(b, r.parent, r.name, r.ino));
  COWKV_RETURN_IF_ERROR(DropLink(b, r.ino, &it));
  if (log) COWKV_RETURN_IF_ERROR(UpdateLog(b, {r.ino}));
  return b.Commit();
}

absl::StatusOr<bool> FsOps::IsAncestor(Batch& b, uint64_t a, uint64_t dir) {
  for (size_t depth = 0; depth <= kMaxPathDepth + 1; ++depth) {
    if (dir == a) return true;
    if (dir == kRootDirIno) return false;
    uint64_t parent = 0;
    COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(dir, kInodeRef), TypeStart(dir, kInodeRef + 1), false,
                                 [&](absl::string_view k, absl::string_view) {
                                   FsKey fk;
                                   if (DecodeFsKey(k, &fk)) parent = fk.offset;
                                   return false;
                                 }));
    if (parent == 0) return DirectoryWithoutParent(dir);
    dir = parent;
  }
  return DirectoryChainTooDeep(dir);
}

absl::Status FsOps::RenameChecks(Batch& b, const Resolved& f, const Resolved& t, uint32_t flags) {
  const bool fdir = f.type == FileType::kDirectory;
  const bool tdir = t.type == FileType::kDirectory;
  if ((flags & kRenameNoReplace) && t.ino != 0) {
    return PosixError(ErrorReason::kEEXIST, absl::StrCat("\"", t.name, "\" exists"));
  }
  if ((flags & kRenameExchange) && t.ino == 0) {
    return PosixError(ErrorReason::kENOENT, absl::StrCat("no \"", t.name, "\" to exchange with"));
  }
  if (fdir) {
    COWKV_ASSIGN_OR_RETURN(bool under, IsAncestor(b, f.ino, t.parent));
    if (under) return PosixError(ErrorReason::kEINVAL, "cannot move a directory under itself");
  }
  if ((flags & kRenameExchange) && tdir) {
    COWKV_ASSIGN_OR_RETURN(bool under, IsAncestor(b, t.ino, f.parent));
    if (under) return PosixError(ErrorReason::kEINVAL, "cannot move a directory under itself");
  }
  if (t.ino == 0 || (flags & kRenameExchange)) return absl::OkStatus();
  if (fdir && !tdir)
    return PosixError(ErrorReason::kENOTDIR, absl::StrCat("\"", t.name, "\" is not a directory"));
  if (!fdir && tdir)
    return PosixError(ErrorReason::kEISDIR, absl::StrCat("\"", t.name, "\" is a directory"));
  if (tdir) {
    bool empty = true;
    COWKV_RETURN_IF_ERROR(
        b.Scan(TypeStart(t.ino, kDirIndex), TypeStart(t.ino, kDirIndex + 1), false,
               [&](absl::string_view, absl::string_view) { return empty = false; }));
    if (!empty)
      return PosixError(ErrorReason::kENOTEMPTY, absl::StrCat("\"", t.name, "\" is not empty"));
  }
  return absl::OkStatus();
}

absl::Status FsOps::TouchInode(Batch& b, uint64_t ino) {
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* v, b.Find(InodeKey(ino)));
  if (!v->has_value()) return absl::OkStatus();  // deleted by this operation
  COWKV_ASSIGN_OR_RETURN(InodeItem it, DecodeInodeItem(**v, ino));
  it.ctime_ns = NowNs();
  it.transid = b_->generation();
  b.Put(InodeKey(ino), EncodeInodeItem(it));
  return absl::OkStatus();
}

absl::Status FsOps::Rename(const Place& from, const Place& to, uint32_t flags) {
  if ((flags & ~(kRenameNoReplace | kRenameExchange)) != 0 ||
      flags == (kRenameNoReplace | kRenameExchange)) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("bad rename flags ", flags));
  }
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(Resolved f, ResolveParent(b, from));
  if (f.ino == 0)
    return PosixError(ErrorReason::kENOENT, absl::StrCat("no such file: ", from.Describe()));
  COWKV_ASSIGN_OR_RETURN(Resolved t, ResolveParent(b, to, &f));
  // Two names of one inode: nothing to do (but no-replace still refuses an existing `to`).
  if (f.ino == t.ino && !(flags & kRenameNoReplace)) return absl::OkStatus();
  COWKV_RETURN_IF_ERROR(RenameChecks(b, f, t, flags));
  COWKV_RETURN_IF_ERROR(
      Emit(b, (flags & kRenameExchange) ? FileEvent::Type::kExchange : FileEvent::Type::kRename,
           f.ino, f, &t));
  std::vector<uint64_t> involved = {f.ino, f.parent, t.parent};
  if (t.ino != 0) involved.push_back(t.ino);
  COWKV_ASSIGN_OR_RETURN(bool log, AnyLogged(b, involved));
  // A plain rename within one directory touches the directory once, after
  // both names changed (`removed`: the size the old name took off).
  int64_t removed = 0;
  const bool defer = !(flags & kRenameExchange) && t.ino == 0 && f.parent == t.parent;
  COWKV_RETURN_IF_ERROR(RemoveName(b, f.parent, f.name, f.ino, defer ? &removed : nullptr));
  if (flags & kRenameExchange) {
    COWKV_RETURN_IF_ERROR(RemoveName(b, t.parent, t.name, t.ino));
    COWKV_RETURN_IF_ERROR(AddName(b, t.parent, t.name, f.ino, f.type));
    COWKV_RETURN_IF_ERROR(AddName(b, f.parent, f.name, t.ino, t.type));
    COWKV_RETURN_IF_ERROR(TouchInode(b, t.ino));
  } else {
    if (t.ino != 0) {
      COWKV_ASSIGN_OR_RETURN(InodeItem tit, LoadInode(b, t.ino));
      COWKV_RETURN_IF_ERROR(RemoveName(b, t.parent, t.name, t.ino));
      COWKV_RETURN_IF_ERROR(DropLink(b, t.ino, &tit));
    }
    int64_t added = 0;
    COWKV_RETURN_IF_ERROR(AddName(b, t.parent, t.name, f.ino, f.type, defer ? &added : nullptr));
    if (defer) COWKV_RETURN_IF_ERROR(TouchDir(b, t.parent, removed + added));
  }
  COWKV_RETURN_IF_ERROR(TouchInode(b, f.ino));
  if (log) {
    std::vector<uint64_t> named = {f.ino};
    if (t.ino != 0) named.push_back(t.ino);
    COWKV_RETURN_IF_ERROR(UpdateLog(b, named));
  }
  return b.Commit();
}

absl::StatusOr<Attr> FsOps::Link(absl::string_view existing, const Place& new_place) {
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(uint64_t ino, LookupIn(b, existing));
  return LinkIn(b, ino, new_place);
}

absl::StatusOr<Attr> FsOps::LinkInode(uint64_t ino, const Place& new_place) {
  Batch b(b_);
  return LinkIn(b, ino, new_place);
}

absl::StatusOr<Attr> FsOps::LinkIn(Batch& b, uint64_t ino, const Place& new_place) {
  COWKV_ASSIGN_OR_RETURN(Resolved t, ResolveParent(b, new_place));
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  if (IsDir(it))
    return PosixError(ErrorReason::kEPERM, "hard links to directories are not allowed");
  // An inode whose last name went (an orphan): only an O_TMPFILE one may
  // get a name (Linux's I_LINKABLE); linkat of any other answers ENOENT.
  const bool tmpfile = it.nlink == 0;
  if (tmpfile && !st_->linkable.count(ino))
    return PosixError(ErrorReason::kENOENT, absl::StrCat("inode ", ino, " has no names left"));
  if (it.nlink >= kMaxLinks)
    return PosixError(ErrorReason::kEMLINK,
                      absl::StrCat("inode ", ino, " has ", it.nlink, " links"));
  if (t.ino != 0)
    return PosixError(ErrorReason::kEEXIST, absl::StrCat(new_place.Describe(), " exists"));
  COWKV_RETURN_IF_ERROR(Emit(b, FileEvent::Type::kLink, ino, t));
  COWKV_ASSIGN_OR_RETURN(bool log, AnyLogged(b, {ino, t.parent}));
  COWKV_RETURN_IF_ERROR(AddName(b, t.parent, t.name, ino, TypeOf(it)));
  ++it.nlink;
  it.ctime_ns = NowNs();
  it.transid = b_->generation();
  b.Put(InodeKey(ino), EncodeInodeItem(it));
  if (tmpfile) b.Del(OrphanKey(ino));
  if (log) COWKV_RETURN_IF_ERROR(UpdateLog(b, {ino}));
  COWKV_RETURN_IF_ERROR(b.Commit());
  if (tmpfile) {
    st_->linkable.erase(ino);
    st_->orphans.erase(ino);
  }
  return Attr{ino, it};
}

absl::StatusOr<std::vector<ReadDirEntry>> FsOps::ReadDir(uint64_t dir, uint64_t cookie,
                                                         uint64_t limit, bool* more) {
  Batch b(b_);
  COWKV_RETURN_IF_ERROR(CheckDir(b, dir));
  std::vector<ReadDirEntry> out;
  *more = false;
  absl::Status bad;
  COWKV_RETURN_IF_ERROR(b.Scan(DirIndexKey(dir, cookie), TypeStart(dir, kDirIndex + 1), false,
                               [&](absl::string_view k, absl::string_view v) {
                                 if (limit != 0 && out.size() == limit) {
                                   *more = true;
                                   return false;
                                 }
                                 FsKey fk;
                                 DecodeFsKey(k, &fk);
                                 absl::StatusOr<DirEntry> e = DecodeDirIndex(v, dir);
                                 if (!e.ok()) {
                                   bad = e.status();
                                   return false;
                                 }
                                 out.push_back({e->name, e->child, e->type, fk.offset});
                                 return true;
                               }));
  COWKV_RETURN_IF_ERROR(bad);
  return out;
}

absl::StatusOr<std::string> FsOps::ReadLink(uint64_t ino) {
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  if (TypeOf(it) != FileType::kSymlink) return PosixError(ErrorReason::kEINVAL, "not a symlink");
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, b.Get(ExtentKey(ino, 0)));
  CorruptionSite site;
  site.what = "symlink";
  site.inode = ino;
  if (!v.has_value()) return COWKV_CORRUPTION(site, "no target", "", "");
  COWKV_ASSIGN_OR_RETURN(FileExtent e, DecodeFileExtent(*v, ino, 0));
  if (e.kind != kExtentInline) {
    return COWKV_CORRUPTION(site, "target not inline", absl::StrCat("kind ", int{e.kind}),
                            absl::StrCat("kind ", int{kExtentInline}));
  }
  return e.inline_data;
}

}  // namespace fs
}  // namespace cowkv
