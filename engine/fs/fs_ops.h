// The file namespace of one subvolume: path resolution, namespace and data
// operations, fsync's choice of what to log (seeds 000 and 004), fiemap
// with its path-sharedness cache (seed 002) and the fix-up that makes a
// replayed log consistent. Everything runs over an FsBackend under the
// store's tree lock; FsState is the subvolume's in-memory part (the inode
// cache of seed 003 and per-transaction bookkeeping).
//
// Errors carry the POSIX name first in the message ("ENOENT: ...") with
// these codes: ENOENT NOT_FOUND, EEXIST ALREADY_EXISTS, ENOTDIR / EISDIR /
// ENOTEMPTY / EPERM / EMLINK FAILED_PRECONDITION, EINVAL / ENAMETOOLONG /
// EFBIG INVALID_ARGUMENT, ENOSPC RESOURCE_EXHAUSTED, EROFS
// FAILED_PRECONDITION.
#ifndef COWKV_ENGINE_FS_FS_OPS_H_
#define COWKV_ENGINE_FS_FS_OPS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/functional/function_ref.h"
#include "absl/hash/hash.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "cowkv/watch.h"
#include "engine/fs/fs_backend.h"
#include "engine/fs/fs_items.h"
#include "engine/fs/inode_cache.h"

namespace cowkv {
namespace fs {

// The namespace's limits: engine/include/cowkv/limits.h.

struct FsOptions {
  size_t inline_max = 2048;        // files up to this size live in their item
  size_t max_extent = 128 << 10;   // largest data extent one write makes
  bool dir_index_offset = true;    // seed 000
  bool precise_logged_check = true;  // seed 004
  bool fiemap_path_cache = true;   // seed 002
  size_t inode_cache_entries = 1 << 16;
  // Testing only: at most this many names in one INODE_REF item (0: as
  // many as fit); the rest go to INODE_EXTREF items.
  size_t ref_item_names = 0;
  // Testing only (Options::TestHooks::planted_bug).
  bool bug_no_full_commit = false;
  bool bug_item_counts_as_names = false;
  bool bug_replay_drops_new_name = false;
  bool bug_late_inode_counter = false;
  bool bug_replay_drops_prealloc = false;  // fix-up drops KEEP_SIZE extents past EOF
  bool bug_skip_orphan_cleanup = false;
  bool bug_logged_inode_skips_item = false;
  bool bug_xattr_removal_not_logged = false;
  bool bug_extref_not_logged = false;  // fsync logs names in INODE_REF items only
};

// fallocate(2) modes (Linux's FALLOC_FL_* values); the combinations
// FsOps::Fallocate takes are 0, KEEP_SIZE, PUNCH_HOLE | KEEP_SIZE and
// ZERO_RANGE with or without KEEP_SIZE.
inline constexpr uint32_t kFallocKeepSize = 0x01;
inline constexpr uint32_t kFallocPunchHole = 0x02;
inline constexpr uint32_t kFallocZeroRange = 0x10;

// Relaxed atomics: statistics, bumped under a shared lock too.
struct FsCounters {
  std::atomic<uint64_t> fsyncs{0};
  std::atomic<uint64_t> logged_keys{0};     // keys fsync and log updates noted
  std::atomic<uint64_t> log_updates{0};     // rename/link/unlink that updated the log
  std::atomic<uint64_t> logged_lookups{0};  // "logged?" answered by the log (seed 004)
  std::atomic<uint64_t> inode_cache_hits{0};
  std::atomic<uint64_t> inode_cache_misses{0};
  std::atomic<uint64_t> path_cache_hits{0};  // fiemap nodes answered by the cache
  std::atomic<uint64_t> shared_checks{0};    // fiemap tree-block lookups
  std::atomic<uint64_t> file_events{0};      // file events recorded (only while watched)
  std::atomic<uint64_t> span_closes{0};      // file-event spans closed by an unwatched write
};

// A subvolume's file-event recording (docs/design.md "File watch";
// fs_events.h for the span). `watchers` changes only under the store's
// exclusive barrier (a writer reads it first to pick its lock); the rest
// under the subvolume's exclusive tree lock or the exclusive barrier.
struct FileWatchState {
  enum class Span { kUnknown, kOpen, kClosed };  // kUnknown: info not read since mount
  std::atomic<int> watchers{0};
  Span span = Span::kUnknown;
  uint64_t span_start = 0;
  uint64_t floor = 0;
  uint64_t since_compact = 0;  // events recorded since the last compaction check
};

// The in-memory inode (seed 003's cache holds these).
struct InodeMem {
  // Whether the inode is in the log chain of generation `logged_gen`
  // (0 = unknown: never asked since it was cached).
  uint64_t logged_gen = 0;
  bool logged = false;
  // The generation in which its names were logged (an fsync, or a log
  // update of a name change). Its item alone in the log (a directory a
  // name change touched) does not count: the names still have to go.
  uint64_t names_logged_gen = 0;
  // Seed 000: the last DIR_INDEX offset logged in `index_logged_gen`.
  uint64_t index_logged_gen = 0;
  uint64_t last_logged_index = 0;
  // The next DIR_INDEX offset (0 = not loaded yet), and the first one
  // handed out in generation `first_index_gen`.
  uint64_t next_index = 0;
  uint64_t first_index_gen = 0;
  uint64_t first_index = 0;
};

// Per-subvolume state. Mutated only under the store's exclusive tree lock
// (the cache itself is thread-safe for readers that populate it).
struct FsState {
  explicit FsState(size_t cache_entries) : cache(cache_entries) {}
  InodeCache<InodeMem> cache;
  uint64_t next_ino = 0;  // 0 = not loaded
  // Keys deleted in generation `gen` per inode, not logged since: the
  // first fsync of the inode logs their tombstones.
  uint64_t gen = 0;
  struct KeyHash {
    size_t operator()(const FsKey& k) const {
      return absl::HashOf(k.objectid, k.type, k.offset);
    }
  };
  struct KeyEq {
    bool operator()(const FsKey& a, const FsKey& b) const {
      return a.objectid == b.objectid && a.type == b.type && a.offset == b.offset;
    }
  };
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<FsKey, KeyHash, KeyEq>> deleted;
  // dir → the inodes whose INODE_REF for dir is in their own deleted set:
  // who lost a name in dir (rename, fsync logging) without a scan of
  // `deleted`. Kept in step by RecordDeleted and ForgetDeleted.
  absl::flat_hash_map<uint64_t, absl::flat_hash_set<uint64_t>> ref_losers;
  // Inodes that lost a name (unlink with names left, rename, exchange)
  // and directories that lost an entry, in generation `gen` (btrfs's
  // last_unlink_trans). The log carries only names that grew: an fsync
  // whose picture includes one of these, or whose object sits under a
  // moved directory, needs a full engine commit.
  absl::flat_hash_set<uint64_t> lost_name;
  absl::flat_hash_set<uint64_t> lost_entry;
  // Directories created in generation `gen`, by the directory they were
  // created in: a directory's fsync logs their new entries, recursively,
  // also when their own entry was logged by an earlier fsync.
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> new_subdirs;
  // Drops `ino`'s deleted set (logged, or the inode is gone).
  void ForgetDeleted(uint64_t ino) {
    auto d = deleted.find(ino);
    if (d == deleted.end()) return;
    for (const FsKey& k : d->second) {
      if (k.type != kInodeRef || k.objectid != ino) continue;
      auto r = ref_losers.find(k.offset);
      if (r == ref_losers.end()) continue;
      r->second.erase(ino);
      if (r->second.empty()) ref_losers.erase(r);
    }
    deleted.erase(d);
  }
  // Open handles (fs_open.cc). Handles and counts are guarded by open_mu
  // (Open runs under the shared tree lock); `orphans` and `linkable`
  // change only under the exclusive tree lock. An inode whose last name
  // goes while open_count > 0 becomes an orphan (nlink 0, an ORPHAN_ITEM)
  // and is deleted at its last Close, or at the next mount.
  absl::Mutex open_mu;
  uint64_t next_handle ABSL_GUARDED_BY(open_mu) = 1;
  absl::flat_hash_map<uint64_t, uint64_t> handles ABSL_GUARDED_BY(open_mu);     // -> ino
  absl::flat_hash_map<uint64_t, uint32_t> open_count ABSL_GUARDED_BY(open_mu);  // ino ->
  absl::flat_hash_set<uint64_t> orphans;   // nlink 0, kept by open handles
  absl::flat_hash_set<uint64_t> linkable;  // O_TMPFILE inodes never linked (I_LINKABLE)
  // Seed 002: sharedness of the last fiemap path, by level.
  struct PathCacheEntry {
    uint64_t bytenr = 0;
    bool shared = false;
    uint64_t epoch = 0;  // snapshot epoch (not shared) or drop epoch (shared)
  };
  absl::Mutex path_mu;  // fiemap runs under a shared tree lock
  std::vector<PathCacheEntry> path_cache ABSL_GUARDED_BY(path_mu);
  FsCounters counters;
  FileWatchState file_watch;
};

struct Attr {
  uint64_t ino = 0;
  InodeItem item;
  FileType type() const;
};

struct ReadDirEntry {
  std::string name;
  uint64_t ino = 0;
  FileType type = FileType::kRegular;
  uint64_t index = 0;
};

struct FiemapEntry {
  uint64_t logical = 0;
  uint64_t physical = 0;
  uint64_t length = 0;
  uint32_t flags = 0;
};
// Linux's FIEMAP_EXTENT_* values.
inline constexpr uint32_t kFiemapLast = 0x1;
inline constexpr uint32_t kFiemapNotAligned = 0x100;
inline constexpr uint32_t kFiemapInline = 0x200;
inline constexpr uint32_t kFiemapUnwritten = 0x800;  // preallocated (reads as zeros)
inline constexpr uint32_t kFiemapShared = 0x2000;

inline constexpr uint32_t kXattrCreate = 1;
inline constexpr uint32_t kXattrReplace = 2;

inline constexpr uint32_t kRenameNoReplace = 1;
inline constexpr uint32_t kRenameExchange = 2;

// What SetAttr changes (engine/include/cowkv/files.h SetAttrSpec).
struct AttrTime {
  bool now = false;  // the clock at the call, else `ns`
  int64_t ns = 0;
};
struct AttrChange {
  std::optional<uint32_t> mode;  // permission bits (07777); the kind stays
  std::optional<uint32_t> uid, gid;
  std::optional<AttrTime> atime, mtime;
  std::optional<uint64_t> size;
  bool empty() const { return !mode && !uid && !gid && !atime && !mtime && !size; }
};

// Touched-by-replay bookkeeping (ReplayFixup).
struct ReplayNotes {
  std::set<uint64_t> inodes;       // any key of theirs was replayed
  std::set<uint64_t> full_inodes;  // their INODE_ITEM was replayed
  // ino -> its INODE_REF / INODE_EXTREF keys replayed, as (type, offset).
  std::map<uint64_t, std::set<std::pair<uint8_t, uint64_t>>> logged_refs;
  std::set<uint64_t> ref_dirs;  // directories of the names in replayed refs
  // Names an INODE_REF lost in replay: (ino, parent) -> names with indexes.
  std::map<std::pair<uint64_t, uint64_t>, std::vector<InodeRef>> lost_names;
  std::set<std::string> dir_keys;  // DIR_ITEM / DIR_INDEX keys replayed
};

// A path's components (views into the caller's path).
using PathParts = absl::InlinedVector<absl::string_view, 8>;

// Where a namespace operation acts: a path from the subvolume's root, or a
// name in a directory given by inode (the *at() calls, and FUSE's low-level
// API, which knows directories by inode). Views into the caller's strings.
struct Place {
  Place(absl::string_view p) : path(p) {}  // NOLINT: a path is a place
  static Place At(uint64_t dir, absl::string_view name) {
    Place pl(absl::string_view{});
    pl.dir = dir;
    pl.name = name;
    return pl;
  }
  bool at() const { return dir != 0; }
  // The place in error messages: the path, or "<dir>/name".
  std::string Describe() const;

