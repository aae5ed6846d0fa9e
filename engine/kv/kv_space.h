// KvSpace: the key space's logic under the store's tree lock — the twin of
// fs::FsOps for the file tree. Reads (Get, Range, compares), the one-shot
// Txn's body and the apply of a validated write set, over the subvolume
// trees of one TxnManager; it owns the revision counter and the conflict
// window that validates client transactions.
//
//   store (engine/store)        takes the tree lock, picks the tree, groups
//                               writers, waits for durability
//     KvSpace::Apply / Txn       one atomic change under one new revision
//       Tree / TxnManager        the CoW tree and the data references
//       LogManager::NoteChange   what the next log sync copies
//
// Contracts:
//  - Every method runs with the store's tree lock held by the caller:
//    shared for the reads (Get, Range, ComparesHold, LoadValue, Validate),
//    exclusive for the rest. KvSpace takes no lock of its own; its
//    statistics counters are atomics.
//  - Apply changes nothing when it fails, except after a tree write failed
//    half way: then the TxnManager is fatal (the generation never commits).
//  - A write set's large values are already in data extents
//    (KvWriteSet::extents); Apply records which ones it used.
#ifndef COWKV_ENGINE_KV_KV_SPACE_H_
#define COWKV_ENGINE_KV_KV_SPACE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/device.h"
#include "cowkv/kv.h"
#include "engine/format/items.h"
#include "engine/kv/conflict_window.h"
#include "engine/kv/history_item.h"
#include "engine/kv/kv_item.h"
#include "engine/log/log_manager.h"
#include "engine/tree/tree.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {
namespace kv {

// What a KV commit applies, already validated.
struct KvWriteSet {
  // Writes by user key: a value, or nullopt for a delete.
  std::map<std::string, std::optional<std::string>> writes;
  // Delete-ranges [start, end) (end empty = unbounded), applied before
  // `writes`; a later Put of a key inside one wins.
  std::vector<std::pair<std::string, std::string>> delete_ranges;
  // Values too large to be inline, already written to data extents
  // (the store's PrepareExtents), by user key; `used` = referenced by the
  // commit.
  std::map<std::string, ExtentRef> extents;
  std::set<std::string> used;
  // Leases (engine/lease): the lease each put attaches its key to, by user
  // key; a put of a key not here detaches it from any lease. Nonzero
  // revoke_lease: the write set deletes that lease's keys and the
  // ApplyHook deletes the lease with them, in the same revision.
  std::map<std::string, uint64_t> leases;
  uint64_t revoke_lease = 0;
  bool empty() const { return writes.empty() && delete_ranges.empty(); }
};

// Buffers one write into `ws` (the last write of a key wins).
void BufferPut(KvWriteSet* ws, absl::string_view key, absl::string_view value);
void BufferDelete(KvWriteSet* ws, absl::string_view key);
void BufferDeleteRange(KvWriteSet* ws, absl::string_view start, absl::string_view end);

// key in [start, end) (end empty = unbounded).
bool InRange(absl::string_view key, absl::string_view start, absl::string_view end);
// Turns a request's start/end/prefix into one [start, end).
absl::Status NormaliseRange(const RangeRequest& req, std::string* start, std::string* end);
// Sizes and counts of a Txn branch's ops, before any lock.
absl::Status ValidateTxnOps(const std::vector<TxnOp>& ops);

// OUT_OF_RANGE for a read at `at` below the history's compact revision
// (reason COMPACTED; the compact revision as decimal bytes in the payload
// kCompactRevisionPayloadUrl), or past the current revision
// (FUTURE_REVISION), as etcd's ErrCompacted / ErrFutureRev.
absl::Status CompactedError(uint64_t at, uint64_t compact_revision);
absl::Status FutureRevisionError(uint64_t at, uint64_t current);

// One tree change of a KV commit, with the data extents it lets go of and
// takes (len 0 = none).
struct KvOp {
  std::string tree_key;
  std::optional<std::string> item;  // nullopt = delete
  format::DataRef old_data;
  format::DataRef new_data;
  // The item before the change (nullopt: the key was absent): what the
  // change's history entry keeps. Set by Apply, not by replay.
  std::optional<std::string> old_item;
};

// Told of every change Apply makes (leases, engine/lease/lessor.h): it
// adds the tree ops of its own items (never KV keys) to the same change,
// under the same revision and the same failure contract. Called under the
// exclusive tree lock.
class ApplyHook {
 public:
  virtual ~ApplyHook() = default;
  // Before anything changes: the hook's own ops for `ops` (the KV key
  // changes Apply will make from `ws`) into `*extra`, or why `ws` cannot
  // be applied (then nothing changes).
  virtual absl::Status Plan(uint64_t subvol, Tree* tree, const KvWriteSet& ws,
                            const std::vector<KvOp>& ops, std::vector<KvOp>* extra) = 0;
  // The planned change was applied (the revision it got).
  virtual void Applied(uint64_t subvol, uint64_t revision) = 0;
};

class KvSpace {
 public:
  // `revision`: the last revision applied (from the superblock and the log).
  KvSpace(TxnManager* txn, log::LogManager* log, BlockDevice* device, uint64_t window_keys,
          uint64_t revision);
  KvSpace(const KvSpace&) = delete;
  KvSpace& operator=(const KvSpace&) = delete;

