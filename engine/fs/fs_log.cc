// What fsync logs, the log updates of rename/link/unlink (seeds 000 and
// 004), and the fix-up after a replay.
//
// The log copies items by key: whatever a key holds at the next log sync
// (or its absence) is what replay puts back. fsync of an inode notes the
// keys that bring it to its current state; a name change of an inode that
// is already in this transaction's log notes the keys it touched, so that
// the log never holds a stale half of a rename.
#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

namespace {
FileType TypeOf(const InodeItem& it) { return static_cast<FileType>((it.mode >> 12) & 0xf); }
uint64_t ItemGeneration(absl::string_view v) { return v.size() >= 8 ? DecodeLE64(v.data()) : 0; }

// Inodes other than `except` that lost a name in `dir` in this transaction
// and were not logged since: their INODE_REF key for `dir` is in their own
// deleted set (or in the directory's).
std::vector<uint64_t> LostNameOwners(const FsState& st, uint64_t dir, uint64_t except) {
  std::set<uint64_t> out;
  auto d = st.deleted.find(dir);
  if (d != st.deleted.end()) {
    for (const FsKey& fk : d->second) {
      if (fk.type == kInodeRef && fk.offset == dir) out.insert(fk.objectid);
    }
  }
  auto r = st.ref_losers.find(dir);
  if (r != st.ref_losers.end()) {
    for (uint64_t ino : r->second) {
      if (ino != dir) out.insert(ino);
    }
  }
  out.erase(except);
  return std::vector<uint64_t>(out.begin(), out.end());
}

// Whether `dir` lost an entry of that name in this transaction (not logged since).
bool LostEntry(const FsState& st, uint64_t dir, absl::string_view name) {
  auto d = st.deleted.find(dir);
  return d != st.deleted.end() && d->second.count(FsKey{dir, kDirItem, NameHash(name)}) > 0;
}
}  // namespace

void FsOps::Note(Batch& b, absl::string_view key) {
  b.Note(key);
  st_->counters.logged_keys.fetch_add(1, std::memory_order_relaxed);
}

void FsOps::MarkLogged(uint64_t ino) {
  std::shared_ptr<InodeMem> m = Mem(ino);
  m->logged_gen = b_->generation();
  m->logged = true;
  if (opt_.bug_item_counts_as_names) m->names_logged_gen = b_->generation();
}

// Seed 004: whether `ino` is in this transaction's log. Memory answers when
// it knows; otherwise (evicted, or not asked since mount) the log is looked
// up and the answer kept. With the check off, an unknown inode that changed
// in this transaction counts as logged (btrfs before the seed): a false
// "logged" that costs a log update.
absl::StatusOr<bool> FsOps::IsLogged(Batch& b, uint64_t ino) {
  const uint64_t gen = b_->generation();
  std::shared_ptr<InodeMem> m = Mem(ino);
  if (m->logged_gen == gen) return m->logged;
  if (!b_->LogHasFsEntries()) {
    m->logged_gen = gen;
    m->logged = false;
    return false;
  }
  if (opt_.precise_logged_check) {
    st_->counters.logged_lookups.fetch_add(1, std::memory_order_relaxed);
    COWKV_ASSIGN_OR_RETURN(bool found, b_->LogContains(InodeKey(ino)));
    m->logged_gen = gen;
    m->logged = found;
    return found;
  }
  absl::StatusOr<InodeItem> it = LoadInode(b, ino);
  if (absl::IsNotFound(it.status())) return false;
  COWKV_RETURN_IF_ERROR(it.status());
  return it->transid == gen;
}

absl::StatusOr<bool> FsOps::AnyLogged(Batch& b, const std::vector<uint64_t>& inodes) {
  bool any = false;
  for (uint64_t ino : inodes) {
    COWKV_ASSIGN_OR_RETURN(bool logged, IsLogged(b, ino));
    any = any || logged;
  }
  return any;
}