  absl::string_view path;
  uint64_t dir = 0;  // nonzero: `name` in directory `dir`
  absl::string_view name;
};

class FsOps {
 public:
  FsOps(FsBackend* backend, FsState* state, const FsOptions& options);
  // Call first under the exclusive lock, before any writing operation:
  // starts the per-transaction bookkeeping when the generation moved.
  void BeginWrite();

  // Paths are '/'-separated from the subvolume's root directory; empty
  // components are skipped; "." and ".." are refused (EINVAL). Symlinks
  // are not followed.
  absl::StatusOr<uint64_t> Lookup(absl::string_view path);
  absl::StatusOr<uint64_t> LookupAt(uint64_t dir, absl::string_view name);
  absl::StatusOr<Attr> Stat(uint64_t ino);

  absl::StatusOr<Attr> Create(const Place& place, FileType type, uint32_t mode,
                              absl::string_view symlink_target = {});
  absl::Status Unlink(const Place& place, bool dir);
  absl::Status Rename(const Place& from, const Place& to, uint32_t flags);
  absl::StatusOr<Attr> Link(absl::string_view existing, const Place& new_place);
  // linkat(2) by inode: a new name for `ino`.
  absl::StatusOr<Attr> LinkInode(uint64_t ino, const Place& new_place);
  absl::StatusOr<std::vector<ReadDirEntry>> ReadDir(uint64_t dir, uint64_t cookie,
                                                    uint64_t limit, bool* more);
  absl::StatusOr<std::string> ReadLink(uint64_t ino);

