// FsOps::Batch: one fs operation's writes, staged (private to engine/fs).
#ifndef COWKV_ENGINE_FS_FS_BATCH_H_
#define COWKV_ENGINE_FS_FS_BATCH_H_

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "engine/base/status.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

// One operation's writes, staged so its own reads see them, applied at
// Commit in one backend batch (all or nothing for space); log notes are
// passed on only once the writes are in.
class FsOps::Batch {
 public:
  explicit Batch(FsBackend* b) : b_(b) {}
  ~Batch() {
    for (const format::DataRef& d : written_) b_->ReleaseData(d);
  }

  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key) {
    COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* v, Find(key));
    return *v;
  }
  // Get without the copy: the value stays valid until this key is next
  // staged (map nodes do not move).
  absl::StatusOr<const std::optional<std::string>*> Find(absl::string_view key) {
    auto it = items_.find(key);
    if (it != items_.end()) {
      if (it->second.staged) return &it->second.value;
      if (it->second.read) return &it->second.old;
    }
    COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, b_->Get(key));
    // The backend does not change until Commit.
    if (it == items_.end()) it = items_.emplace(ItemKey(key), Item()).first;
    it->second.read = true;
    it->second.old = std::move(v);
    return &it->second.old;
  }

  // Merges staged writes in [start, end) into the backend's items. `fn`
  // must not stage keys inside the range.
  absl::Status Scan(absl::string_view start, absl::string_view end, bool reverse,
                    const FsBackend::ScanFn& fn) {
    std::vector<std::pair<absl::string_view, const std::optional<std::string>*>> st;
    for (auto it = items_.lower_bound(start); it != items_.end() && it->first.view() < end;
         ++it) {
      if (it->second.staged) st.push_back({it->first.view(), &it->second.value});
    }
    if (reverse) std::reverse(st.begin(), st.end());
    size_t i = 0;
    bool stopped = false;
    auto before = [&](absl::string_view a, absl::string_view k) { return reverse ? a > k : a < k; };
    auto emit = [&](absl::string_view k, const std::optional<std::string>& v) {
      if (v.has_value() && !fn(k, *v)) stopped = true;
      return !stopped;
    };
    COWKV_RETURN_IF_ERROR(
        b_->Scan(start, end, reverse, [&](absl::string_view k, absl::string_view v) {
          while (i < st.size() && before(st[i].first, k)) {
            if (!emit(st[i].first, *st[i].second)) return false;
            ++i;
          }
          if (i < st.size() && st[i].first == k) return emit(k, *st[i++].second);
          if (!fn(k, v)) stopped = true;
          return !stopped;
        }));
    for (; !stopped && i < st.size(); ++i) emit(st[i].first, *st[i].second);
    return absl::OkStatus();
  }

  void Put(absl::string_view key, std::string value) { Slot(key) = std::move(value); }
  void Del(absl::string_view key) { Slot(key).reset(); }
  bool staged(absl::string_view key) const {
    auto it = items_.find(key);
    return it != items_.end() && it->second.staged;
  }
  std::vector<std::string> StagedKeys() const {
    std::vector<std::string> keys;
    for (const auto& [k, item] : items_) {
      if (item.staged) keys.push_back(k.str());
    }
    return keys;
  }

  absl::StatusOr<format::DataRef> WriteData(absl::string_view data) {
    COWKV_ASSIGN_OR_RETURN(format::DataRef d, b_->WriteData(data));
    written_.push_back(d);
    return d;
  }

  absl::StatusOr<format::DataRef> AllocData(uint64_t len) {
    COWKV_ASSIGN_OR_RETURN(format::DataRef d, b_->AllocData(len));
    written_.push_back(d);
    return d;
  }

  void Note(absl::string_view key) { notes_.insert(ItemKey(key)); }
  size_t notes() const { return notes_.size(); }

  absl::Status Commit() {
    std::vector<FsWrite> writes;
    writes.reserve(items_.size());
    // A fresh extent's first reference in key order (the order Apply adds
    // them) is the one that creates its extent item. Worked out here, not
    // flagged at Put: a punch that deletes and re-puts (or moves) the item
    // holding a fresh extent keeps referencing it.
    std::set<uint64_t> fresh, claimed;
    for (const format::DataRef& d : written_) fresh.insert(d.bytenr);
    for (const auto& [k, item] : items_) {
      if (!item.staged) continue;
      const std::optional<std::string>& v = item.value;
      format::DataRef r;
      const bool first = !fresh.empty() && v && format::LeafDataRef(k, *v, &r) &&
                         fresh.count(r.bytenr) > 0 && claimed.insert(r.bytenr).second;
      writes.push_back({k.view(), &v, first, item.read ? &item.old : nullptr});
    }
    if (!writes.empty()) COWKV_RETURN_IF_ERROR(b_->Apply(writes));
    // Every fresh extent is referenced now (or was never staged: release).
    std::vector<format::DataRef> unused;
    for (const format::DataRef& d : written_) {
      if (claimed.count(d.bytenr) == 0) unused.push_back(d);
    }
    written_ = std::move(unused);
    for (const ItemKey& k : notes_) b_->NoteLog(k);
    return absl::OkStatus();
  }

 private:
  std::optional<std::string>& Slot(absl::string_view key) {
    auto it = items_.find(key);
    if (it == items_.end()) it = items_.emplace(ItemKey(key), Item()).first;
    it->second.staged = true;
    return it->second.value;
  }

  // What the operation knows of one key: the backend's value, if read
  // (`old`), and the value it staged, if any.
  struct Item {
    bool read = false;
    bool staged = false;
    std::optional<std::string> old;
    std::optional<std::string> value;
  };
  FsBackend* const b_;
  std::map<ItemKey, Item, ItemKeyLess> items_;
  std::vector<format::DataRef> written_;
  std::set<ItemKey, ItemKeyLess> notes_;
};

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_FS_BATCH_H_
