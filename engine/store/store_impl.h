// StoreImpl: the engine behind the Store facade (private to //engine).
//
// Locking (the lock order, outermost first): commit_mu_ → log_mu_ →
// handles_mu_ → mu_ → a subvolume's tree lock (one at a time) →
// LogManager::notes_mu_ → TxnManager::extent_mu_ → TxnManager::space_mu_ →
// NodeCache; fs_mu_, LogSyncer's and WriteGroup's locks are leaves taken
// alone (fs_mu_ possibly under mu_).
//   - commit_mu_ serialises commits (and subvolume changes, which commit):
//     a commit writes its generation without mu_, and the next one must not
//     seal before that generation is durable.
//   - log_mu_ serialises log syncs (one leader writes at a time); a commit
//     passes through it before freeing a retired chain, so no sync is still
//     writing into blocks that are about to be reused.
//   - LogSyncer's lock guards the group-commit state: which points a log sync or
//     an engine commit made durable, and whether a sync leader is running.
//   - mu_ is the store-wide barrier. Held exclusively by whatever changes
//     the set of trees or must see every tree still: the commit's seal and
//     finish, subvolume create/snapshot/rename/delete, the cleaner, replay,
//     a log sync's capture (PrepareSync), fsync's logging, KV writes (the
//     write group: one revision counter and conflict window for the whole
//     store), Show/List subvolumes and Stats. Held shared by file writers
//     and by every reader.
//   - a subvolume's tree lock (tree_locks_, one per subvolume, found by id
//     under the shared barrier) serialises file writers of that subvolume
//     (exclusive) against each other and against its readers (shared):
//     dirty nodes change in place, so a reader must not run beside a writer
//     of the same tree. File writers of different subvolumes run at once;
//     what they share (free space, delayed refs, the extent tree, the log's
//     noted keys) has its own lock in TxnManager and LogManager, below.
//   - TxnManager::extent_mu_ / space_mu_ and LogManager::notes_mu_: see
//     txn_manager.h and log_manager.h. A fiemap holds extent_mu_ and
//     space_mu_ once for its whole walk (TxnManager::WithExtentReads), inside
//     its subvolume's FsState::path_mu (a lock only fiemap takes).
//   - handles_mu_ guards the count of open Transaction handles and the
//     "commit wanted" flag; a commit waits on it until no handle is open and
//     keeps new handles out meanwhile.
//
// Store states:  open --fatal I/O error in Commit--> read-only-after-error
//                 |                                  (writes: FAILED_PRECONDITION)
//                 +--Close()--> closed (every call: FAILED_PRECONDITION)
#ifndef COWKV_ENGINE_STORE_IMPL_H_
#define COWKV_ENGINE_STORE_IMPL_H_

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/store.h"
#include "engine/base/latency_histogram.h"
#include "engine/format/items.h"
#include "engine/fs/fs_ops.h"
#include "engine/kv/conflict_window.h"
#include "engine/kv/kv_item.h"
#include "engine/kv/kv_space.h"
#include "engine/lease/lessor.h"
#include "engine/log/log_manager.h"
#include "engine/send/resume_token.h"
#include "engine/store/durability_notifier.h"
#include "engine/store/durable_revision.h"
#include "engine/store/log_syncer.h"
#include "engine/store/write_group.h"
#include "engine/subvol/subvolumes.h"
#include "engine/tree/tree.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {

enum class CommitTrigger {
  kExplicit,
  kInterval,
  kDirtyBytes,
  kSpace,
  kClose,
  kDelayedRefs,
  kLogFull,
  kFsync,
  kCount
};

// Every trigger but kClose (counted as explicit), with its name in
// StoreStats (commits_by_<name>, commit_latency) and in slow-commit events.
inline constexpr std::pair<CommitTrigger, const char*> kTriggerNames[] = {
    {CommitTrigger::kExplicit, "explicit"},
    {CommitTrigger::kInterval, "interval"},
    {CommitTrigger::kDirtyBytes, "dirty_bytes"},
    {CommitTrigger::kSpace, "space"},
    {CommitTrigger::kDelayedRefs, "delayed_refs"},
    {CommitTrigger::kLogFull, "log_full"},
    {CommitTrigger::kFsync, "fsync"},
};
// "close" for kClose.
const char* TriggerName(CommitTrigger trigger);

