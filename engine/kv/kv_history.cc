// KvSpace's history: the entries a change writes, reads at a past revision
// and compaction. The items are described in history_item.h; the design
// (why entries in the tree rather than pinned roots) in docs/design.md
// "History: reads at a revision".
#include <algorithm>
#include <map>
#include <optional>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/limits.h"
#include "cowkv/status_macros.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/kv/kv_space.h"

namespace cowkv {
namespace kv {

namespace {

KeyValue FromItem(absl::string_view user_key, const ItemView& item) {
  KeyValue kv;
  kv.key = std::string(user_key);
  kv.value_size = item.in_extent ? item.extent.value_len : item.value.size();
  kv.create_revision = item.meta.create_revision;
  kv.mod_revision = item.meta.mod_revision;
  kv.version = item.meta.version;
  return kv;
}

absl::Status MissingEntry(absl::string_view user_key, uint64_t mod, uint64_t at) {
  CorruptionSite site;
  site.what = "KV history";
  return COWKV_CORRUPTION(
      site,
      absl::StrCat("no history entry for key '", absl::CHexEscape(user_key.substr(0, 64)),
                   "' changed at revision ", mod, " after read revision ", at),
      "", "");
}

// DeleteNodesBound (kv_space.cc) for one range of neighbouring keys.
uint64_t DeleteNodesBoundFor(const Tree* tree, uint64_t leaves, uint64_t inner) {
  const uint64_t levels = static_cast<uint64_t>(tree->height()) + 1;
  return leaves + 2 * inner + 3 * levels;
}

}  // namespace

absl::Status CompactedError(uint64_t at, uint64_t compact_revision) {
  absl::Status s =
      WithReason(absl::OutOfRangeError(absl::StrCat(
                     "revision ", at, " has been compacted: the history keeps revisions from ",
                     compact_revision)),
                 ErrorReason::kCompacted);
  s.SetPayload(kCompactRevisionPayloadUrl, absl::Cord(absl::StrCat(compact_revision)));
  return s;
}

absl::Status FutureRevisionError(uint64_t at, uint64_t current) {
  return WithReason(absl::OutOfRangeError(absl::StrCat(
                        "revision ", at, " is a future revision: the current is ", current)),
                    ErrorReason::kFutureRevision);
}

absl::Status KvSpace::HistoryOps(Tree* tree, uint64_t rev, std::vector<KvOp>* ops,
                                 std::vector<KvOp>* history) {
  if (no_history_) {
    history->push_back(KvOp{HistoryInfoKey(), EncodeHistoryInfo(rev), {}, {}, std::nullopt});
    return absl::OkStatus();
  }
  if (rev > kMaxHistoryRevision) {
    return absl::FailedPreconditionError("revision past 2^56: the history cannot record it");
  }
  const size_t max_value = tree->max_value_size();
  history->reserve(ops->size());
  for (size_t i = 0; i < ops->size(); ++i) {
    KvOp& op = (*ops)[i];
    absl::string_view prev;
    if (op.old_item) prev = *op.old_item;
    KvOp h{
        HistoryKey(rev, UserKey(op.tree_key)),
        EncodeHistoryEntry(op.item ? kHistoryPut : kHistoryDelete, op.old_item ? &prev : nullptr),
        {},
        {},
        std::nullopt};
    if (h.item->size() > max_value) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the history entry of key '", absl::CHexEscape(UserKey(op.tree_key).substr(0, 64)),
          "' would not fit a leaf (an inline value written by an older version)"));
    }
    history->push_back(std::move(h));
  }
  // Only now that nothing can fail: the entries take the old references.
  for (KvOp& op : *ops) op.old_data = {};
  return absl::OkStatus();
}

namespace {
// The revision of `tree`'s oldest history entry; nullopt without entries.
absl::StatusOr<std::optional<uint64_t>> FirstHistoryRevision(Tree* tree) {
  TreeIterator it(tree);
  it.Seek(HistoryKey(1, ""));
  COWKV_RETURN_IF_ERROR(it.status());
  if (!it.Valid() || !IsHistoryTreeKey(it.key())) return std::nullopt;
  return HistoryKeyRevision(it.key());
}
}  // namespace