// A name change touching a logged inode or directory: every key the
// operation wrote goes to the log, with the full names (and, for files,
// the data) of the inodes whose names changed, so the log stays a
// consistent picture.
absl::Status FsOps::UpdateLog(Batch& b, const std::vector<uint64_t>& named) {
  st_->counters.log_updates.fetch_add(1, std::memory_order_relaxed);
  std::vector<std::pair<uint64_t, bool>> also;
  std::set<uint64_t> emptied;  // directories whose entries the operation removed
  for (const std::string& k : b.StagedKeys()) {
    Note(b, k);
    FsKey fk;
    if (!DecodeFsKey(k, &fk)) continue;
    if (fk.type == kInodeItem) MarkLogged(fk.objectid);
    if (fk.type == kDirItem || fk.type == kDirIndex) {
      COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, b.Get(k));
      if (!v.has_value()) emptied.insert(fk.objectid);
    }
  }
  // A removed entry's tombstone also removes the name from whoever held it
  // at the last commit: an inode that lost that name earlier in this
  // transaction (an exchange, a rename over it) goes to the log with its
  // current names, or replay would leave it nameless.
  // Each such inode once per transaction: logging it with its names again
  // for every later removal in a large directory would make a run of
  // renames quadratic (seed 004 with the precise check off).
  const uint64_t gen = b_->generation();
  for (uint64_t dir : emptied) {
    for (uint64_t owner : LostNameOwners(*st_, dir, 0)) {
      if (std::find(named.begin(), named.end(), owner) != named.end()) continue;
      if (Mem(owner)->names_logged_gen == gen) continue;
      also.push_back({owner, false});
    }
  }
  for (uint64_t ino : named) {
    absl::StatusOr<InodeItem> it = LoadInode(b, ino);
    if (absl::IsNotFound(it.status())) continue;  // deleted by the operation
    COWKV_RETURN_IF_ERROR(it.status());
    COWKV_RETURN_IF_ERROR(LogInodeKeys(b, ino, *it, /*names=*/true, &also));
  }
  return LogQueue(b, also);
}

// Logs the inodes queued by LogInodeKeys/LogDirEntries/QueueLinkDirs (new
// parents, new children, directories of new links): each one's keys at
// most once, and a directory's entries at most once (also when it was
// first queued without them).
absl::Status FsOps::LogQueue(Batch& b, std::vector<std::pair<uint64_t, bool>>& work) {
  std::set<uint64_t> done, done_entries;
  while (!work.empty()) {
    auto [ino, entries] = work.back();
    work.pop_back();
    const bool keys = done.insert(ino).second;
    const bool want_entries = entries && done_entries.insert(ino).second;
    if (!keys && !want_entries) continue;
    absl::StatusOr<InodeItem> it = LoadInode(b, ino);
    if (absl::IsNotFound(it.status())) continue;
    COWKV_RETURN_IF_ERROR(it.status());
    if (keys) COWKV_RETURN_IF_ERROR(LogInodeKeys(b, ino, *it, /*names=*/true, &work));
    if (want_entries && TypeOf(*it) == FileType::kDirectory) {
      COWKV_RETURN_IF_ERROR(LogDirEntries(b, ino, &work));
    }
  }
  return absl::OkStatus();
}

// An inode's own keys: its item; with `names`, every name it has and the
// parents' entries for them (a parent created in this transaction is
// queued, so the name has somewhere to live after replay); the keys it
// lost since the last log; its data changed in this transaction; xattrs.
// A directory's lost keys include the entries it lost: the inodes that
// lost those names (moved away, or unlinked with other names left) are
// queued too — replay drops the names the log says are gone, so their new
// names must come with them.
absl::Status FsOps::LogInodeKeys(Batch& b, uint64_t ino, const InodeItem& item, bool names,
                                 std::vector<std::pair<uint64_t, bool>>* also) {
  const uint64_t gen = b_->generation();
  // Planted bug (Options::TestHooks): an inode whose names were logged in
  // this transaction counts as logged, its item skipped (btrfs's
  // inode_in_log without setattr marking the inode changed).
  const bool skip_item = opt_.bug_logged_inode_skips_item && TypeOf(item) != FileType::kDirectory &&
                         Mem(ino)->names_logged_gen == gen;
  if (!skip_item) Note(b, InodeKey(ino));
  MarkLogged(ino);
  if (st_->lost_name.count(ino)) needs_full_commit_ = true;
  if (names) {
    COWKV_RETURN_IF_ERROR(LogNames(b, ino, also));
    Mem(ino)->names_logged_gen = gen;
  }
  auto d = st_->deleted.find(ino);
  if (d != st_->deleted.end()) {
    if (TypeOf(item) == FileType::kDirectory) {
      for (uint64_t owner : LostNameOwners(*st_, ino, ino)) also->push_back({owner, false});
    }
    // In key order, so the log's contents do not depend on hashing.
    std::vector<std::string> keys;
    keys.reserve(d->second.size());
    for (const FsKey& k : d->second) keys.push_back(EncodeFsKey(k));
    std::sort(keys.begin(), keys.end());
    for (const std::string& k : keys) Note(b, k);
    st_->ForgetDeleted(ino);
  }
  if (TypeOf(item) != FileType::kDirectory) {
    COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(ino, kExtentData), TypeStart(ino, kExtentData + 1),
                                 false, [&](absl::string_view k, absl::string_view v) {
                                   if (ItemGeneration(v) == gen) Note(b, k);
                                   return true;
                                 }));
  }
  return b.Scan(TypeStart(ino, kXattrItem), TypeStart(ino, kXattrItem + 1), false,
                [&](absl::string_view k, absl::string_view) {
                  Note(b, k);
                  return true;
                });
}