// engine/subvol's record as the public SubvolumeInfo (subvolume_ops.cc).
SubvolumeInfo ToPublicSubvolumeInfo(const SubvolInfo& s);

// A client transaction's state (KvTransaction's body).
struct KvTxnState {
  uint64_t subvol = 0;
  uint64_t read_revision = 0;
  kv::ReadSet reads;
  kv::KvWriteSet ws;  // buffered until Commit
  bool finished = false;
  absl::Status CheckActive() const {
    if (!finished) return absl::OkStatus();
    return absl::FailedPreconditionError("transaction already committed or aborted");
  }
};

class StoreImpl {
 public:
  StoreImpl(BlockDevice* device, std::unique_ptr<BlockDevice> owned, const Options& options,
            std::unique_ptr<TxnManager> txn);
  ~StoreImpl();
  // Replays the log (committing the result) and starts the background
  // threads. Call once, before anything else.
  absl::Status Init();

  absl::Status Close();
  // The key space (kv_path.cc).
  // Put, Delete and Txn wait for durability themselves, unless
  // `defer_point` is given: then they return once applied and set it to the
  // durability point the caller must wait for (AfterDurable; 0 = none).
  absl::StatusOr<uint64_t> Put(uint64_t subvol, absl::string_view key, absl::string_view value,
                               Durability d, uint64_t* defer_point = nullptr);
  absl::StatusOr<uint64_t> Delete(uint64_t subvol, absl::string_view key, Durability d,
                                  uint64_t* defer_point = nullptr);
  // max_value_load: as RangeRequest::max_value_load.
  absl::StatusOr<KeyValue> GetItem(uint64_t subvol, absl::string_view key,
                                   uint64_t max_value_load = 0, uint64_t* revision = nullptr);
  // History (kv_history_path.cc): a key at a past revision, the compact
  // revision, and Compact (through the write group, durable as a write).
  absl::StatusOr<KeyValue> GetItemAt(uint64_t subvol, absl::string_view key, uint64_t at,
                                     uint64_t max_value_load = 0);
  absl::StatusOr<uint64_t> CompactRevision(uint64_t subvol);
  absl::Status Compact(uint64_t subvol, uint64_t revision, Durability d);
  // GetItem's value alone (Store::Get, Subvolume::Get), copied once.
  absl::StatusOr<std::string> GetValue(uint64_t subvol, absl::string_view key);
  absl::StatusOr<RangeResult> Range(uint64_t subvol, const RangeRequest& req);
  std::unique_ptr<Iterator> NewIterator(uint64_t subvol);
  absl::StatusOr<TxnResponse> Txn(uint64_t subvol, const TxnRequest& req,
                                  uint64_t* defer_point = nullptr);
  // Runs `done` once durability point `point` is durable (or with the error
  // that stopped it): at once for point 0, else from the notifier's thread
  // or, for a lone writer, on this thread after it led the sync
  // (DurabilityNotifier).
  void AfterDurable(uint64_t point, std::function<void(const absl::Status&)> done);
  absl::StatusOr<std::unique_ptr<KvTransaction>> BeginTransaction(uint64_t subvol);
  // KvTransaction's body.
  absl::StatusOr<KeyValue> TxnGet(KvTxnState* t, absl::string_view key);
  absl::StatusOr<RangeResult> TxnRange(KvTxnState* t, const RangeRequest& req);
  absl::StatusOr<uint64_t> TxnCommit(KvTxnState* t, Durability d);
  void TxnFinish(KvTxnState* t);

