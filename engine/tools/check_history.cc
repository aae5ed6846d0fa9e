// The KV history check: see check_history.h; format in docs/format.md
// "KV history".
#include "engine/tools/check_history.h"

#include <optional>
#include <set>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/kv/history_item.h"
#include "engine/kv/kv_item.h"

namespace cowkv {

void CheckHistory(Tree* tree, uint64_t id, std::vector<std::string>* problems) {
  auto problem = [&](const std::string& what) {
    problems->push_back(absl::StrCat("tree ", id, ": KV history: ", what));
  };
  uint64_t floor = 0;
  bool has_info = false;
  std::optional<uint64_t> first;                    // the oldest entry's revision
  std::set<std::pair<uint64_t, std::string>> puts;  // (revision, key) of put entries
  TreeIterator it(tree);
  for (it.Seek(std::string(1, kv::kHistoryPrefix)); it.Valid() && kv::IsHistoryTreeKey(it.key());
       it.Next()) {
    if (it.key() == kv::HistoryInfoKey()) {
      absl::StatusOr<uint64_t> f = kv::DecodeHistoryInfo(it.value());
      if (!f.ok()) {
        problem(std::string(f.status().message()));
      } else {
        floor = *f;
      }
      has_info = true;
      continue;
    }
    absl::StatusOr<kv::HistoryEntry> e = kv::DecodeHistoryEntry(it.key(), it.value());
    if (!e.ok()) {
      problem(std::string(e.status().message()));
      continue;
    }
    if (e->has_prev) {
      absl::StatusOr<kv::ItemView> prev = kv::DecodeItem(kv::TreeKey(e->key), e->prev);
      if (!prev.ok()) {
        problem(absl::StrCat("entry at revision ", e->revision,
                             ": prev item: ", prev.status().message()));
      } else if (prev->meta.mod_revision >= e->revision) {
        problem(absl::StrCat("entry of '", absl::CHexEscape(e->key), "' at revision ", e->revision,
                             " holds a prev item of revision ", prev->meta.mod_revision));
      }
    }
    if (!first.has_value()) first = e->revision;
    if (e->type == kv::kHistoryPut) puts.insert({e->revision, std::string(e->key)});
  }
  if (!it.status().ok()) return problem(std::string(it.status().message()));
  // Never compacted: the history starts at the oldest entry (a subvolume
  // written by a version without history has none before); without
  // entries there is nothing to be complete about.
  if (!has_info) {
    if (!first.has_value()) return;
    floor = *first - 1;
  }
  // Complete: every KV item changed after the floor has its put entry.
  for (it.Seek(std::string(1, kv::kKvPrefix)); it.Valid() && kv::IsKvTreeKey(it.key()); it.Next()) {
    absl::StatusOr<kv::ItemView> item = kv::DecodeItem(it.key(), it.value());
    if (!item.ok()) continue;  // reported by the KV checks
    const uint64_t m = item->meta.mod_revision;
    if (m > floor && puts.count({m, std::string(kv::UserKey(it.key()))}) == 0) {
      problem(absl::StrCat("key '", absl::CHexEscape(kv::UserKey(it.key()).substr(0, 64)),
                           "' written at revision ", m, " (after the compact revision ", floor,
                           ") has no history entry"));
    }
  }
  if (!it.status().ok()) problem(std::string(it.status().message()));
}

}  // namespace cowkv