  absl::StatusOr<std::string> Read(uint64_t ino, uint64_t offset, uint64_t length);
  absl::Status Write(uint64_t ino, uint64_t offset, absl::string_view data);
  absl::Status Truncate(uint64_t ino, uint64_t size);
  absl::Status Clone(uint64_t src, uint64_t src_off, uint64_t dst, uint64_t dst_off,
                     uint64_t length);
  // `flags`: kXattrCreate / kXattrReplace (setxattr(2)'s).
  absl::Status SetXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                        uint32_t flags = 0);
  absl::StatusOr<std::string> GetXattr(uint64_t ino, absl::string_view name);
  absl::StatusOr<std::vector<std::string>> ListXattrs(uint64_t ino);
  absl::Status RemoveXattr(uint64_t ino, absl::string_view name);
  // fallocate(2) (fs_prealloc.cc): allocate (mode 0 / KEEP_SIZE: the
  // holes of the range get preallocated extents, which read as zeros),
  // PUNCH_HOLE | KEEP_SIZE (the range becomes a hole), ZERO_RANGE (the
  // range becomes preallocated extents). Without KEEP_SIZE the file grows
  // to the range's end. EOPNOTSUPP (UNIMPLEMENTED) for other modes,
  // EINVAL for length 0, ENOSPC with nothing changed.
  absl::Status Fallocate(uint64_t ino, uint32_t mode, uint64_t offset, uint64_t length);
  // setattr (fs_attr.cc): the fields `c` names; `size` through Truncate
  // first (regular files only), then the rest in one batch; ctime becomes
  // now when anything changed.
  absl::StatusOr<Attr> SetAttr(uint64_t ino, const AttrChange& c);