  absl::StatusOr<SubvolumeInfo> CreateSubvolume(absl::string_view name);
  absl::StatusOr<SubvolumeInfo> CreateSnapshot(absl::string_view source, absl::string_view name,
                                               bool read_only);
  absl::Status RenameSubvolume(absl::string_view name, absl::string_view new_name);
  absl::Status ReplaceSubvolume(absl::string_view name, absl::string_view target);
  absl::Status DeleteSubvolume(absl::string_view name);
  absl::Status DropDeletedSubvolumes(uint64_t max_steps);
  absl::StatusOr<SubvolumeInfo> ShowSubvolume(absl::string_view name);
  std::vector<SubvolumeInfo> ListSubvolumes();
  absl::StatusOr<std::unique_ptr<Subvolume>> OpenSubvolume(absl::string_view name);
  // subvolume_list.cc.
  absl::StatusOr<std::vector<SubvolumeInfo>> ListSubvolumes(const SubvolumeListOptions& options);
  absl::StatusOr<std::vector<uint64_t>> SyncDeletedSubvolumes(const SubvolumeSyncOptions& options);
  absl::StatusOr<std::unique_ptr<Transaction>> Begin();
  absl::Status Commit(CommitTrigger trigger);
  // Send and receive (send_path.cc, receive_path.cc; issue 19).
  absl::StatusOr<SendReport> Send(const SendOptions& options, const SendSink& sink);
  absl::StatusOr<std::unique_ptr<ReceiveStream>> Receive(const ReceiveOptions& options);
  absl::StatusOr<SubvolumeDigest> DigestSubvolume(absl::string_view name);
  absl::StatusOr<SendOptions> ResumeSendOptions(absl::string_view token);
  absl::StatusOr<std::vector<PartialReceive>> PartialReceives();
  absl::Status AbortPartialReceive(absl::string_view name);
  StoreStats Stats();
  uint32_t nodesize() const { return nodesize_; }

  // Leases (lease_path.cc): the lessor's state changes under the exclusive
  // barrier with the tree items it mirrors; KeepAlive and the reads take
  // the barrier shared (and the subvolume's tree lock to load).
  absl::StatusOr<int64_t> LeaseGrant(uint64_t subvol, int64_t ttl_seconds, int64_t id,
                                     Durability d);
  // `only_expired`: revoke only if the lease's deadline passed (expiry).
  absl::StatusOr<uint64_t> LeaseRevoke(uint64_t subvol, int64_t id, Durability d,
                                       bool only_expired = false);
  absl::StatusOr<int64_t> LeaseKeepAlive(uint64_t subvol, int64_t id);
  absl::StatusOr<LeaseInfo> LeaseTimeToLive(uint64_t subvol, int64_t id, bool keys);
  absl::StatusOr<std::vector<int64_t>> Leases(uint64_t subvol);
  // Put attaching the key to `lease` (0: none).
  absl::StatusOr<uint64_t> PutWithLease(uint64_t subvol, absl::string_view key,
                                        absl::string_view value, int64_t lease, Durability d,
                                        uint64_t* defer_point = nullptr);
  absl::StatusOr<int> ExpireLeases(int max);

  // Watch (watch_path.cc): events from `subvol`'s history under the shared
  // barrier and its tree lock (kv::ReadEvents); the durable-revision
  // watermark and a wait on it without any store lock.
  absl::StatusOr<EventsResult> ReadEvents(uint64_t subvol, const EventsRequest& req);
  DurableState Durable() const { return durable_rev_->state(); }
  DurableState WaitDurableState(const DurableState& seen, absl::Duration timeout) const {
    return durable_rev_->Wait(seen, timeout);
  }

  // File watch (file_watch_path.cc; docs/design.md "File watch").
  // StartFileEvents: one more file watcher of `subvol`; answers the span
  // start (the oldest revision whose file events are recorded). Stop: one
  // fewer. ReadFileEvents: events of the open span up to the committed
  // revision by default.
  absl::StatusOr<uint64_t> StartFileEvents(uint64_t subvol);
  void StopFileEvents(uint64_t subvol);
  absl::StatusOr<FileEventsResult> ReadFileEvents(uint64_t subvol, const FileEventsRequest& req);

  // Called by Transaction.
  absl::Status HandlePut(absl::string_view key, absl::string_view value);
  absl::Status HandleDelete(absl::string_view key);
  void EndHandle();
  size_t max_value_size() const { return kv::MaxInlineValue(nodesize_); }