absl::Status FsOps::LogNames(Batch& b, uint64_t ino, std::vector<std::pair<uint64_t, bool>>* also) {
  const uint64_t gen = b_->generation();
  COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> refs, LoadRefs(b, ino));
  for (const auto& [parent, names] : refs) {
    // A directory that lost an entry: the log would show the new name
    // beside the old entries (btrfs logs the directory, or commits).
    if (st_->lost_entry.count(parent)) needs_full_commit_ = true;
    // The INODE_REF key even when only extended refs hold names there:
    // its tombstone says the item is gone.
    Note(b, RefKey(ino, parent));
    bool taken = false;
    for (const InodeRef& r : names) {
      if (r.extref && !opt_.bug_extref_not_logged) Note(b, ExtrefKey(ino, parent, r.name));
      Note(b, DirItemKey(parent, r.name));
      Note(b, DirIndexKey(parent, r.index));
      taken = taken || LostEntry(*st_, parent, r.name);
    }
    // A name another inode lost in this transaction (a rename over it, an
    // exchange, a new file under a moved file's old name): that inode is
    // logged too, with its new names (btrfs logs the conflicting inode).
    if (taken) {
      for (uint64_t owner : LostNameOwners(*st_, parent, ino)) also->push_back({owner, false});
    }
    if (parent == kRootDirIno) {
      Note(b, InodeKey(kRootDirIno));
      continue;
    }
    absl::StatusOr<InodeItem> p = LoadInode(b, parent);
    COWKV_RETURN_IF_ERROR(p.status());
    // A parent created in this transaction needs its own names in the log
    // (its item alone, logged by a name change inside it, is not enough).
    if (p->generation == gen && Mem(parent)->names_logged_gen != gen) {
      also->push_back({parent, false});
    }
  }
  return absl::OkStatus();
}

// A directory's entries added in this transaction. Seed 000: the
// directory remembers the last index it logged in this transaction and
// starts after it; switched off, every fsync starts at the first index this
// transaction added (btrfs before the seed re-logged all of them).
// Their children not logged yet are queued: one created in this
// transaction in full (a directory with its entries), an older one (moved
// or linked here) with its names, since replay keeps an entry only when
// its child has the name.
absl::Status FsOps::LogDirEntries(Batch& b, uint64_t dir,
                                  std::vector<std::pair<uint64_t, bool>>* also) {
  const uint64_t gen = b_->generation();
  // Its removed entries would need tombstones beside the new ones.
  if (st_->lost_entry.count(dir)) needs_full_commit_ = true;
  std::shared_ptr<InodeMem> m = Mem(dir);
  uint64_t start = 0;
  if (opt_.dir_index_offset && m->index_logged_gen == gen) {
    start = m->last_logged_index + 1;
  } else if (m->first_index_gen == gen) {
    start = m->first_index;
  }
  uint64_t last = start == 0 ? 0 : start - 1;
  std::vector<DirEntry> children;
  absl::Status bad;
  COWKV_RETURN_IF_ERROR(b.Scan(DirIndexKey(dir, start), TypeStart(dir, kDirIndex + 1), false,
                               [&](absl::string_view k, absl::string_view v) {
                                 FsKey fk;
                                 DecodeFsKey(k, &fk);
                                 last = fk.offset;
                                 absl::StatusOr<DirEntry> e = DecodeDirIndex(v, dir);
                                 if (!e.ok()) {
                                   bad = e.status();
                                   return false;
                                 }
                                 if (e->transid != gen) return true;
                                 Note(b, k);
                                 Note(b, DirItemKey(dir, e->name));
                                 children.push_back(*std::move(e));
                                 return true;
                               }));
  COWKV_RETURN_IF_ERROR(bad);
  m->index_logged_gen = gen;
  m->last_logged_index = last;
  // Subdirectories created in this transaction whose entries here were
  // logged by an earlier fsync: their own new entries go too.
  auto sub = st_->new_subdirs.find(dir);
  if (sub != st_->new_subdirs.end() && !opt_.bug_item_counts_as_names) {
    for (uint64_t d : sub->second) also->push_back({d, true});
  }
  for (const DirEntry& e : children) {
    // A child logged with its names already is skipped, unless it is a
    // directory created in this transaction: its own new entries go too,
    // recursively (btrfs's log_new_dir_dentries).
    std::shared_ptr<InodeMem> cm = Mem(e.child);
    const bool logged = cm->names_logged_gen == gen && !st_->lost_name.count(e.child);
    if (logged && (e.type != FileType::kDirectory || opt_.bug_item_counts_as_names)) continue;
    absl::StatusOr<InodeItem> it = LoadInode(b, e.child);
    if (absl::IsNotFound(it.status())) continue;
    COWKV_RETURN_IF_ERROR(it.status());
    const bool new_dir = it->generation == gen && e.type == FileType::kDirectory;
    if (logged && !new_dir) continue;
    also->push_back({e.child, new_dir});
  }
  return absl::OkStatus();
}

