// TxnManager: the running engine transaction and its commit.
//
// One engine transaction is running at any time; every write joins it. The
// manager owns what a transaction changes: the node cache (dirty nodes), the
// free space, the delayed refs and the trees themselves (root tree, extent
// tree, fs trees). It implements TreeHooks, so every CoW allocates through it
// and queues its refs here.
//
// Engine transaction states. A commit is pipelined: PrepareCommit seals
// generation N and starts N+1 under the store's exclusive lock; WriteCommit
// writes N without that lock, while writers already work in N+1; FinishCommit
// publishes N under the lock again. (Commit() runs all three under the
// caller's lock.)
//
//   running(N) --PrepareCommit--> sealed(N), running(N+1)
//   sealed(N) --WriteCommit: nodes, flush, superblocks, flush--> durable(N)
//   durable(N) --FinishCommit--> done: N's nodes evictable, N's pins free
//
//   - running: dirty nodes and pinned extents belong to `generation_`; the
//     device still holds the last durable generation intact (pinned space
//     is not reused).
//   - sealed: N's nodes are immutable (a write in N+1 CoWs them) and pinned
//     in the cache until written; N's root pointers and pins are in the
//     CommitBatch.
//   - durable: the superblocks name N's root.
//   Any error after the first device write makes the manager read-only
//   (fatal_), and the last committed state stays mountable.
//
// Space: ReserveForWrite() refuses a write (RESOURCE_EXHAUSTED, nothing
// changed) unless the worst case of that write plus everything the commit may
// still allocate fits in free space; see docs/design.md "Space reservation".
//
// Threads. Two kinds of callers (docs/design.md "Concurrency"):
//   - exclusive: the store holds its barrier (StoreImpl::mu_) exclusively —
//     commit, subvolume changes, replay, KV writes, log syncs, the cleaner,
//     mount. Nothing else runs inside the manager then.
//   - file writers and readers: each holds the barrier shared and its own
//     subvolume's tree lock, so several run here at once, each on its own
//     fs tree. They call the TreeHooks, ReserveForWrite/EndWrite,
//     AllocDataExtent, ReleaseUnusedData, AddDataRef, RunDelayedRefBatch,
//     DataExtentRefs, TreeBlockShared, SetFatal, fatal() and the counters.
//     What those share is behind the manager's own locks, outermost first:
//     extent_mu_ (the extent tree: a delayed-ref batch, every read of it,
//     and the CoW of a node that may be shared, whose refcount decision
//     must not interleave with another tree's CoW of the same node) →
//     space_mu_ (free space, the delayed-ref heads, used bytes, per-tree
//     node counts, reservations, fatal_) → NodeCache. Neither is held
//     while a tree is changed, except extent_mu_ around the extent tree's
//     own changes (whose hooks take space_mu_ only).
//   Everything else (fs_roots_, the root tree, generation_, the superblock)
//   changes only under the exclusive barrier, and the trees' roots only
//   under their subvolume's tree lock or the exclusive barrier.
#ifndef COWKV_ENGINE_TXN_TXN_MANAGER_H_
#define COWKV_ENGINE_TXN_TXN_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/device.h"
#include "engine/alloc/free_space.h"
#include "engine/format/items.h"
#include "engine/format/superblock.h"
#include "engine/refs/delayed_refs.h"
#include "engine/tree/node_cache.h"
#include "engine/tree/tree.h"

namespace cowkv {

struct TxnStats {
  uint64_t generation = 0;
  uint64_t commits = 0;
  uint64_t device_flushes = 0;
  uint64_t total_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0;
  uint64_t pinned_bytes = 0;
  uint64_t free_fragments = 0;
  uint64_t free_largest_bytes = 0;
  // Bytes values (data extents) of 4 KiB, 64 KiB, 1 MiB and 16 MiB could
  // take now: the free ranges that fit whole extents of that size, less the
  // room a commit keeps.
  uint64_t usable_for_4k = 0, usable_for_64k = 0, usable_for_1m = 0, usable_for_16m = 0;
  uint64_t enospc_errors = 0;
  DelayedRefStats refs;
  NodeCacheStats cache;
};

inline std::string RootItemKeyFor(uint64_t tree_id) {
  return format::EncodeKey17(format::Key17{tree_id, format::kRootItem, 0});
}

// Reads every superblock copy and returns the newest one whose checksum and
// root node verify. `notes` (optional) receives one line per rejected copy.
absl::StatusOr<format::Superblock> ReadBestSuperblock(BlockDevice* device,
                                                      std::string* notes);

class TxnManager : public TreeHooks {
 public:
  enum class WriteKind { kInsert, kDelete };

