// How a store is formatted and mounted: MkfsOptions, Options, Durability,
// and EngineEvent (what Options::on_event reports). Plain values; copy freely.
#ifndef COWKV_INCLUDE_COWKV_OPTIONS_H_
#define COWKV_INCLUDE_COWKV_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "cowkv/limits.h"

namespace cowkv {

// Engine tree ids (for DumpTree and tools).
inline constexpr uint64_t kRootTreeId = 1;
inline constexpr uint64_t kExtentTreeId = 2;
inline constexpr uint64_t kDefaultTreeId = 5;

struct MkfsOptions {
  uint32_t nodesize = kDefaultNodesize;  // power of two in [4 KiB, 64 KiB]
  uint32_t sectorsize = 4096;
  // 16 bytes; empty = random.
  std::string fsid;
};

// Something an operator should hear about, reported through
// Options::on_event (the server logs it).
struct EngineEvent {
  enum class Kind {
    kReadOnly,     // a commit or log sync failed: the store takes no more writes
    kSlowCommit,   // an engine commit took longer than Options::slow_op_ms
    kSlowLogSync,  // a log sync took longer than Options::slow_op_ms
  };
  Kind kind = Kind::kReadOnly;
  uint64_t generation = 0;  // the commit's, or the one a log sync extends
  uint64_t micros = 0;      // how long it took (slow events)
  std::string trigger;      // kSlowCommit: "interval", "fsync", ...
  std::string detail;       // kReadOnly: the error
};

// When a KV write is acknowledged.
//   kDurable: after the log sync (or engine commit) that covers it — it
//             survives any crash from then on.
//   kAsync:   after it is applied and visible; durable by the next log sync
//             or engine commit. Async writes become durable in commit
//             order: a crash keeps a prefix of them.
//   kDefault: Options::default_durability.
enum class Durability { kDefault, kDurable, kAsync };

struct Options {
  bool read_only = false;
  // Durability of KV writes that ask for kDefault.
  Durability default_durability = Durability::kDurable;
  // Recent KV writes kept for validating client transactions (keys). A
  // transaction whose read revision fell out of the window fails with
  // OUT_OF_RANGE ("too old") instead of ABORTED.
  uint64_t conflict_window_keys = 1 << 20;
  // The KV history of each subvolume (reads at a past revision, the reads
  // of interactive transactions): the newest `history_revisions` revisions
  // are kept (at least 1), and at most about `history_bytes` of entries
  // (0 = no byte bound); older ones are compacted, checked every
  // history_revisions / 8 changes of a subvolume. docs/design.md "History".
  uint64_t history_revisions = 10000;
  uint64_t history_bytes = 64ull << 20;
  // Keys a log sync may have to copy; past this, durable commits fall
  // back to an engine commit until the next one.
  uint64_t log_max_pending_keys = 1 << 16;
  // Bound on the node cache's clean nodes, in bytes. Dirty nodes are pinned
  // until the engine transaction that wrote them commits and are not counted
  // against this bound.
  uint64_t node_cache_bytes = 256ull << 20;
  // Commit triggers. 0 disables a trigger. The interval trigger runs on a
  // background thread; the dirty-bytes trigger runs in the writer that
  // crosses it (when no Begin() handle is open).
  uint64_t commit_interval_ms = 30000;
  uint64_t dirty_bytes_max = 256ull << 20;
  // The file namespace. The three seed optimisations can be switched off
  // for the benchmarks that measure them (cowkv_<variant> in bench/).
  uint64_t inode_cache_entries = 1 << 16;  // in-memory inodes per subvolume (seed 003)
  bool fs_dir_index_offset = true;         // seed 000
  bool fs_precise_logged_check = true;     // seed 004
  bool fiemap_path_cache = true;           // seed 002 (the subvolume path's sharedness
                                           // and the extent-tree leaf, per fiemap)
  // Operator events (EngineEvent). Called on the engine thread that saw
  // the event, with engine locks held: it must be quick and must not call
  // the Store. Empty = none.
  std::function<void(const EngineEvent&)> on_event;
  // Commits and log syncs slower than this are kSlowCommit / kSlowLogSync
  // events. 0 = never.
  uint64_t slow_op_ms = 1000;
  // The throttler (seed 001). Writers are paced by delayed refs: with
  // `delayed_refs_soft` heads pending, a writer runs twice as many heads as
  // its write added (at most `delayed_refs_batch`) itself, in the same hold
  // of the tree lock as the write; once the transaction has made
  // `delayed_refs_commit` ref updates (pending or already run) the writer
  // commits; with `delayed_refs_hard` heads pending it waits for that
  // commit. docs/benchmarks.md has the measurements behind the defaults.
  uint64_t delayed_refs_soft = 16384;
  uint64_t delayed_refs_commit = 65536;
  uint64_t delayed_refs_hard = 262144;
  uint64_t delayed_refs_batch = 32;
  // Subvolume::PutItemThen / DeleteItemThen / TxnThen: a lone durable
  // writer (nothing else queued or waiting) leads its log sync on its own
  // thread and is answered there, instead of handing the wait to the
  // durability thread and back (a thread wake-up each way). At most one
  // caller's thread is held so. Off: a Then call never waits on the
  // caller's thread.
  bool lone_writer_waits_inline = true;
  // Drop deleted subvolumes on a background thread. Off: only
  // Store::DropDeletedSubvolumes() does it (tests that step it by hand).
  bool background_cleaner = true;
  // Run the full consistency check after every commit and fail the commit
  // on any finding (tests). On by default under --config=paranoid.
#ifdef COWKV_PARANOID
  bool paranoid_checks = true;
#else
  bool paranoid_checks = false;
#endif