  uint64_t revision() const { return revision_; }
  // The history's bounds (Options::history_revisions / history_bytes):
  // every change is recorded (kv/history_item.h); past these bounds the
  // oldest revisions are compacted, checked every `max_revisions / 8`
  // changes of a subvolume.
  void set_history_bounds(uint64_t max_revisions, uint64_t max_bytes) {
    history_revisions_ = max_revisions < 1 ? 1 : max_revisions;
    history_bytes_ = max_bytes;
  }
  void set_revision(uint64_t revision) { revision_ = revision; }  // log replay

  // A key with its revisions; NOT_FOUND if absent. A value larger than
  // `max_value_load` (0 = no bound) is not loaded: it comes back empty with
  // value_size set.
  absl::StatusOr<KeyValue> Get(Tree* tree, absl::string_view key, uint64_t max_value_load = 0);
  // Get's value alone (NOT_FOUND if absent), copied once out of the leaf:
  // no tree-key, item or KeyValue copies.
  absl::StatusOr<std::string> GetValue(Tree* tree, absl::string_view key);
  // `req` already normalised (NormaliseRange). `*bytes_cut` (when given)
  // tells whether req.max_bytes, rather than `limit` or the range's end,
  // stopped the scan.
  absl::StatusOr<RangeResult> Range(Tree* tree, const RangeRequest& req, uint64_t limit,
                                    bool* bytes_cut = nullptr);
  // Reads at a past revision (kv_history.cc), from the subvolume's history:
  // the key as it was at revision `at` (0 or >= revision(): the latest).
  // OUT_OF_RANGE (reason COMPACTED, the compact revision as the payload
  // kCompactRevisionPayloadUrl) when `at` is older than what the history
  // keeps, OUT_OF_RANGE (FUTURE_REVISION) past the current revision.
  // `at` is literal here (revision 0 is the state before any write);
  // kLatest reads the latest state.
  static constexpr uint64_t kLatest = UINT64_MAX;
  absl::StatusOr<KeyValue> GetAt(Tree* tree, absl::string_view key, uint64_t at,
                                 uint64_t max_value_load = 0);
  // Range at the literal revision `at` (req.revision ignored).
  absl::StatusOr<RangeResult> RangeAtRevision(Tree* tree, const RangeRequest& req, uint64_t at,
                                              uint64_t limit, bool* bytes_cut = nullptr);
  // The history's compact revision: reads at a revision below it are
  // OUT_OF_RANGE.
  absl::StatusOr<uint64_t> CompactRevision(Tree* tree);
  // Where a watch's events start to be complete (kv_events.cc): the
  // compact revision, except that a never-compacted tree's events are
  // complete from the mount on even when its first entry came later
  // (revisions are store-wide: other subvolumes took those between). Reads
  // at a revision keep CompactRevision: a tree filled by a receive since
  // the mount holds items no entry explains.
  absl::StatusOr<uint64_t> EventsFloor(Tree* tree);
  // Drops the history of revisions <= `revision` (etcd's Compact) from
  // `subvol`'s tree (writable, exclusive lock). OUT_OF_RANGE (COMPACTED)
  // when `revision` is below the compact revision already, FUTURE_REVISION
  // past the current one. Entries go a leaf at a time (each leaf reserved);
  // only the new floor is noted for the log (DropOldest).
  absl::Status Compact(uint64_t subvol, Tree* tree, uint64_t revision);
  // Space pressure (set by the store for a write that found no space even
  // after a commit): the change is applied without history entries and the
  // history is compacted past it (reads at older revisions become
  // OUT_OF_RANGE), so a full device can still delete. `drop_first`: the
  // entries are dropped first (their space returns at the next commit; the
  // CoW of their leaves takes some now), else only the floor rises and the
  // entries left below it go at a later compaction.
  void set_no_history(bool no_history, bool drop_first) {
    no_history_ = no_history;
    drop_history_ = drop_first;
  }
  // Options::TestHooks::PlantedBug::kHistoryNotLogged.
  void set_bug_history_not_logged(bool bug) { bug_history_not_logged_ = bug; }
  // Statistics: history entries written and dropped by compaction.
  uint64_t history_entries() const { return history_entries_; }
  uint64_t history_compacted() const { return history_compacted_; }

