// WriteGroup: writers queue their KV commits; the first one finding no
// leader takes everything queued and runs it as one batch (the store applies
// it in one hold of the tree lock and leads one log sync for the durable
// ones), then wakes the rest once. A follower sleeps once instead of queueing
// on the tree lock and again for the sync (RocksDB's write group).
//
// Locking: the group's lock is a leaf; the leader drops it before running
// the batch, so the batch may take any store lock.
#ifndef COWKV_ENGINE_STORE_WRITE_GROUP_H_
#define COWKV_ENGINE_STORE_WRITE_GROUP_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cowkv {

// What the throttler decides on, read by a writer while it still holds the
// tree lock for its write, so that pacing it needs no second trip to the lock.
struct ThrottleSample {
  uint64_t heads = 0;    // delayed-ref heads pending
  uint64_t dirty = 0;    // dirty metadata bytes
  uint64_t updates = 0;  // ref updates this transaction made
};

// One writer's commit in the group. The writer fills the inputs; the leader
// fills the rest before `done`.
struct GroupWrite {
  const std::function<absl::StatusOr<uint64_t>()>* apply = nullptr;  // under the tree lock
  bool durable = false;
  // Durable, but the writer waits itself (StoreImpl::AfterDurable): the
  // leader records the point it needs instead of syncing for it.
  bool defer = false;
  uint64_t point = 0;            // for `defer`: the durability point to wait for
  uint64_t before = 0;           // revision before the apply
  absl::StatusOr<uint64_t> rev;  // what the apply returned
  absl::Status durable_status;   // the group's log sync, if durable
  ThrottleSample throttle;       // after the group's write
  // Apply without history entries (space pressure: KvSpace::set_no_history).
  bool no_history = false;
  bool drop_history = false;  // ... after dropping the history's entries
  bool done = false;
};

class WriteGroup {
 public:
  // Runs a batch (in queue order); called by the leader without the
  // group's lock.
  using RunBatch = std::function<void(const std::vector<GroupWrite*>& batch)>;

  WriteGroup() = default;
  WriteGroup(const WriteGroup&) = delete;
  WriteGroup& operator=(const WriteGroup&) = delete;

  // Queues `w` and returns once a batch holding it has run: by this thread
  // as the leader (through `run`), or by another leader.
  void Run(GroupWrite* w, const RunBatch& run);

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  std::deque<GroupWrite*> queue_ ABSL_GUARDED_BY(mu_);
  bool leader_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_WRITE_GROUP_H_
