// StoreStats: what Store::Stats() reports (the server's /metrics and
// `cowkv stats` are built from it). Plain values, read at one moment.
#ifndef COWKV_INCLUDE_COWKV_STATS_H_
#define COWKV_INCLUDE_COWKV_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace cowkv {

// A latency histogram read at one moment (StoreStats). Buckets are fixed
// and exponential: upper_bounds_seconds[i] = 8 µs × 2^i (22 bounds, 8 µs ..
// ~16.8 s), and cumulative_counts[i] counts the observations no longer than
// upper_bounds_seconds[i]. `count` counts all of them (the +Inf bucket):
// cumulative_counts never decreases and never exceeds `count`, even when
// read during a recording. `sum_seconds` is their total (it may miss an
// observation recorded at the same moment).
struct LatencyHistogramSnapshot {
  std::vector<double> upper_bounds_seconds;
  std::vector<uint64_t> cumulative_counts;  // same length as the bounds
  uint64_t count = 0;
  double sum_seconds = 0;

  // sum_seconds / count; 0 when empty.
  double MeanSeconds() const;
  // An estimate of the q-quantile (0 < q <= 1), as Prometheus's
  // histogram_quantile: linear inside the bucket that holds it, the last
  // bound when it falls past it; 0 when empty.
  double QuantileSeconds(double q) const;
};

// The latency of the engine commits one trigger started.
struct CommitLatency {
  std::string trigger;  // as in StoreStats::commits_by_<trigger>: "explicit", ...
  LatencyHistogramSnapshot latency;
};

struct StoreStats {
  uint64_t generation = 0;
  uint32_t nodesize = 0;
  uint64_t total_bytes = 0;   // usable bytes (device minus reserved)
  uint64_t used_bytes = 0;    // allocated extents, committed + this txn
  uint64_t free_bytes = 0;    // allocatable now
  uint64_t pinned_bytes = 0;  // freed in this txn, free after commit
  // Free space in pieces: a KV value is one contiguous data extent, so a
  // value of N bytes needs a free range of N (rounded to the sector).
  uint64_t free_fragments = 0;      // disjoint free ranges
  uint64_t free_largest_bytes = 0;  // the longest one
  // Bytes that values of 4 KiB / 64 KiB / 1 MiB / 16 MiB could fill now.
  uint64_t usable_for_4k = 0;
  uint64_t usable_for_64k = 0;
  uint64_t usable_for_1m = 0;
  uint64_t usable_for_16m = 0;
  uint64_t commits = 0;
  uint64_t commits_by_explicit = 0;
  uint64_t commits_by_interval = 0;
  uint64_t commits_by_dirty_bytes = 0;
  uint64_t commits_by_space = 0;
  uint64_t commits_by_delayed_refs = 0;
  uint64_t commits_by_log_full = 0;  // durable commits the log could not take
  uint64_t commits_by_fsync = 0;     // fsyncs the log could not carry (a name removed or moved)
  uint64_t throttle_batches = 0;     // delayed-ref batches run by writers
  uint64_t throttle_waits = 0;       // writers that waited for a commit
  uint64_t throttle_wait_us = 0;     // total time they waited
  uint64_t device_flushes = 0;       // all: engine commits' and log syncs'
  uint64_t dirty_nodes = 0;
  uint64_t dirty_bytes = 0;
  uint64_t delayed_ref_heads = 0;       // pending heads (one per extent)
  uint64_t delayed_ref_updates = 0;     // pending +1/-1 updates, before merging
  uint64_t delayed_ref_runs = 0;        // batches run
  uint64_t delayed_refs_run_total = 0;  // heads applied to the extent tree
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_bytes = 0;
  uint64_t cache_evictions = 0;
  uint64_t corruptions_detected = 0;
  uint64_t enospc_errors = 0;
  uint64_t subvolumes = 0;
  uint64_t deleted_subvolumes_pending = 0;  // still being dropped
  uint64_t cleaner_steps = 0;
  // KV and the log.
  uint64_t revision = 0;          // last KV revision applied
  uint64_t kv_commits = 0;        // KV writes and transactions that changed something
  uint64_t durable_commits = 0;   // of them, acknowledged as durable
  uint64_t log_syncs = 0;         // log syncs written (one flush each)
  uint64_t log_inline_syncs = 0;  // of them, entries inline in one sector
  uint64_t log_synced_keys = 0;
  uint64_t log_sync_bytes = 0;
  uint64_t log_replayed_entries = 0;  // at the last mount
  uint64_t kv_conflicts = 0;          // transactions aborted by validation
  uint64_t kv_too_old = 0;            // transactions past the conflict window, reads compacted
  uint64_t kv_history_entries = 0;    // history entries written (since open)
  uint64_t kv_history_compacted = 0;  // history entries dropped by compaction (since open)
  uint64_t open_transactions = 0;     // client transactions not yet finished
  uint64_t kv_range_value_bytes = 0;  // value bytes range reads (and Txn ranges) loaded
  // The file namespace.
  uint64_t fs_fsyncs = 0;
  // File events recorded (only while a subvolume's files are watched: 0 on
  // a store nobody watches), and spans closed by the first unwatched write.
  uint64_t fs_file_events = 0;
  uint64_t fs_file_event_span_closes = 0;
  uint64_t fs_logged_keys = 0;     // keys fsync and name-change log updates noted
  uint64_t fs_log_updates = 0;     // rename/link/unlink that had to update the log
  uint64_t fs_logged_lookups = 0;  // "was this inode logged?" asked of the log (seed 004)
  uint64_t log_lookups = 0;        // log trees searched for them
  uint64_t inode_cache_hits = 0;
  uint64_t inode_cache_misses = 0;
  uint64_t inode_cache_evictions = 0;
  uint64_t fiemap_path_cache_hits = 0;  // seed 002
  uint64_t fiemap_shared_checks = 0;    // tree-block sharedness lookups
  // Latency. An engine commit is timed from when it holds the commit lock
  // to its generation being durable and published (docs/design.md
  // "Commit and log-sync latency"); one entry per trigger, in the order of
  // commits_by_*: explicit (close included), interval, dirty_bytes, space,
  // delayed_refs, log_full, fsync. Each count equals its commits_by_* counter.
  std::vector<CommitLatency> commit_latency;
  // Each log sync's write of its blocks and its flush; count == log_syncs.
  LatencyHistogramSnapshot log_sync_latency;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_STATS_H_
