// LogManager: per-subvolume log trees, written on durable commit (and fsync)
// with one device flush, and replayed at mount.
//
// While engine generation N+1 runs (N is the last durable one), every change
// to a logged key space notes its key here. A log sync copies the current
// item of each key noted since the last sync (or a tombstone) from the
// subvolume tree, and writes them as the next link of the chain the
// superblock of N names: one log root block (log_format.h) holding the
// entries inline when they fit in its sector — one 4 KiB write — or, for a
// bigger sync, listing a fresh log tree per subvolume (owner kLogTreeOwner)
// written beside it; then it flushes once. Captured under the store lock, a
// sync holds exactly the changes up to one revision, so the chain, replayed
// in order, is a prefix of the commit order.
//
// The engine commit that seals N+1 starts the chain for N+1 (StartChain);
// the old chain's blocks are freed once N+1 is durable. Log blocks are never
// in the extent tree: free space holds them out while their chain lives,
// and mount holds a replayed chain's blocks out until the replay commit.
//
// Falls back to "needs a full engine commit" when the chain could not be
// set up or written (no space, I/O error), when more keys are pending than
// `max_pending_keys`, or when an engine-level write (a Transaction handle)
// changed a tree outside the log's view.
//
// Threads: the store calls it under its tree lock, except WriteSync and
// FinishSync, which the store serialises (its log lock) and calls without
// it, so that a lone durable write takes the tree lock twice (apply, then
// PrepareSync), not three times. What FinishSync touches is safe beside the
// tree-lock holders: the chain identity (nonce_, base_, cache_) is written
// only by ResetChain, under both the tree lock and chain_mu_, and read under
// either; broken_ is atomic; the sync counters are under chain_mu_; the
// NodeCache is thread-safe.
//
// File writers of different subvolumes note changes and ask Contains at
// once (each under the store's shared barrier and its own subvolume's tree
// lock): the noted keys and what Contains reads are under notes_mu_, a
// leaf but for the engine's space locks and the node caches (PrepareSync
// allocates log blocks while holding it). Everything else changes only
// under the store's exclusive barrier (PrepareSync, StartChain), which no
// noting writer holds at the same time.
#ifndef COWKV_ENGINE_LOG_LOG_MANAGER_H_
#define COWKV_ENGINE_LOG_LOG_MANAGER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/format/superblock.h"
#include "engine/log/log_format.h"
#include "engine/tree/node_cache.h"
#include "engine/tree/tree.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {
namespace log {

struct LogAnchor {
  uint64_t log_root = 0;  // 0: no chain for this generation
  uint64_t nonce = 0;
};

struct LogStats {
  uint64_t syncs = 0;
  uint64_t inline_syncs = 0;  // of them, entries inline in the root block
  uint64_t synced_keys = 0;
  uint64_t sync_bytes = 0;  // nodes + root blocks written
  uint64_t chains = 0;
  uint64_t chain_blocks = 0;  // blocks held by the live chain
  uint64_t lookups = 0;       // Contains() calls that searched written links
};

// What mount found in the log.
struct Recovered {
  using Entry = LogEntry;  // in chain order: replay applies them in order
  uint64_t revision = 0;
  std::vector<Entry> entries;
  uint64_t root_blocks = 0;       // valid links of the chain
  std::vector<uint64_t> blocks;   // every block replay reads; held until the replay commit
};

class LogManager : private TreeHooks {
 public:
  LogManager(TxnManager* txn, uint64_t max_pending_keys);
  ~LogManager() override;

  // How a sync logs a noted key's item: the store rewrites the KV history's
  // entries into their base form (kv/history_item.h) here. Called under
  // the store's exclusive barrier; must not fail. Set before the first sync.
  using LogForm = std::function<void(uint64_t subvol, absl::string_view key, std::string* value)>;
  void set_log_form(LogForm form) { log_form_ = std::move(form); }

  // Reads the chain `sb` names. DATA_LOSS when a link that a later link
  // proves was flushed does not verify.
  static absl::StatusOr<Recovered> Recover(BlockDevice* device, const format::Superblock& sb);

  // Mount without replay: continue the (empty) chain `sb` names.
  absl::Status ContinueChain(const format::Superblock& sb);
  // Mount with replay: the replayed chain's blocks (already claimed from
  // free space) are retired by the replay commit's StartChain.
  void Adopt(const std::vector<uint64_t>& blocks) {
    chain_blocks_.insert(chain_blocks_.end(), blocks.begin(), blocks.end());
  }
  // The engine commit sealing generation `base` starts the chain that
  // extends it. The old chain's blocks go to `retired`, to be freed once
  // `base` is durable.
  LogAnchor StartChain(uint64_t base, std::vector<uint64_t>* retired);

