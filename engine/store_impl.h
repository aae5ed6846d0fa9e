// StoreImpl: the engine behind the Store facade (private to //engine).
//
// Locking (the lock order, outermost first): commit_mu_ → handles_mu_ → mu_
// → NodeCache.
//   - commit_mu_ serialises commits (and subvolume changes, which commit):
//     a commit writes its generation without mu_, and the next one must not
//     seal before that generation is durable.
//   - mu_ is the tree lock: writers and the commit hold it exclusively,
//     readers (Get, iterator steps) share it.
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
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/store.h"
#include "engine/tree/tree.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {

enum class CommitTrigger { kExplicit, kInterval, kDirtyBytes, kSpace, kClose, kDelayedRefs };

class StoreImpl {
 public:
  StoreImpl(BlockDevice* device, std::unique_ptr<BlockDevice> owned, const Options& options,
            std::unique_ptr<TxnManager> txn);
  ~StoreImpl();

  absl::Status Close();
  absl::Status Put(uint64_t tree_id, absl::string_view key, absl::string_view value);
  absl::Status Delete(uint64_t tree_id, absl::string_view key);
  absl::StatusOr<std::string> Get(uint64_t tree_id, absl::string_view key);
  std::unique_ptr<Iterator> NewIterator(uint64_t tree_id);

  absl::StatusOr<SubvolumeInfo> CreateSubvolume(absl::string_view name);
  absl::StatusOr<SubvolumeInfo> CreateSnapshot(absl::string_view source, absl::string_view name,
                                               bool read_only);
  absl::Status RenameSubvolume(absl::string_view name, absl::string_view new_name);
  absl::Status DeleteSubvolume(absl::string_view name);
  absl::Status DropDeletedSubvolumes(uint64_t max_steps);
  absl::StatusOr<SubvolumeInfo> ShowSubvolume(absl::string_view name);
  std::vector<SubvolumeInfo> ListSubvolumes();
  absl::StatusOr<std::unique_ptr<Subvolume>> OpenSubvolume(absl::string_view name);
  absl::StatusOr<std::unique_ptr<Transaction>> Begin();
  absl::Status Commit(CommitTrigger trigger);
  StoreStats Stats();
  uint32_t nodesize() const { return nodesize_; }

  // Called by Transaction.
  absl::Status HandlePut(absl::string_view key, absl::string_view value);
  absl::Status HandleDelete(absl::string_view key);
  void EndHandle();


 private:
  absl::Status WriteOnce(uint64_t tree_id, absl::string_view key, const absl::string_view* value);
  absl::Status ImplicitWrite(uint64_t tree_id, absl::string_view key,
                             const absl::string_view* value);
  // Runs `op` under the exclusive lock with no handle open, then commits.
  absl::StatusOr<uint64_t> ManageSubvolumes(
      const std::function<absl::StatusOr<uint64_t>(TxnManager*)>& op, bool commit_first,
      TxnManager::WriteKind kind = TxnManager::WriteKind::kInsert);
  absl::StatusOr<Tree*> TreeFor(uint64_t tree_id) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CommitLocked(CommitTrigger trigger)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_, commit_mu_);
  absl::Status AfterCommitLocked(CommitTrigger trigger) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Kicks a commit once dirty metadata (read by the caller) passes
  // dirty_bytes_max.
  void MaybeCommitForDirtyBytes(uint64_t dirty);
  // Paces a writer that holds no handle (seed 001); see Options.
  void Throttle();
  void CommitterLoop();
  // Asks the background committer for a commit now (or commits here when
  // there is none).
  void KickCommit(CommitTrigger why);
  void CleanerLoop();
  // One batch of cleaner steps under the locks; returns steps done.
  absl::StatusOr<int> CleanerBatch(int max_steps);
  absl::Status CheckOpen() const;

  // Constant after construction.
  BlockDevice* const device_;
  const std::unique_ptr<BlockDevice> owned_device_;
  const Options options_;
  const uint32_t nodesize_;

  absl::Mutex commit_mu_ ABSL_ACQUIRED_BEFORE(handles_mu_);
  absl::Mutex handles_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  int open_handles_ ABSL_GUARDED_BY(handles_mu_) = 0;
  bool commit_wanted_ ABSL_GUARDED_BY(handles_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(handles_mu_) = false;
  bool commit_requested_ ABSL_GUARDED_BY(handles_mu_) = false;
  CommitTrigger requested_trigger_ ABSL_GUARDED_BY(handles_mu_) = CommitTrigger::kInterval;

  absl::Mutex mu_;
  std::unique_ptr<TxnManager> txn_ ABSL_PT_GUARDED_BY(mu_);

  uint64_t commits_by_[6] ABSL_GUARDED_BY(mu_) = {};
  uint64_t throttle_batches_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> throttle_waits_{0};    // relaxed: statistics
  std::atomic<uint64_t> throttle_wait_us_{0};  // relaxed: statistics
  uint64_t cleaner_steps_ ABSL_GUARDED_BY(mu_) = 0;

  // Read without locks by CheckOpen(); set once by Close(). Acquire/release
  // so a caller that sees it set also sees the closed state.
  std::atomic<bool> closed_{false};
  std::thread committer_;
  std::thread cleaner_;
  bool cleaner_work_ ABSL_GUARDED_BY(handles_mu_) = false;  // wake the cleaner
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_IMPL_H_