  // Leases (lease.h). The clock their TTLs run on: a monotonic clock in
  // milliseconds; empty = std::chrono::steady_clock (tests pass a fake
  // one). Every `lease_expiry_interval_ms` (0 = never: only
  // Store::ExpireLeases() does it) a background thread revokes up to
  // `lease_expiry_batch` expired leases, each in one commit.
  std::function<int64_t()> lease_clock_ms;
  uint64_t lease_expiry_interval_ms = 250;
  uint64_t lease_expiry_batch = 16;

  // Test and benchmark hooks: never set in production. They put back
  // behaviour the engine replaced, so that a test can show its generator
  // catches a bug, or a benchmark can measure what an optimisation gained.
  struct TestHooks {
    // One of the fsync and replay bugs the crash generator found (issue
    // 13), for engine/crash_test/fs_gen_test.cc.
    enum class PlantedBug {
      kNone,
      kNoFullCommit,        // fsync logs even when names it depends on were removed or moved
      kItemCountsAsNames,   // an inode whose item a name change logged counts as logged with
                            // its names, and a directory fsync skips logged children
      kLateInodeCounter,    // the inode counter loaded after a delete (reuses the number)
      kEagerReplayDrops,    // replay drops a replaced item's extent reference at once
      kReplayDropsNewName,  // replay drops the DIR_ITEM of a name that came back under a new index
      kDropsPrealloc,       // replay drops preallocated extents past EOF (fallocate KEEP_SIZE)
      kSkipOrphanCleanup,   // mount leaves orphans (inodes kept by open handles) in place
      kLoggedInodeSkipsItem,   // fsync skips the item of a file logged already in this transaction
      kXattrRemovalNotLogged,  // removing an item's last xattr is not noted for the log
      kExtrefNotLogged,        // fsync logs an inode's names in INODE_REF items only
      kSortIgnoresDirection,   // subvolume list's --sort treats "-FIELD" as "+FIELD"
      kTxnReadsLatest,         // a transaction's Get reads the latest value, not its revision's
      kHistoryNotLogged,       // a put's history entry is not noted for the log
      kLeasePutKeepsAttachment,  // a put without a lease leaves the key attached to its lease
      kHistoryLogFormTooNew,  // a sync logs the base form of an entry whose prev is newer than its
                              // base
      kWatchValueFromLatest,  // a watch PUT event carries the key's latest value
      kWatchSeesUndurable,    // watch reads past the durable revision (to the current one)
      kSendSkipsChangedSubtree,    // send's tree comparison skips level-1 pointers that differ
      kFileWatchSeesUncommitted,   // file events read past the committed revision
      kFileFsyncLogsWhileWatched,  // fsync of a watched file tree syncs the log, not a commit
      kFileEventMatchesOldPath,    // a rename matches a watcher's prefix by its old path only
      kResumeSkipsOneItem,         // a resumed send starts one item past the token's position
    };
    PlantedBug planted_bug = PlantedBug::kNone;
    // At most this many names in one INODE_REF item (0: as many as fit);
    // the rest go to extended refs. fs_gen_test and fs_model_test run with
    // 1 as well, so every second name of a file in a directory is an
    // extended ref.
    size_t ref_item_names = 0;
    // The throttler's older policy, for bench/subvol_bench's comparison
    // (BM_.../cowkv_bytes_throttle) and throttle_test: writers wait for a
    // commit whenever dirty metadata passes `throttle_dirty_bytes`.
    enum class ThrottlePolicy { kDelayedRefs, kReservedBytes };
    ThrottlePolicy throttle_policy = ThrottlePolicy::kDelayedRefs;
    uint64_t throttle_dirty_bytes = 64ull << 20;
  };
  TestHooks test_hooks;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_OPTIONS_H_