absl::StatusOr<uint64_t> KvSpace::HistoryFloor(Tree* tree, bool* compacted) {
  absl::StatusOr<std::string> raw = tree->Get(HistoryInfoKey());
  *compacted = !absl::IsNotFound(raw.status());
  if (!*compacted) {
    // Never compacted. Every change since the tree's first entry has one
    // (the history starts there: a new subvolume's first change, or the
    // first change of one written by a version without history); a tree
    // with no entry changed nothing since the mount.
    COWKV_ASSIGN_OR_RETURN(std::optional<uint64_t> first, FirstHistoryRevision(tree));
    return first.has_value() ? *first - 1 : legacy_floor_;
  }
  COWKV_RETURN_IF_ERROR(raw.status());
  return DecodeHistoryInfo(*raw);
}

absl::StatusOr<uint64_t> KvSpace::CompactRevision(Tree* tree) {
  bool compacted = false;
  return HistoryFloor(tree, &compacted);
}

absl::StatusOr<uint64_t> KvSpace::EventsFloor(Tree* tree) {
  bool compacted = false;
  COWKV_ASSIGN_OR_RETURN(uint64_t floor, HistoryFloor(tree, &compacted));
  // A never-compacted tree whose first entry came after the mount: every
  // KV change since the mount has its entry, so none happened in between.
  return compacted ? floor : std::min(floor, legacy_floor_);
}

absl::Status KvSpace::CheckReadable(Tree* tree, uint64_t at) {
  if (at > revision_) return FutureRevisionError(at, revision_);
  COWKV_ASSIGN_OR_RETURN(uint64_t floor, CompactRevision(tree));
  if (at < floor) {
    too_old_.fetch_add(1, std::memory_order_relaxed);
    return CompactedError(at, floor);
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyValue> KvSpace::GetAt(Tree* tree, absl::string_view key, uint64_t at,
                                        uint64_t max_value_load) {
  if (at == kLatest || at == revision_) return Get(tree, key, max_value_load);
  COWKV_RETURN_IF_ERROR(CheckReadable(tree, at));
  const std::string tk = TreeKey(key);
  absl::StatusOr<std::string> cur = tree->Get(tk);
  if (!cur.ok() && !absl::IsNotFound(cur.status())) return cur.status();
  // The state at `at`: the current item if no change came after `at`,
  // else the prev item of the first entry after `at`.
  std::optional<std::string> state;
  bool resolved = false;
  if (cur.ok()) {
    COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(tk, *cur));
    if (item.meta.mod_revision <= at) {
      state = std::move(*cur);
      resolved = true;
    }
  }
  if (!resolved) {
    TreeIterator it(tree);
    for (it.Seek(HistoryKey(at + 1, "")); it.Valid() && IsHistoryTreeKey(it.key()); it.Next()) {
      COWKV_ASSIGN_OR_RETURN(HistoryEntry e, DecodeHistoryEntry(it.key(), it.value()));
      if (e.key != key) continue;
      if (e.has_prev) state = std::string(e.prev);
      resolved = true;
      break;
    }
    COWKV_RETURN_IF_ERROR(it.status());
    if (!resolved && cur.ok()) {
      COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(tk, *cur));
      return MissingEntry(key, item.meta.mod_revision, at);
    }
  }
  if (!state) return absl::NotFoundError("key not found");
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(tk, *state));
  KeyValue kv = FromItem(key, item);
  if (max_value_load == 0 || kv.value_size <= max_value_load) {
    COWKV_ASSIGN_OR_RETURN(kv.value, LoadValue(item));
  }
  return kv;
}

absl::StatusOr<RangeResult> KvSpace::RangeAtRevision(Tree* tree, const RangeRequest& req,
                                                     uint64_t at, uint64_t limit, bool* bytes_cut) {
  RangeRequest n = req;
  n.revision = at == revision_ ? 0 : at;
  return at == revision_ ? Range(tree, n, limit, bytes_cut) : RangeAt(tree, n, limit, bytes_cut);
}

