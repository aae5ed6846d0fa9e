#include "engine/store/log_syncer.h"

#include <algorithm>
#include <utility>

#include "engine/base/check.h"

namespace cowkv {

LogSyncer::LogSyncer(SyncOnce sync_once, uint64_t durable_gen)
    : sync_once_(std::move(sync_once)), durable_gen_(durable_gen) {}

absl::StatusOr<LogSyncer::Outcome> LogSyncer::WaitDurable(uint64_t point) {
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      // Wait while a sync runs, or while the sync that covers `point` waits
      // for the engine commit its chain extends. A condition variable, not
      // Await: with many committers waiting, re-evaluating every waiter's
      // condition on each unlock costs more than the sync.
      for (;;) {
        if (committed_point_ >= point || (synced_point_ >= point && durable_gen_ >= synced_base_)) {
          return Outcome::kDurable;
        }
        if (!failed_.ok()) return failed_;
        if (!running_ && synced_point_ < point) break;  // lead the next sync
        cv_.Wait(&mu_);
      }
      running_ = true;
    }
    absl::StatusOr<std::optional<Synced>> synced = sync_once_();
    absl::MutexLock l(&mu_);
    running_ = false;
    cv_.SignalAll();  // once, for everyone the sync covered
    if (!synced.ok() || !synced->has_value()) return Outcome::kNeedsCommit;
    // The leader's sync covers its own point: the point was taken under
    // the tree lock before the sync read the counter under it.
    COWKV_DCHECK((*synced)->point >= point);
    if ((*synced)->point > synced_point_) {
      synced_point_ = (*synced)->point;
      synced_base_ = (*synced)->base;
    }
  }
}

bool LogSyncer::PublishCommit(uint64_t generation, uint64_t point, const absl::Status& s) {
  absl::MutexLock l(&mu_);
  bool first_failure = false;
  if (!s.ok()) {
    first_failure = failed_.ok();
    if (first_failure) failed_ = s;
  } else {
    // Commits publish in generation order (commit_mu_); a log sync's point
    // can run ahead of the commit, never the commit behind an earlier one.
    COWKV_DCHECK(generation == 0 || generation >= durable_gen_);
    durable_gen_ = std::max(durable_gen_, generation);
    committed_point_ = std::max(committed_point_, point);
  }
  cv_.SignalAll();
  return first_failure;
}

}  // namespace cowkv
