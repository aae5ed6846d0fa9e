// HistoryModel: the state of a subvolume's key space at every revision,
// for the KV history's model and crash tests (engine/store/
// history_model_test.cc, engine/crash_test/history_crash_test.cc). A test
// applies each acknowledged change at the revision the store returned;
// Verify reads the store at a revision (Range with a revision, and
// GetItemAt of every key the model ever saw) and lists every difference.
//
// Not thread-safe (one test thread).
#ifndef COWKV_ENGINE_TESTING_HISTORY_MODEL_H_
#define COWKV_ENGINE_TESTING_HISTORY_MODEL_H_

#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"

namespace cowkv {
namespace testing {

class HistoryModel {
 public:
  struct Item {
    std::string value;
    uint64_t mod_revision = 0;
    bool operator==(const Item& o) const {
      return value == o.value && mod_revision == o.mod_revision;
    }
  };
  using State = std::map<std::string, Item>;

  // The state before any change: empty at revision `base` (0 by default).
  HistoryModel() : HistoryModel(0) {}
  explicit HistoryModel(uint64_t base) { states_[base] = {}; }

  // The state at `rev` (the last change at or before it).
  const State& At(uint64_t rev) const {
    auto it = states_.upper_bound(rev);
    return (--it)->second;
  }
  uint64_t last() const { return states_.rbegin()->first; }
  // The revision of the first change, 0 before any.
  uint64_t first_change() const {
    return states_.size() < 2 ? 0 : std::next(states_.begin())->first;
  }
  // One change at `rev` (> last()): puts (value) and deletes (nullopt-like:
  // `deleted`), applied to the last state.
  void Apply(uint64_t rev, const std::map<std::string, std::string>& puts,
             const std::set<std::string>& deletes,
             const std::vector<std::pair<std::string, std::string>>& delete_ranges = {}) {
    State s = states_.rbegin()->second;
    for (const auto& [start, end] : delete_ranges) {
      for (auto it = s.lower_bound(start); it != s.end() && (end.empty() || it->first < end);) {
        it = s.erase(it);
      }
    }
    for (const std::string& k : deletes) s.erase(k);
    for (const auto& [k, v] : puts) {
      s[k] = Item{v, rev};
      keys_.insert(k);
    }
    states_[rev] = std::move(s);
  }
  void Compact(uint64_t rev) {
    if (rev > floor_) floor_ = rev;
  }
  uint64_t floor() const { return floor_; }

  // Reads `sv` at `rev` and appends every difference to `problems`.
  // Revision 0 means "the latest" to the store (as to etcd): not checked.
  void Verify(Subvolume* sv, uint64_t rev, std::vector<std::string>* problems) const {
    if (rev == 0) return;
    const std::string at = absl::StrCat("at revision ", rev, ": ");
    RangeRequest all;
    all.revision = rev;
    absl::StatusOr<RangeResult> r = sv->Range(all);
    if (rev < floor_) {
      if (!absl::IsOutOfRange(r.status()) || ReasonOf(r.status()) != ErrorReason::kCompacted) {
        problems->push_back(absl::StrCat(at, "below the compact revision ", floor_,
                                         ", Range answered ", r.status().ToString()));
      }
      return;
    }
    if (!r.ok()) {
      problems->push_back(absl::StrCat(at, "Range: ", r.status().ToString()));
      return;
    }
    const State& want = At(rev);
    State have;
    for (const KeyValue& kv : r->kvs) have[kv.key] = Item{kv.value, kv.mod_revision};
    if (have != want) {
      problems->push_back(
          absl::StrCat(at, "Range has ", Describe(have), ", the model ", Describe(want)));
    }
    for (const std::string& k : keys_) {
      absl::StatusOr<KeyValue> kv = sv->GetItemAt(k, rev);
      auto w = want.find(k);
      if (w == want.end()) {
        if (!absl::IsNotFound(kv.status())) {
          problems->push_back(
              absl::StrCat(at, "GetItemAt('", k, "') = ", Show(kv), ", the model: absent"));
        }
      } else if (!kv.ok() || kv->value != w->second.value ||
                 kv->mod_revision != w->second.mod_revision) {
        problems->push_back(absl::StrCat(at, "GetItemAt('", k, "') = ", Show(kv), ", the model: ",
                                         Short(w->second.value), "@", w->second.mod_revision));
      }
    }
  }

  static std::string Short(const std::string& v) {
    return v.size() <= 16 ? absl::CHexEscape(v) : absl::StrCat(v.size(), " bytes");
  }
  static std::string Show(const absl::StatusOr<KeyValue>& kv) {
    if (!kv.ok()) return kv.status().ToString();
    return absl::StrCat(Short(kv->value), "@", kv->mod_revision);
  }
  static std::string Describe(const State& s) {
    std::string out = "{";
    for (const auto& [k, i] : s)
      absl::StrAppend(&out, k, "=", Short(i.value), "@", i.mod_revision, " ");
    return out + "}";
  }

 private:
  std::map<uint64_t, State> states_;
  std::set<std::string> keys_;
  uint64_t floor_ = 0;
};

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_HISTORY_MODEL_H_