  // Whether every compare holds (etcd: an absent key has zero revisions
  // and no value).
  absl::StatusOr<bool> ComparesHold(Tree* tree, const std::vector<Compare>& compares);
  // A value as stored: inline, or read from its extent and checked.
  absl::StatusOr<std::string> LoadValue(const ItemView& item);

  // Validates `reads` (made at `read_revision`) and applies `ws` to
  // `subvol` atomically under one new revision; returns it (the current
  // revision if nothing changed). `writable` gives the subvolume's tree,
  // or why it cannot be written; it is asked only when something would
  // change. ENOSPC changes nothing.
  using WritableTree = absl::FunctionRef<absl::StatusOr<Tree*>()>;
  absl::StatusOr<uint64_t> Apply(uint64_t subvol, const WritableTree& writable,
                                 uint64_t read_revision, const ReadSet& reads, KvWriteSet& ws);
  // Apply of a write set holding one put of an inline value (at most
  // MaxInlineValue) and no reads, the common Put: same result, revisions
  // and failure contract, without the write set. One descent of `tree`
  // (writable) reads the old item's revisions and writes the new item.
  absl::StatusOr<uint64_t> PutInline(uint64_t subvol, Tree* tree, absl::string_view key,
                                     absl::string_view value);
  // The one-shot Txn: compares on `tree`, then the branch taken, applied as
  // Apply does. `branches`: the success and failure branches' puts with
  // their extents (KvWriteSet::extents).
  absl::StatusOr<TxnResponse> Txn(uint64_t subvol, Tree* tree, const WritableTree& writable,
                                  const TxnRequest& req, KvWriteSet* branches);
  // One tree change with its data references. `new_alloc`: op.new_data is
  // a fresh extent (its first reference).
  absl::Status ApplyOp(Tree* tree, uint64_t subvol, const KvOp& op, bool new_alloc = true);

  // Client transactions: the conflict window keeps writes newer than the
  // oldest open transaction's read revision.
  absl::Status Validate(uint64_t read_revision, const ReadSet& reads);
  void OpenTxn() { window_.OpenTxn(revision_); }
  void CloseTxn() { window_.CloseTxn(); }
  // A transaction's read found a key written after its read revision: ABORTED
  // (reason kConflict), counted in conflicts(). Needs no lock.
  absl::Status Conflict(const KeyValue& kv, uint64_t read_revision);

  // Leases' hook (nullptr: none); set once before any write.
  void set_apply_hook(ApplyHook* hook) { hook_ = hook; }

  // Statistics (StoreStats).
  uint64_t commits() const { return commits_; }
  uint64_t conflicts() const { return conflicts_.load(std::memory_order_relaxed); }
  uint64_t too_old() const { return too_old_.load(std::memory_order_relaxed); }
  uint64_t range_value_bytes() const { return range_value_bytes_.load(std::memory_order_relaxed); }

 private:
  // Apply's call of the ApplyHook: its ops for the KV `ops` in `*hook_ops`
  // (written in the same revision, without history entries).
  absl::Status AddHookOps(uint64_t subvol, Tree* tree, const KvWriteSet& ws,
                          const std::vector<KvOp>& ops, std::vector<KvOp>* hook_ops,
                          bool* all_deletes);

  TxnManager* const txn_;
  log::LogManager* const log_;
  BlockDevice* const device_;
  uint64_t revision_;
  ConflictWindow window_;
  uint64_t commits_ = 0;  // changes applied
  std::atomic<uint64_t> conflicts_{0};
  std::atomic<uint64_t> too_old_{0};
  std::atomic<uint64_t> range_value_bytes_{0};
  // PutInline's buffers, reused (it runs under the exclusive tree lock).
  std::string put_key_;
  std::string put_item_;
  std::string put_prev_;

