// NodeCache: every node the engine reads or creates goes through here.
//
// Reads verify (via format::DecodeNode) everything the parent pointer
// promises: bytenr, generation, owner, level, checksum. Clean nodes are kept
// under a byte bound with CLOCK eviction (a hit only sets a bit, so lookups
// stay cheap); dirty nodes are pinned — never evicted — until MarkClean()
// after the commit wrote them, or Discard() when freed in the same engine
// transaction. A NodeRef keeps a node alive after eviction, so eviction never
// invalidates a reader.
//
// Thread-safe.
#ifndef COWKV_ENGINE_TREE_NODE_CACHE_H_
#define COWKV_ENGINE_TREE_NODE_CACHE_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/device.h"
#include "engine/format/node_codec.h"
#include "engine/tree/node.h"

namespace cowkv {

struct NodeCacheStats {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t clean_bytes = 0;
  uint64_t dirty_nodes = 0;
  uint64_t dirty_bytes = 0;
};

class NodeCache {
 public:
  // `device` is borrowed and must outlive the cache.
  NodeCache(BlockDevice* device, std::string fsid, uint32_t nodesize,
            uint32_t sectorsize, uint64_t limit_bytes);
  NodeCache(const NodeCache&) = delete;
  NodeCache& operator=(const NodeCache&) = delete;

  // Returns the node at expect.bytenr, from memory or the device. A cached
  // node is checked against `expect` too (a stale pointer is DATA_LOSS).
  absl::StatusOr<NodeRef> Read(const format::NodeExpect& expect);

  // Creates an empty dirty node for a freshly allocated bytenr.
  NodeRef NewDirty(const format::NodeHeader& header);
  // Creates a dirty node with `header` and a copy of `src`'s items (CoW).
  NodeRef CopyDirty(const format::NodeHeader& header, const Node& src);

  // Removes the node at `bytenr`, clean or dirty (its extent was freed).
  void Discard(uint64_t bytenr);

  // Seals the running transaction's dirty nodes for writeback: each is
  // compacted and release-stored clean (immutable: a later write CoWs it),
  // but stays pinned in the cache until MarkWritten, since the device does
  // not hold it yet. Returns them sorted by bytenr (the write order).
  std::vector<NodeRef> SealDirty();
  // The commit wrote these: they become evictable.
  void MarkWritten(const std::vector<NodeRef>& nodes);

  uint32_t nodesize() const { return nodesize_; }
  uint32_t sectorsize() const { return sectorsize_; }
  const std::string& fsid() const { return fsid_; }
  BlockDevice* device() const { return device_; }
  NodeCacheStats Stats();
  // Dirty nodes now, without the lock (the throttler asks on every write):
  // exact when the caller excludes writers, as the tree lock does.
  uint64_t DirtyNodes() const { return dirty_nodes_.load(std::memory_order_relaxed); }

 private:
  void InsertLocked(NodeRef node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckExpect(const Node& n, const format::NodeExpect& e);

  // Constant after construction.
  BlockDevice* const device_;
  const std::string fsid_;
  const uint32_t nodesize_;
  const uint32_t sectorsize_;

  absl::Mutex mu_;
  uint64_t limit_bytes_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, NodeRef> map_ ABSL_GUARDED_BY(mu_);
  // CLOCK ring of clean bytenrs; may hold bytenrs no longer clean or present
  // (skipped lazily).
  std::deque<uint64_t> clock_ ABSL_GUARDED_BY(mu_);
  uint64_t clean_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // The dirty subset of map_, so a commit touches only what it writes.
  absl::flat_hash_map<uint64_t, NodeRef> dirty_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint64_t> dirty_nodes_{0};  // dirty_.size(), stored under mu_
  // Sealed, not yet written: in map_, never evicted.
  absl::flat_hash_map<uint64_t, NodeRef> writeback_ ABSL_GUARDED_BY(mu_);
  // Statistics bumped under a shared lock; relaxed, no ordering implied.
  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

// Encodes `nodes` (sorted by bytenr) and writes them to `device`, adjacent
// nodes coalesced into writes of up to 1 MiB. `*bytes` (optional) counts
// what was written. No flush.
absl::Status WriteNodes(BlockDevice* device, const std::vector<NodeRef>& nodes,
                        absl::string_view fsid, uint32_t nodesize, uint64_t* bytes = nullptr);

}  // namespace cowkv

#endif  // COWKV_ENGINE_TREE_NODE_CACHE_H_
