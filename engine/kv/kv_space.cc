// KvSpace: see kv_space.h. Moved out of the store (issue 15) unchanged in
// behaviour; the store keeps the locks, the write group and durability.
#include "engine/kv/kv_space.h"

#include <algorithm>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/limits.h"
#include "cowkv/status_macros.h"
#include "engine/base/check.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"

namespace cowkv {
namespace kv {

namespace {

static_assert(kMaxTxnOps == 10000);

KeyValue MakeKeyValue(absl::string_view user_key, const kv::ItemView& item, std::string value) {
  KeyValue kv;
  kv.key = std::string(user_key);
  kv.value = std::move(value);
  kv.value_size = kv.value.size();
  kv.create_revision = item.meta.create_revision;
  kv.mod_revision = item.meta.mod_revision;
  kv.version = item.meta.version;
  return kv;
}

// The first key after every key with prefix `p` ("" = no such bound).
std::string PrefixEnd(std::string p) {
  while (!p.empty() && static_cast<uint8_t>(p.back()) == 0xff) p.pop_back();
  if (!p.empty()) p.back() = static_cast<char>(static_cast<uint8_t>(p.back()) + 1);
  return p;
}

}  // namespace

bool InRange(absl::string_view key, absl::string_view start, absl::string_view end) {
  return key >= start && (end.empty() || key < end);
}

// Turns start/end/prefix into one [start, end) (end empty = unbounded).
absl::Status NormaliseRange(const RangeRequest& req, std::string* start, std::string* end) {
  if (!req.prefix.empty()) {
    if (!req.start.empty() || !req.end.empty()) {
      return absl::InvalidArgumentError("a range takes a prefix or start/end, not both");
    }
    COWKV_RETURN_IF_ERROR(kv::ValidateKey(req.prefix));
    *start = req.prefix;
    *end = PrefixEnd(req.prefix);
    return absl::OkStatus();
  }
  if (req.start.size() > kMaxKeySize || req.end.size() > kMaxKeySize + 1) {
    return absl::InvalidArgumentError("range bound longer than the largest key");
  }
  *start = req.start;
  *end = req.end;
  return absl::OkStatus();
}

// Buffers one write into `ws` with last-writer-wins order semantics.
void BufferPut(KvWriteSet* ws, absl::string_view key, absl::string_view value) {
  ws->writes[std::string(key)] = std::string(value);
}

void BufferDelete(KvWriteSet* ws, absl::string_view key) {
  ws->writes[std::string(key)] = std::nullopt;
}

void BufferDeleteRange(KvWriteSet* ws, absl::string_view start, absl::string_view end) {
  for (auto it = ws->writes.lower_bound(std::string(start));
       it != ws->writes.end() && InRange(it->first, start, end);) {
    it = ws->writes.erase(it);
  }
  ws->delete_ranges.emplace_back(std::string(start), std::string(end));
}

absl::Status ValidateTxnOps(const std::vector<TxnOp>& ops) {
  if (ops.size() > kMaxTxnOps) {
    return absl::InvalidArgumentError(absl::StrCat("more than ", kMaxTxnOps, " ops in a Txn"));
  }
  for (const TxnOp& op : ops) {
    switch (op.type) {
      case TxnOp::Type::kPut:
        COWKV_RETURN_IF_ERROR(kv::ValidateKey(op.key));
        COWKV_RETURN_IF_ERROR(kv::ValidateValue(op.value));
        break;
      case TxnOp::Type::kDelete:
        COWKV_RETURN_IF_ERROR(kv::ValidateKey(op.key));
        break;
      case TxnOp::Type::kDeleteRange:
        if (op.key.size() > kMaxKeySize || op.end.size() > kMaxKeySize + 1) {
          return absl::InvalidArgumentError("delete-range bound longer than the largest key");
        }
        break;
      case TxnOp::Type::kRange: {
        std::string s, e;
        COWKV_RETURN_IF_ERROR(NormaliseRange(op.range, &s, &e));
        break;
      }
    }
  }
  return absl::OkStatus();
}

namespace {

template <typename T>
bool CompareWith(Compare::Op op, const T& have, const T& want) {
  switch (op) {
    case Compare::Op::kEqual:
      return have == want;
    case Compare::Op::kNotEqual:
      return have != want;
    case Compare::Op::kLess:
      return have < want;
    case Compare::Op::kGreater:
      return have > want;
  }
  return false;
}

// The existing keys `ws`'s delete-ranges remove (those it does not put
// again), sorted and unique.
// `leaves` and `inner` collect the nodes on the paths to the keys deleted
// (their distinct bytenrs): what deleting them can CoW.
absl::Status ExpandDeleteRanges(Tree* tree, const KvWriteSet& ws, std::vector<KvOp>* ops,
                                absl::flat_hash_set<uint64_t>* leaves,
                                absl::flat_hash_set<uint64_t>* inner) {
  for (const auto& [start, end] : ws.delete_ranges) {
    TreeIterator it(tree);
    for (it.Seek(kv::TreeKey(start)); it.Valid() && kv::IsKvTreeKey(it.key()); it.Next()) {
      const absl::string_view uk = kv::UserKey(it.key());
      if (!InRange(uk, start, end)) break;
      if (ws.writes.count(std::string(uk)) == 0) {
        // Neighbouring keys share their path: only a new leaf adds nodes.
        if (leaves->insert(it.PathNode(0).first).second) {
          for (int l = 1; l < it.path_levels(); ++l) inner->insert(it.PathNode(l).first);
        }
        KvOp op{std::string(it.key()), std::nullopt, {}, {}, std::string(it.value())};
        format::LeafDataRef(it.key(), it.value(), &op.old_data);
        ops->push_back(std::move(op));
      }
      if (ops->size() > kMaxTxnOps) {
        return absl::InvalidArgumentError(absl::StrCat(
            "a transaction may change at most ", kMaxTxnOps, " keys; delete in smaller ranges"));
      }
    }
    COWKV_RETURN_IF_ERROR(it.status());
  }
  auto less = [](const KvOp& a, const KvOp& b) { return a.tree_key < b.tree_key; };
  auto same = [](const KvOp& a, const KvOp& b) { return a.tree_key == b.tree_key; };
  std::sort(ops->begin(), ops->end(), less);
  ops->erase(std::unique(ops->begin(), ops->end(), same), ops->end());
  return absl::OkStatus();
}

absl::Status CheckOpCount(const std::vector<KvOp>& ops) {
  if (ops.size() <= kMaxTxnOps) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("a transaction may change at most ", kMaxTxnOps, " keys, not ", ops.size()));
}

// The keys and items a batch writes (ReserveForWrite's `bytes`).
uint64_t OpBytes(const std::vector<KvOp>& ops) {
  uint64_t bytes = 0;
  for (const KvOp& op : ops) bytes += op.tree_key.size() + (op.item ? op.item->size() : 0) + 16;
  return bytes;
}

// Deletes CoW each node on their keys' paths at most once. Rebalancing
// merges neighbours that are on those paths too, except at the two edges
// of each range (a sibling per edge and level); an internal node may split
// once when a separator grows; the root may change. So: the leaves, twice
// the internal nodes, a sibling per level per range edge, a path for the
// root, and a worst case per point delete (whose path was not walked).
uint64_t DeleteNodesBound(const Tree* tree, uint64_t leaves, uint64_t inner, uint64_t ranges,
                          uint64_t point_deletes) {
  const uint64_t levels = static_cast<uint64_t>(tree->height()) + 1;
  return leaves + 2 * inner + 2 * levels * ranges + levels +
         static_cast<uint64_t>(tree->WorstCaseNodesPerOp()) * point_deletes;
}

// The revisions of a put at `rev` over `old` (its item; nullptr: the key
// is new), and the data extent the old item referenced (into *old_data).
absl::StatusOr<ItemMeta> PutMeta(absl::string_view tree_key, const absl::string_view* old,
                                 uint64_t rev, format::DataRef* old_data) {
  ItemMeta meta{rev, rev, 1};
  if (old != nullptr) {
    COWKV_ASSIGN_OR_RETURN(ItemView prev, DecodeItem(tree_key, *old));
    meta.create_revision = prev.meta.create_revision;
    meta.version = prev.meta.version + 1;
    format::LeafDataRef(tree_key, *old, old_data);
  }
  return meta;
}

}  // namespace

KvSpace::KvSpace(TxnManager* txn, log::LogManager* log, BlockDevice* device, uint64_t window_keys,
                 uint64_t revision)
    : txn_(txn),
      log_(log),
      device_(device),
      revision_(revision),
      window_(window_keys),
      legacy_floor_(revision) {}

absl::StatusOr<KeyValue> KvSpace::Get(Tree* tree, absl::string_view key, uint64_t max_value_load) {
  const std::string tk = TreeKey(key);
  COWKV_ASSIGN_OR_RETURN(std::string raw, tree->Get(tk));
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(tk, raw));
  const uint64_t value_size = item.in_extent ? item.extent.value_len : item.value.size();
  std::string value;
  if (max_value_load == 0 || value_size <= max_value_load) {
    COWKV_ASSIGN_OR_RETURN(value, LoadValue(item));
  }
  KeyValue kv = MakeKeyValue(key, item, std::move(value));
  kv.value_size = value_size;
  return kv;
}