  // History (kv_history.cc).
  // Range at a past revision: the request's revision is below revision_.
  absl::StatusOr<RangeResult> RangeAt(Tree* tree, const RangeRequest& req, uint64_t limit,
                                      bool* bytes_cut);
  // RangeAt's result so far; AddAt adds one key's item at req.revision,
  // false when the limit or max_bytes stops the scan.
  struct RangeScan {
    RangeResult result;
    uint64_t bytes = 0, loaded = 0;
    bool bytes_cut = false;
    std::string tk;
  };
  absl::StatusOr<bool> AddAt(const RangeRequest& req, uint64_t limit, absl::string_view uk,
                             absl::string_view raw, RangeScan* scan);
  // OUT_OF_RANGE unless `at` is within [compact revision, revision_].
  absl::Status CheckReadable(Tree* tree, uint64_t at);
  // Counts a change of `subvol` and compacts its history to the bounds
  // every history_revisions_ / 8 changes (errors: none; a compaction that
  // does not fit in free space waits for the next check).
  void MaybeCompact(uint64_t subvol, Tree* tree, uint64_t changes);
  // The history items of a change at `rev` to `ops` (in order): an entry
  // per op, each taking over its op's old data reference (old_data
  // cleared), or — no_history_ — the info item compacting the history to
  // `rev`. FAILED_PRECONDITION when an entry would not fit a leaf (an
  // inline item written before the inline limit left room for history).
  absl::Status HistoryOps(Tree* tree, uint64_t rev, std::vector<KvOp>* ops,
                          std::vector<KvOp>* history);
  // Apply's reservation (`as_deletes`: deletes only, without entries: the
  // nodes they can CoW and the info item's path) and its tree writes (the
  // ops, then the history items, noted for the log; fatal half way).
  absl::Status ReserveApply(Tree* tree, const std::vector<KvOp>& ops,
                            const std::vector<KvOp>& hook_ops, const std::vector<KvOp>& history,
                            bool as_deletes, uint64_t delete_nodes);
  absl::Status WriteApply(uint64_t subvol, Tree* tree, const std::vector<KvOp>& ops,
                          const std::vector<KvOp>& hook_ops, const std::vector<KvOp>& history,
                          KvWriteSet& ws);
  // Compaction (kv_history.cc): drops the oldest entries a leaf at a time,
  // whole revisions: every one up to `target`, then on up to `upto` until
  // `bytes_over` bytes went; at most `max_runs` leaf runs (then finishing
  // the revision begun). Raises the floor from `floor` to what it reached.
  struct DropGoal {
    uint64_t upto = 0;
    uint64_t target = 0;
    uint64_t bytes_over = 0;
    size_t max_runs = SIZE_MAX;
  };
  absl::Status DropOldest(uint64_t subvol, Tree* tree, const DropGoal& goal, uint64_t floor);
  // CompactRevision, and whether the tree has an info item of its own
  // (`*compacted`) rather than a floor derived from its oldest entry.
  absl::StatusOr<uint64_t> HistoryFloor(Tree* tree, bool* compacted);
  // One leaf run of entries from `from` (below `to`): their data references
  // dropped, their bytes added to `*bytes`, the last one's revision.
  absl::StatusOr<size_t> DropRun(uint64_t subvol, Tree* tree, const std::string& from,
                                 const std::string& to, uint64_t* bytes, uint64_t* last_revision);
  // The oldest entry's tree key when its revision (`*revision`) is <= upto.
  absl::StatusOr<std::optional<std::string>> OldestEntry(Tree* tree, uint64_t upto,
                                                         uint64_t* revision);
  // The bytes of `subvol`'s entries (keys and values): counted once after
  // a mount, then kept by every change and compaction.
  absl::StatusOr<uint64_t> HistoryBytes(uint64_t subvol, Tree* tree);
  void NoteHistoryBytes(uint64_t subvol, uint64_t bytes);
  void NoteHistoryEntries(uint64_t subvol, const std::vector<KvOp>& history);
  void NoteDroppedBytes(uint64_t subvol, uint64_t bytes);
  bool no_history_ = false;
  bool drop_history_ = false;
  // The revision at mount: a never-compacted tree without history entries
  // changed nothing after it (CompactRevision).
  const uint64_t legacy_floor_;
  bool bug_history_not_logged_ = false;
  uint64_t history_revisions_ = 10000;
  uint64_t history_bytes_ = 64ull << 20;
  std::map<uint64_t, uint64_t> changes_since_check_;  // by subvolume
  std::map<uint64_t, uint64_t> history_bytes_of_;     // by subvolume, once counted
  std::vector<format::DataRef> drop_refs_;             // DropRun's scratch
  uint64_t history_entries_ = 0;
  uint64_t history_compacted_ = 0;
  ApplyHook* hook_ = nullptr;
};

}  // namespace kv
}  // namespace cowkv

#endif  // COWKV_ENGINE_KV_KV_SPACE_H_
