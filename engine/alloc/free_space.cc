#include "engine/alloc/free_space.h"

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/status.h"

namespace cowkv {

void FreeSpace::AddFree(uint64_t start, uint64_t len) {
  if (len == 0) return;
  uint64_t end = start + len;
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
  free_bytes_ -= len;
  return true;
}

bool FreeSpace::IsFree(uint64_t start, uint64_t len) const {
  auto it = ranges_.upper_bound(start);
  if (it == ranges_.begin()) return false;
  --it;
  return start + len <= it->first + it->second;
}

absl::StatusOr<uint64_t> FreeSpace::Allocate(uint64_t len, uint64_t align) {
  COWKV_CHECK(len > 0 && align > 0);
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

void FreeSpace::Pin(uint64_t start, uint64_t len) {
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
    AddFree(start, len);
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