absl::StatusOr<std::string> KvSpace::GetValue(Tree* tree, absl::string_view key) {
  // The tree key on the stack: 'k' + key (ValidateKey bounds it).
  char buf[1 + kMaxKeySize];
  if (key.empty() || key.size() > kMaxKeySize) return ValidateKey(key);
  buf[0] = kKvPrefix;
  std::memcpy(buf + 1, key.data(), key.size());
  const absl::string_view tk(buf, key.size() + 1);
  NodeRef leaf;
  absl::string_view raw;
  COWKV_ASSIGN_OR_RETURN(bool found, tree->Find(tk, &leaf, &raw));
  if (!found) return absl::NotFoundError("key not found");
  absl::string_view inline_value;
  if (InlineValue(raw, &inline_value)) return std::string(inline_value);
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(tk, raw));
  if (!item.in_extent) return std::string(item.value);
  return LoadValue(item);
}

absl::Status KvSpace::Validate(uint64_t read_revision, const ReadSet& reads) {
  absl::Status v = window_.Validate(read_revision, reads);
  if (!v.ok())
    (absl::IsOutOfRange(v) ? too_old_ : conflicts_).fetch_add(1, std::memory_order_relaxed);
  return v;
}

absl::Status KvSpace::Conflict(const KeyValue& kv, uint64_t read_revision) {
  conflicts_.fetch_add(1, std::memory_order_relaxed);
  return WithReason(
      absl::AbortedError(absl::StrCat("conflict: key '", absl::CHexEscape(kv.key.substr(0, 64)),
                                      "' was written at revision ", kv.mod_revision,
                                      " after this transaction's read revision ", read_revision)),
      ErrorReason::kConflict);
}

