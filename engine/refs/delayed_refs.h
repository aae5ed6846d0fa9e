// DelayedRefs: queued refcount changes, merged per extent.
//
// Every CoW queues a +1 for the new node and a -1 for the old one instead of
// touching the extent tree at once (which would CoW the extent tree on every
// write, recursively). Updates to one extent merge into its head: one head
// per extent, one net delta per back-reference. The commit takes all heads
// and applies them to the extent tree (RunDelayedRefs); applying them CoWs
// extent-tree nodes, which queues new heads, so the commit loops until the
// queue is empty (each round touches only nodes not yet dirty, so it
// converges within a few rounds).
//
// Counters (pending heads, pending updates, runs) feed the store's stats and,
// from the subvolumes issue on, the throttler (seed 001).
//
// Not thread-safe; the transaction layer serialises access.
#ifndef COWKV_ENGINE_REFS_DELAYED_REFS_H_
#define COWKV_ENGINE_REFS_DELAYED_REFS_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

namespace cowkv {

// A back-reference: its item type in the extent tree and its parameter
// (TREE_BLOCK_REF: the owning tree id; SHARED_BLOCK_REF: the parent bytenr).
struct BackrefKey {
  uint8_t type = 0;
  uint64_t param = 0;
  bool operator<(const BackrefKey& o) const {
    return std::tie(type, param) < std::tie(o.type, o.param);
  }
};

struct DelayedRefHead {
  uint64_t bytenr = 0;
  uint64_t num_bytes = 0;
  bool is_tree_block = true;
  uint8_t level = 0;
  // The extent was allocated in the running transaction and has no
  // EXTENT_ITEM yet: running the head inserts it.
  bool must_insert = false;
  uint64_t generation = 0;  // allocating generation (for must_insert)
  int64_t ref_mod = 0;      // sum of the deltas below
  std::map<BackrefKey, int64_t> refs;
  // Set the FULL_BACKREF flag on the extent item when the head runs.
  bool set_full_backref = false;
};

struct DelayedRefStats {
  uint64_t heads = 0;          // pending heads
  uint64_t updates = 0;        // pending updates (before merging)
  uint64_t runs = 0;           // batches taken by the commit
  uint64_t heads_run = 0;      // heads applied in total
};

class DelayedRefs {
 public:
  // Queues `delta` (non-zero) on `ref` (a back-reference type) of the extent.
  // `new_alloc` marks the +1 of a fresh allocation, which must be the
  // extent's first pending update. Returns the merged head.
  const DelayedRefHead& Add(uint64_t bytenr, uint64_t num_bytes, uint8_t level,
                            BackrefKey ref, int64_t delta, bool new_alloc,
                            uint64_t generation);

  // Queues setting FULL_BACKREF on the extent (btrfs's delayed extent op).
  void SetFullBackref(uint64_t bytenr, uint64_t num_bytes, uint8_t level);

  // The pending head of `bytenr`, or null.
  const DelayedRefHead* Find(uint64_t bytenr) const;

  // Drops the head of `bytenr` when it is a fresh allocation whose refs all
  // cancelled out (allocated and freed in the same transaction): nothing
  // must reach the extent tree and the space is free at once. True if dropped.
  bool DropIfCancelled(uint64_t bytenr);

  // Hands every pending head to the caller, in bytenr order.
  std::vector<DelayedRefHead> TakeAll();
  // Hands up to `max_heads` pending heads (lowest bytenrs) to the caller:
  // a writer's throttle batch, run before the commit (seed 001).
  std::vector<DelayedRefHead> TakeBatch(size_t max_heads);

  bool empty() const { return heads_.empty(); }
  // Updates queued since the last TakeAll (the last commit), including the
  // ones writers already ran: how much ref work this transaction made.
  uint64_t updates_since_commit() const { return updates_since_commit_; }
  uint64_t num_heads() const { return heads_.size(); }
  DelayedRefStats Stats() const;

 private:
  std::map<uint64_t, DelayedRefHead> heads_;
  uint64_t pending_updates_ = 0;
  uint64_t updates_since_commit_ = 0;
  uint64_t runs_ = 0;
  uint64_t heads_run_ = 0;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_REFS_DELAYED_REFS_H_