// The directories where `ino` gained a name by a link or a rename in this
// transaction (for an inode created in it: every directory of its names,
// when it has more than one) are logged with their new entries: btrfs
// logs the parents of a new link, so the other names added there in the
// transaction persist with it (xfstests generic/104, 343).
absl::Status FsOps::QueueLinkDirs(Batch& b, uint64_t ino, const InodeItem& item, LogWork* work) {
  const uint64_t gen = b_->generation();
  if (item.generation == gen && item.nlink < 2) return absl::OkStatus();
  COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> refs, LoadRefs(b, ino));
  for (const auto& [parent, names] : refs) {
    bool linked = item.generation == gen;
    for (size_t i = 0; i < names.size() && !linked; ++i) {
      COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v,
                             b.Get(DirIndexKey(parent, names[i].index)));
      if (!v.has_value()) continue;
      COWKV_ASSIGN_OR_RETURN(DirEntry e, DecodeDirIndex(*v, parent));
      linked = e.transid == gen;
    }
    if (linked) work->push_back({parent, true});
  }
  return absl::OkStatus();
}

// Whether the way from `ino` up to the root changed in a way the log does
// not carry: a parent that lost an entry, or an ancestor directory that
// was moved (lost its name) in this transaction.
absl::StatusOr<bool> FsOps::PathChanged(Batch& b, uint64_t ino) {
  COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> refs, LoadRefs(b, ino));
  for (const auto& pr : refs) {
    if (st_->lost_entry.count(pr.first)) return true;
    uint64_t dir = pr.first;
    for (size_t depth = 0; dir != kRootDirIno; ++depth) {
      if (depth > kMaxPathDepth + 1) return DirectoryChainTooDeep(dir);
      if (st_->lost_name.count(dir)) return true;
      uint64_t up = 0;
      COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(dir, kInodeRef), TypeStart(dir, kInodeRef + 1), false,
                                   [&](absl::string_view k, absl::string_view) {
                                     FsKey fk;
                                     if (DecodeFsKey(k, &fk)) up = fk.offset;
                                     return false;
                                   }));
      if (up == 0) return DirectoryWithoutParent(dir);
      dir = up;
    }
  }
  return false;
}

// The log carries what grew in this transaction: new inodes, new names,
// data, xattrs. When the fsync's picture needs a name that was removed or
// moved (the inode's own, a parent's entry, an ancestor's), it answers
// false and the caller commits (btrfs falls back to a transaction commit
// in the same cases it cannot log: BTRFS_LOG_FORCE_COMMIT).
absl::StatusOr<bool> FsOps::LogForFsync(uint64_t ino, bool datasync) {
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  st_->counters.fsyncs.fetch_add(1, std::memory_order_relaxed);
  // fdatasync of an inode older than this transaction: its names are
  // durable already; only the data and the item matter.
  const bool names = !(datasync && it.generation < b_->generation());
  if (st_->lost_name.count(ino) && !opt_.bug_no_full_commit) return false;
  if (names && !opt_.bug_no_full_commit) {
    COWKV_ASSIGN_OR_RETURN(bool changed, PathChanged(b, ino));
    if (changed) return false;
  }
  needs_full_commit_ = false;
  std::vector<std::pair<uint64_t, bool>> work;
  COWKV_RETURN_IF_ERROR(LogInodeKeys(b, ino, it, names, &work));
  if (TypeOf(it) == FileType::kDirectory) {
    COWKV_RETURN_IF_ERROR(LogDirEntries(b, ino, &work));
  } else if (names) {
    COWKV_RETURN_IF_ERROR(QueueLinkDirs(b, ino, it, &work));
  }
  COWKV_RETURN_IF_ERROR(LogQueue(b, work));
  COWKV_RETURN_IF_ERROR(b.Commit());
  return !needs_full_commit_ || opt_.bug_no_full_commit;
}