  // Formats `device`: zeroes every superblock location, creates the root,
  // extent and default trees in generation 1, lets `populate` (optional;
  // engine/subvol names the default tree) add root-tree items, and commits.
  static absl::Status Mkfs(BlockDevice* device, uint32_t nodesize, uint32_t sectorsize,
                           const std::string& fsid,
                           const std::function<absl::Status(TxnManager*)>& populate = nullptr);
  static absl::StatusOr<std::unique_ptr<TxnManager>> Mount(BlockDevice* device,
                                                           uint64_t cache_bytes);
  ~TxnManager() override;

  // TreeHooks.
  uint64_t generation() const override { return generation_; }
  absl::StatusOr<uint64_t> AllocTreeBlock(uint64_t owner, uint8_t level) override;
  absl::Status CowTreeBlock(uint64_t tree_id, const Node& old) override;
  absl::Status FreeTreeBlock(uint64_t tree_id, const Node& node) override;
  absl::StatusOr<bool> ShouldDescendForDrop(uint64_t tree_id, format::ChildPtr c,
                                            int level) override;
  absl::Status DropChild(uint64_t tree_id, const Node& parent, int slot) override;
  absl::Status DropRoot(uint64_t tree_id, const Node& root) override;

  // The fs trees (one per subvolume; engine/subvol names them) and their
  // root items (txn/tree_roots.cc). Ids are never reused.
  //
  // The fs tree `id`, or null (absent, or being dropped).
  Tree* fs_tree(uint64_t id);
  // A new empty tree.
  absl::StatusOr<uint64_t> CreateTree();
  // A snapshot of tree `source_id`: a new tree whose root item points at
  // the source's root node, sharing every node (O(1), whatever the size);
  // both trees' last_snapshot become this generation. The source must have
  // no dirty nodes: call right after a commit.
  absl::StatusOr<uint64_t> CloneTree(uint64_t source_id, bool read_only);
  // Sets and clears root-item flags of live tree `id` (kRootFlagReadOnly,
  // kRootFlagReceiving; never kRootFlagDropping: MarkTreeDropping).
  absl::Status SetTreeFlags(uint64_t id, uint64_t set, uint64_t clear);
  // Marks tree `id` for dropping: fs_tree() forgets it at once, and
  // DropTreeStep() takes it apart across as many commits as it takes.
  absl::Status MarkTreeDropping(uint64_t id);
  // Drops one child pointer of dying tree `id` (Tree::DropLeftmost); when
  // the tree is gone, its root item goes too and this returns false.
  absl::StatusOr<bool> DropTreeStep(uint64_t id);
  // Live (dropping = false) or dying tree ids, ascending.
  std::vector<uint64_t> TreeIds(bool dropping) const;
  // The id the next CreateTree/CloneTree hands out: every id below it at
  // or above kFirstFreeTreeId was a subvolume once.
  uint64_t next_tree_id() const { return next_tree_id_; }
  // Tree `id`'s root item, with its current root pointer.
  absl::StatusOr<format::RootItem> TreeRootItem(uint64_t id) const;
  bool IsReadOnly(uint64_t id) const;
  // The root tree's other items (engine/subvol's SUBVOL_INFO). Callers
  // reserve first (ReserveRootTreeWrites), so a write cannot fail for
  // space half-way through an operation.
  absl::Status ReserveRootTreeWrites(uint64_t count);
  absl::Status PutRootTreeItem(absl::string_view key, absl::string_view value);
  absl::Status DeleteRootTreeItem(absl::string_view key);  // absent: OK
  // Every root-tree item of `type`, in key order.
  absl::Status ScanRootTree(uint8_t type,
                            const std::function<absl::Status(uint64_t objectid,
                                                             absl::string_view value)>& fn);
  bool HasDirtyNodes() { return cache_->DirtyNodes() > 0; }