  // The file namespace (fs_path.cc): `fn` runs under the shared barrier and
  // the subvolume's tree lock, shared (FsRead) or exclusive (FsWrite);
  // FsWrite retries once after a commit on ENOSPC and paces the writer
  // afterwards.
  absl::Status FsRead(uint64_t subvol, const std::function<absl::Status(fs::FsOps&)>& fn);
  absl::Status FsWrite(uint64_t subvol, const std::function<absl::Status(fs::FsOps&)>& fn);
  // Logs what fsync of `ino` needs and waits for the log sync.
  absl::Status FsFsync(uint64_t subvol, uint64_t ino, bool datasync);

 private:
  class FsBackendImpl;
  class ReceiveSession;
  class ReceiveTargetImpl;
  // Send's subvolumes resolved under the barrier: ids, trees and the header.
  struct SendPlan;
  absl::StatusOr<SendPlan> PlanSend(const SendOptions& options) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // The snapshot (and parent) a resume token names, into `p`.
  absl::Status PlanResumedSend(const SendOptions& options, SendPlan* p)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Partial receives (receive_resume.cc): the progress item of each, read
  // under the tree lock; one by name (NOT_FOUND, RESUME_MISMATCH).
  struct PartialState {
    uint64_t id = 0;
    send::ReceiveProgress progress;
  };
  absl::StatusOr<std::vector<PartialState>> ReadPartialsLocked() ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::StatusOr<PartialState> FindPartial(absl::string_view name);
  // ALREADY_EXISTS (PARTIAL_RECEIVE) if a partial receive will take `name`.
  absl::Status CheckPartialNameFree(absl::string_view name);
  // One receive at a time per name and per tree: false if `name`, or the
  // tree `id` (0: none yet), is claimed. SetClaimedTree names the tree a
  // claim made without one got; ReleasePartial ends the claim.
  bool ClaimPartial(uint64_t id, const std::string& name);
  void SetClaimedTree(const std::string& name, uint64_t id);
  void ReleasePartial(const std::string& name);
  // FAILED_PRECONDITION (PARTIAL_RECEIVE): another receive writes to `name`.
  static absl::Status PartialBusy(absl::string_view name);
  // Mount: drops the partial receives that hold no progress item.
  absl::Status DropUnresumableReceivesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::shared_ptr<fs::FsState> FsStateFor(uint64_t subvol);
  void ForgetFsState(uint64_t subvol);
  fs::FsOptions FsOptionsFromStore() const;
  absl::Status NoteFsReplay(Tree* tree, const log::LogEntry& e, fs::ReplayNotes* notes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status FixupFsReplay(std::map<uint64_t, fs::ReplayNotes>& notes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One try of FsWrite under the barrier (shared, or `exclusive` while the
  // subvolume records file events); *retry_exclusive when it must run
  // again holding the barrier exclusively.
  absl::Status FsWriteLocked(uint64_t subvol, fs::FsState* st,
                             const std::function<absl::Status(fs::FsOps&)>& fn, bool exclusive,
                             bool* retry_exclusive, ThrottleSample* sample)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // File events around one write (file_watch_path.cc): Prepare tells the
  // backend to record events, or to close an open span (a write nobody
  // records); Finish keeps the subvolume's state and compacts old events.
  absl::Status PrepareFileEvents(fs::FsState* st, FsBackendImpl* be, bool recording)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void FinishFileEvents(uint64_t subvol, Tree* tree, fs::FsState* st, const FsBackendImpl& be)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Replay changed `subvol`'s file tree from the log: its file events no
  // longer tell those changes, so an open span closes.
  absl::Status CloseFileEventSpanAfterReplay(uint64_t subvol, Tree* tree)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Mount, after log replay: deletes every writable subvolume's orphans
  // (inodes an open handle kept without names when the store went down).
  absl::Status CleanupOrphansLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies one log entry; the references of the items it replaces go to
  // `drops` (ReplayLog drops them after the last entry).
  absl::Status ReplayEntry(const log::LogEntry& e, std::set<uint64_t>* claimed,
                           std::map<uint64_t, fs::ReplayNotes>* notes,
                           std::vector<std::pair<uint64_t, format::DataRef>>* drops)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // KV internals (kv_path.cc; under the tree lock, kv::KvSpace).
  // Validates `reads` and applies `ws` to `subvol` atomically under one new
  // revision (the current one if nothing changed). ENOSPC changes nothing.
  absl::StatusOr<uint64_t> ApplyLocked(uint64_t subvol, uint64_t read_revision,
                                       const kv::ReadSet& reads, kv::KvWriteSet& ws)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ApplyLocked of one put of an inline value (at most max_value_size())
  // with no reads, without building a write set (kv::KvSpace::PutInline).
  absl::StatusOr<uint64_t> PutInlineLocked(uint64_t subvol, absl::string_view key,
                                           absl::string_view value)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes every value of `ws` too large to be inline to a data extent of
  // its own (no flush: the log sync or commit that makes the item durable
  // flushes it too). ReleaseUnusedExtents returns the ones no commit used.
  absl::Status PrepareExtents(std::map<std::string, std::optional<std::string>>* writes,
                              std::map<std::string, kv::ExtentRef>* extents);
  void ReleaseUnusedExtents(const kv::KvWriteSet& ws);
  // Prepares extents, runs KvWrite, releases what was not used.
  absl::StatusOr<uint64_t> KvWriteSetWrite(kv::KvWriteSet* ws,
                                           const std::function<absl::StatusOr<uint64_t>()>& apply,
                                           Durability d, uint64_t* defer_point = nullptr);
  // Iterator support: the value of `tree_key` in `subvol` now.
  absl::StatusOr<std::string> LoadByTreeKey(uint64_t subvol, absl::string_view tree_key);
  // Runs `apply` under the exclusive lock; on ENOSPC commits once (freed
  // space is pinned until then) and retries; then waits for durability and
  // paces the writer. With `defer_point`, returns the point to wait for
  // instead of waiting (see Put).
  absl::StatusOr<uint64_t> KvWrite(const std::function<absl::StatusOr<uint64_t>()>& apply,
                                   Durability d, uint64_t* defer_point = nullptr);
  absl::StatusOr<Tree*> WritableTree(uint64_t subvol) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  Durability Resolve(Durability d) const {
    return d == Durability::kDefault ? options_.default_durability : d;
  }
  // Queues `w` and returns once it is applied (and, if durable, synced):
  // by this thread as the group's leader, or by another.
  void RunInWriteGroup(GroupWrite* w);
  void RunWriteBatch(const std::vector<GroupWrite*>& batch);
  // Returns once durability point `point` (a value of durable_seq_) is
  // durable: LogSyncer's group commit, and the engine commit (kLogFull)
  // here when it answers that the log cannot take it.
  absl::Status WaitDurable(uint64_t point);
  // One log sync (LogSyncer's SyncOnce); nullopt when the log cannot take
  // it (an engine commit is needed).
  absl::StatusOr<std::optional<LogSyncer::Synced>> RunLogSync();
  // Expands `r`'s base-form history entries in place, then applies them.
  absl::Status ReplayLog(log::Recovered& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InstallLogForm();
  absl::Status ExpandHistoryEntries(std::vector<log::LogEntry>* entries)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Under mu_ right before a generation is sealed: the next log chain, the
  // revision; returns the durability point sealed.
  uint64_t SealLogLocked(std::vector<uint64_t>* retired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // ... and tells durable_rev_ that `revision` is durable (on success).
  void PublishDurable(uint64_t generation, uint64_t point, const absl::Status& s,
                      uint64_t revision = 0);
  absl::Status WriteOnce(absl::string_view key, const absl::string_view* value);
  // Runs `op` under the exclusive lock with no handle open, then commits.
  absl::StatusOr<uint64_t> ManageSubvolumes(
      const std::function<absl::StatusOr<uint64_t>(Subvolumes*)>& op, bool commit_first,
      TxnManager::WriteKind kind = TxnManager::WriteKind::kInsert);
  absl::StatusOr<Tree*> TreeFor(uint64_t tree_id) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Subvolume `subvol`'s tree lock (see the lock order). Exists for every
  // live subvolume (AddTreeLocksLocked) and lives as long as the store.
  absl::Mutex* TreeLock(uint64_t subvol) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Gives every live subvolume a tree lock; after anything that adds one.
  void AddTreeLocksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CommitLocked(CommitTrigger trigger) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, commit_mu_);
  // An EngineEvent for a commit or log sync slower than slow_op_ms; no lock
  // needed (`generation` as EngineEvent::generation).
  void ReportIfSlow(EngineEvent::Kind kind, uint64_t generation,
                    std::chrono::steady_clock::duration took, absl::string_view trigger);
  // Counts a commit that made `generation` durable and records its
  // latency since `start` (when the commit took commit_mu_).
  absl::Status AfterCommitLocked(CommitTrigger trigger, uint64_t generation,
                                 std::chrono::steady_clock::time_point start)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // StoreStats' latency snapshots.
  void LatencyStatsLocked(StoreStats* s) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Runs most queued delayed refs in short batches before a commit seals.
  void DrainDelayedRefs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(commit_mu_);
  // Kicks a commit once dirty metadata (read by the caller) passes
  // dirty_bytes_max.
  void MaybeCommitForDirtyBytes(uint64_t dirty);
  // Paces a writer that holds no handle (seed 001) from the sample its
  // write took; see Options.
  void Throttle(const ThrottleSample& sample);
  // Ends a write, still in its hold of the tree lock: above the soft limit
  // the writer that just added delayed-ref heads runs twice as many (at
  // most delayed_refs_batch), then samples what Throttle() decides on.
  // `heads_before`: pending heads before the write. A file writer holds
  // the barrier shared (TxnManager locks the extent tree for the batch).
  // `after`: the counts at the end of the write.
  ThrottleSample PayDelayedRefsLocked(uint64_t heads_before, const TxnManager::RefCounts& after)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void CommitterLoop();
  // Asks the background committer for a commit now (or commits here when
  // there is none).
  void KickCommit(CommitTrigger why);
  void CleanerLoop();
  // One batch of cleaner steps under the locks; returns steps done.
  absl::StatusOr<int> CleanerBatch(int max_steps);
  absl::Status CheckOpen() const;
  // Leases (lease_path.cc): loads `subvol`'s leases (under its tree lock,
  // shared); writes lease items that go with no KV change (a grant, a
  // revoke whose keys are gone) as one change of their own, without a new
  // revision.
  absl::Status LoadLeases(uint64_t subvol) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Loads every subvolume's leases not loaded yet (mount, each expiry
  // round): a lease's TTL restarts when its subvolume is loaded.
  absl::Status LoadAllLeases() ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status LeaseOpsLocked(uint64_t subvol, Tree* tree, const std::vector<kv::KvOp>& ops)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LeaseExpiryLoop();

  // Constant after construction.
  BlockDevice* const device_;
  const std::unique_ptr<BlockDevice> owned_device_;
  const Options options_;
  const uint32_t nodesize_;
  const fs::FsOptions fs_options_;

  absl::Mutex commit_mu_ ABSL_ACQUIRED_BEFORE(handles_mu_);
  absl::Mutex handles_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int open_handles_ ABSL_GUARDED_BY(handles_mu_) = 0;
  bool commit_wanted_ ABSL_GUARDED_BY(handles_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(handles_mu_) = false;
  bool commit_requested_ ABSL_GUARDED_BY(handles_mu_) = false;
  CommitTrigger requested_trigger_ ABSL_GUARDED_BY(handles_mu_) = CommitTrigger::kInterval;

  absl::Mutex mu_ ABSL_ACQUIRED_AFTER(handles_mu_);
  std::unique_ptr<TxnManager> txn_ ABSL_PT_GUARDED_BY(mu_);
  // One tree lock per subvolume id, added under the exclusive barrier and
  // never removed (ids are not reused), so a pointer found under the
  // shared barrier stays valid for the store's life.
  std::map<uint64_t, std::unique_ptr<absl::Mutex>> tree_locks_ ABSL_GUARDED_BY(mu_);
  // The names over txn_'s fs trees; loaded by Init().
  std::unique_ptr<Subvolumes> subvols_ ABSL_PT_GUARDED_BY(mu_);

  uint64_t commits_by_[static_cast<int>(CommitTrigger::kCount)] ABSL_GUARDED_BY(mu_) = {};
  // Latency of those commits (kClose recorded as kExplicit, as counted in
  // StoreStats) and of log syncs. Lock-free themselves; recorded under mu_
  // next to commits_by_ and the log's sync count, so that Stats() sees
  // counts that agree.
  LatencyRecorder commit_latency_[static_cast<int>(CommitTrigger::kCount)];
  LatencyRecorder log_sync_latency_;

  // The key space (its methods run under mu_; created by Init) and the log.
  std::unique_ptr<kv::KvSpace> kv_;
  // Durability points: bumped by every KV commit and every fsync; a log
  // sync or engine commit makes everything up to the point it captured
  // durable (WaitDurable).
  uint64_t durable_seq_ ABSL_GUARDED_BY(mu_) = 0;
  // The KV revision of the generation the log chain extends (written under
  // mu_ exclusively at a seal or mount, read by the log's LogForm under it).
  std::atomic<uint64_t> log_base_revision_{0};
  // Init finished: only then does Close commit.
  bool initialized_ = false;
  std::unique_ptr<log::LogManager> log_ ABSL_PT_GUARDED_BY(mu_);
  uint64_t open_txns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t replayed_entries_ = 0;             // set by Init
  std::atomic<uint64_t> durable_commits_{0};  // relaxed: statistics

  absl::Mutex log_mu_ ABSL_ACQUIRED_AFTER(commit_mu_) ABSL_ACQUIRED_BEFORE(handles_mu_);
  WriteGroup write_group_;

  // Group commit through the log (created by Init).
  std::unique_ptr<LogSyncer> syncer_;
  // Durable writes whose callers wait without a thread (AfterDurable).
  std::unique_ptr<DurabilityNotifier> notifier_;
  // The durable-revision watermark watchers read up to (created by Init).
  std::unique_ptr<DurableRevision> durable_rev_;
  // Bumped by file writers under the shared barrier; relaxed: statistics.
  std::atomic<uint64_t> throttle_batches_{0};
  std::atomic<uint64_t> throttle_waits_{0};    // relaxed: statistics
  std::atomic<uint64_t> throttle_wait_us_{0};  // relaxed: statistics
  uint64_t cleaner_steps_ ABSL_GUARDED_BY(mu_) = 0;
  // cleaner_steps_ when SyncDeletedSubvolumes last released the space of
  // every drop done so far (its two commits).
  uint64_t synced_cleaner_steps_ ABSL_GUARDED_BY(mu_) = 0;

  // The file namespace's in-memory state per subvolume; fs_mu_ is a leaf.
  absl::Mutex fs_mu_;
  std::map<uint64_t, std::shared_ptr<fs::FsState>> fs_states_ ABSL_GUARDED_BY(fs_mu_);
  // fiemap's path cache (seed 002) goes stale on these.
  std::atomic<uint64_t> snapshot_epoch_{1};
  std::atomic<uint64_t> drop_epoch_{1};

  // Read without locks by CheckOpen(); set once by Close(). Acquire/release
  // so a caller that sees it set also sees the closed state.
  std::atomic<bool> closed_{false};
  std::thread committer_;
  std::thread cleaner_;
  // Leases: the lessor (created by Init, the KvSpace's apply hook; its
  // mutex is a leaf below the tree locks) and the expiry thread.
  std::unique_ptr<lease::Lessor> lessor_;
  std::thread lease_expiry_;
  bool cleaner_work_ ABSL_GUARDED_BY(handles_mu_) = false;  // wake the cleaner
  // Receives writing now (ReceiveSession), by the name each will take, with
  // its tree (0 until made): one receive per name and per tree. A leaf.
  absl::Mutex partial_mu_;
  std::map<std::string, uint64_t, std::less<>> receiving_ ABSL_GUARDED_BY(partial_mu_);
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_IMPL_H_