// ---- Replay fix-up -----------------------------------------------------------------

absl::Status FsOps::ReplayFixup(const ReplayNotes& n) {
  dropped_in_.clear();
  Batch b(b_);
  COWKV_RETURN_IF_ERROR(FixNames(b, n));
  COWKV_RETURN_IF_ERROR(b.Commit());
  std::set<uint64_t> inodes = n.inodes;
  Batch b2(b_);
  COWKV_RETURN_IF_ERROR(FixDirEntries(b2, n));
  COWKV_RETURN_IF_ERROR(FixStaleIndexes(b2, n, &inodes));
  COWKV_RETURN_IF_ERROR(b2.Commit());
  inodes.insert(n.ref_dirs.begin(), n.ref_dirs.end());
  for (uint64_t ino : inodes) {
    Batch b3(b_);
    COWKV_RETURN_IF_ERROR(FixInode(b3, ino));
    COWKV_RETURN_IF_ERROR(b3.Commit());
  }
  // Directories that lost entries on the way (a deleted inode's names left
  // in a directory the log did not carry): their sizes follow. Fixing one
  // can drop entries elsewhere, so until nothing changes (each round
  // removes entries, so it ends).
  for (size_t round = 0; !dropped_in_.empty(); ++round) {
    if (round > 64) {
      CorruptionSite site;
      site.what = "replayed file tree";
      return COWKV_CORRUPTION(site, "directory sizes did not settle",
                              absl::StrCat(round, " rounds"), "at most 64");
    }
    std::set<uint64_t> dirs;
    dirs.swap(dropped_in_);
    for (uint64_t dir : dirs) {
      Batch b4(b_);
      COWKV_RETURN_IF_ERROR(FixInode(b4, dir));
      COWKV_RETURN_IF_ERROR(b4.Commit());
    }
  }
  return absl::OkStatus();
}

// Names an inode no longer has: refs of an inode logged with its names
// that the log did not carry, and names dropped from a replayed INODE_REF.
// Their directory entries go too.
absl::Status FsOps::FixNames(Batch& b, const ReplayNotes& n) {
  std::map<std::pair<uint64_t, uint64_t>, std::vector<InodeRef>> lost = n.lost_names;
  for (uint64_t ino : n.full_inodes) {
    // An item logged without its names (fdatasync; a directory whose item a
    // name change touched): the tree's names stand.
    auto lr = n.logged_refs.find(ino);
    if (lr == n.logged_refs.end()) continue;
    COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> all, LoadRefs(b, ino));
    for (const auto& [parent, refs] : all) {
      for (const InodeRef& r : refs) {
        FsKey fk;
        DecodeFsKey(NameRefKey(ino, parent, r), &fk);
        if (lr->second.count({fk.type, fk.offset})) continue;  // logged: it stands
        lost[{ino, parent}].push_back(r);
        b.Del(NameRefKey(ino, parent, r));
      }
    }
  }
  for (const auto& [who, refs] : lost) {
    const auto [ino, parent] = who;
    for (const InodeRef& r : refs) {
      // The same name under a new index (removed and added again, or
      // renamed over): only the old DIR_INDEX goes; the DIR_ITEM is the
      // new name's.
      COWKV_ASSIGN_OR_RETURN(bool still, HasName(b, ino, parent, r.name));
      if (opt_.bug_replay_drops_new_name) still = false;
      COWKV_RETURN_IF_ERROR(DropEntry(b, parent, r.name, r.index, ino, /*keep_item=*/still));
    }
  }
  return absl::OkStatus();
}

