#include "engine/kv/conflict_window.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "engine/base/check.h"

namespace cowkv {
namespace kv {

void ConflictWindow::OpenTxn(uint64_t revision) {
  if (open_txns_++ == 0) floor_ = revision;
}

void ConflictWindow::CloseTxn() {
  COWKV_CHECK(open_txns_ > 0);
  if (--open_txns_ == 0) {
    last_write_.clear();
    order_.clear();
  }
}

void ConflictWindow::RecordWrite(uint64_t subvol, absl::string_view key, uint64_t revision) {
  if (open_txns_ == 0) return;
  Key k{subvol, std::string(key)};
  last_write_[k] = revision;
  order_.emplace_back(revision, std::move(k));
  while (order_.size() > max_keys_) {
    auto& [rev, old] = order_.front();
    auto it = last_write_.find(old);
    if (it != last_write_.end() && it->second == rev) last_write_.erase(it);
    floor_ = std::max(floor_, rev);
    order_.pop_front();
  }
}

namespace {
std::string Show(absl::string_view key) {
  return absl::CHexEscape(key.substr(0, 64)) + (key.size() > 64 ? "..." : "");
}
}  // namespace

absl::Status ConflictWindow::Validate(uint64_t read_revision, const ReadSet& reads) const {
  if (reads.empty()) return absl::OkStatus();
  if (open_txns_ == 0 || read_revision < floor_) {
    return WithReason(
        absl::OutOfRangeError(absl::StrCat("transaction too old: read revision ", read_revision,
                                           " is below the conflict window (revisions above ",
                                           floor_, " are tracked); retry it")),
        ErrorReason::kTooOld);
  }
  for (const auto& [subvol, key] : reads.keys) {
    auto it = last_write_.find(Key{subvol, key});
    if (it != last_write_.end() && it->second > read_revision) {
      return WithReason(absl::AbortedError(absl::StrCat(
                            "conflict: key '", Show(key), "' was written at revision ", it->second,
                            " after this transaction read at ", read_revision)),
                        ErrorReason::kConflict);
    }
  }
  for (const ReadRange& r : reads.ranges) {
    auto it = last_write_.lower_bound(Key{r.subvol, r.start});
    for (; it != last_write_.end() && it->first.first == r.subvol; ++it) {
      if (!r.end.empty() && it->first.second >= r.end) break;
      if (it->second > read_revision) {
        return WithReason(absl::AbortedError(absl::StrCat(
                              "conflict: key '", Show(it->first.second), "' in range ['",
                              Show(r.start), "', '", Show(r.end), "') was written at revision ",
                              it->second, " after this transaction read at ", read_revision)),
                          ErrorReason::kConflict);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kv
}  // namespace cowkv