  // Notes what fsync of `ino` must log; the caller then waits for a log
  // sync. `datasync`: skip the names of an inode older than this
  // transaction. False: the log cannot carry this fsync (a name it
  // depends on was removed or moved in this transaction) and the caller
  // must commit the engine transaction instead (btrfs's "needs a full
  // commit"); what was noted stays noted.
  absl::StatusOr<bool> LogForFsync(uint64_t ino, bool datasync);

  absl::StatusOr<std::vector<FiemapEntry>> Fiemap(uint64_t ino, uint64_t offset,
                                                  uint64_t length);

  // Open handles and orphans (fs_open.cc). Open: a handle on `ino`
  // (any existing inode); Close: EBADF (NOT_FOUND) for an unknown handle,
  // else *last_orphan says the handle is the last one of an orphan: the
  // caller repeats the Close under the exclusive lock with `may_delete`,
  // which then deletes the orphan (inode, extents, xattrs, ORPHAN_ITEM).
  absl::StatusOr<uint64_t> Open(uint64_t ino);
  absl::Status Close(uint64_t handle, bool may_delete, bool* last_orphan);
  // The inode an open handle is on (EBADF: NOT_FOUND).
  absl::StatusOr<uint64_t> HandleInode(uint64_t handle);
  // O_TMPFILE: a regular inode with nlink 0 and an ORPHAN_ITEM, opened;
  // LinkInode gives it a name (linkat with AT_EMPTY_PATH).
  absl::StatusOr<std::pair<uint64_t, Attr>> CreateTmpfile(uint64_t dir, uint32_t mode);
  // Mount (btrfs's orphan cleanup): every ORPHAN_ITEM's inode that still
  // has nlink 0 is deleted; a stale item (the inode was linked, or is
  // gone) is dropped. Returns how many inodes it deleted.
  absl::StatusOr<uint64_t> CleanupOrphans();
  // Every ORPHAN_ITEM's inode (check, tests).
  absl::StatusOr<std::vector<uint64_t>> ListOrphans();