namespace {

// Every key of [req.start, req.end) changed after `at`, with its item at
// `at` (nullopt: absent then): the prev item of its first entry after `at`.
absl::Status ChangedSince(Tree* tree, uint64_t at, const RangeRequest& req,
                          std::map<std::string, std::optional<std::string>>* changed) {
  TreeIterator it(tree);
  for (it.Seek(HistoryKey(at + 1, "")); it.Valid() && IsHistoryTreeKey(it.key()); it.Next()) {
    COWKV_ASSIGN_OR_RETURN(HistoryEntry e, DecodeHistoryEntry(it.key(), it.value()));
    if (!InRange(e.key, req.start, req.end)) continue;
    auto [slot, fresh] = changed->try_emplace(std::string(e.key));
    if (fresh && e.has_prev) slot->second = std::string(e.prev);
  }
  return it.status();
}

// Positions `it` on the range's first KV item in the scan's order.
void SeekRange(TreeIterator* it, const RangeRequest& req) {
  if (!req.reverse) {
    it->Seek(TreeKey(req.start));
  } else if (req.end.empty()) {
    it->SeekForPrev(std::string(1, kKvPrefixEnd));
  } else {
    const std::string tk = TreeKey(req.end);
    it->SeekForPrev(tk);
    if (it->Valid() && it->key() == tk) it->Prev();
  }
}

}  // namespace

absl::StatusOr<bool> KvSpace::AddAt(const RangeRequest& req, uint64_t limit, absl::string_view uk,
                                    absl::string_view raw, RangeScan* scan) {
  scan->tk = TreeKey(uk);
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(scan->tk, raw));
  if (item.meta.mod_revision > req.revision) {
    return MissingEntry(uk, item.meta.mod_revision, req.revision);
  }
  RangeResult& r = scan->result;
  ++r.count;
  if (req.count_only) return true;
  if (limit != 0 && r.kvs.size() >= limit) {
    r.more = true;
    return false;
  }
  const uint64_t value_size = item.in_extent ? item.extent.value_len : item.value.size();
  if (req.max_bytes != 0) {
    const uint64_t pair = uk.size() + (req.keys_only ? 0 : value_size) + kRangeEntryOverheadBytes;
    if (!r.kvs.empty() && scan->bytes + pair > req.max_bytes) {
      r.more = true;
      scan->bytes_cut = true;
      return false;
    }
    scan->bytes += pair;
  }
  KeyValue kv = FromItem(uk, item);
  if (!req.keys_only && (req.max_value_load == 0 || value_size <= req.max_value_load)) {
    COWKV_ASSIGN_OR_RETURN(kv.value, LoadValue(item));
    scan->loaded += kv.value.size();
  }
  r.kvs.push_back(std::move(kv));
  return true;
}

absl::StatusOr<RangeResult> KvSpace::RangeAt(Tree* tree, const RangeRequest& req, uint64_t limit,
                                             bool* bytes_cut) {
  const uint64_t at = req.revision;
  COWKV_RETURN_IF_ERROR(CheckReadable(tree, at));
  RangeScan scan;
  scan.result.revision = at;
  if (bytes_cut != nullptr) *bytes_cut = false;
  if (!req.end.empty() && req.start >= req.end) return scan.result;
  std::map<std::string, std::optional<std::string>> changed;
  COWKV_RETURN_IF_ERROR(ChangedSince(tree, at, req, &changed));
  // Merge the current items with `changed` (which wins), in the scan's order.
  TreeIterator it(tree);
  SeekRange(&it, req);
  auto tree_valid = [&] {
    return it.Valid() && IsKvTreeKey(it.key()) && InRange(UserKey(it.key()), req.start, req.end);
  };
  auto fwd = changed.begin();
  auto rev = changed.rbegin();
  std::string uk, raw;
  for (bool more = true; more;) {
    const bool tv = tree_valid();
    const bool mv = req.reverse ? rev != changed.rend() : fwd != changed.end();
    if (!tv && !mv) break;
    const std::pair<const std::string, std::optional<std::string>>* m =
        mv ? &(req.reverse ? *rev : *fwd) : nullptr;
    // 0: the tree's key comes first, 1: the map's, 2: the same key.
    int pick = !mv ? 0 : !tv ? 1 : 2;
    if (pick == 2 && UserKey(it.key()) != m->first) {
      pick = (UserKey(it.key()) < m->first) != req.reverse ? 0 : 1;
    }
    bool have = true;
    if (pick == 0) {
      uk = std::string(UserKey(it.key()));
      raw = std::string(it.value());
    } else {
      uk = m->first;
      have = m->second.has_value();
      if (have) raw = *m->second;
    }
    if (pick != 1) req.reverse ? it.Prev() : it.Next();
    if (pick != 0) req.reverse ? (void)++rev : (void)++fwd;
    if (!have) continue;
    COWKV_ASSIGN_OR_RETURN(more, AddAt(req, limit, uk, raw, &scan));
  }
  COWKV_RETURN_IF_ERROR(it.status());
  range_value_bytes_.fetch_add(scan.loaded, std::memory_order_relaxed);
  if (bytes_cut != nullptr) *bytes_cut = scan.bytes_cut;
  return scan.result;
}

