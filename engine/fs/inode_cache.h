// InodeCache: the in-memory inodes of one subvolume, keyed by inode number
// (seed 003).
//
// Inode numbers are dense (allocated in sequence), so the cache is a radix
// array like the kernel's xarray rather than a binary search tree: a tree
// of 64-slot nodes, 6 bits of the index per level, as tall as the largest
// index needs (4 levels cover 16M inodes). An insert or lookup touches one
// slot per level — a few cache lines — instead of ~log2(n) tree nodes, and
// inserts in sequence fill one node before allocating the next.
//
// Bounded: past `capacity` entries an insert evicts with CLOCK (a lookup
// sets an entry's referenced bit; the hand clears it or evicts). An entry
// some caller still holds (its shared_ptr is shared) is never evicted, so a
// returned pointer stays valid; a caller that needs an inode kept keeps its
// pointer. Eviction is what makes the fs layer's "was this inode logged?"
// answer fall back to the log tree (seed 004).
//
// Thread-safe: lookups share the lock, inserts and erases take it alone.
// `StdMapInodeCache` has the same interface over a std::map, the baseline
// the seed-003 benchmark compares against.
#ifndef COWKV_ENGINE_FS_INODE_CACHE_H_
#define COWKV_ENGINE_FS_INODE_CACHE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace cowkv {
namespace fs {

namespace internal {

// The untyped radix array: indices to opaque pointers. Not thread-safe.
class RadixArray {
 public:
  static constexpr int kBits = 6;
  static constexpr int kSlots = 1 << kBits;
  // Levels that cover every 64-bit index (11 * 6 = 66 bits).
  static constexpr int kMaxHeight = (64 + kBits - 1) / kBits;
  static_assert(kMaxHeight * kBits >= 64, "kMaxHeight levels reach every index");

  RadixArray() = default;
  ~RadixArray();
  RadixArray(const RadixArray&) = delete;
  RadixArray& operator=(const RadixArray&) = delete;

  void* Get(uint64_t index) const;
  // Stores `value` (non-null) at `index`; returns what was there (or null).
  void* Set(uint64_t index, void* value);
  // Clears `index`; returns what was there (or null). Frees emptied nodes.
  void* Erase(uint64_t index);
  // The first present index >= `from`, or false.
  bool Next(uint64_t from, uint64_t* index) const;
  size_t size() const { return size_; }
  int height() const { return height_; }

 private:
  struct Node {
    std::array<void*, kSlots> slots{};
    int count = 0;  // non-null slots
  };
  // Largest index a tree of `height` levels holds.
  static uint64_t MaxIndex(int height);
  void Free(Node* n, int level);
  static bool NextIn(const Node* n, int level, uint64_t base, uint64_t from, uint64_t* out);

  Node* root_ = nullptr;
  int height_ = 0;  // levels; 0 = empty
  size_t size_ = 0;
};

}  // namespace internal

template <typename T>
class InodeCache {
 public:
  explicit InodeCache(size_t capacity) : capacity_(capacity) {}
  ~InodeCache() {
    absl::MutexLock l(&mu_);
    uint64_t i = 0;
    while (array_.Next(i, &i)) {
      delete static_cast<Entry*>(array_.Erase(i));
    }
  }
  InodeCache(const InodeCache&) = delete;
  InodeCache& operator=(const InodeCache&) = delete;

  // The cached inode, or null.
  std::shared_ptr<T> Lookup(uint64_t ino) {
    absl::ReaderMutexLock l(&mu_);
    auto* e = static_cast<Entry*>(array_.Get(ino));
    if (e == nullptr) return nullptr;
    e->referenced.store(true, std::memory_order_relaxed);
    return e->value;
  }

  // Caches `value` for `ino` unless an inode is cached there already;
  // returns the cached one either way.
  std::shared_ptr<T> Insert(uint64_t ino, std::shared_ptr<T> value) {
    absl::MutexLock l(&mu_);
    if (auto* e = static_cast<Entry*>(array_.Get(ino))) return e->value;
    if (array_.size() >= capacity_) EvictLocked();
    auto* e = new Entry{std::move(value)};
    array_.Set(ino, e);
    return e->value;
  }

  bool Erase(uint64_t ino) {
    absl::MutexLock l(&mu_);
    auto* e = static_cast<Entry*>(array_.Erase(ino));
    delete e;
    return e != nullptr;
  }

  size_t size() {
    absl::ReaderMutexLock l(&mu_);
    return array_.size();
  }
  uint64_t evictions() {
    absl::ReaderMutexLock l(&mu_);
    return evictions_;
  }

 private:
  struct Entry {
    std::shared_ptr<T> value;
    std::atomic<bool> referenced{false};
  };

  // CLOCK: sweeps from the hand, clearing referenced bits, and evicts the
  // first unreferenced entry nobody holds; gives up after two sweeps (every
  // entry held: the cache grows past its bound rather than fail).
  void EvictLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t budget = 2 * array_.size() + 2;
    for (size_t step = 0; step < budget; ++step) {
      uint64_t i;
      if (!array_.Next(hand_, &i)) {
        if (hand_ == 0) return;
        hand_ = 0;
        continue;
      }
      hand_ = i + 1;
      auto* e = static_cast<Entry*>(array_.Get(i));
      if (e->referenced.exchange(false, std::memory_order_relaxed)) continue;
      if (e->value.use_count() > 1) continue;  // held by a caller
      delete static_cast<Entry*>(array_.Erase(i));
      ++evictions_;
      return;
    }
  }

  const size_t capacity_;
  absl::Mutex mu_;
  internal::RadixArray array_ ABSL_GUARDED_BY(mu_);
  uint64_t hand_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t evictions_ ABSL_GUARDED_BY(mu_) = 0;
};

// The baseline: the same cache over a balanced binary tree (btrfs's
// rb-tree before seed 003). No eviction; for the benchmark only.
template <typename T>
class StdMapInodeCache {
 public:
  std::shared_ptr<T> Lookup(uint64_t ino) {
    absl::ReaderMutexLock l(&mu_);
    auto it = map_.find(ino);
    return it == map_.end() ? nullptr : it->second;
  }
  std::shared_ptr<T> Insert(uint64_t ino, std::shared_ptr<T> value) {
    absl::MutexLock l(&mu_);
    return map_.emplace(ino, std::move(value)).first->second;
  }
  bool Erase(uint64_t ino) {
    absl::MutexLock l(&mu_);
    return map_.erase(ino) > 0;
  }
  size_t size() {
    absl::ReaderMutexLock l(&mu_);
    return map_.size();
  }

 private:
  absl::Mutex mu_;
  std::map<uint64_t, std::shared_ptr<T>> map_ ABSL_GUARDED_BY(mu_);
};

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_INODE_CACHE_H_