  // After a log replay: makes the touched inodes and directories
  // consistent (stale names dropped, missing entries re-added, link counts
  // and directory sizes recomputed, unlinked inodes deleted, extents past
  // EOF dropped).
  absl::Status ReplayFixup(const ReplayNotes& notes);

 private:
  friend class Batch;
  class Batch;
  using LogWork = std::vector<std::pair<uint64_t, bool>>;  // inode, with entries
  struct Resolved {
    uint64_t parent = 0;
    uint64_t at_dir = 0;  // the place named its parent by inode
    PathParts dir_parts;  // the parent's path; views into the caller's path
    std::string name;
    uint64_t ino = 0;  // 0 = absent
    FileType type = FileType::kRegular;
  };
  // Both resolve through `b`, whose read cache then serves the operation
  // that follows (a rename's two paths share their parents' items).
  // `sibling`: a path this operation resolved already; when it has the
  // same parent path its parent is reused instead of walked again.
  absl::StatusOr<Resolved> ResolveParent(Batch& b, const Place& place,
                                         const Resolved* sibling = nullptr);
  absl::StatusOr<Attr> LinkIn(Batch& b, uint64_t ino, const Place& new_place);
  absl::StatusOr<uint64_t> LookupIn(Batch& b, absl::string_view path);
  absl::StatusOr<uint64_t> Walk(Batch& b, absl::Span<const absl::string_view> parts,
                                absl::string_view path);
  absl::StatusOr<std::optional<DirEntry>> FindEntry(Batch& b, uint64_t dir,
                                                    absl::string_view name);
  absl::StatusOr<InodeItem> LoadInode(Batch& b, uint64_t ino);
  absl::Status CheckDir(Batch& b, uint64_t ino);
  absl::Status EnsureRoot(Batch& b);
  absl::StatusOr<uint64_t> AllocIno();
  absl::Status LoadNextIno();
  absl::Status LoadNextIndex(Batch& b, uint64_t dir);
  absl::StatusOr<uint64_t> NextIndex(Batch& b, uint64_t dir);
  std::shared_ptr<InodeMem> Mem(uint64_t ino);
  // Both update the parent directory's inode (size, times) unless
  // `touch_later` is given: then its size change is added there and the
  // caller touches the directory itself.
  absl::Status AddName(Batch& b, uint64_t parent, absl::string_view name, uint64_t ino,
                       FileType type, int64_t* touch_later = nullptr);
  absl::Status RemoveName(Batch& b, uint64_t parent, absl::string_view name, uint64_t ino,
                          int64_t* touch_later = nullptr);
  absl::Status DropLink(Batch& b, uint64_t ino, InodeItem* item);
  absl::Status DeleteInode(Batch& b, uint64_t ino);
  // Whether a handle is open on `ino`.
  bool IsOpen(uint64_t ino);
  // `ino` (a file whose last name just went, `item` its inode) becomes an
  // orphan instead of being deleted: nlink 0 and an ORPHAN_ITEM.
  void MakeOrphan(Batch& b, uint64_t ino, InodeItem* item);
  absl::Status TouchDir(Batch& b, uint64_t dir, int64_t size_delta);
  absl::Status TouchInode(Batch& b, uint64_t ino);
  absl::StatusOr<bool> IsAncestor(Batch& b, uint64_t maybe_ancestor, uint64_t dir);
  absl::Status RenameChecks(Batch& b, const Resolved& from, const Resolved& to, uint32_t flags);