absl::StatusOr<std::string> KvSpace::LoadValue(const kv::ItemView& item) {
  if (!item.in_extent) return std::string(item.value);
  std::string v(item.extent.value_len, '\0');
  if (item.extent.bytenr + item.extent.disk_len > device_->Size()) {
    CorruptionSite site;
    site.what = "data extent";
    site.bytenr = item.extent.bytenr;
    return COWKV_CORRUPTION(site, "past the end of the device",
                            absl::StrCat("end ", item.extent.bytenr + item.extent.disk_len),
                            absl::StrCat("<= ", device_->Size()));
  }
  COWKV_RETURN_IF_ERROR(device_->ReadAt(item.extent.bytenr, v.data(), v.size()));
  const uint32_t crc = Crc32c(v.data(), v.size());
  if (crc != item.extent.crc) {
    CorruptionSite site;
    site.what = "data extent";
    site.bytenr = item.extent.bytenr;
    return COWKV_CORRUPTION(site, "value checksum mismatch", absl::StrCat(crc),
                            absl::StrCat(item.extent.crc));
  }
  return v;
}

absl::StatusOr<RangeResult> KvSpace::Range(Tree* tree, const RangeRequest& req, uint64_t limit,
                                           bool* bytes_cut) {
  RangeResult r;
  uint64_t bytes = 0;
  uint64_t loaded = 0;  // value bytes, counted once at the end (kv_range_value_bytes)
  if (bytes_cut != nullptr) *bytes_cut = false;
  if (req.revision != 0 && req.revision != revision_) return RangeAt(tree, req, limit, bytes_cut);
  r.revision = revision_;
  if (!req.end.empty() && req.start >= req.end) return r;
  TreeIterator it(tree);
  if (!req.reverse) {
    it.Seek(kv::TreeKey(req.start));
  } else if (req.end.empty()) {
    it.SeekForPrev(std::string(1, kv::kKvPrefixEnd));
  } else {
    const std::string tk = kv::TreeKey(req.end);
    it.SeekForPrev(tk);
    if (it.Valid() && it.key() == tk) it.Prev();
  }
  for (; it.Valid() && kv::IsKvTreeKey(it.key()); req.reverse ? it.Prev() : it.Next()) {
    const absl::string_view uk = kv::UserKey(it.key());
    if (!InRange(uk, req.start, req.end)) break;
    ++r.count;
    if (req.count_only) continue;
    if (limit != 0 && r.kvs.size() >= limit) {
      r.more = true;  // count stays a lower bound: no scan of the rest
      break;
    }
    COWKV_ASSIGN_OR_RETURN(kv::ItemView item, kv::DecodeItem(it.key(), it.value()));
    if (req.max_bytes != 0) {
      const uint64_t value_bytes =
          req.keys_only ? 0 : (item.in_extent ? item.extent.value_len : item.value.size());
      const uint64_t pair = uk.size() + value_bytes + kRangeEntryOverheadBytes;
      if (!r.kvs.empty() && bytes + pair > req.max_bytes) {
        r.more = true;  // count stays a lower bound, as with the limit
        if (bytes_cut != nullptr) *bytes_cut = true;
        break;
      }
      bytes += pair;
    }
    std::string value;
    const uint64_t value_size = item.in_extent ? item.extent.value_len : item.value.size();
    if (!req.keys_only && (req.max_value_load == 0 || value_size <= req.max_value_load)) {
      COWKV_ASSIGN_OR_RETURN(value, LoadValue(item));
      loaded += value.size();
    }
    // In key order (reversed for a reverse scan), and never past the limit.
    COWKV_DCHECK(r.kvs.empty() || (req.reverse ? uk < r.kvs.back().key : uk > r.kvs.back().key));
    COWKV_DCHECK(limit == 0 || r.kvs.size() < limit);
    COWKV_DCHECK(item.meta.mod_revision <= revision_ &&
                 item.meta.create_revision <= item.meta.mod_revision);
    r.kvs.push_back(MakeKeyValue(uk, item, std::move(value)));
    r.kvs.back().value_size = value_size;
  }
  range_value_bytes_.fetch_add(loaded, std::memory_order_relaxed);
  COWKV_RETURN_IF_ERROR(it.status());
  return r;
}

