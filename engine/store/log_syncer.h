// LogSyncer: group commit over the log tree (btrfs's log_root sync). Every
// KV change and every fsync takes a durability point (a counter the store
// bumps under its tree lock); WaitDurable(point) returns once a log sync or
// an engine commit made that point durable. Whoever finds no sync running
// leads one for everyone waiting, so N concurrent durable writers cost one
// device flush, not N.
//
// It never commits the engine itself: when the log cannot take a sync (full,
// a chain that needs a full commit, a failed write), WaitDurable answers
// kNeedsCommit and the caller commits (CommitTrigger::kLogFull) and waits
// again — as btrfs_sync_file does with BTRFS_LOG_FORCE_COMMIT.
//
// Locking: sync_mu_ is a leaf lock. The sync itself (SyncOnce, the store's)
// runs without it, under the store's log lock and tree lock.
#ifndef COWKV_ENGINE_STORE_LOG_SYNCER_H_
#define COWKV_ENGINE_STORE_LOG_SYNCER_H_

#include <cstdint>
#include <functional>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cowkv {

class LogSyncer {
 public:
  // What one log sync made durable: every point up to `point`, once the
  // engine generation its chain extends (`base`) is durable too.
  struct Synced {
    uint64_t point = 0;
    uint64_t base = 0;
  };
  // Writes one log sync; nullopt when the log cannot take it (the engine
  // must commit). Called by the leader, never with sync_mu_ held.
  using SyncOnce = std::function<absl::StatusOr<std::optional<Synced>>()>;

  enum class Outcome { kDurable, kNeedsCommit };

  // `durable_gen`: the generation on the device at mount.
  LogSyncer(SyncOnce sync_once, uint64_t durable_gen);
  LogSyncer(const LogSyncer&) = delete;
  LogSyncer& operator=(const LogSyncer&) = delete;

  // Returns once `point` is durable (kDurable), or kNeedsCommit when the
  // log could not take the sync that would cover it; the error of a failed
  // commit or sync (the store is then read-only).
  absl::StatusOr<Outcome> WaitDurable(uint64_t point);

  // An engine commit of `generation` made every point up to `point`
  // durable; or failed with `s` (every later wait returns it). Returns
  // true the first time a failure is published.
  bool PublishCommit(uint64_t generation, uint64_t point, const absl::Status& s);

 private:
  const SyncOnce sync_once_;
  absl::Mutex mu_;
  absl::CondVar cv_;  // signalled whenever the state below changes
  bool running_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);
  uint64_t synced_point_ ABSL_GUARDED_BY(mu_) = 0;  // in a written log sync
  uint64_t synced_base_ ABSL_GUARDED_BY(mu_) = 0;   // ... whose chain extends this gen
  uint64_t durable_gen_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t committed_point_ ABSL_GUARDED_BY(mu_) = 0;  // sealed in durable_gen_
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_STORE_LOG_SYNCER_H_