  // Checks that `count` writes to `tree` fit (see the header comment).
  // `bytes` (optional): the keys and values the writes carry; with it, a
  // large batch reserves no more than the nodes that exist plus what its
  // bytes can add, instead of a full path per write. `delete_nodes`
  // (optional, kDelete only): a bound the caller measured on the nodes a
  // batch of deletes can CoW (DeleteNodesBound), which replaces the
  // per-write worst case when smaller, so a large delete of neighbouring
  // keys on a full device needs what it touches, not a path per key.
  //
  // Concurrent file writers (one per subvolume) bracket a write with
  // BeginWrite/EndWrite and hold what they reserved until EndWrite: a check
  // counts the other writers' outstanding reservations as used, so two
  // writers cannot both be granted the same free space. A writer's own
  // earlier reservations in the same write are not counted (its
  // allocations since are already out of free space), and callers under
  // the exclusive barrier hold nothing, so a lone writer's answers are as
  // they were.
  absl::Status ReserveForWrite(Tree* tree, WriteKind kind, uint64_t count = 1, uint64_t bytes = 0,
                               uint64_t delete_nodes = 0)
      ABSL_LOCKS_EXCLUDED(extent_mu_, space_mu_);
  //
  // BeginWrite answers fatal() or the delayed-ref heads pending before the
  // write, and EndWrite the counts after it: one trip to space_mu_ each,
  // which two writers of different subvolumes otherwise bounce between
  // them several times per write.
  absl::StatusOr<uint64_t> BeginWrite(uint64_t tree_id) ABSL_LOCKS_EXCLUDED(space_mu_);
  struct RefCounts {
    uint64_t heads = 0;    // pending_ref_heads()
    uint64_t updates = 0;  // ref_updates_this_txn()
  };
  // Ends a file writer's write to `tree_id`: its reservations are released.
  RefCounts EndWrite(uint64_t tree_id) ABSL_LOCKS_EXCLUDED(space_mu_);
  // Both counts in one trip.
  RefCounts ref_counts() const ABSL_LOCKS_EXCLUDED(space_mu_) {
    absl::MutexLock l(&space_mu_);
    return RefCounts{refs_.num_heads(), refs_.updates_since_commit()};
  }

  // Log blocks (engine/log): nodesize extents outside the extent tree, held
  // by the log while its chain lives. AllocLogBlock refuses
  // (RESOURCE_EXHAUSTED) to eat into what the next commit needs.
  absl::StatusOr<uint64_t> AllocLogBlock();
  // Back to free space at once (their chain is retired and durable).
  void FreeLogBlocks(const std::vector<uint64_t>& blocks);
  // Mount: the blocks of the chain the superblock names, free as far as the
  // extent tree knows, are the log's again (FreeLogBlocks returns them).
  absl::Status ClaimLogBlocks(const std::vector<uint64_t>& blocks);
  // Data extents (values in extents). AllocDataExtent reserves `len`
  // bytes (rounded up to the sector size) for data the caller writes
  // before referencing it; RESOURCE_EXHAUSTED if that would eat into what
  // the next commit needs. An extent that never got a reference goes back
  // with ReleaseUnusedData. AddDataRef queues +1/-1 on the reference of
  // tree `tree_id` (EXTENT_DATA_REF); `new_alloc` marks the first +1.
  absl::StatusOr<format::DataRef> AllocDataExtent(uint64_t len);
  void ReleaseUnusedData(const format::DataRef& d);
  void AddDataRef(uint64_t tree_id, const format::DataRef& d, int64_t delta, bool new_alloc);
  // Mount: a data extent a replayed log entry points at (free as far as
  // the extent tree knows) is taken out of free space before its +1.
  absl::Status ClaimDataExtent(const format::DataRef& d);
  // Whether the extent tree has an item for the data extent (committed).
  absl::StatusOr<bool> DataExtentCommitted(const format::DataRef& d);
  // fiemap: a data extent's refcount (extent item plus queued updates),
  // and whether a node of tree `tree_id` is shared (it may be: written no
  // later than the tree's last snapshot; and it is: more than one ref).
  // `hint`, if given, carries the extent-tree leaf from one call to the
  // next (callers asking in disk order).
  absl::StatusOr<uint64_t> DataExtentRefs(uint64_t bytenr, uint64_t len,
                                          Tree::LeafHint* hint = nullptr);
  absl::StatusOr<bool> TreeBlockShared(uint64_t tree_id, uint64_t bytenr, uint64_t generation);
  // Runs `fn` with extent_mu_ and space_mu_ held once, for a scan that asks
  // DataExtentRefs / TreeBlockShared about many extents (fiemap): inside
  // it, on this thread, those calls take no lock of their own. Per extent,
  // the two lock trips cost a fiemap ~15 % (docs/benchmarks.md). Writers
  // of every subvolume wait meanwhile, as they did for a fiemap under the
  // store-wide lock before the per-subvolume write paths. `fn` must not
  // call the manager otherwise.
  absl::Status WithExtentReads(absl::FunctionRef<absl::Status()> fn)
      ABSL_LOCKS_EXCLUDED(extent_mu_, space_mu_);