// Removes `name` -> `ino` from `dir` (DIR_ITEM unless `keep_item` and, when
// it still points at `ino`, DIR_INDEX `index`), if present.
absl::Status FsOps::DropEntry(Batch& b, uint64_t dir, absl::string_view name, uint64_t index,
                              uint64_t ino, bool keep_item) {
  const ItemKey dk = DirItemKey(dir, name);
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> cur, b.Get(dk));
  if (cur.has_value() && !keep_item) {
    COWKV_ASSIGN_OR_RETURN(std::vector<DirEntry> es, DecodeDirEntries(*cur, dir));
    const size_t before = es.size();
    es.erase(std::remove_if(es.begin(), es.end(),
                            [&](const DirEntry& e) { return e.name == name && e.child == ino; }),
             es.end());
    if (es.empty()) {
      b.Del(dk);
    } else if (es.size() != before) {
      b.Put(dk, EncodeDirEntries(es));
    }
  }
  const ItemKey ik = DirIndexKey(dir, index);
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> iv, b.Get(ik));
  if (iv.has_value()) {
    COWKV_ASSIGN_OR_RETURN(DirEntry e, DecodeDirIndex(*iv, dir));
    if (e.child == ino && e.name == name) {
      b.Del(ik);
      dropped_in_.insert(dir);
    }
  }
  return absl::OkStatus();
}

// Replayed directory entries must agree with their child's names: an entry
// whose child is missing or does not carry that name is dropped.
absl::Status FsOps::FixDirEntries(Batch& b, const ReplayNotes& n) {
  for (const std::string& key : n.dir_keys) {
    FsKey fk;
    DecodeFsKey(key, &fk);
    COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, b.Get(key));
    if (!v.has_value()) continue;
    COWKV_ASSIGN_OR_RETURN(std::vector<DirEntry> es, DecodeDirEntries(*v, fk.objectid));
    std::vector<DirEntry> keep;
    for (const DirEntry& e : es) {
      COWKV_ASSIGN_OR_RETURN(bool ok, HasName(b, e.child, fk.objectid, e.name));
      if (ok) keep.push_back(e);
    }
    if (keep.size() == es.size()) continue;
    if (keep.empty()) {
      b.Del(key);
    } else {
      b.Put(key, EncodeDirEntries(keep));
    }
  }
  return absl::OkStatus();
}

// A replayed DIR_ITEM says who holds a name now. An older DIR_INDEX entry
// of that name for another inode is stale: the inode lost the name (a
// rename over it, or an exchange) in a change the log carries only from
// the other side. The entry goes, with the name in the inode's ref; the
// inode is fixed up after (deleted if that was its last name).
absl::Status FsOps::FixStaleIndexes(Batch& b, const ReplayNotes& n, std::set<uint64_t>* fix) {
  std::map<uint64_t, std::set<uint64_t>> hashes;  // directory -> replayed DIR_ITEM hashes
  for (const std::string& key : n.dir_keys) {
    FsKey fk;
    if (DecodeFsKey(key, &fk) && fk.type == kDirItem) hashes[fk.objectid].insert(fk.offset);
  }
  for (const auto& [dir, hs] : hashes) {
    std::vector<std::pair<uint64_t, DirEntry>> cands;
    COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(dir, kDirIndex), TypeStart(dir, kDirIndex + 1), false,
                                 [&](absl::string_view k, absl::string_view v) {
                                   FsKey fk;
                                   DecodeFsKey(k, &fk);
                                   absl::StatusOr<DirEntry> e = DecodeDirIndex(v, dir);
                                   if (e.ok() && hs.count(NameHash(e->name))) {
                                     cands.push_back({fk.offset, *std::move(e)});
                                   }
                                   return true;
                                 }));
    for (const auto& [index, e] : cands) {
      COWKV_ASSIGN_OR_RETURN(std::optional<DirEntry> cur, FindEntry(b, dir, e.name));
      if (cur.has_value() && cur->child == e.child) continue;
      b.Del(DirIndexKey(dir, index));
      fix->insert(e.child);
      COWKV_RETURN_IF_ERROR(TakeRef(b, e.child, dir, e.name, index).status());
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> FsOps::HasName(Batch& b, uint64_t ino, uint64_t parent,
                                    absl::string_view name) {
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> it, b.Get(InodeKey(ino)));
  if (!it.has_value()) return false;
  COWKV_ASSIGN_OR_RETURN(std::optional<InodeRef> r, FindRef(b, ino, parent, name));
  return r.has_value();
}