  void NoteChange(uint64_t subvol, absl::string_view tree_key) ABSL_LOCKS_EXCLUDED(notes_mu_);
  // Whether `tree_key` of `subvol` is in this chain: noted since the last
  // sync, or in a link written since the chain began (inline entries are
  // remembered; log trees are searched, newest first). Only file-namespace
  // keys (prefix 'f') are tracked — the fs layer's "was this inode logged
  // in this transaction?" (seed 004).
  absl::StatusOr<bool> Contains(uint64_t subvol, absl::string_view tree_key)
      ABSL_LOCKS_EXCLUDED(notes_mu_);
  // Whether any file-namespace key of `subvol` was noted in this chain.
  bool HasFsEntries(uint64_t subvol) const ABSL_LOCKS_EXCLUDED(notes_mu_) {
    absl::MutexLock l(&notes_mu_);
    return fs_subvols_.count(subvol) > 0;
  }
  // An engine-level write the log cannot see: durable commits fall back to
  // engine commits until the next chain.
  void MarkFull() ABSL_LOCKS_EXCLUDED(notes_mu_) {
    absl::MutexLock l(&notes_mu_);
    full_ = true;
  }
  bool needs_full_commit() const ABSL_LOCKS_EXCLUDED(notes_mu_) {
    absl::MutexLock l(&notes_mu_);
    return NeedsFullCommitLocked();
  }
  uint64_t chain_base() const { return base_; }

  struct SyncBatch {
    uint64_t nonce = 0;
    uint64_t base = 0;
    uint64_t revision = 0;
    uint64_t keys = 0;
    bool inline_entries = false;
    std::vector<NodeRef> nodes;
    uint64_t root_bytenr = 0;
    std::string root_block;
    std::string fsid;
  };
  // Under the lock: copies the pending keys into the log trees and seals a
  // sync at `revision`. Null when nothing is pending.
  absl::StatusOr<std::unique_ptr<SyncBatch>> PrepareSync(uint64_t revision)
      ABSL_LOCKS_EXCLUDED(notes_mu_);
  // Without the lock: the new nodes, the root block, one flush.
  absl::Status WriteSync(const SyncBatch& b);
  // Without the tree lock too (see the file comment): counts the sync and,
  // when its chain still lives, marks its nodes written or the chain broken.
  void FinishSync(const SyncBatch& b, const absl::Status& written);

  LogStats Stats() const;

 private:
  // TreeHooks for the log trees.
  uint64_t generation() const override { return base_ + 1; }
  absl::StatusOr<uint64_t> AllocTreeBlock(uint64_t owner, uint8_t level) override;
  absl::Status CowTreeBlock(uint64_t, const Node&) override { return absl::OkStatus(); }
  absl::Status FreeTreeBlock(uint64_t tree_id, const Node& node) override;
  absl::StatusOr<bool> ShouldDescendForDrop(uint64_t, format::ChildPtr, int) override;
  absl::Status DropChild(uint64_t, const Node&, int) override;
  absl::Status DropRoot(uint64_t, const Node&) override;

  bool NeedsFullCommitLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(notes_mu_) {
    return broken_ || full_ || next_root_ == 0;
  }
  // The pending keys' current items, by subvolume and key.
  absl::StatusOr<std::vector<LogEntry>> CollectPending() ABSL_EXCLUSIVE_LOCKS_REQUIRED(notes_mu_);
  absl::Status BuildTrees(const std::vector<LogEntry>& entries, LogRootBlock* root);
  void ResetChain(uint64_t base, uint64_t nonce) ABSL_LOCKS_EXCLUDED(notes_mu_, chain_mu_);

  TxnManager* const txn_;
  const uint64_t max_pending_keys_;
  LogForm log_form_;
  std::unique_ptr<NodeCache> cache_;  // one per chain
  // What file writers note and ask about; never held with chain_mu_.
  mutable absl::Mutex notes_mu_;
  std::map<uint64_t, absl::flat_hash_set<std::string>> pending_ ABSL_GUARDED_BY(notes_mu_);
  uint64_t pending_keys_ ABSL_GUARDED_BY(notes_mu_) = 0;
  uint64_t base_ = 0;
  uint64_t nonce_ = 0;
  uint64_t next_root_ = 0;  // where the next root block goes; 0 = no chain
  uint64_t seq_ = 0;
  std::atomic<bool> broken_{false};  // a sync failed or could not allocate
  // Over the pending bound, or engine-level writes.
  bool full_ ABSL_GUARDED_BY(notes_mu_) = false;
  std::vector<uint64_t> chain_blocks_;
  // File-namespace keys of this chain, for Contains(): subvolumes that have
  // any, keys of inline links, and the log trees of the other links.
  absl::flat_hash_set<uint64_t> fs_subvols_ ABSL_GUARDED_BY(notes_mu_);
  std::map<uint64_t, absl::flat_hash_set<std::string>> inline_fs_keys_ ABSL_GUARDED_BY(notes_mu_);
  std::vector<LogTreeRef> fs_trees_ ABSL_GUARDED_BY(notes_mu_);
  uint64_t lookups_ ABSL_GUARDED_BY(notes_mu_) = 0;
  // Guards the sync counters and orders FinishSync against ResetChain.
  mutable absl::Mutex chain_mu_;
  LogStats stats_ ABSL_GUARDED_BY(chain_mu_);
};

}  // namespace log
}  // namespace cowkv

#endif  // COWKV_ENGINE_LOG_LOG_MANAGER_H_
