// The watch events a testing::HistoryModel implies, for the watch model and
// crash tests (engine/store/watch_model_test.cc,
// engine/crash_test/watch_crash_test.cc): the change list of revisions
// [from, to] — for each revision, in key order, a PUT of every key whose
// item has that mod revision and a DELETE of every key that disappeared,
// each with the key's item before — and the store's ReadEvents in the same
// one-line-per-event form, so that a difference reads as a diff.
#ifndef COWKV_ENGINE_TESTING_WATCH_MODEL_H_
#define COWKV_ENGINE_TESTING_WATCH_MODEL_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/store.h"
#include "engine/testing/history_model.h"

namespace cowkv {
namespace testing {

// "rev PUT key=value@mod prev=value@mod" (or "prev=-"), values shortened.
inline std::string ShowEvent(uint64_t rev, bool put, const std::string& key,
                             const std::string& value, uint64_t mod, bool has_prev,
                             const std::string& prev, uint64_t prev_mod) {
  return absl::StrCat(rev, put ? " PUT " : " DELETE ", key,
                      put ? absl::StrCat("=", HistoryModel::Short(value), "@", mod) : "", " prev=",
                      has_prev ? absl::StrCat(HistoryModel::Short(prev), "@", prev_mod) : "-");
}

inline std::vector<std::string> ModelEvents(const HistoryModel& m, uint64_t from, uint64_t to,
                                            bool prev_kv = true) {
  std::vector<std::string> out;
  for (uint64_t r = from; r <= to && r >= 1; ++r) {
    const HistoryModel::State& before = m.At(r - 1);
    const HistoryModel::State& after = m.At(r);
    std::set<std::string> keys;
    for (const auto& [k, i] : before) keys.insert(k);
    for (const auto& [k, i] : after) keys.insert(k);
    for (const std::string& k : keys) {
      auto b = before.find(k);
      auto a = after.find(k);
      const bool had = b != before.end() && prev_kv;
      const std::string prev = had ? b->second.value : "";
      const uint64_t prev_mod = had ? b->second.mod_revision : 0;
      if (a != after.end() && a->second.mod_revision == r) {
        out.push_back(ShowEvent(r, true, k, a->second.value, r, had, prev, prev_mod));
      } else if (a == after.end() && b != before.end()) {
        out.push_back(ShowEvent(r, false, k, "", r, had, prev, prev_mod));
      }
    }
  }
  return out;
}

inline std::vector<std::string> ShowEvents(const std::vector<WatchEvent>& events) {
  std::vector<std::string> out;
  for (const WatchEvent& e : events) {
    out.push_back(ShowEvent(e.revision(), e.type == WatchEvent::Type::kPut, e.kv.key, e.kv.value,
                            e.kv.mod_revision, e.has_prev, e.prev_kv.value,
                            e.prev_kv.mod_revision));
  }
  return out;
}

// The first difference of two event lists, or "" when equal.
inline std::string DiffEvents(const std::vector<std::string>& have,
                              const std::vector<std::string>& want) {
  for (size_t i = 0; i < have.size() || i < want.size(); ++i) {
    const std::string h = i < have.size() ? have[i] : "(end)";
    const std::string w = i < want.size() ? want[i] : "(end)";
    if (h != w) return absl::StrCat("event ", i, ": store has '", h, "', the model '", w, "'");
  }
  return "";
}

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_WATCH_MODEL_H_
