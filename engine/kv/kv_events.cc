// ReadEvents (kv_events.h): one forward pass over the history entries of
// [from, to], then on past `to` only while a PUT waits for its new item.
#include "engine/kv/kv_events.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/status_macros.h"
#include "engine/base/status.h"
#include "engine/kv/history_item.h"
#include "engine/kv/kv_item.h"

namespace cowkv {
namespace kv {

namespace {

absl::Status Unresolved(absl::string_view key, uint64_t revision, absl::string_view why) {
  CorruptionSite site;
  site.what = "KV history";
  return COWKV_CORRUPTION(site,
                          absl::StrCat("the put of key '", absl::CHexEscape(key.substr(0, 64)),
                                       "' at revision ", revision, ": ", why),
                          "", "");
}

// The events read so far and the PUTs whose new item is still to come.
struct EventScan {
  KvSpace* kv;
  Tree* tree;
  const EventsRequest* req;
  bool bug_latest;
  EventsResult result;
  absl::flat_hash_map<std::string, size_t> waiting;  // key -> index of its PUT
  std::string tk;
};

// Fills events[index] (a PUT) from `raw`, the item its change wrote.
absl::Status Resolve(EventScan* s, size_t index, absl::string_view raw) {
  WatchEvent& ev = s->result.events[index];
  TreeKeyTo(ev.kv.key, &s->tk);
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(s->tk, raw));
  if (item.meta.mod_revision != ev.kv.mod_revision && !s->bug_latest) {
    return Unresolved(ev.kv.key, ev.kv.mod_revision,
                      absl::StrCat("the item after it has mod_revision ", item.meta.mod_revision));
  }
  ev.kv.create_revision = item.meta.create_revision;
  ev.kv.version = item.meta.version;
  ev.kv.value_size = item.in_extent ? item.extent.value_len : item.value.size();
  COWKV_ASSIGN_OR_RETURN(ev.kv.value, s->kv->LoadValue(item));
  return absl::OkStatus();
}

// The key before the change, from an entry's prev item.
absl::Status PrevKv(EventScan* s, const HistoryEntry& e, WatchEvent* ev) {
  TreeKeyTo(e.key, &s->tk);
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(s->tk, e.prev));
  ev->has_prev = true;
  ev->prev_kv.key = std::string(e.key);
  ev->prev_kv.create_revision = item.meta.create_revision;
  ev->prev_kv.mod_revision = item.meta.mod_revision;
  ev->prev_kv.version = item.meta.version;
  ev->prev_kv.value_size = item.in_extent ? item.extent.value_len : item.value.size();
  COWKV_ASSIGN_OR_RETURN(ev->prev_kv.value, s->kv->LoadValue(item));
  return absl::OkStatus();
}

// One entry of [from, to] in the range: resolves the key's waiting PUT
// with the entry's prev item, and adds the entry's event.
absl::Status AddEntry(EventScan* s, const HistoryEntry& e) {
  auto w = s->waiting.find(e.key);
  if (w != s->waiting.end() && !s->bug_latest) {
    if (!e.has_prev) {
      return Unresolved(e.key, s->result.events[w->second].kv.mod_revision,
                        absl::StrCat("the next change, at ", e.revision, ", found it absent"));
    }
    COWKV_RETURN_IF_ERROR(Resolve(s, w->second, e.prev));
    s->waiting.erase(w);
  }
  WatchEvent ev;
  ev.type = e.type == kHistoryPut ? WatchEvent::Type::kPut : WatchEvent::Type::kDelete;
  ev.kv.key = std::string(e.key);
  ev.kv.mod_revision = e.revision;
  if (s->req->prev_kv && e.has_prev) COWKV_RETURN_IF_ERROR(PrevKv(s, e, &ev));
  if (ev.type == WatchEvent::Type::kPut) s->waiting[ev.kv.key] = s->result.events.size();
  s->result.events.push_back(std::move(ev));
  return absl::OkStatus();
}

// The PUTs still waiting after the pass: the current item when it has
// the PUT's revision, else the prev item of the key's first entry past
// the pass, reading on from `it` (positioned on it).
absl::Status ResolveWaiting(EventScan* s, TreeIterator* it) {
  for (auto w = s->waiting.begin(); w != s->waiting.end();) {
    TreeKeyTo(w->first, &s->tk);
    absl::StatusOr<std::string> cur = s->tree->Get(s->tk);
    if (!cur.ok() && !absl::IsNotFound(cur.status())) return cur.status();
    if (cur.ok()) {
      COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(s->tk, *cur));
      if (item.meta.mod_revision == s->result.events[w->second].kv.mod_revision || s->bug_latest) {
        COWKV_RETURN_IF_ERROR(Resolve(s, w->second, *cur));
        s->waiting.erase(w++);
        continue;
      }
    }
    ++w;
  }
  for (; !s->waiting.empty() && it->Valid() && IsHistoryTreeKey(it->key()); it->Next()) {
    COWKV_ASSIGN_OR_RETURN(HistoryEntry e, DecodeHistoryEntry(it->key(), it->value()));
    auto w = s->waiting.find(e.key);
    if (w == s->waiting.end()) continue;
    if (!e.has_prev) return Unresolved(e.key, s->result.events[w->second].kv.mod_revision, "gone");
    COWKV_RETURN_IF_ERROR(Resolve(s, w->second, e.prev));
    s->waiting.erase(w);
  }
  COWKV_RETURN_IF_ERROR(it->status());
  if (!s->waiting.empty()) {
    auto w = s->waiting.begin();
    return Unresolved(w->first, s->result.events[w->second].kv.mod_revision,
                      "no later change or current item has its revision");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EventsResult> ReadEvents(KvSpace* kv, Tree* tree, const EventsRequest& req,
                                        bool bug_latest) {
  if (req.from_revision == 0) {
    return absl::InvalidArgumentError("events start at revision 1 or later");
  }
  COWKV_ASSIGN_OR_RETURN(uint64_t floor, kv->EventsFloor(tree));
  if (req.from_revision <= floor) return CompactedError(req.from_revision, floor + 1);
  EventScan s{kv, tree, &req, bug_latest, {}, {}, {}};
  s.result.next_revision = req.to_revision + 1;
  if (req.from_revision > req.to_revision) {
    s.result.next_revision = req.from_revision;
    return std::move(s.result);
  }
  TreeIterator it(tree);
  uint64_t last = 0;
  for (it.Seek(HistoryKey(req.from_revision, "")); it.Valid() && IsHistoryTreeKey(it.key());
       it.Next()) {
    const uint64_t rev = HistoryKeyRevision(it.key());
    if (rev > req.to_revision) break;
    if (rev != last && req.max_events != 0 && s.result.events.size() >= req.max_events) {
      s.result.more = true;
      s.result.next_revision = rev;
      break;
    }
    COWKV_ASSIGN_OR_RETURN(HistoryEntry e, DecodeHistoryEntry(it.key(), it.value()));
    if (!InRange(e.key, req.start, req.end)) continue;
    COWKV_RETURN_IF_ERROR(AddEntry(&s, e));
    last = rev;
  }
  COWKV_RETURN_IF_ERROR(it.status());
  COWKV_RETURN_IF_ERROR(ResolveWaiting(&s, &it));
  return std::move(s.result);
}

}  // namespace kv
}  // namespace cowkv