absl::Status KvSpace::Compact(uint64_t subvol, Tree* tree, uint64_t revision) {
  COWKV_RETURN_IF_ERROR(txn_->fatal());
  if (revision > revision_) return FutureRevisionError(revision, revision_);
  COWKV_ASSIGN_OR_RETURN(uint64_t floor, CompactRevision(tree));
  if (revision < floor) return CompactedError(revision, floor);
  // revision == floor still drops entries a write under space pressure
  // (or a compaction that ran out of space half way through a revision)
  // left below the floor.
  DropGoal goal;
  goal.upto = goal.target = revision;
  return DropOldest(subvol, tree, goal, floor);
}

absl::StatusOr<std::optional<std::string>> KvSpace::OldestEntry(Tree* tree, uint64_t upto,
                                                                uint64_t* revision) {
  TreeIterator it(tree);
  it.Seek(HistoryKey(1, ""));
  COWKV_RETURN_IF_ERROR(it.status());
  if (!it.Valid() || !IsHistoryTreeKey(it.key())) return std::optional<std::string>();
  *revision = HistoryKeyRevision(it.key());
  if (*revision > upto) return std::optional<std::string>();
  return std::optional<std::string>(std::string(it.key()));
}

absl::StatusOr<size_t> KvSpace::DropRun(uint64_t subvol, Tree* tree, const std::string& from,
                                        const std::string& to, uint64_t* bytes,
                                        uint64_t* last_revision) {
  // The run's nodes and the info item's write after it (DropOldest).
  COWKV_RETURN_IF_ERROR(
      txn_->ReserveForWrite(tree, TxnManager::WriteKind::kDelete, 2, 64 + kHistoryInfoSize,
                            2 * static_cast<uint64_t>(tree->WorstCaseNodesPerOp())));
  drop_refs_.clear();
  uint64_t run_bytes = 0, run_last = 0;
  bool item_failed = false;
  absl::StatusOr<size_t> n =
      tree->DeleteRun(from, to, kMaxTxnOps, [&](absl::string_view k, absl::string_view v) {
        absl::Status s = DecodeHistoryEntry(k, v).status();
        if (!s.ok()) {
          item_failed = true;
          return s;
        }
        format::DataRef ref;
        if (format::LeafDataRef(k, v, &ref) && ref.len != 0) drop_refs_.push_back(ref);
        run_bytes += k.size() + v.size();
        run_last = HistoryKeyRevision(k);
        return absl::OkStatus();
      });
  if (!n.ok()) {
    // A corrupt entry changed nothing; a failure of the change itself left
    // the tree half written: this generation must never commit.
    if (!item_failed) txn_->SetFatal(n.status());
    return n.status();
  }
  for (const format::DataRef& ref : drop_refs_) txn_->AddDataRef(subvol, ref, -1, false);
  *bytes += run_bytes;
  *last_revision = run_last;
  history_compacted_ += *n;
  return n;
}

