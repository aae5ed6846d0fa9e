// FreeSpace: which byte ranges of the device may be allocated now.
//
// cowkv keeps free space in memory only and rebuilds it at mount from the
// extent tree (every EXTENT_ITEM is allocated; everything else outside the
// reserved ranges is free) — docs/design.md "Free space" says why. Ranges
// freed in the running engine transaction are *pinned*: the committed tree may
// still point at them, so they become allocatable only after the commit that
// stops referencing them is durable (TakePinned when the generation is
// sealed, Unpin after its superblock flush).
//
// Allocation is next-fit from a cursor so consecutive allocations are
// adjacent and a commit writes long sequential runs.
//
// Invariants (asserted; a violation is an engine bug, never device input:
// mount refuses extent items that break them):
//   1. Free ranges are disjoint and coalesced; free_bytes() is their sum.
//   2. A range given back (Pin, FreeNow, Unpin) is allocated: no byte of it
//      is free (a double free crashes here, not one commit later when the
//      range is handed out twice).
//   3. A range given back starts and ends on a `sectorsize` boundary
//      (every extent is allocated so).
//   4. pinned_bytes() never goes below zero: Unpin returns only what Pin took.
//
// Not thread-safe; the transaction layer serialises access.
#ifndef COWKV_ENGINE_ALLOC_FREE_SPACE_H_
#define COWKV_ENGINE_ALLOC_FREE_SPACE_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace cowkv {

class FreeSpace {
 public:
  // `sectorsize` (a power of two): the alignment of every range given back.
  explicit FreeSpace(uint64_t sectorsize = 1);
  FreeSpace(const FreeSpace&) = delete;
  FreeSpace& operator=(const FreeSpace&) = delete;

  // Adds [start, start+len) as free (the device's space at mount, and every
  // range given back). It must not overlap a free range.
  void AddFree(uint64_t start, uint64_t len);
  // Removes [start, start+len), which must be entirely free (used while
  // rebuilding at mount).
  bool RemoveFree(uint64_t start, uint64_t len);

  // Allocates `len` bytes aligned to `align`. RESOURCE_EXHAUSTED when no free
  // range fits.
  absl::StatusOr<uint64_t> Allocate(uint64_t len, uint64_t align);

  // Freed in the running engine transaction: free after the next commit.
  void Pin(uint64_t start, uint64_t len);
  // Never-written space of the running transaction: free at once.
  void FreeNow(uint64_t start, uint64_t len);
  // Pipelined commit: the ranges pinned by the generation being committed,
  // handed over when it is sealed and released by Unpin once it is durable
  // (they still count as pinned until then).
  std::vector<std::pair<uint64_t, uint64_t>> TakePinned();
  void Unpin(const std::vector<std::pair<uint64_t, uint64_t>>& ranges);

  bool IsFree(uint64_t start, uint64_t len) const;
  uint64_t free_bytes() const { return free_bytes_; }
  uint64_t pinned_bytes() const { return pinned_bytes_; }
  size_t fragments() const { return ranges_.size(); }
  // The longest free range.
  uint64_t largest() const;
  // How many bytes allocations of exactly `size` bytes aligned to `align`
  // could take from the free ranges now (each range fits floor(aligned
  // length / size) of them). Less than free_bytes() when free space is in
  // pieces smaller than `size`. O(fragments).
  uint64_t UsableFor(uint64_t size, uint64_t align) const;

 private:
  // Invariants 2 and 3 for a range given back.
  void CheckGivenBack(uint64_t start, uint64_t len) const;
  bool OverlapsFree(uint64_t start, uint64_t len) const;

  const uint64_t sectorsize_;
  std::map<uint64_t, uint64_t> ranges_;  // start -> len, disjoint, coalesced
  std::vector<std::pair<uint64_t, uint64_t>> pinned_;
  uint64_t free_bytes_ = 0;
  uint64_t pinned_bytes_ = 0;
  uint64_t cursor_ = 0;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_ALLOC_FREE_SPACE_H_
