// The StoreStats table; see stats_table.h.
#include "server/stats_table.h"

#include <cmath>
#include <string>

namespace cowkv {
namespace server {
namespace {

uint64_t Micros(double seconds) { return static_cast<uint64_t>(std::llround(seconds * 1e6)); }

const LatencyHistogramSnapshot& CommitLatencyOf(const StoreStats& s, const char* trigger) {
  static const LatencyHistogramSnapshot* const kEmpty = new LatencyHistogramSnapshot();
  for (const CommitLatency& c : s.commit_latency) {
    if (c.trigger == trigger) return c.latency;
  }
  return *kEmpty;
}

// Every trigger's commits in one histogram (the engine's buckets are the
// same for all).
LatencyHistogramSnapshot AllCommits(const StoreStats& s) {
  LatencyHistogramSnapshot all;
  for (const CommitLatency& c : s.commit_latency) {
    const LatencyHistogramSnapshot& h = c.latency;
    if (all.upper_bounds_seconds.empty() && !h.upper_bounds_seconds.empty()) {
      all.upper_bounds_seconds = h.upper_bounds_seconds;
      all.cumulative_counts.assign(h.cumulative_counts.size(), 0);
    }
    for (size_t i = 0; i < all.cumulative_counts.size() && i < h.cumulative_counts.size(); ++i) {
      all.cumulative_counts[i] += h.cumulative_counts[i];
    }
    all.count += h.count;
    all.sum_seconds += h.sum_seconds;
  }
  return all;
}

}  // namespace

// A latency figure of Admin.Stats only (no metric: /metrics has the
// histogram itself), in microseconds; `expr` reads it from StoreStats `s`.
#define COWKV_LATENCY(field, expr) \
  StatField { #field, [](const StoreStats& s) -> uint64_t { return Micros(expr); }, nullptr, "", false, 1, "" }

#define COWKV_STAT(field, metric, labels, counter, scale, help) \
  StatField {                                                   \
    #field, [](const StoreStats& s) -> uint64_t { return s.field; }, metric, labels, counter, \
        scale, help                                              \
  }

// The latency rows, after the counters (field numbers 54..66, 68).
void AddLatencyFields(std::vector<StatField>* fields) {
  fields->insert(fields->end(), {
      COWKV_LATENCY(commit_us_by_explicit, CommitLatencyOf(s, "explicit").sum_seconds),
      COWKV_LATENCY(commit_us_by_interval, CommitLatencyOf(s, "interval").sum_seconds),
      COWKV_LATENCY(commit_us_by_dirty_bytes, CommitLatencyOf(s, "dirty_bytes").sum_seconds),
      COWKV_LATENCY(commit_us_by_space, CommitLatencyOf(s, "space").sum_seconds),
      COWKV_LATENCY(commit_us_by_delayed_refs, CommitLatencyOf(s, "delayed_refs").sum_seconds),
      COWKV_LATENCY(commit_us_by_log_full, CommitLatencyOf(s, "log_full").sum_seconds),
      COWKV_LATENCY(commit_us_by_fsync, CommitLatencyOf(s, "fsync").sum_seconds),
      COWKV_LATENCY(commit_mean_us, AllCommits(s).MeanSeconds()),
      COWKV_LATENCY(commit_p50_us, AllCommits(s).QuantileSeconds(0.5)),
      COWKV_LATENCY(commit_p99_us, AllCommits(s).QuantileSeconds(0.99)),
      COWKV_LATENCY(log_sync_us, s.log_sync_latency.sum_seconds),
      COWKV_LATENCY(log_sync_mean_us, s.log_sync_latency.MeanSeconds()),
      COWKV_LATENCY(log_sync_p50_us, s.log_sync_latency.QuantileSeconds(0.5)),
      COWKV_LATENCY(log_sync_p99_us, s.log_sync_latency.QuantileSeconds(0.99)),
  });
}

// The throttler, delayed refs, caches and subvolume rows.
void AddCounterFields(std::vector<StatField>* fields) {
  fields->insert(
      fields->end(),
      {
          COWKV_STAT(throttle_batches, "cowkv_throttle_batches_total", "", true, 1,
                     "Delayed-ref batches run by writers (throttle)."),
          COWKV_STAT(throttle_waits, "cowkv_throttle_waits_total", "", true, 1,
                     "Writers that waited for a commit (throttle)."),
          COWKV_STAT(throttle_wait_us, "cowkv_throttle_wait_seconds_total", "", true, 1e-6,
                     "Time writers waited for a commit (throttle)."),
          COWKV_STAT(device_flushes, "cowkv_device_flushes_total", "", true, 1,
                     "Device flushes issued."),
          COWKV_STAT(dirty_nodes, "cowkv_dirty_nodes", "", false, 1,
                     "Dirty nodes of the running engine transaction."),
          COWKV_STAT(dirty_bytes, "cowkv_dirty_bytes", "", false, 1,
                     "Dirty metadata bytes of the running engine transaction."),
          COWKV_STAT(delayed_ref_heads, "cowkv_delayed_ref_heads", "", false, 1,
                     "Pending delayed-ref heads (one per extent)."),
          COWKV_STAT(delayed_ref_updates, "cowkv_delayed_ref_updates", "", false, 1,
                     "Pending delayed-ref updates before merging."),
          COWKV_STAT(delayed_ref_runs, "cowkv_delayed_ref_runs_total", "", true, 1,
                     "Delayed-ref batches run."),
          COWKV_STAT(delayed_refs_run_total, "cowkv_delayed_ref_heads_run_total", "", true, 1,
                     "Delayed-ref heads applied to the extent tree."),
          COWKV_STAT(cache_hits, "cowkv_node_cache_hits_total", "", true, 1, "Node cache hits."),
          COWKV_STAT(cache_misses, "cowkv_node_cache_misses_total", "", true, 1,
                     "Node cache misses."),
          COWKV_STAT(cache_bytes, "cowkv_node_cache_bytes", "", false, 1,
                     "Bytes held by the node cache."),
          COWKV_STAT(cache_evictions, "cowkv_node_cache_evictions_total", "", true, 1,
                     "Nodes evicted from the cache."),
          COWKV_STAT(corruptions_detected, "cowkv_corruptions_detected_total", "", true, 1,
                     "Checksum or structure failures seen on reads."),
          COWKV_STAT(enospc_errors, "cowkv_enospc_errors_total", "", true, 1,
                     "Writes refused for lack of space."),
          COWKV_STAT(subvolumes, "cowkv_subvolumes", "", false, 1, "Live subvolumes."),
          COWKV_STAT(deleted_subvolumes_pending, "cowkv_deleted_subvolumes_pending", "", false, 1,
                     "Deleted subvolumes still being dropped."),
          COWKV_STAT(cleaner_steps, "cowkv_cleaner_steps_total", "", true, 1, "Cleaner steps run."),
      });
}

// The KV, log and file rows.
void AddKvAndFsFields(std::vector<StatField>* fields) {
  fields->insert(
      fields->end(),
      {
          COWKV_STAT(revision, "cowkv_kv_revision", "", false, 1, "Last KV revision applied."),
          COWKV_STAT(kv_commits, "cowkv_kv_commits_total", "", true, 1,
                     "KV writes and transactions that changed something."),
          COWKV_STAT(durable_commits, "cowkv_kv_durable_commits_total", "", true, 1,
                     "KV commits acknowledged as durable."),
          COWKV_STAT(log_syncs, "cowkv_log_syncs_total", "", true, 1,
                     "Log syncs written (one device flush each)."),
          COWKV_STAT(log_inline_syncs, "cowkv_log_inline_syncs_total", "", true, 1,
                     "Log syncs with entries inline in one sector."),
          COWKV_STAT(log_synced_keys, "cowkv_log_synced_keys_total", "", true, 1,
                     "Keys written by log syncs."),
          COWKV_STAT(log_sync_bytes, "cowkv_log_sync_bytes_total", "", true, 1,
                     "Bytes written by log syncs."),
          COWKV_STAT(log_replayed_entries, "cowkv_log_replayed_entries", "", false, 1,
                     "Log entries replayed at the last mount."),
          COWKV_STAT(kv_conflicts, "cowkv_kv_conflicts_total", "", true, 1,
                     "Client transactions aborted by validation."),
          COWKV_STAT(kv_too_old, "cowkv_kv_too_old_total", "", true, 1,
                     "Client transactions past the conflict window."),
          COWKV_STAT(open_transactions, "cowkv_kv_open_transactions", "", false, 1,
                     "Client transactions not yet finished."),
          COWKV_STAT(kv_range_value_bytes, "cowkv_kv_range_value_bytes_total", "", true, 1,
                     "Value bytes loaded by range reads and Txn ranges."),
          COWKV_STAT(fs_fsyncs, "cowkv_fs_fsyncs_total", "", true, 1, "File fsyncs."),
          COWKV_STAT(fs_file_events, "cowkv_fs_file_events_total", "", true, 1,
                     "File events recorded (only while files are watched)."),
          COWKV_STAT(fs_file_event_span_closes, "cowkv_fs_file_event_span_closes_total", "", true,
                     1, "File-event spans closed by an unwatched write."),
          COWKV_STAT(fs_logged_keys, "cowkv_fs_logged_keys_total", "", true, 1,
                     "Keys noted by fsync and name-change log updates."),
          COWKV_STAT(fs_log_updates, "cowkv_fs_log_updates_total", "", true, 1,
                     "Rename/link/unlink calls that updated the log."),
          COWKV_STAT(fs_logged_lookups, "cowkv_fs_logged_lookups_total", "", true, 1,
                     "Questions to the log whether an inode was logged."),
          COWKV_STAT(log_lookups, "cowkv_log_lookups_total", "", true, 1,
                     "Log trees searched for them."),
          COWKV_STAT(inode_cache_hits, "cowkv_inode_cache_hits_total", "", true, 1,
                     "Inode cache hits."),
          COWKV_STAT(inode_cache_misses, "cowkv_inode_cache_misses_total", "", true, 1,
                     "Inode cache misses."),
          COWKV_STAT(inode_cache_evictions, "cowkv_inode_cache_evictions_total", "", true, 1,
                     "Inodes evicted from the cache."),
          COWKV_STAT(fiemap_path_cache_hits, "cowkv_fiemap_path_cache_hits_total", "", true, 1,
                     "Fiemap sharedness answers from the path cache."),
          COWKV_STAT(fiemap_shared_checks, "cowkv_fiemap_shared_checks_total", "", true, 1,
                     "Tree-block sharedness lookups made by fiemap."),
      });
}

const std::vector<StatField>& StatFields() {
  static const std::vector<StatField>* const kFields = [] {
    auto* fields = new std::vector<StatField>{
        COWKV_STAT(generation, "cowkv_generation", "", false, 1,
                   "Generation of the running engine transaction."),
        COWKV_STAT(nodesize, "cowkv_nodesize_bytes", "", false, 1, "Node size."),
        COWKV_STAT(total_bytes, "cowkv_space_bytes", "kind=\"total\"", false, 1,
                   "Device space: total usable, used (allocated), free (allocatable now), pinned "
                   "(free after the next commit)."),
        COWKV_STAT(used_bytes, "cowkv_space_bytes", "kind=\"used\"", false, 1, ""),
        COWKV_STAT(free_bytes, "cowkv_space_bytes", "kind=\"free\"", false, 1, ""),
        COWKV_STAT(pinned_bytes, "cowkv_space_bytes", "kind=\"pinned\"", false, 1, ""),
        COWKV_STAT(free_fragments, "cowkv_free_space_fragments", "", false, 1,
                   "Disjoint free ranges of the device."),
        COWKV_STAT(free_largest_bytes, "cowkv_free_space_largest_bytes", "", false, 1,
                   "The longest free range."),
        COWKV_STAT(usable_for_4k, "cowkv_space_usable_bytes", "value_size=\"4096\"", false, 1,
                   "Bytes values of this size could fill now (a value is one contiguous extent)."),
        COWKV_STAT(usable_for_64k, "cowkv_space_usable_bytes", "value_size=\"65536\"", false, 1,
                   ""),
        COWKV_STAT(usable_for_1m, "cowkv_space_usable_bytes", "value_size=\"1048576\"", false, 1,
                   ""),
        COWKV_STAT(usable_for_16m, "cowkv_space_usable_bytes", "value_size=\"16777216\"", false, 1,
                   ""),
        COWKV_STAT(commits, "cowkv_engine_commits_total", "", true, 1, "Engine commits."),
        COWKV_STAT(commits_by_explicit, "cowkv_engine_commits_by_trigger_total",
                   "trigger=\"explicit\"", true, 1, "Engine commits by what started them."),
        COWKV_STAT(commits_by_interval, "cowkv_engine_commits_by_trigger_total",
                   "trigger=\"interval\"", true, 1, ""),
        COWKV_STAT(commits_by_dirty_bytes, "cowkv_engine_commits_by_trigger_total",
                   "trigger=\"dirty_bytes\"", true, 1, ""),
        COWKV_STAT(commits_by_space, "cowkv_engine_commits_by_trigger_total", "trigger=\"space\"",
                   true, 1, ""),
        COWKV_STAT(commits_by_delayed_refs, "cowkv_engine_commits_by_trigger_total",
                   "trigger=\"delayed_refs\"", true, 1, ""),
        COWKV_STAT(commits_by_log_full, "cowkv_engine_commits_by_trigger_total",
                   "trigger=\"log_full\"", true, 1, ""),
        COWKV_STAT(commits_by_fsync, "cowkv_engine_commits_by_trigger_total", "trigger=\"fsync\"",
                   true, 1, ""),
    };
    AddCounterFields(fields);
    AddKvAndFsFields(fields);
    AddLatencyFields(fields);
    return fields;
  }();
  return *kFields;
}

#undef COWKV_STAT
#undef COWKV_LATENCY

}  // namespace server
}  // namespace cowkv