// One touched inode: every name it has gets its directory entries (added
// when replay left them out; a name in a missing directory is dropped);
// nlink = names; no names left = deleted; directories' sizes recomputed;
// extents past EOF dropped (preallocated ones kept).
absl::Status FsOps::FixInode(Batch& b, uint64_t ino) {
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> raw, b.Get(InodeKey(ino)));
  if (!raw.has_value()) {
    if (ino == kRootDirIno) return absl::OkStatus();
    // A deleted inode: its names left in directories go, then its remnants.
    COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> refs, LoadRefs(b, ino));
    for (const auto& [parent, rs] : refs) {
      for (const InodeRef& r : rs)
        COWKV_RETURN_IF_ERROR(DropEntry(b, parent, r.name, r.index, ino));
    }
    return DeleteInode(b, ino);
  }
  COWKV_ASSIGN_OR_RETURN(InodeItem it, DecodeInodeItem(*raw, ino));
  COWKV_ASSIGN_OR_RETURN(uint32_t names, FixRefs(b, ino, TypeOf(it)));
  if (ino != kRootDirIno && names == 0) return DeleteInode(b, ino);
  InodeItem fixed = it;
  fixed.nlink = TypeOf(it) == FileType::kDirectory ? 1 : names;
  if (ino == kRootDirIno) fixed.nlink = 1;
  // nlink = names, and an inode left without names was deleted above.
  COWKV_DCHECK(fixed.nlink >= 1);
  if (TypeOf(it) == FileType::kDirectory) {
    uint64_t size = 0;
    COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(ino, kDirIndex), TypeStart(ino, kDirIndex + 1), false,
                                 [&](absl::string_view, absl::string_view v) {
                                   absl::StatusOr<DirEntry> e = DecodeDirIndex(v, ino);
                                   if (e.ok()) size += 2 * e->name.size();
                                   return true;
                                 }));
    fixed.size = size;
  } else {
    COWKV_RETURN_IF_ERROR(DropPastEof(b, ino, fixed.size));
  }
  if (EncodeInodeItem(fixed) != *raw) b.Put(InodeKey(ino), EncodeInodeItem(fixed));
  return absl::OkStatus();
}

// Re-adds the directory entries of every name of `ino`; returns how many
// names it has. A name in a directory that is gone is dropped.
absl::StatusOr<uint32_t> FsOps::FixRefs(Batch& b, uint64_t ino, FileType type) {
  COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> refs, LoadRefs(b, ino));
  uint32_t names = 0;
  for (const auto& [parent, rs] : refs) {
    COWKV_ASSIGN_OR_RETURN(std::optional<std::string> p, b.Get(InodeKey(parent)));
    const bool gone = !p.has_value() && parent != kRootDirIno;
    for (const InodeRef& r : rs) {
      bool ok = false;
      if (!gone) {
        COWKV_ASSIGN_OR_RETURN(ok, EnsureEntry(b, parent, r, ino, type));
      }
      if (ok) {
        ++names;
      } else {
        COWKV_RETURN_IF_ERROR(TakeRef(b, ino, parent, r.name, r.index).status());
      }
    }
  }
  return names;
}

// Makes sure `dir` has the entries of name `r` -> `ino`; false when the
// name belongs to another inode there (the name is then not `ino`'s).
absl::StatusOr<bool> FsOps::EnsureEntry(Batch& b, uint64_t dir, const InodeRef& r, uint64_t ino,
                                        FileType type) {
  COWKV_ASSIGN_OR_RETURN(std::optional<DirEntry> e, FindEntry(b, dir, r.name));
  if (e.has_value() && e->child != ino) return false;
  DirEntry ne{ino, type, b_->generation(), r.name};
  if (!e.has_value()) {
    const ItemKey dk = DirItemKey(dir, r.name);
    COWKV_ASSIGN_OR_RETURN(std::optional<std::string> cur, b.Get(dk));
    std::vector<DirEntry> es;
    if (cur.has_value()) {
      COWKV_ASSIGN_OR_RETURN(es, DecodeDirEntries(*cur, dir));
    }
    es.push_back(ne);
    b.Put(dk, EncodeDirEntries(es));
  }
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> iv, b.Get(DirIndexKey(dir, r.index)));
  if (!iv.has_value()) b.Put(DirIndexKey(dir, r.index), EncodeDirEntries({ne}));
  return true;
}

}  // namespace fs
}  // namespace cowkv