absl::Status KvSpace::DropOldest(uint64_t subvol, Tree* tree, const DropGoal& goal,
                                 uint64_t floor) {
  // The oldest entries go a leaf at a time (Tree::DeleteRun); a revision
  // once begun is finished, so the new floor is the last revision dropped
  // (all of it gone), or `goal.upto` when nothing at or below it is left.
  // Only the info item is noted for the log: a crash before the next
  // commit brings back dropped entries below the logged floor, which reads
  // never look at and the next compaction drops again.
  const std::string to = HistoryKey(std::min(goal.upto, kMaxHistoryRevision - 1) + 1, "");
  // The info item must be writable after any run (each run reserves for
  // it too): entries dropped under a floor that did not rise would leave
  // their changes without entries.
  COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(tree, TxnManager::WriteKind::kDelete, 1,
                                              64 + kHistoryInfoSize,
                                              static_cast<uint64_t>(tree->WorstCaseNodesPerOp())));
  uint64_t last = 0, bytes = 0;
  size_t runs = 0;
  bool done = false;
  absl::Status status;
  for (;;) {
    uint64_t r = 0;
    absl::StatusOr<std::optional<std::string>> from = OldestEntry(tree, goal.upto, &r);
    if (!from.ok()) {
      status = from.status();
      break;
    }
    if (!from->has_value()) {
      done = true;
      break;
    }
    // A revision's entries may span leaves: one begun is finished.
    const bool finishing = last != 0 && r == last;
    if (!finishing && (runs >= goal.max_runs || (r > goal.target && bytes >= goal.bytes_over))) {
      break;
    }
    absl::StatusOr<size_t> n = DropRun(subvol, tree, **from, to, &bytes, &last);
    if (!n.ok()) {
      status = n.status();
      break;
    }
    ++runs;
  }
  NoteDroppedBytes(subvol, bytes);
  const uint64_t new_floor = done ? goal.upto : last;
  if (new_floor > floor && txn_->fatal().ok()) {
    // Written even after a failed run (what was dropped is gone), into the
    // room every run reserved for it.
    absl::Status s = tree->Put(HistoryInfoKey(), EncodeHistoryInfo(new_floor));
    if (s.ok()) {
      log_->NoteChange(subvol, HistoryInfoKey());
    } else {
      txn_->SetFatal(s);
    }
    if (status.ok()) status = s;
  }
  return status;
}

void KvSpace::NoteHistoryBytes(uint64_t subvol, uint64_t bytes) {
  auto it = history_bytes_of_.find(subvol);
  if (it != history_bytes_of_.end()) it->second += bytes;
}

void KvSpace::NoteDroppedBytes(uint64_t subvol, uint64_t bytes) {
  auto it = history_bytes_of_.find(subvol);
  if (it != history_bytes_of_.end()) it->second -= std::min(it->second, bytes);
}

absl::StatusOr<uint64_t> KvSpace::HistoryBytes(uint64_t subvol, Tree* tree) {
  auto it = history_bytes_of_.find(subvol);
  if (it != history_bytes_of_.end()) return it->second;
  // Once per subvolume after a mount (or a snapshot): count the entries;
  // from then on every change and compaction keeps the count.
  uint64_t bytes = 0;
  TreeIterator ti(tree);
  for (ti.Seek(HistoryKey(1, "")); ti.Valid() && IsHistoryTreeKey(ti.key()); ti.Next()) {
    bytes += ti.key().size() + ti.value().size();
  }
  COWKV_RETURN_IF_ERROR(ti.status());
  history_bytes_of_[subvol] = bytes;
  return bytes;
}

void KvSpace::MaybeCompact(uint64_t subvol, Tree* tree, uint64_t changes) {
  uint64_t& n = changes_since_check_[subvol];
  n += changes;
  const uint64_t every = std::max<uint64_t>(16, history_revisions_ / 8);
  if (n < every) return;
  n = 0;
  absl::StatusOr<uint64_t> floor = CompactRevision(tree);
  if (!floor.ok()) return;  // a read error: the next check retries
  DropGoal goal;
  goal.upto = goal.target =
      std::max(revision_ > history_revisions_ ? revision_ - history_revisions_ : 0, *floor);
  if (history_bytes_ != 0) {
    absl::StatusOr<uint64_t> bytes = HistoryBytes(subvol, tree);
    if (!bytes.ok()) return;
    // Past the byte bound, older entries go too, until an eighth under it.
    if (*bytes > history_bytes_) {
      goal.upto = revision_;
      goal.bytes_over = *bytes - history_bytes_ + history_bytes_ / 8;
    }
  }
  // Bounded work per check (a large backlog, e.g. after the bounds were
  // lowered, drains over several checks): at most a leaf per two changes
  // since the last one.
  goal.max_runs = std::max<uint64_t>(8, every / 2);
  if (goal.upto <= *floor && goal.bytes_over == 0) {
    // Nothing due, unless entries were left below the floor.
    uint64_t r = 0;
    absl::StatusOr<std::optional<std::string>> oldest = OldestEntry(tree, *floor, &r);
    if (!oldest.ok() || !oldest->has_value()) return;
  }
  // ENOSPC or a read error: the bounds are checked again later (a tree
  // write that failed half way made the manager fatal already).
  DropOldest(subvol, tree, goal, *floor).IgnoreError();
}

}  // namespace kv
}  // namespace cowkv
