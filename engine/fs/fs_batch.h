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

  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) {
    ASSIGN_OR_RETURN(const std::optional<std::string>* v, Find(key));
    return *v;
  }
  // Get without the copy: the value stays valid until this key is next
  // staged (map nodes do not move).
  absl::StatusOr<const std::optional<std::string>*> Find(const std::string& key) {
    auto it = staged_.find(key);
    if (it != staged_.end()) return &it->second.value;
    auto r = read_.find(key);
    if (r != read_.end()) return &r->second;
    ASSIGN_OR_RETURN(std::optional<std::string> v, b_->Get(key));
    // The backend does not change until Commit.
    return &read_.emplace(key, std::move(v)).first->second;
  }

  // Merges staged writes in [start, end) into the backend's items. `fn`
  // must not stage keys inside the range.
  absl::Status Scan(const std::string& start, const std::string& end, bool reverse,
                    const FsBackend::ScanFn& fn) {
    std::vector<std::pair<const std::string*, const std::optional<std::string>*>> st;
    for (auto it = staged_.lower_bound(start); it != staged_.end() && it->first < end; ++it) {
      st.push_back({&it->first, &it->second.value});
    }
    if (reverse) std::reverse(st.begin(), st.end());
    size_t i = 0;
    bool stopped = false;
    auto before = [&](absl::string_view a, absl::string_view k) { return reverse ? a > k : a < k; };
    auto emit = [&](absl::string_view k, const std::optional<std::string>& v) {
      if (v.has_value() && !fn(k, *v)) stopped = true;
      return !stopped;
    };
    RETURN_IF_ERROR(b_->Scan(start, end, reverse, [&](absl::string_view k, absl::string_view v) {
      while (i < st.size() && before(*st[i].first, k)) {
        if (!emit(*st[i].first, *st[i].second)) return false;
        ++i;
      }
      if (i < st.size() && *st[i].first == k) return emit(k, *st[i++].second);
      if (!fn(k, v)) stopped = true;
      return !stopped;
    }));
    for (; !stopped && i < st.size(); ++i) emit(*st[i].first, *st[i].second);
    return absl::OkStatus();
  }

  void Put(const std::string& key, std::string value) { staged_[key].value = std::move(value); }
  void Del(const std::string& key) { staged_[key].value.reset(); }
  bool staged(const std::string& key) const { return staged_.count(key) > 0; }
  std::vector<std::string> StagedKeys() const {
    std::vector<std::string> keys;
    for (const auto& [k, v] : staged_) keys.push_back(k);
    return keys;
  }

  absl::StatusOr<format::DataRef> WriteData(absl::string_view data) {
    ASSIGN_OR_RETURN(format::DataRef d, b_->WriteData(data));
    written_.push_back(d);
    return d;
  }

  void Note(const std::string& key) { notes_.insert(key); }
  size_t notes() const { return notes_.size(); }

  absl::Status Commit() {
    std::vector<FsWrite> writes;
    writes.reserve(staged_.size());
    // A fresh extent's first reference in key order (the order Apply adds
    // them) is the one that creates its extent item. Worked out here, not
    // flagged at Put: a punch that deletes and re-puts (or moves) the item
    // holding a fresh extent keeps referencing it.
    std::set<uint64_t> fresh, claimed;
    for (const format::DataRef& d : written_) fresh.insert(d.bytenr);
    for (auto& [k, s] : staged_) {
      format::DataRef r;
      const bool first = s.value && format::LeafDataRef(k, *s.value, &r) &&
                         fresh.count(r.bytenr) > 0 && claimed.insert(r.bytenr).second;
      auto known = read_.find(k);
      writes.push_back({k, s.value, first,
                        known == read_.end()
                            ? std::nullopt
                            : std::optional<std::optional<std::string>>(known->second)});
    }
    if (!writes.empty()) RETURN_IF_ERROR(b_->Apply(writes));
    // Every fresh extent is referenced now (or was never staged: release).
    std::vector<format::DataRef> unused;
    for (const format::DataRef& d : written_) {
      bool used = false;
      for (const FsWrite& w : writes) {
        format::DataRef r;
        if (w.first_ref && w.value && format::LeafDataRef(w.key, *w.value, &r) &&
            r.bytenr == d.bytenr) {
          used = true;
          break;
        }
      }
      if (!used) unused.push_back(d);
    }
    written_ = std::move(unused);
    for (const std::string& k : notes_) b_->NoteLog(k);
    return absl::OkStatus();
  }

 private:
  struct Staged {
    std::optional<std::string> value;
  };
  FsBackend* const b_;
  std::map<std::string, Staged> staged_;
  std::map<std::string, std::optional<std::string>> read_;  // backend values read
  std::vector<format::DataRef> written_;
  std::set<std::string> notes_;
};

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_FS_BATCH_H_
