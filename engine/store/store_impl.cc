// StoreImpl's life: construction, Init (mount: log recovery and replay,
// the background threads), Close, and Stats. The rooms it wires are in
// the files beside it (docs/design.md "The store").
#include "engine/store/store_impl.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/kv/history_item.h"

namespace cowkv {

StoreImpl::StoreImpl(BlockDevice* device, std::unique_ptr<BlockDevice> owned,
                     const Options& options, std::unique_ptr<TxnManager> txn)
    : device_(device),
      owned_device_(std::move(owned)),
      options_(options),
      nodesize_(txn->nodesize()),
      fs_options_(FsOptionsFromStore()),
      txn_(std::move(txn)) {}

absl::Status StoreImpl::Init() {
  COWKV_ASSIGN_OR_RETURN(log::Recovered r, log::LogManager::Recover(device_, txn_->superblock()));
  {
    absl::MutexLock cl(&commit_mu_);
    absl::WriterMutexLock l(&mu_);
    const format::Superblock& sb = txn_->superblock();
    subvols_ = std::make_unique<Subvolumes>(txn_.get());
    COWKV_RETURN_IF_ERROR(subvols_->Load());
    COWKV_RETURN_IF_ERROR(DropUnresumableReceivesLocked());
    AddTreeLocksLocked();
    log_ = std::make_unique<log::LogManager>(txn_.get(), options_.log_max_pending_keys);
    kv_ = std::make_unique<kv::KvSpace>(txn_.get(), log_.get(), device_,
                                        options_.conflict_window_keys,
                                        std::max(sb.revision, r.revision));
    kv_->set_history_bounds(options_.history_revisions, options_.history_bytes);
    kv_->set_bug_history_not_logged(options_.test_hooks.planted_bug ==
                                    Options::TestHooks::PlantedBug::kHistoryNotLogged);
    lessor_ = std::make_unique<lease::Lessor>(
        options_.lease_clock_ms ? options_.lease_clock_ms : [] {
          return static_cast<int64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                          std::chrono::steady_clock::now().time_since_epoch())
                                          .count());
        },
        options_.test_hooks.planted_bug ==
            Options::TestHooks::PlantedBug::kLeasePutKeepsAttachment);
    kv_->set_apply_hook(lessor_.get());
    InstallLogForm();
    if (r.root_blocks == 0) {
      if (!options_.read_only) COWKV_RETURN_IF_ERROR(log_->ContinueChain(sb));
      log_base_revision_.store(sb.revision, std::memory_order_relaxed);
    } else {
      COWKV_RETURN_IF_ERROR(ReplayLog(r));
    }
  }
  {
    syncer_ =
        std::make_unique<LogSyncer>([this] { return RunLogSync(); }, txn_->superblock().generation);
    durable_rev_ =
        std::make_unique<DurableRevision>(kv_->revision(), txn_->superblock().generation);
    notifier_ = std::make_unique<DurabilityNotifier>(
        [this](uint64_t point) { return WaitDurable(point); },
        absl::FailedPreconditionError("store is closed"), options_.lone_writer_waits_inline);
  }
  if (!options_.read_only) {
    // btrfs's orphan cleanup, after replay (whose commit below then carries
    // it); a failure here leaves a store that closes cleanly.
    absl::MutexLock cl(&commit_mu_);
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(CleanupOrphansLocked());
  }
  if (r.root_blocks > 0 && !options_.read_only) {
    // The replayed state becomes an engine commit; the chain is retired.
    COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kExplicit));
  }
  // Leases restart their TTLs at mount (etcd: on a new leader).
  COWKV_RETURN_IF_ERROR(LoadAllLeases());
  if (options_.commit_interval_ms > 0 && !options_.read_only) {
    committer_ = std::thread([this] { CommitterLoop(); });
  }
  if (options_.background_cleaner && !options_.read_only) {
    cleaner_work_ = subvols_->HasDeadRoots();  // resume a deletion a crash interrupted
    cleaner_ = std::thread([this] { CleanerLoop(); });
  }
  if (options_.lease_expiry_interval_ms > 0 && !options_.read_only) {
    lease_expiry_ = std::thread([this] { LeaseExpiryLoop(); });
  }
  initialized_ = true;
  return absl::OkStatus();
}

// A sync logs a history entry whose prev item is in the generation its
// chain extends by that item's revision only (replay reads it back).
void StoreImpl::InstallLogForm() {
  const bool bug_form =
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kHistoryLogFormTooNew;
  log_->set_log_form([this, bug_form](uint64_t, absl::string_view key, std::string* value) {
    uint64_t base_revision = log_base_revision_.load(std::memory_order_relaxed);
    if (base_revision == 0) return;
    if (bug_form) base_revision = kv::kMaxHistoryRevision;
    std::optional<std::string> base = kv::HistoryEntryBaseForm(key, *value, base_revision);
    if (base.has_value()) *value = *std::move(base);
  });
}