  // Written into the superblock of the next sealed generation.
  void SetLogAnchor(uint64_t log_root, uint64_t nonce) {
    next_log_root_ = log_root;
    next_log_nonce_ = nonce;
  }
  void SetRevision(uint64_t revision) { revision_ = revision; }
  // The last durable superblock.
  const format::Superblock& superblock() const { return sb_; }
  // A write that cannot be undone failed half-way: no commit may follow.
  void SetFatal(const absl::Status& why);

  // Runs up to `max_heads` delayed-ref heads now, before the commit (the
  // throttler's writer batch). A failure makes the store read-only.
  absl::StatusOr<int> RunDelayedRefBatch(int max_heads);
  uint64_t pending_ref_heads() const ABSL_LOCKS_EXCLUDED(space_mu_) {
    absl::MutexLock l(&space_mu_);
    return refs_.num_heads();
  }
  uint64_t ref_updates_this_txn() const ABSL_LOCKS_EXCLUDED(space_mu_) {
    absl::MutexLock l(&space_mu_);
    return refs_.updates_since_commit();
  }

  // One sealed generation on its way to the device.
  struct CommitBatch {
    uint64_t generation = 0;
    std::vector<NodeRef> nodes;  // sorted by bytenr
    format::Superblock sb;       // what to write (bytenr set per copy)
    std::vector<std::pair<uint64_t, uint64_t>> pinned;
  };
  // Phase 1, under the store's exclusive lock: root items, delayed refs,
  // seal, start the next generation. Null when nothing changed.
  absl::StatusOr<std::unique_ptr<CommitBatch>> PrepareCommit();
  // Phase 2, without the store lock (commits are serialised by the caller):
  // nodes, flush, every superblock copy, flush. Touches only the batch and
  // the device.
  absl::Status WriteCommit(const CommitBatch& batch);
  // Phase 3, under the lock: publish, or go read-only if phase 2 failed.
  absl::Status FinishCommit(std::unique_ptr<CommitBatch> batch, absl::Status written);

  // Commits the running engine transaction (all three phases). No-op when
  // nothing changed.
  absl::Status Commit();
  bool HasChanges() const;

  // Non-OK once a commit failed after touching the device (a copy: file
  // writers of other subvolumes may set it meanwhile).
  absl::Status fatal() const ABSL_LOCKS_EXCLUDED(space_mu_) {
    absl::MutexLock l(&space_mu_);
    return fatal_;
  }

  // Whether the device still holds this store: the primary superblock's
  // bytes are the ones this manager read at mount or last wrote (or is
  // writing). Anything else means something outside the store wrote it —
  // an mkfs or a second writer — and writing on would mix two filesystems:
  // FAILED_PRECONDITION. WriteCommit checks it before writing; the store
  // checks it before each log sync. Thread-safe.
  absl::Status CheckDeviceOwned() ABSL_LOCKS_EXCLUDED(owned_mu_);

  TxnStats Stats();
  uint32_t nodesize() const { return sb_.nodesize; }
  uint64_t dirty_bytes() { return cache_->DirtyNodes() * cache_->nodesize(); }
  NodeCache* cache() { return cache_.get(); }
  BlockDevice* device() { return device_; }

