// DurableRevision: the store-wide durable-revision watermark that watch
// delivers up to (cowkv/watch.h). A revision is durable once an engine
// commit sealed it, or once a log sync wrote it and the engine generation
// that sync's chain extends is durable too (LogSyncer's rule for points).
// The durability path tells it both (Synced, Committed: a few integer
// updates and a condition-variable signal under a leaf lock); watchers wait
// on it (Wait) without any store lock.
//
// Async writes become visible to watchers at the next log sync or commit
// that covers them; a write that never becomes durable (a crash first) is
// never shown, so its revision may be reused after the restart unseen.
//
// Locking: mu_ is a leaf, taken alone.
#ifndef COWKV_ENGINE_STORE_DURABLE_REVISION_H_
#define COWKV_ENGINE_STORE_DURABLE_REVISION_H_

#include <cstdint>
#include <map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cowkv/watch.h"

namespace cowkv {

class DurableRevision {
 public:
  // `revision`: durable at mount (the replayed state); `durable_gen`: the
  // generation on the device.
  DurableRevision(uint64_t revision, uint64_t durable_gen);
  DurableRevision(const DurableRevision&) = delete;
  DurableRevision& operator=(const DurableRevision&) = delete;

  // A log sync whose chain extends generation `base` wrote every change up
  // to `revision`: durable now if `base` is, else when it commits.
  void Synced(uint64_t base, uint64_t revision);
  // An engine commit of `generation` (0: nothing new to write) made every
  // change up to `revision` durable.
  void Committed(uint64_t generation, uint64_t revision);
  // Something watchers must look at that is not a new revision (a
  // subvolume was deleted): moves the epoch.
  void Kick();
  // The store closes: moves the epoch, and every Wait returns at once.
  void Close();

  DurableState state() const;
  // Returns once the epoch differs from `seen.epoch`, the store closed, or
  // `timeout` passed.
  DurableState Wait(const DurableState& seen, absl::Duration timeout) const;

 private:
  void AdvanceLocked(uint64_t revision) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  mutable absl::CondVar cv_;
  DurableState state_ ABSL_GUARDED_BY(mu_);
  uint64_t durable_gen_ ABSL_GUARDED_BY(mu_);
  // Log syncs waiting for their base generation: base -> highest revision.
  std::map<uint64_t, uint64_t> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_DURABLE_REVISION_H_