// Whether every compare of a Txn holds (etcd: an absent key has zero
// revisions and no value).
absl::StatusOr<bool> KvSpace::ComparesHold(Tree* tree, const std::vector<Compare>& compares) {
  for (const Compare& c : compares) {
    const std::string tk = kv::TreeKey(c.key);
    absl::StatusOr<std::string> raw = tree->Get(tk);
    if (!raw.ok() && !absl::IsNotFound(raw.status())) return raw.status();
    kv::ItemView item;  // zero revisions and empty value when absent, as etcd
    if (raw.ok()) {
      COWKV_ASSIGN_OR_RETURN(item, kv::DecodeItem(tk, *raw));
    }
    bool holds = false;
    switch (c.target) {
      case Compare::Target::kValue: {
        if (!raw.ok()) break;
        COWKV_ASSIGN_OR_RETURN(std::string value, LoadValue(item));
        holds = CompareWith(c.op, absl::string_view(value), absl::string_view(c.value));
        break;
      }
      case Compare::Target::kCreateRevision:
        holds = CompareWith(c.op, item.meta.create_revision, c.number);
        break;
      case Compare::Target::kModRevision:
        holds = CompareWith(c.op, item.meta.mod_revision, c.number);
        break;
      case Compare::Target::kVersion:
        holds = CompareWith(c.op, item.meta.version, c.number);
        break;
      case Compare::Target::kExists:
        holds = CompareWith(c.op, raw.ok(), c.exists);
        break;
    }
    if (!holds) return false;
  }
  return true;
}