 private:
  TxnManager(BlockDevice* device, const format::Superblock& sb, uint64_t cache_bytes);
  struct FsRoot {
    std::unique_ptr<Tree> tree;
    format::RootItem item;
    bool dirty = false;  // item changed beyond the root pointer
    bool dying() const { return item.flags & format::kRootFlagDropping; }
  };
  absl::Status LoadTrees();
  // The caller holds extent_mu_ (or the exclusive barrier: mount, drops).
  absl::StatusOr<std::pair<uint64_t, uint64_t>> LookupExtentInfo(uint64_t bytenr)
      ABSL_LOCKS_EXCLUDED(space_mu_);
  // ... with space_mu_ held by the caller too.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> LookupExtentInfoLocked(uint64_t bytenr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);
  // An extent's queued ref update (its delayed-ref head), copied out.
  struct QueuedHead {
    bool have = false, must_insert = false, set_full_backref = false;
    int64_t ref_mod = 0;
  };
  QueuedHead QueuedHeadLocked(uint64_t bytenr) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);
  // Their shared tail: the extent item read (extent_mu_ or the exclusive
  // barrier) and combined with the queued head given.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> ExtentInfoWithHead(uint64_t bytenr,
                                                                   const QueuedHead& h);
  // DataExtentRefs' body: the caller holds both locks.
  absl::StatusOr<uint64_t> DataExtentRefsLocked(uint64_t bytenr, uint64_t len, Tree::LeafHint* hint)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(extent_mu_, space_mu_);
  // Whether this thread is inside WithExtentReads of this manager.
  bool InExtentReads() const;
  void AddChildRefs(const Node& node, bool full_backref, uint64_t tree_id, int64_t delta)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);
  void DropTreeRefLocked(uint64_t tree_id, const Node& node)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);
  // CowTreeBlock's body once the refcount is known.
  void CowRefsLocked(uint64_t tree_id, const Node& old, uint64_t refs, uint64_t flags)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);

  absl::Status RebuildFreeSpace();
  void AddDeviceFreeSpaceLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);
  absl::Status UpdateRootItems();
  absl::Status RunAllDelayedRefs();

  // Reads the extent tree's height: extent_mu_ or the exclusive barrier.
  uint64_t CommitReserveNodesLocked(uint64_t extra_heads) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_);
  // Free bytes a data extent may not take: what the commit may need, and
  // what other writers hold reserved.
  uint64_t DataReserveBytesLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_) {
    return (CommitReserveNodesLocked(4) + 64) * sb_.nodesize + reserved_bytes_total_;
  }
  void OnExtentFreed(uint64_t bytenr, uint64_t num_bytes) ABSL_LOCKS_EXCLUDED(space_mu_);

  // Constant after construction.
  BlockDevice* const device_;
  const std::unique_ptr<NodeCache> cache_;  // thread-safe

  // The extent tree; see the header comment. Taken before space_mu_.
  mutable absl::Mutex extent_mu_ ABSL_ACQUIRED_BEFORE(space_mu_);
  // Replaced only at mount; its nodes change under extent_mu_ (a writer's
  // delayed-ref batch) or the exclusive barrier (the commit).
  std::unique_ptr<Tree> extent_tree_;

  // Changed only under the store's exclusive barrier (read by file
  // writers under the shared one).
  format::Superblock sb_;  // the last committed superblock
  std::unique_ptr<Tree> root_tree_;
  std::map<uint64_t, FsRoot> fs_roots_;
  uint64_t generation_ = 0;  // the running engine transaction
  uint64_t next_tree_id_ = 0;
  uint64_t commits_ = 0;

  // Shared by concurrent file writers: a leaf but for the node cache.
  mutable absl::Mutex space_mu_ ABSL_ACQUIRED_AFTER(extent_mu_);
  FreeSpace free_ ABSL_GUARDED_BY(space_mu_);
  DelayedRefs refs_ ABSL_GUARDED_BY(space_mu_);
  std::map<uint64_t, int64_t> nodes_per_tree_ ABSL_GUARDED_BY(space_mu_);  // live tree blocks
  uint64_t bytes_used_ ABSL_GUARDED_BY(space_mu_) = 0;
  uint64_t enospc_errors_ ABSL_GUARDED_BY(space_mu_) = 0;
  absl::Status fatal_ ABSL_GUARDED_BY(space_mu_);
  // Outstanding reservations of file writers, by tree (ReserveForWrite,
  // EndWrite), and their sum.
  std::map<uint64_t, uint64_t> reserved_bytes_ ABSL_GUARDED_BY(space_mu_);
  uint64_t reserved_bytes_total_ ABSL_GUARDED_BY(space_mu_) = 0;

  // Bumped by WriteCommit without the store lock; relaxed: a statistic.
  std::atomic<uint64_t> flushes_{0};
  uint64_t next_log_root_ = 0;
  uint64_t next_log_nonce_ = 0;
  uint64_t revision_ = 0;
  // Some superblock copy is missing, corrupt or older than the one mounted:
  // the next commit (Close() forces one) rewrites every copy.
  bool superblocks_need_rewrite_ = false;

  // The primary superblock's bytes as read at mount or last written, and
  // those a commit is writing now (empty when none is).
  absl::Mutex owned_mu_;
  std::string primary_ ABSL_GUARDED_BY(owned_mu_);
  std::string primary_pending_ ABSL_GUARDED_BY(owned_mu_);
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_TXN_TXN_MANAGER_H_