  // Data.
  absl::StatusOr<std::vector<std::pair<uint64_t, FileExtent>>> Extents(Batch& b, uint64_t ino,
                                                                       uint64_t start,
                                                                       uint64_t end);
  absl::Status Punch(Batch& b, uint64_t ino, uint64_t start, uint64_t end, int64_t* nbytes);
  absl::StatusOr<bool> HasRegularExtents(Batch& b, uint64_t ino);
  absl::Status UninlineIfNeeded(Batch& b, uint64_t ino, InodeItem* item);
  absl::Status WriteInline(Batch& b, uint64_t ino, InodeItem* item, uint64_t offset,
                           absl::string_view data);
  absl::Status WriteExtents(Batch& b, uint64_t ino, uint64_t offset, absl::string_view data,
                            int64_t* nbytes);
  absl::StatusOr<std::string> ReadExtent(const FileExtent& e, uint64_t from, uint64_t len);
  // fallocate: preallocated extents over the holes of [start, end)
  // (at most max_extent bytes each); adds their bytes to *nbytes.
  absl::Status PreallocHoles(Batch& b, uint64_t ino, uint64_t start, uint64_t end, int64_t* nbytes);
  // Replay: drops what lies past EOF but preallocated extents (btrfs keeps
  // fallocate KEEP_SIZE extents through log replay).
  absl::Status DropPastEof(Batch& b, uint64_t ino, uint64_t size);
  absl::Status CloneChecks(const InodeItem& s, uint64_t src, uint64_t src_off,
                           const InodeItem& d, uint64_t dst, uint64_t dst_off, uint64_t length);
  absl::StatusOr<std::vector<Xattr>> LoadXattrs(Batch& b, uint64_t ino, absl::string_view name);

  // File events (fs_watch.cc); no-ops unless the backend records them.
  // Called before the operation's Commit, with the names as they were.
  absl::StatusOr<std::optional<std::string>> InodePath(Batch& b, uint64_t ino);
  absl::StatusOr<std::string> PlacePath(Batch& b, const Resolved& r);
  absl::Status Emit(Batch& b, FileEvent::Type type, uint64_t ino, const Resolved& at,
                    const Resolved* to = nullptr);
  absl::Status EmitInode(Batch& b, FileEvent::Type type, uint64_t ino);

  // The log (seeds 000 and 004).
  absl::StatusOr<bool> IsLogged(Batch& b, uint64_t ino);
  absl::StatusOr<bool> AnyLogged(Batch& b, const std::vector<uint64_t>& inodes);
  void MarkLogged(uint64_t ino);
  void RecordDeleted(uint64_t ino, absl::string_view key);
  absl::Status UpdateLog(Batch& b, const std::vector<uint64_t>& named);
  absl::Status LogQueue(Batch& b, LogWork& work);
  absl::Status LogInodeKeys(Batch& b, uint64_t ino, const InodeItem& item, bool names,
                            LogWork* also);
  absl::Status LogNames(Batch& b, uint64_t ino, LogWork* also);
  // `ino`'s names, per parent directory in key order: its INODE_REF items,
  // then the names of its INODE_EXTREF items (InodeRef::extref) joined to
  // their parent's.
  using ParentRefs = std::pair<uint64_t, std::vector<InodeRef>>;
  static absl::StatusOr<std::vector<ParentRefs>> LoadRefs(Batch& b, uint64_t ino);
  // Extended refs (fs_refs.cc). AddRef puts a name in the INODE_REF item of
  // (ino, parent), or in an INODE_EXTREF item when that one is full (EMLINK
  // when that one is full too: names colliding in one hash slot).
  absl::Status AddRef(Batch& b, uint64_t ino, uint64_t parent, const InodeRef& r);
  // Removes `name` (with `index`, when given) from whichever item holds it;
  // nullopt when `ino` has no such name in `parent`.
  absl::StatusOr<std::optional<InodeRef>> TakeRef(Batch& b, uint64_t ino, uint64_t parent,
                                                  absl::string_view name,
                                                  std::optional<uint64_t> index = std::nullopt);
  static absl::StatusOr<std::optional<InodeRef>> FindRef(Batch& b, uint64_t ino, uint64_t parent,
                                                         absl::string_view name);
  absl::Status LogDirEntries(Batch& b, uint64_t dir, LogWork* also);
  // Whether a directory on the way from `ino` to the root (the root
  // excepted) was moved or lost an entry it would need in this
  // transaction: `ino`'s parents must not have lost entries, and no
  // ancestor may have lost its own name.
  absl::StatusOr<bool> PathChanged(Batch& b, uint64_t ino);
  absl::Status QueueLinkDirs(Batch& b, uint64_t ino, const InodeItem& item, LogWork* work);
  void Note(Batch& b, absl::string_view key);