absl::Status KvSpace::ApplyOp(Tree* tree, uint64_t subvol, const KvOp& op, bool new_alloc) {
  COWKV_RETURN_IF_ERROR(op.item ? tree->Put(op.tree_key, *op.item) : tree->Delete(op.tree_key));
  if (op.old_data.len != 0 && op.new_data.len != 0 && op.old_data.bytenr == op.new_data.bytenr &&
      !new_alloc) {
    return absl::OkStatus();  // the same extent before and after (a trimmed file extent)
  }
  // The +1 first: a -1 that took a fresh extent to zero would free it.
  if (op.new_data.len != 0) txn_->AddDataRef(subvol, op.new_data, +1, new_alloc);
  if (op.old_data.len != 0) txn_->AddDataRef(subvol, op.old_data, -1, false);
  return absl::OkStatus();
}

// Leases: their items change with the keys (one revision, one log sync).
absl::Status KvSpace::AddHookOps(uint64_t subvol, Tree* tree, const KvWriteSet& ws,
                                 const std::vector<KvOp>& ops, std::vector<KvOp>* hook_ops,
                                 bool* all_deletes) {
  if (hook_ == nullptr) return absl::OkStatus();
  COWKV_RETURN_IF_ERROR(hook_->Plan(subvol, tree, ws, ops, hook_ops));
  for (const KvOp& op : *hook_ops) *all_deletes = *all_deletes && !op.item.has_value();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> KvSpace::Apply(uint64_t subvol, const WritableTree& writable,
                                        uint64_t read_revision, const kv::ReadSet& reads,
                                        KvWriteSet& ws) {
  COWKV_RETURN_IF_ERROR(txn_->fatal());
  COWKV_RETURN_IF_ERROR(Validate(read_revision, reads));
  if (ws.empty()) return revision_;
  COWKV_ASSIGN_OR_RETURN(Tree * tree, writable());
  // Space pressure: the history goes first (errors: the reservation answers).
  if (no_history_ && drop_history_) Compact(subvol, tree, revision_).IgnoreError();
  // First all that can fail without changing anything: the keys the
  // delete-ranges and deletes remove, the current revisions of those put.
  std::vector<KvOp> ops;
  absl::flat_hash_set<uint64_t> leaves, inner;
  COWKV_RETURN_IF_ERROR(ExpandDeleteRanges(tree, ws, &ops, &leaves, &inner));
  const size_t range_deletes = ops.size();
  const uint64_t rev = revision_ + 1;
  bool all_deletes = true;
  for (const auto& [key, value] : ws.writes) {
    KvOp op{kv::TreeKey(key), std::nullopt, {}, {}, std::nullopt};
    absl::StatusOr<std::string> old = tree->Get(op.tree_key);
    if (!old.ok() && !absl::IsNotFound(old.status())) return old.status();
    const absl::string_view old_item = old.ok() ? absl::string_view(*old) : absl::string_view();
    COWKV_ASSIGN_OR_RETURN(kv::ItemMeta meta,
                           PutMeta(op.tree_key, old.ok() ? &old_item : nullptr, rev, &op.old_data));
    if (old.ok()) op.old_item = std::move(*old);
    if (!value.has_value()) {
      if (old.ok()) ops.push_back(std::move(op));
      continue;
    }
    all_deletes = false;
    auto ext = ws.extents.find(key);
    if (ext != ws.extents.end()) {
      op.item = kv::EncodeExtentItem(meta, ext->second);
      op.new_data = {ext->second.bytenr, ext->second.disk_len};
    } else {
      op.item = kv::EncodeItem(meta, *value);
    }
    ops.push_back(std::move(op));
  }
  if (ops.empty()) return revision_;
  COWKV_RETURN_IF_ERROR(CheckOpCount(ops));
  // Leases' items (same revision; no history entries for them).
  std::vector<KvOp> hook_ops;
  COWKV_RETURN_IF_ERROR(AddHookOps(subvol, tree, ws, ops, &hook_ops, &all_deletes));
  // History entries (each takes over its op's old data reference), or,
  // under space pressure, the info item compacting past this revision.
  std::vector<KvOp> history;
  COWKV_RETURN_IF_ERROR(HistoryOps(tree, rev, &ops, &history));
  const bool with_entries = history.front().tree_key != HistoryInfoKey();
  const uint64_t delete_nodes =
      all_deletes ? DeleteNodesBound(tree, leaves.size(), inner.size(), ws.delete_ranges.size(),
                                     ops.size() + hook_ops.size() - range_deletes)
                  : 0;
  COWKV_RETURN_IF_ERROR(
      ReserveApply(tree, ops, hook_ops, history, all_deletes && !with_entries, delete_nodes));
  COWKV_RETURN_IF_ERROR(WriteApply(subvol, tree, ops, hook_ops, history, ws));
  if (with_entries) NoteHistoryEntries(subvol, history);
  COWKV_DCHECK(rev == revision_ + 1);  // one new revision per change, never skipped
  revision_ = rev;
  ++commits_;
  for (const KvOp& op : ops) {
    COWKV_DCHECK(kv::IsKvTreeKey(op.tree_key));
    window_.RecordWrite(subvol, kv::UserKey(op.tree_key), rev);
    log_->NoteChange(subvol, op.tree_key);
  }
  if (hook_ != nullptr) hook_->Applied(subvol, rev);
  if (with_entries) MaybeCompact(subvol, tree, ops.size());
  return rev;
}

void KvSpace::NoteHistoryEntries(uint64_t subvol, const std::vector<KvOp>& history) {
  history_entries_ += history.size();
  uint64_t bytes = 0;
  for (const KvOp& h : history) bytes += h.tree_key.size() + h.item->size();
  NoteHistoryBytes(subvol, bytes);
}

absl::Status KvSpace::ReserveApply(Tree* tree, const std::vector<KvOp>& ops,
                                   const std::vector<KvOp>& hook_ops,
                                   const std::vector<KvOp>& history, bool as_deletes,
                                   uint64_t delete_nodes) {
  if (as_deletes) {
    // Under space pressure the info item is overwritten in place when it
    // exists (one path CoWed, no split).
    delete_nodes += tree->Get(HistoryInfoKey()).ok()
                        ? static_cast<uint64_t>(tree->height()) + 1
                        : static_cast<uint64_t>(tree->WorstCaseNodesPerOp());
  }
  return txn_->ReserveForWrite(
      tree, as_deletes ? TxnManager::WriteKind::kDelete : TxnManager::WriteKind::kInsert,
      ops.size() + hook_ops.size() + history.size(),
      OpBytes(ops) + OpBytes(hook_ops) + OpBytes(history), as_deletes ? delete_nodes : 0);
}

absl::Status KvSpace::WriteApply(uint64_t subvol, Tree* tree, const std::vector<KvOp>& ops,
                                 const std::vector<KvOp>& hook_ops,
                                 const std::vector<KvOp>& history, KvWriteSet& ws) {
  for (const KvOp& op : ops) {
    absl::Status s = ApplyOp(tree, subvol, op);
    if (!s.ok()) {
      // Half applied in memory: this generation must never commit.
      txn_->SetFatal(s);
      return s;
    }
    if (op.new_data.len != 0) ws.used.insert(std::string(kv::UserKey(op.tree_key)));
  }
  for (const KvOp& op : hook_ops) {
    absl::Status s = ApplyOp(tree, subvol, op);
    if (!s.ok()) {
      txn_->SetFatal(s);
      return s;
    }
    log_->NoteChange(subvol, op.tree_key);
  }
  for (const KvOp& op : history) {
    absl::Status s = tree->Put(op.tree_key, *op.item);
    if (!s.ok()) {
      txn_->SetFatal(s);
      return s;
    }
    log_->NoteChange(subvol, op.tree_key);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> KvSpace::PutInline(uint64_t subvol, Tree* tree, absl::string_view key,
                                            absl::string_view value) {
  COWKV_RETURN_IF_ERROR(txn_->fatal());
  COWKV_DCHECK(value.size() <= MaxInlineValue(tree->cache()->nodesize()));
  if (no_history_ && drop_history_) Compact(subvol, tree, revision_).IgnoreError();  // as Apply
  TreeKeyTo(key, &put_key_);
  const absl::string_view tk = put_key_;
  // Apply's reservation for one insert of this key and item, and of its
  // history entry (which holds the old item: at most an inline one, or
  // the info item under space pressure).
  const bool entries = !no_history_;
  COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(
      tree, TxnManager::WriteKind::kInsert, 2,
      2 * (tk.size() + kKvHeaderSize + value.size() + 16) + kHistoryKeyHeader + kHistoryEntryHeader,
      0));
  const uint64_t rev = revision_ + 1;
  format::DataRef old_data;  // an extent the old item referenced
  bool changed = false;
  bool had_old = false;
  absl::Status s = tree->Upsert(
      tk,
      [&](const absl::string_view* old) -> absl::StatusOr<absl::string_view> {
        COWKV_ASSIGN_OR_RETURN(ItemMeta meta, PutMeta(tk, old, rev, &old_data));
        had_old = old != nullptr;
        if (had_old) put_prev_.assign(old->data(), old->size());
        EncodeItemTo(meta, value, &put_item_);
        return absl::string_view(put_item_);
      },
      &changed);
  if (!s.ok()) {
    // Half applied in memory: this generation must never commit. A failure
    // before the item changed (a corrupt old item, a read error on the way
    // down) left the tree's items as they were, as Apply's lookups do.
    if (changed) txn_->SetFatal(s);
    return s;
  }
  // The history entry takes over the old item's data reference; without
  // one (space pressure) the history is compacted past this revision.
  const absl::string_view prev = put_prev_;
  const std::string hkey = entries ? HistoryKey(rev, key) : HistoryInfoKey();
  const std::string hval = entries ? EncodeHistoryEntry(kHistoryPut, had_old ? &prev : nullptr)
                                   : EncodeHistoryInfo(rev);
  s = tree->Put(hkey, hval);
  if (!s.ok()) {
    txn_->SetFatal(s);
    return s;
  }
  if (!entries && old_data.len != 0) txn_->AddDataRef(subvol, old_data, -1, false);
  COWKV_DCHECK(rev == revision_ + 1);  // one new revision per change, never skipped
  revision_ = rev;
  ++commits_;
  window_.RecordWrite(subvol, key, rev);
  log_->NoteChange(subvol, tk);
  if (!bug_history_not_logged_) log_->NoteChange(subvol, hkey);
  if (entries) {
    ++history_entries_;
    NoteHistoryBytes(subvol, hkey.size() + hval.size());
    MaybeCompact(subvol, tree, 1);
  }
  return rev;
}

absl::StatusOr<TxnResponse> KvSpace::Txn(uint64_t subvol, Tree* tree, const WritableTree& writable,
                                         const TxnRequest& req, KvWriteSet* branches) {
  TxnResponse resp;
  COWKV_ASSIGN_OR_RETURN(resp.succeeded, ComparesHold(tree, req.compare));
  const std::vector<TxnOp>& ops = resp.succeeded ? req.success : req.failure;
  KvWriteSet& ws = resp.succeeded ? branches[0] : branches[1];
  ws.writes.clear();
  ws.delete_ranges.clear();
  ws.leases.clear();
  uint64_t response_bytes = 0;  // of the Range ops so far (RangeRequest::max_bytes's count)
  for (size_t i = 0; i < ops.size(); ++i) {
    const TxnOp& op = ops[i];
    TxnOpResult res;
    switch (op.type) {
      case TxnOp::Type::kRange: {
        RangeRequest n = op.range;
        COWKV_RETURN_IF_ERROR(NormaliseRange(op.range, &n.start, &n.end));
        const uint64_t budget = req.max_response_bytes;
        const uint64_t left = budget == 0 ? 0 : budget - std::min(budget, response_bytes);
        if (budget != 0 && (n.max_bytes == 0 || n.max_bytes > left))
          n.max_bytes = std::max<uint64_t>(left, 1);
        bool cut = false;
        COWKV_ASSIGN_OR_RETURN(res.range, Range(tree, n, n.limit, &cut));
        if (budget != 0) {
          for (const KeyValue& kv : res.range.kvs) {
            response_bytes += kv.key.size() + kv.value.size() + kRangeEntryOverheadBytes;
          }
          // Cut by the Txn's budget rather than the op's own bound, or a
          // first pair larger than what was left.
          const bool op_bound = op.range.max_bytes != 0 && op.range.max_bytes <= left;
          if ((cut && !op_bound) || response_bytes > budget) {
            return LimitError(absl::StrCat("Txn: the range results pass the response budget of ",
                                           budget, " bytes at op ", i, " (", ops.size(),
                                           " ops); nothing was applied. Lower the "
                                           "ranges' limits, use keys_only or count_only, or read "
                                           "them with Range, which pages"));
          }
        }
        break;
      }
      case TxnOp::Type::kPut:
        BufferPut(&ws, op.key, op.value);
        ws.leases.erase(op.key);
        if (op.lease != 0) ws.leases[op.key] = op.lease;
        break;
      case TxnOp::Type::kDelete:
        res.deleted = tree->Get(kv::TreeKey(op.key)).ok() ? 1 : 0;
        BufferDelete(&ws, op.key);
        break;
      case TxnOp::Type::kDeleteRange: {
        RangeRequest n;
        n.start = op.key;
        n.end = op.end;
        n.count_only = true;
        COWKV_ASSIGN_OR_RETURN(RangeResult counted, Range(tree, n, 0));
        res.deleted = counted.count;
        BufferDeleteRange(&ws, op.key, op.end);
        break;
      }
    }
    resp.results.push_back(std::move(res));
  }
  COWKV_ASSIGN_OR_RETURN(resp.revision, Apply(subvol, writable, 0, ReadSet{}, ws));
  return resp;
}

}  // namespace kv
}  // namespace cowkv
