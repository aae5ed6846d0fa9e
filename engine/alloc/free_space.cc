#include "engine/alloc/free_space.h"

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/status.h"

namespace cowkv {

FreeSpace::FreeSpace(uint64_t sectorsize) : sectorsize_(sectorsize) {
  COWKV_CHECK(sectorsize > 0);
  COWKV_CHECK((sectorsize & (sectorsize - 1)) == 0);
}

void FreeSpace::AddFree(uint64_t start, uint64_t len) {
  if (len == 0) return;
  uint64_t end = start + len;
  COWKV_CHECK(end > start);  // no wrap past 2^64
  auto next = ranges_.lower_bound(start);
  COWKV_CHECK_MSG(next == ranges_.end() || next->first >= end, "double free (overlaps next)");
  if (next != ranges_.begin()) {
    auto prev = std::prev(next);
    COWKV_CHECK_MSG(prev->first + prev->second <= start, "double free (overlaps prev)");
    if (prev->first + prev->second == start) {
      start = prev->first;
      ranges_.erase(prev);
    }
  }
  if (next != ranges_.end() && next->first == end) {
    end += next->second;
    ranges_.erase(next);
  }
  ranges_[start] = end - start;
  free_bytes_ += len;
}

bool FreeSpace::RemoveFree(uint64_t start, uint64_t len) {
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  uint64_t rs = it->first, re = it->first + it->second;
  if (start + len > re) return false;
  ranges_.erase(it);
  if (rs < start) ranges_[rs] = start - rs;
  if (start + len < re) ranges_[start + len] = re - start - len;
  COWKV_DCHECK(free_bytes_ >= len);  // the range was free, so counted
  free_bytes_ -= len;
  return true;
}

bool FreeSpace::OverlapsFree(uint64_t start, uint64_t len) const {
  auto next = ranges_.lower_bound(start);
  if (next != ranges_.end() && next->first < start + len) return true;
  if (next == ranges_.begin()) return false;
  auto prev = std::prev(next);
  return prev->first + prev->second > start;
}

void FreeSpace::CheckGivenBack(uint64_t start, uint64_t len) const {
  COWKV_CHECK(len > 0);
  COWKV_CHECK_MSG(start % sectorsize_ == 0, "misaligned free (start)");
  COWKV_CHECK_MSG(len % sectorsize_ == 0, "misaligned free (length)");
  COWKV_CHECK_MSG(!OverlapsFree(start, len), "double free (range is free)");
}

bool FreeSpace::IsFree(uint64_t start, uint64_t len) const {
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  return start + len <= it->first + it->second;
}

absl::StatusOr<uint64_t> FreeSpace::Allocate(uint64_t len, uint64_t align) {
  COWKV_CHECK(len > 0);
  COWKV_CHECK(align > 0);
  COWKV_CHECK((align & (align - 1)) == 0);
  // Two passes: from the cursor to the end, then from the start.
  for (int pass = 0; pass < 2; ++pass) {
    auto it = pass == 0 ? ranges_.upper_bound(cursor_) : ranges_.begin();
    if (pass == 0 && it != ranges_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second > cursor_) it = prev;
    }
    for (; it != ranges_.end(); ++it) {
      uint64_t lo = it->first;
      if (pass == 0 && lo < cursor_) lo = cursor_;
      uint64_t aligned = (lo + align - 1) / align * align;
      if (aligned + len <= it->first + it->second) {
        COWKV_CHECK(RemoveFree(aligned, len));
        COWKV_DCHECK(aligned % align == 0);
        cursor_ = aligned + len;
        return aligned;
      }
    }
  }
  return NoSpaceError(absl::StrCat("no free range of ", len, " bytes (",
                                   free_bytes_, " free in ", ranges_.size(),
                                   " fragments, ", pinned_bytes_,
                                   " pinned until the next commit)"));
}

void FreeSpace::FreeNow(uint64_t start, uint64_t len) {
  CheckGivenBack(start, len);
  AddFree(start, len);
}

void FreeSpace::Pin(uint64_t start, uint64_t len) {
  // Checked now: a range pinned while free would be handed out again before
  // the commit, and Unpin would then free someone else's extent.
  CheckGivenBack(start, len);
  pinned_.emplace_back(start, len);
  pinned_bytes_ += len;
}

std::vector<std::pair<uint64_t, uint64_t>> FreeSpace::TakePinned() {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  out.swap(pinned_);
  return out;
}

void FreeSpace::Unpin(const std::vector<std::pair<uint64_t, uint64_t>>& ranges) {
  for (const auto& [start, len] : ranges) {
    COWKV_CHECK_MSG(pinned_bytes_ >= len, "unpin of a range that was not pinned");
    AddFree(start, len);  // checks it is not free already
    pinned_bytes_ -= len;
  }
}

uint64_t FreeSpace::largest() const {
  uint64_t best = 0;
  for (const auto& [start, len] : ranges_) best = std::max(best, len);
  return best;
}

uint64_t FreeSpace::UsableFor(uint64_t size, uint64_t align) const {
  if (size == 0) return 0;
  uint64_t total = 0;
  for (const auto& [start, len] : ranges_) {
    const uint64_t aligned = align > 1 ? (start + align - 1) / align * align : start;
    if (aligned >= start + len) continue;
    total += (start + len - aligned) / size * size;
  }
  return total;
}

}  // namespace cowkv