  // fiemap. The walk's cache hits and sharedness lookups, added to the
  // state's counters once per call rather than per extent and level.
  struct PathCounts {
    uint64_t hits = 0;
    uint64_t checks = 0;
  };
  absl::StatusOr<bool> PathShared(const std::vector<PathNode>& path, PathCounts* counts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st_->path_mu);
  // `own_refs(bytenr)`: how many of the file's own items reference that
  // data extent (they do not make it shared).
  absl::StatusOr<FiemapEntry> MapExtent(
      uint64_t logical, const FileExtent& e, const std::vector<PathNode>& path,
      absl::FunctionRef<absl::StatusOr<uint64_t>(uint64_t)> own_refs, PathCounts* counts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(st_->path_mu);

  // Replay fix-up steps.
  absl::Status FixNames(Batch& b, const ReplayNotes& n);
  absl::Status DropEntry(Batch& b, uint64_t dir, absl::string_view name, uint64_t index,
                         uint64_t ino, bool keep_item = false);
  absl::Status FixDirEntries(Batch& b, const ReplayNotes& n);
  absl::Status FixStaleIndexes(Batch& b, const ReplayNotes& n, std::set<uint64_t>* fix);
  absl::StatusOr<bool> HasName(Batch& b, uint64_t ino, uint64_t parent, absl::string_view name);
  absl::Status FixInode(Batch& b, uint64_t ino);
  absl::StatusOr<uint32_t> FixRefs(Batch& b, uint64_t ino, FileType type);
  absl::StatusOr<bool> EnsureEntry(Batch& b, uint64_t dir, const InodeRef& r, uint64_t ino,
                                   FileType type);

  FsBackend* const b_;
  FsState* const st_;
  const FsOptions& opt_;
  // Set while logging for an fsync when its picture needs a name that was
  // removed or moved in this transaction (LogForFsync then answers false).
  bool needs_full_commit_ = false;
  // Replay: directories DropEntry removed entries from (their sizes are
  // recomputed at the end of the fix-up).
  std::set<uint64_t> dropped_in_;
};

// Builders of tree keys.
ItemKey InodeKey(uint64_t ino);
ItemKey RefKey(uint64_t ino, uint64_t parent);
ItemKey ExtrefKey(uint64_t ino, uint64_t parent, absl::string_view name);
// The key of the item that holds name `r` of `ino` in `parent`.
ItemKey NameRefKey(uint64_t ino, uint64_t parent, const InodeRef& r);
ItemKey DirItemKey(uint64_t dir, absl::string_view name);
ItemKey DirIndexKey(uint64_t dir, uint64_t index);
ItemKey ExtentKey(uint64_t ino, uint64_t offset);
// Every key of `ino` lies in [InodeStart(ino), InodeStart(ino + 1)).
ItemKey InodeStart(uint64_t ino);
ItemKey TypeStart(uint64_t ino, uint8_t type);
ItemKey OrphanKey(uint64_t ino);

// Corruptions found walking from a directory up to the root (path walks in
// fs_ops.cc and fs_log.cc): `dir` has no INODE_REF, or the walk passed the
// path depth limit (a cycle). `line` defaults to the caller's (GCC, Clang).
absl::Status DirectoryWithoutParent(uint64_t dir, int line = __builtin_LINE());
absl::Status DirectoryChainTooDeep(uint64_t dir, int line = __builtin_LINE());

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_FS_OPS_H_