StoreImpl::~StoreImpl() { Close().IgnoreError(); }

absl::Status StoreImpl::CheckOpen() const {
  if (closed_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("store is closed");
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::Close() {
  if (closed_.load(std::memory_order_acquire)) return absl::OkStatus();
  {
    absl::MutexLock l(&handles_mu_);
    stop_ = true;
  }
  // Writers waiting without a thread are answered first: their writes are
  // applied, and the wait may need the committer's commit.
  if (notifier_ != nullptr) notifier_->Stop();
  if (committer_.joinable()) committer_.join();
  if (cleaner_.joinable()) cleaner_.join();
  if (lease_expiry_.joinable()) lease_expiry_.join();
  absl::Status s;
  // A store whose Init failed (a log that does not replay, say) writes
  // nothing: its trees may hold half a replay, and its committer state is
  // not set up.
  if (!options_.read_only && initialized_) s = Commit(CommitTrigger::kClose);
  closed_.store(true, std::memory_order_release);
  if (durable_rev_ != nullptr) durable_rev_->Close();
  return s;
}

absl::StatusOr<Tree*> StoreImpl::TreeFor(uint64_t tree_id) {
  Tree* tree = txn_->fs_tree(tree_id);
  if (tree == nullptr) return absl::NotFoundError(absl::StrCat("no subvolume with id ", tree_id));
  return tree;
}

absl::Mutex* StoreImpl::TreeLock(uint64_t subvol) {
  auto it = tree_locks_.find(subvol);
  // Every live subvolume has one (AddTreeLocksLocked after each change to
  // the set of trees); callers found the tree first.
  COWKV_CHECK_MSG(it != tree_locks_.end(), "a subvolume without a tree lock");
  return it->second.get();
}

void StoreImpl::AddTreeLocksLocked() {
  for (uint64_t id : txn_->TreeIds(/*dropping=*/false)) {
    std::unique_ptr<absl::Mutex>& m = tree_locks_[id];
    if (m == nullptr) m = std::make_unique<absl::Mutex>();
  }
}

namespace {

LatencyHistogramSnapshot ToSnapshot(const LatencyRecorder::Reading& r) {
  LatencyHistogramSnapshot out;
  out.upper_bounds_seconds.reserve(LatencyRecorder::kBuckets);
  out.cumulative_counts.reserve(LatencyRecorder::kBuckets);
  uint64_t cumulative = 0;
  for (int i = 0; i < LatencyRecorder::kBuckets; ++i) {
    cumulative += r.buckets[i];
    out.upper_bounds_seconds.push_back(static_cast<double>(LatencyRecorder::UpperBoundNs(i)) *
                                       1e-9);
    out.cumulative_counts.push_back(cumulative);
  }
  out.count = r.count;
  out.sum_seconds = static_cast<double>(r.sum_ns) * 1e-9;
  COWKV_DCHECK(cumulative + r.buckets[LatencyRecorder::kBuckets] == out.count);
  return out;
}

// StoreStats' trigger names, in the order of its commits_by_* fields
// (kClose is counted as kExplicit).

}  // namespace

double LatencyHistogramSnapshot::MeanSeconds() const {
  return count == 0 ? 0 : sum_seconds / static_cast<double>(count);
}

double LatencyHistogramSnapshot::QuantileSeconds(double q) const {
  if (count == 0 || upper_bounds_seconds.empty()) return 0;
  const double rank = std::min(std::max(q, 0.0), 1.0) * static_cast<double>(count);
  uint64_t below = 0;  // observations in the buckets before i
  for (size_t i = 0; i < cumulative_counts.size(); ++i) {
    if (static_cast<double>(cumulative_counts[i]) >= rank && cumulative_counts[i] > below) {
      const double lo = i == 0 ? 0 : upper_bounds_seconds[i - 1];
      const double in_bucket = static_cast<double>(cumulative_counts[i] - below);
      return lo + (upper_bounds_seconds[i] - lo) * (rank - static_cast<double>(below)) / in_bucket;
    }
    below = cumulative_counts[i];
  }
  return upper_bounds_seconds.back();  // in the +Inf bucket
}

void StoreImpl::LatencyStatsLocked(StoreStats* s) {
  s->commit_latency.clear();
  for (const auto& [trigger, name] : kTriggerNames) {
    s->commit_latency.push_back(
        CommitLatency{name, ToSnapshot(commit_latency_[static_cast<int>(trigger)].Read())});
  }
  s->log_sync_latency = ToSnapshot(log_sync_latency_.Read());
}

namespace {

void CopyFreeSpaceShape(const TxnStats& t, StoreStats* s) {
  s->free_fragments = t.free_fragments;
  s->free_largest_bytes = t.free_largest_bytes;
  s->usable_for_4k = t.usable_for_4k;
  s->usable_for_64k = t.usable_for_64k;
  s->usable_for_1m = t.usable_for_1m;
  s->usable_for_16m = t.usable_for_16m;
}

}  // namespace

// Exclusive: the subvolume list reads every tree's root pointer, which a
// file writer of that subvolume moves under the shared barrier.
namespace {

// The key space's counters (atomics or under the lock Stats holds).
void CopyKvCounters(const kv::KvSpace& kv, StoreStats* s) {
  s->kv_conflicts = kv.conflicts();
  s->kv_too_old = kv.too_old();
  s->kv_history_entries = kv.history_entries();
  s->kv_history_compacted = kv.history_compacted();
  s->kv_range_value_bytes = kv.range_value_bytes();
}

}  // namespace

StoreStats StoreImpl::Stats() {
  absl::WriterMutexLock l(&mu_);
  TxnStats t = txn_->Stats();
  StoreStats s;
  s.generation = t.generation;
  s.nodesize = nodesize_;
  s.total_bytes = t.total_bytes;
  s.used_bytes = t.used_bytes;
  s.free_bytes = t.free_bytes;
  s.pinned_bytes = t.pinned_bytes;
  CopyFreeSpaceShape(t, &s);
  s.commits = t.commits;
  s.commits_by_explicit = commits_by_[static_cast<int>(CommitTrigger::kExplicit)] +
                          commits_by_[static_cast<int>(CommitTrigger::kClose)];
  s.commits_by_interval = commits_by_[static_cast<int>(CommitTrigger::kInterval)];
  s.commits_by_dirty_bytes = commits_by_[static_cast<int>(CommitTrigger::kDirtyBytes)];
  s.commits_by_space = commits_by_[static_cast<int>(CommitTrigger::kSpace)];
  s.commits_by_delayed_refs = commits_by_[static_cast<int>(CommitTrigger::kDelayedRefs)];
  s.commits_by_log_full = commits_by_[static_cast<int>(CommitTrigger::kLogFull)];
  s.commits_by_fsync = commits_by_[static_cast<int>(CommitTrigger::kFsync)];
  s.throttle_batches = throttle_batches_.load(std::memory_order_relaxed);
  s.throttle_waits = throttle_waits_.load(std::memory_order_relaxed);
  s.throttle_wait_us = throttle_wait_us_.load(std::memory_order_relaxed);
  s.device_flushes = t.device_flushes;
  s.dirty_nodes = t.cache.dirty_nodes;
  s.dirty_bytes = t.cache.dirty_bytes;
  s.delayed_ref_heads = t.refs.heads;
  s.delayed_ref_updates = t.refs.updates;
  s.delayed_ref_runs = t.refs.runs;
  s.delayed_refs_run_total = t.refs.heads_run;
  s.cache_hits = t.cache.hits;
  s.cache_misses = t.cache.misses;
  s.cache_bytes = t.cache.clean_bytes;
  s.cache_evictions = t.cache.evictions;
  s.corruptions_detected = CorruptionsDetected();
  s.enospc_errors = t.enospc_errors;
  s.subvolumes = subvols_->List().size();
  s.deleted_subvolumes_pending = subvols_->dead_roots();
  s.cleaner_steps = cleaner_steps_;
  s.revision = kv_->revision();
  s.kv_commits = kv_->commits();
  s.durable_commits = durable_commits_.load(std::memory_order_relaxed);
  log::LogStats ls = log_->Stats();
  s.log_syncs = ls.syncs;
  s.device_flushes += ls.syncs;  // one flush per log sync
  s.log_inline_syncs = ls.inline_syncs;
  s.log_synced_keys = ls.synced_keys;
  s.log_sync_bytes = ls.sync_bytes;
  s.log_replayed_entries = replayed_entries_;
  CopyKvCounters(*kv_, &s);
  s.open_transactions = open_txns_;
  s.log_lookups = log_->Stats().lookups;
  LatencyStatsLocked(&s);
  absl::MutexLock fl(&fs_mu_);
  for (const auto& [id, st] : fs_states_) {
    const fs::FsCounters& c = st->counters;
    s.fs_fsyncs += c.fsyncs.load(std::memory_order_relaxed);
    s.fs_file_events += c.file_events.load(std::memory_order_relaxed);
    s.fs_file_event_span_closes += c.span_closes.load(std::memory_order_relaxed);
    s.fs_logged_keys += c.logged_keys.load(std::memory_order_relaxed);
    s.fs_log_updates += c.log_updates.load(std::memory_order_relaxed);
    s.fs_logged_lookups += c.logged_lookups.load(std::memory_order_relaxed);
    s.inode_cache_hits += c.inode_cache_hits.load(std::memory_order_relaxed);
    s.inode_cache_misses += c.inode_cache_misses.load(std::memory_order_relaxed);
    s.inode_cache_evictions += st->cache.evictions();
    s.fiemap_path_cache_hits += c.path_cache_hits.load(std::memory_order_relaxed);
    s.fiemap_shared_checks += c.shared_checks.load(std::memory_order_relaxed);
  }
  return s;
}

}  // namespace cowkv
