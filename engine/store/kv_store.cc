// StoreImpl's key space: KV reads and writes, client transactions, the
// etcd-style Txn, group commit through the log, and log replay at mount.
//
// Every KV change is applied under the exclusive tree lock in one hold, so
// readers see a transaction whole or not at all, and it gets the next
// revision. A durable change then waits for the log sync (or engine commit)
// that covers its revision; whoever finds no sync running leads one for
// everyone waiting (group commit).
#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <thread>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/check.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/store/store_impl.h"

namespace cowkv {

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

bool InRange(absl::string_view key, absl::string_view start, absl::string_view end) {
  return key >= start && (end.empty() || key < end);
}

// The first key after every key with prefix `p` ("" = no such bound).
std::string PrefixEnd(std::string p) {
  while (!p.empty() && static_cast<uint8_t>(p.back()) == 0xff) p.pop_back();
  if (!p.empty()) p.back() = static_cast<char>(static_cast<uint8_t>(p.back()) + 1);
  return p;
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

bool Retryable(const absl::Status& s) { return absl::IsAborted(s) || absl::IsOutOfRange(s); }

}  // namespace

// ---- Reads ------------------------------------------------------------------------

absl::StatusOr<KeyValue> StoreImpl::GetItem(uint64_t subvol, absl::string_view key) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  const std::string tk = kv::TreeKey(key);
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  COWKV_ASSIGN_OR_RETURN(std::string raw, tree->Get(tk));
  COWKV_ASSIGN_OR_RETURN(kv::ItemView item, kv::DecodeItem(tk, raw));
  COWKV_ASSIGN_OR_RETURN(std::string value, LoadValue(item));
  return MakeKeyValue(key, item, std::move(value));
}

absl::StatusOr<std::string> StoreImpl::LoadValue(const kv::ItemView& item) {
  if (!item.in_extent) return std::string(item.value);
  std::string v(item.extent.value_len, '\0');
  if (item.extent.bytenr + item.extent.disk_len > device_->Size()) {
    return absl::DataLossError(absl::StrCat("data extent [", item.extent.bytenr, ", +",
                                            item.extent.disk_len, ") past the end of the device"));
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

absl::StatusOr<std::string> StoreImpl::LoadByTreeKey(uint64_t subvol, absl::string_view tree_key) {
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  COWKV_ASSIGN_OR_RETURN(std::string raw, tree->Get(tree_key));
  COWKV_ASSIGN_OR_RETURN(kv::ItemView item, kv::DecodeItem(tree_key, raw));
  return LoadValue(item);
}

absl::StatusOr<RangeResult> StoreImpl::RangeLocked(Tree* tree, const RangeRequest& req,
                                                   uint64_t limit, bool* bytes_cut) {
  RangeResult r;
  uint64_t bytes = 0;
  uint64_t loaded = 0;  // value bytes, counted once at the end (kv_range_value_bytes)
  if (bytes_cut != nullptr) *bytes_cut = false;
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
    r.kvs.push_back(MakeKeyValue(uk, item, std::move(value)));
    r.kvs.back().value_size = value_size;
  }
  kv_range_value_bytes_.fetch_add(loaded, std::memory_order_relaxed);
  COWKV_RETURN_IF_ERROR(it.status());
  return r;
}

absl::StatusOr<RangeResult> StoreImpl::Range(uint64_t subvol, const RangeRequest& req) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  RangeRequest n = req;
  COWKV_RETURN_IF_ERROR(NormaliseRange(req, &n.start, &n.end));
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  return RangeLocked(tree, n, n.limit);
}

// ---- Writes -----------------------------------------------------------------------

absl::StatusOr<Tree*> StoreImpl::WritableTree(uint64_t subvol) {
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  if (txn_->IsReadOnly(subvol)) {
    absl::StatusOr<SubvolInfo> info = subvols_->Get(subvol);
    return WithReason(absl::FailedPreconditionError(
                          absl::StrCat("subvolume '", info.ok() ? info->name : absl::StrCat(subvol),
                                       "' is a read-only snapshot")),
                      ErrorReason::kReadOnlySnapshot);
  }
  return tree;
}

namespace {



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
        KvOp op{std::string(it.key()), std::nullopt, {}, {}};
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

}  // namespace

absl::Status StoreImpl::ApplyOp(Tree* tree, uint64_t subvol, const KvOp& op, bool new_alloc) {
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

namespace {
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
}  // namespace

absl::StatusOr<uint64_t> StoreImpl::ApplyLocked(uint64_t subvol, uint64_t read_revision,
                                                const kv::ReadSet& reads, KvWriteSet& ws) {
  COWKV_RETURN_IF_ERROR(txn_->fatal());
  if (absl::Status v = window_.Validate(read_revision, reads); !v.ok()) {
    (absl::IsOutOfRange(v) ? kv_too_old_ : kv_conflicts_).fetch_add(1, std::memory_order_relaxed);
    return v;
  }
  if (ws.empty()) return revision_;
  COWKV_ASSIGN_OR_RETURN(Tree * tree, WritableTree(subvol));
  // First everything that can fail without changing anything: which keys
  // the delete-ranges and deletes remove, and the current revisions of the
  // keys put.
  std::vector<KvOp> ops;
  absl::flat_hash_set<uint64_t> leaves, inner;
  COWKV_RETURN_IF_ERROR(ExpandDeleteRanges(tree, ws, &ops, &leaves, &inner));
  const size_t range_deletes = ops.size();
  const uint64_t rev = revision_ + 1;
  bool all_deletes = true;
  for (const auto& [key, value] : ws.writes) {
    KvOp op{kv::TreeKey(key), std::nullopt, {}, {}};
    absl::StatusOr<std::string> old = tree->Get(op.tree_key);
    if (!old.ok() && !absl::IsNotFound(old.status())) return old.status();
    kv::ItemMeta meta{rev, rev, 1};
    if (old.ok()) {
      COWKV_ASSIGN_OR_RETURN(kv::ItemView prev, kv::DecodeItem(op.tree_key, *old));
      meta.create_revision = prev.meta.create_revision;
      meta.version = prev.meta.version + 1;
      format::LeafDataRef(op.tree_key, *old, &op.old_data);
    }
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
  const uint64_t delete_nodes =
      all_deletes ? DeleteNodesBound(tree, leaves.size(), inner.size(), ws.delete_ranges.size(),
                                     ops.size() - range_deletes)
                  : 0;
  COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(
      tree, all_deletes ? TxnManager::WriteKind::kDelete : TxnManager::WriteKind::kInsert,
      ops.size(), OpBytes(ops), delete_nodes));
  for (const KvOp& op : ops) {
    absl::Status s = ApplyOp(tree, subvol, op);
    if (!s.ok()) {
      // Half applied in memory: this generation must never commit.
      txn_->SetFatal(s);
      return s;
    }
    if (op.new_data.len != 0) ws.used.insert(std::string(kv::UserKey(op.tree_key)));
  }
  revision_ = rev;
  ++durable_seq_;
  ++kv_commits_;
  for (const KvOp& op : ops) {
    window_.RecordWrite(subvol, kv::UserKey(op.tree_key), rev);
    log_->NoteChange(subvol, op.tree_key);
  }
  return rev;
}

// The write group (RocksDB's write-group idea): writers queue their
// commits; the first one finding no leader applies everything queued in one
// hold of the tree lock, leads one log sync for the durable ones among them,
// and wakes the rest once. A follower sleeps once instead of queueing on
// the tree lock and then again for the sync.
void StoreImpl::RunInWriteGroup(GroupWrite* w) {
  group_mu_.Lock();
  group_queue_.push_back(w);
  while (!w->done && group_leader_) group_cv_.Wait(&group_mu_);
  if (w->done) {
    group_mu_.Unlock();
    return;
  }
  group_leader_ = true;
  std::vector<GroupWrite*> batch(group_queue_.begin(), group_queue_.end());
  group_queue_.clear();
  group_mu_.Unlock();
  uint64_t durable_point = 0;
  {
    absl::WriterMutexLock l(&mu_);
    const uint64_t heads_before = txn_->pending_ref_heads();
    for (GroupWrite* g : batch) {
      g->before = revision_;
      g->rev = (*g->apply)();
      // A durable call waits for everything applied so far, also when it
      // changed nothing itself: its answer (0 keys deleted, a failed
      // compare) reflects async writes before it, which must survive a
      // crash once it returns (kv_gen_test: 'put a A; del b A;
      // delrange [b,+inf) D'). With nothing pending the wait is free.
      if (g->durable && g->rev.ok()) durable_point = std::max(durable_point, durable_seq_);
    }
    const ThrottleSample sample = PayDelayedRefsLocked(heads_before);
    for (GroupWrite* g : batch) g->throttle = sample;
  }
  const absl::Status synced =
      durable_point > 0 ? WaitDurable(durable_point) : absl::OkStatus();
  group_mu_.Lock();
  for (GroupWrite* g : batch) {
    g->durable_status = synced;
    g->done = true;
  }
  group_leader_ = false;
  group_cv_.SignalAll();
  group_mu_.Unlock();
}

absl::StatusOr<uint64_t> StoreImpl::KvWrite(
    const std::function<absl::StatusOr<uint64_t>()>& apply, Durability d) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  for (int attempt = 0;; ++attempt) {
    GroupWrite w;
    w.apply = &apply;
    w.durable = Resolve(d) == Durability::kDurable;
    RunInWriteGroup(&w);
    if (absl::IsResourceExhausted(w.rev.status()) && !IsLimitError(w.rev.status()) && attempt == 0) {
      // Space freed in this generation is pinned until it commits.
      COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kSpace));
      continue;
    }
    COWKV_RETURN_IF_ERROR(w.rev.status());
    const bool changed = *w.rev > w.before;
    if (w.durable) COWKV_RETURN_IF_ERROR(w.durable_status);  // also a call that changed nothing
    if (changed && w.durable) durable_commits_.fetch_add(1, std::memory_order_relaxed);
    if (changed) Throttle(w.throttle);
    return w.rev;
  }
}

absl::Status StoreImpl::PrepareExtents(std::map<std::string, std::optional<std::string>>* writes,
                                      std::map<std::string, kv::ExtentRef>* extents) {
  const size_t inline_max = kv::MaxInlineValue(nodesize_);
  for (const auto& [key, value] : *writes) {
    if (!value.has_value() || value->size() <= inline_max || extents->count(key)) continue;
    absl::StatusOr<format::DataRef> d;
    {
      absl::WriterMutexLock l(&mu_);
      d = txn_->AllocDataExtent(value->size());
    }
    COWKV_RETURN_IF_ERROR(d.status());
    kv::ExtentRef ref{d->bytenr, d->len, value->size(), Crc32c(value->data(), value->size())};
    (*extents)[key] = ref;  // released with the others if anything fails
    COWKV_RETURN_IF_ERROR(device_->WriteAt(ref.bytenr, value->data(), value->size()));
  }
  return absl::OkStatus();
}

void StoreImpl::ReleaseUnusedExtents(const KvWriteSet& ws) {
  absl::WriterMutexLock l(&mu_);
  for (const auto& [key, ref] : ws.extents) {
    if (ws.used.count(key) == 0) txn_->ReleaseUnusedData({ref.bytenr, ref.disk_len});
  }
}

absl::StatusOr<uint64_t> StoreImpl::KvWriteSetWrite(
    KvWriteSet* ws, const std::function<absl::StatusOr<uint64_t>()>& apply, Durability d) {
  absl::Status s = PrepareExtents(&ws->writes, &ws->extents);
  absl::StatusOr<uint64_t> rev = s.ok() ? KvWrite(apply, d) : absl::StatusOr<uint64_t>(s);
  if (!ws->extents.empty()) ReleaseUnusedExtents(*ws);
  return rev;
}

absl::Status StoreImpl::Put(uint64_t subvol, absl::string_view key, absl::string_view value,
                            Durability d) {
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  COWKV_RETURN_IF_ERROR(kv::ValidateValue(value));
  KvWriteSet ws;
  BufferPut(&ws, key, value);
  return KvWriteSetWrite(&ws, [&] { return ApplyLocked(subvol, 0, kv::ReadSet{}, ws); }, d)
      .status();
}

absl::Status StoreImpl::Delete(uint64_t subvol, absl::string_view key, Durability d) {
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  KvWriteSet ws;
  BufferDelete(&ws, key);
  const std::string tk = kv::TreeKey(key);
  return KvWrite(
             [&]() -> absl::StatusOr<uint64_t> {
               COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
               // A missing key is NOT_FOUND, even on a full device.
               COWKV_RETURN_IF_ERROR(tree->Get(tk).status());
               return ApplyLocked(subvol, 0, kv::ReadSet{}, ws);
             },
             d)
      .status();
}

// ---- The one-shot Txn ------------------------------------------------------------

namespace {

absl::Status ValidateTxnOps(const std::vector<TxnOp>& ops, uint32_t nodesize) {
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

template <typename T>
bool CompareWith(Compare::Op op, const T& have, const T& want) {
  switch (op) {
    case Compare::Op::kEqual: return have == want;
    case Compare::Op::kNotEqual: return have != want;
    case Compare::Op::kLess: return have < want;
    case Compare::Op::kGreater: return have > want;
  }
  return false;
}

}  // namespace

// Whether every compare of a Txn holds (etcd: an absent key has zero
// revisions and no value).
absl::StatusOr<bool> StoreImpl::ComparesHold(Tree* tree, const std::vector<Compare>& compares) {
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

absl::StatusOr<TxnResponse> StoreImpl::TxnLocked(uint64_t subvol, const TxnRequest& req,
                                                 KvWriteSet* branches) {
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  TxnResponse resp;
  COWKV_ASSIGN_OR_RETURN(resp.succeeded, ComparesHold(tree, req.compare));
  const std::vector<TxnOp>& ops = resp.succeeded ? req.success : req.failure;
  KvWriteSet& ws = resp.succeeded ? branches[0] : branches[1];
  ws.writes.clear();
  ws.delete_ranges.clear();
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
        if (budget != 0 && (n.max_bytes == 0 || n.max_bytes > left)) n.max_bytes = std::max<uint64_t>(left, 1);
        bool cut = false;
        COWKV_ASSIGN_OR_RETURN(res.range, RangeLocked(tree, n, n.limit, &cut));
        if (budget != 0) {
          for (const KeyValue& kv : res.range.kvs) {
            response_bytes += kv.key.size() + kv.value.size() + kRangeEntryOverheadBytes;
          }
          // Cut by the Txn's budget rather than the op's own bound, or a
          // first pair larger than what was left.
          const bool op_bound = op.range.max_bytes != 0 && op.range.max_bytes <= left;
          if ((cut && !op_bound) || response_bytes > budget) {
            return LimitError(absl::StrCat(
                "Txn: the range results pass the response budget of ", budget,
                " bytes at op ", i, " (", ops.size(), " ops); nothing was applied. Lower the "
                "ranges' limits, use keys_only or count_only, or read them with Range, which pages"));
          }
        }
        break;
      }
      case TxnOp::Type::kPut:
        BufferPut(&ws, op.key, op.value);
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
        COWKV_ASSIGN_OR_RETURN(RangeResult counted, RangeLocked(tree, n, 0));
        res.deleted = counted.count;
        BufferDeleteRange(&ws, op.key, op.end);
        break;
      }
    }
    resp.results.push_back(std::move(res));
  }
  COWKV_ASSIGN_OR_RETURN(resp.revision, ApplyLocked(subvol, 0, kv::ReadSet{}, ws));
  return resp;
}

absl::StatusOr<TxnResponse> StoreImpl::Txn(uint64_t subvol, const TxnRequest& req) {
  for (const Compare& c : req.compare) COWKV_RETURN_IF_ERROR(kv::ValidateKey(c.key));
  COWKV_RETURN_IF_ERROR(ValidateTxnOps(req.success, nodesize_));
  COWKV_RETURN_IF_ERROR(ValidateTxnOps(req.failure, nodesize_));
  // Large values of either branch go to data extents before the lock; the
  // branch not taken releases its own.
  KvWriteSet branches[2];
  for (int b = 0; b < 2; ++b) {
    for (const TxnOp& op : b == 0 ? req.success : req.failure) {
      if (op.type == TxnOp::Type::kPut) BufferPut(&branches[b], op.key, op.value);
    }
  }
  absl::Status prepared = PrepareExtents(&branches[0].writes, &branches[0].extents);
  if (prepared.ok()) prepared = PrepareExtents(&branches[1].writes, &branches[1].extents);
  TxnResponse resp;
  absl::StatusOr<uint64_t> rev =
      prepared.ok() ? KvWrite(
                          [&]() -> absl::StatusOr<uint64_t> {
                            COWKV_ASSIGN_OR_RETURN(resp, TxnLocked(subvol, req, branches));
                            return resp.revision;
                          },
                          req.durability)
                    : absl::StatusOr<uint64_t>(prepared);
  for (const KvWriteSet& b : branches) {
    if (!b.extents.empty()) ReleaseUnusedExtents(b);
  }
  COWKV_RETURN_IF_ERROR(rev.status());
  return resp;
}

// ---- Interactive transactions ------------------------------------------------------

absl::StatusOr<std::unique_ptr<KvTransaction>> StoreImpl::BeginTransaction(uint64_t subvol) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  auto state = std::make_unique<KvTxnState>();
  state->subvol = subvol;
  {
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(TreeFor(subvol).status());
    state->read_revision = revision_;
    window_.OpenTxn(revision_);
    ++open_txns_;
  }
  return std::unique_ptr<KvTransaction>(new KvTransaction(this, std::move(state)));
}

void StoreImpl::TxnFinish(KvTxnState* t) {
  if (t->finished) return;
  t->finished = true;
  absl::WriterMutexLock l(&mu_);
  window_.CloseTxn();
  --open_txns_;
}

namespace {
absl::Status CheckActive(const KvTxnState* t) {
  if (t->finished) return absl::FailedPreconditionError("transaction already committed or aborted");
  return absl::OkStatus();
}

absl::Status Conflict(const KeyValue& kv, uint64_t read_revision) {
  return WithReason(
      absl::AbortedError(absl::StrCat("conflict: key '", absl::CHexEscape(kv.key.substr(0, 64)),
                                      "' was written at revision ", kv.mod_revision,
                                      " after this transaction's read revision ", read_revision)),
      ErrorReason::kConflict);
}
}  // namespace

absl::StatusOr<KeyValue> StoreImpl::TxnGet(KvTxnState* t, absl::string_view key) {
  COWKV_RETURN_IF_ERROR(CheckActive(t));
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  // Own writes first: they decide the answer, so nothing is read.
  auto w = t->ws.writes.find(std::string(key));
  if (w != t->ws.writes.end()) {
    if (!w->second) return absl::NotFoundError("key deleted in this transaction");
    KeyValue kv;
    kv.key = std::string(key);
    kv.value = *w->second;
    return kv;
  }
  for (const auto& [s, e] : t->ws.delete_ranges) {
    if (InRange(key, s, e)) return absl::NotFoundError("key deleted in this transaction");
  }
  t->reads.keys.emplace_back(t->subvol, std::string(key));
  absl::StatusOr<KeyValue> kv = GetItem(t->subvol, key);
  if (kv.ok() && kv->mod_revision > t->read_revision) {
    kv_conflicts_.fetch_add(1, std::memory_order_relaxed);
    return Conflict(*kv, t->read_revision);
  }
  return kv;
}

namespace {
// Merges a transaction's own writes into the range the tree holds, then
// cuts it to the request's limit and order.
// The most a transaction's range read that overlaps its own writes scans.
constexpr uint64_t kOverlapScanBytes = 64ull << 20;

void OverlayOwnWrites(const KvTxnState& t, const RangeRequest& n, RangeResult* r) {
  std::map<std::string, KeyValue> merged;
  for (KeyValue& kv : r->kvs) merged[kv.key] = std::move(kv);
  for (const auto& [s, e] : t.ws.delete_ranges) {
    for (auto it = merged.lower_bound(s); it != merged.end() && InRange(it->first, s, e);) {
      it = merged.erase(it);
    }
  }
  for (auto it = t.ws.writes.lower_bound(n.start);
       it != t.ws.writes.end() && InRange(it->first, n.start, n.end); ++it) {
    if (!it->second) {
      merged.erase(it->first);
    } else {
      KeyValue& kv = merged[it->first];
      kv.key = it->first;
      kv.value = n.keys_only ? "" : *it->second;
      kv.value_size = it->second->size();
    }
  }
  r->kvs.clear();
  r->count = merged.size();
  r->more = false;
  if (n.count_only) return;
  uint64_t bytes = 0;
  auto take = [&](KeyValue& kv) {
    if (r->more) return;
    const uint64_t pair = kv.key.size() + kv.value.size() + kRangeEntryOverheadBytes;
    if ((n.limit != 0 && r->kvs.size() >= n.limit) ||
        (n.max_bytes != 0 && !r->kvs.empty() && bytes + pair > n.max_bytes)) {
      r->more = true;
      return;
    }
    bytes += pair;
    r->kvs.push_back(std::move(kv));
  };
  if (n.reverse) {
    for (auto it = merged.rbegin(); it != merged.rend(); ++it) take(it->second);
  } else {
    for (auto& [k, kv] : merged) take(kv);
  }
}
}  // namespace

absl::StatusOr<RangeResult> StoreImpl::TxnRange(KvTxnState* t, const RangeRequest& req) {
  COWKV_RETURN_IF_ERROR(CheckActive(t));
  RangeRequest n = req;
  COWKV_RETURN_IF_ERROR(NormaliseRange(req, &n.start, &n.end));
  bool overlap = false;
  for (auto it = t->ws.writes.lower_bound(n.start); it != t->ws.writes.end(); ++it) {
    overlap = InRange(it->first, n.start, n.end);
    break;
  }
  for (const auto& [s, e] : t->ws.delete_ranges) {
    overlap = overlap || ((n.end.empty() || s < n.end) && (e.empty() || n.start < e));
  }
  RangeResult r;
  {
    absl::ReaderMutexLock l(&mu_);
    COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(t->subvol));
    RangeRequest scan = n;
    scan.count_only = n.count_only && !overlap;
    // Overlapping this transaction's own writes, the whole range is read
    // and merged (own deletes may hide any number of keys), within a fixed
    // bound rather than the request's.
    if (overlap) {
      scan.max_bytes = kOverlapScanBytes;
      scan.keys_only = n.keys_only || n.count_only;
    }
    bool cut = false;
    COWKV_ASSIGN_OR_RETURN(r, RangeLocked(tree, scan, overlap ? 0 : n.limit, &cut));
    if (overlap && cut) {
      return LimitError(absl::StrCat(
          "range overlapping this transaction's own writes reads more than ", kOverlapScanBytes,
          " bytes; narrow it, or read it before writing into it"));
    }
  }
  for (const KeyValue& kv : r.kvs) {
    if (kv.mod_revision > t->read_revision) {
      kv_conflicts_.fetch_add(1, std::memory_order_relaxed);
      return Conflict(kv, t->read_revision);
    }
  }
  kv::ReadRange rr{t->subvol, n.start, n.end};
  if (overlap) {
    OverlayOwnWrites(*t, n, &r);
  } else if (r.more && !r.kvs.empty()) {
    // Only what was returned was read: a write past it cannot change it.
    if (n.reverse) {
      rr.start = r.kvs.back().key;
    } else {
      rr.end = r.kvs.back().key + std::string(1, '\0');
    }
  }
  t->reads.ranges.push_back(std::move(rr));
  return r;
}

absl::StatusOr<uint64_t> StoreImpl::TxnCommit(KvTxnState* t, Durability d) {
  COWKV_RETURN_IF_ERROR(CheckActive(t));
  KvWriteSet ws = std::move(t->ws);
  absl::StatusOr<uint64_t> rev;
  if (ws.empty()) {
    // Read-only: valid if nothing it read changed; nothing to apply.
    absl::Status v;
    {
      absl::ReaderMutexLock l(&mu_);
      v = window_.Validate(t->read_revision, t->reads);
    }
    if (!v.ok()) {
      (absl::IsOutOfRange(v) ? kv_too_old_ : kv_conflicts_)
          .fetch_add(1, std::memory_order_relaxed);
    }
    rev = v.ok() ? absl::StatusOr<uint64_t>(t->read_revision) : v;
  } else {
    rev = KvWriteSetWrite(
        &ws, [&] { return ApplyLocked(t->subvol, t->read_revision, t->reads, ws); }, d);
  }
  TxnFinish(t);
  return rev;
}

// ---- Group commit -------------------------------------------------------------------

absl::Status StoreImpl::WaitDurable(uint64_t point) {
  for (;;) {
    {
      absl::MutexLock l(&sync_mu_);
      // Wait while a sync runs, or while the sync that covers `rev` waits
      // for the engine commit its chain extends. A condition variable, not
      // Await: with many committers waiting, re-evaluating every waiter's
      // condition on each unlock costs more than the sync.
      for (;;) {
        if (committed_point_ >= point ||
            (synced_point_ >= point && durable_gen_ >= synced_base_)) {
          return absl::OkStatus();
        }
        if (!sync_failed_.ok()) return sync_failed_;
        if (!sync_running_ && synced_point_ < point) break;  // lead the next sync
        sync_cv_.Wait(&sync_mu_);
      }
      sync_running_ = true;
    }
    absl::StatusOr<bool> synced = RunLogSync();
    {
      absl::MutexLock l(&sync_mu_);
      sync_running_ = false;
      sync_cv_.SignalAll();
    }
    if (!synced.ok() || !*synced) {
      // The log cannot take it: an engine commit makes everything durable.
      COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kLogFull));
    }
  }
}

absl::StatusOr<bool> StoreImpl::RunLogSync() {
  absl::MutexLock ll(&log_mu_);
  std::unique_ptr<log::LogManager::SyncBatch> batch;
  uint64_t rev, base, point;
  {
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(txn_->fatal());
    if (log_->needs_full_commit()) return false;
    rev = revision_;
    point = durable_seq_;
    base = log_->chain_base();
    absl::StatusOr<std::unique_ptr<log::LogManager::SyncBatch>> p = log_->PrepareSync(rev);
    if (!p.ok()) return false;
    batch = std::move(*p);
  }
  if (batch != nullptr) {
    // A log sync's latency: its nodes, its root block and the flush.
    const auto start = std::chrono::steady_clock::now();
    absl::Status w = txn_->CheckDeviceOwned();
    if (w.ok()) w = log_->WriteSync(*batch);
    const auto elapsed = std::chrono::steady_clock::now() - start;
    {
      absl::WriterMutexLock l(&mu_);
      log_->FinishSync(*batch, w);
      if (w.ok()) log_sync_latency_.Record(elapsed);  // with FinishSync's count
      if (w.ok()) ReportIfSlow(EngineEvent::Kind::kSlowLogSync, elapsed, "");
    }
    if (!w.ok()) return false;
  }
  absl::MutexLock sl(&sync_mu_);
  if (point > synced_point_) {
    synced_point_ = point;
    synced_base_ = base;
  }
  return true;  // WaitDurable signals the waiters once, with sync_running_

}

// ---- Replay ----------------------------------------------------------------------------

absl::Status StoreImpl::ReplayLog(const log::Recovered& r) {
  COWKV_RETURN_IF_ERROR(txn_->ClaimLogBlocks(r.blocks));
  log_->Adopt(r.blocks);
  // A data extent an entry points at is either committed already (a file
  // extent trimmed or cloned in the logged transaction) or was written
  // after the superblock's generation, so its extent tree calls it free:
  // take those out of free space before the first tree write could
  // allocate one.
  std::set<uint64_t> claimed, seen;
  for (const log::Recovered::Entry& e : r.entries) {
    format::DataRef d;
    if (txn_->fs_tree(e.subvol) == nullptr || !format::LeafDataRef(e.key, e.value, &d) ||
        !seen.insert(d.bytenr).second) {
      continue;
    }
    COWKV_ASSIGN_OR_RETURN(bool committed, txn_->DataExtentCommitted(d));
    if (committed) continue;
    COWKV_RETURN_IF_ERROR(txn_->ClaimDataExtent(d));
    claimed.insert(d.bytenr);
  }
  std::map<uint64_t, fs::ReplayNotes> notes;
  // The references replaced items held are dropped after every entry is
  // applied: an extent a later entry points at again (a file extent
  // overwritten, then trimmed or cloned back in by a later sync) must not
  // reach zero references, and be freed, in between.
  std::vector<std::pair<uint64_t, format::DataRef>> drops;
  for (const log::Recovered::Entry& e : r.entries) {
    COWKV_RETURN_IF_ERROR(ReplayEntry(e, &claimed, &notes, &drops));
  }
  for (const auto& [subvol, d] : drops) txn_->AddDataRef(subvol, d, -1, false);
  COWKV_RETURN_IF_ERROR(FixupFsReplay(notes));
  replayed_entries_ = r.entries.size();
  return absl::OkStatus();
}

absl::Status StoreImpl::ReplayEntry(const log::LogEntry& e, std::set<uint64_t>* claimed,
                                    std::map<uint64_t, fs::ReplayNotes>* notes,
                                    std::vector<std::pair<uint64_t, format::DataRef>>* drops) {
  Tree* tree = txn_->fs_tree(e.subvol);
  if (tree == nullptr) return absl::OkStatus();  // the subvolume is gone
  fs::FsKey fk;
  if (fs::DecodeFsKey(e.key, &fk)) {
    COWKV_RETURN_IF_ERROR(NoteFsReplay(tree, e, &(*notes)[e.subvol]));
  } else if (!kv::IsKvTreeKey(e.key)) {
    return absl::DataLossError(absl::StrCat("log entry of subvolume ", e.subvol,
                                            " with an unknown key type"));
  } else if (!e.value.empty()) {
    COWKV_RETURN_IF_ERROR(kv::DecodeItem(e.key, e.value).status());
  }
  KvOp op{e.key, std::nullopt, {}, {}};
  if (!e.value.empty()) {
    op.item = e.value;
    format::LeafDataRef(e.key, e.value, &op.new_data);
  }
  absl::StatusOr<std::string> old = tree->Get(e.key);
  if (!old.ok() && !absl::IsNotFound(old.status())) return old.status();
  if (old.ok()) format::LeafDataRef(e.key, *old, &op.old_data);
  if (!old.ok() && !op.item) return absl::OkStatus();
  COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(
      tree, op.item ? TxnManager::WriteKind::kInsert : TxnManager::WriteKind::kDelete));
  // The first entry naming a claimed extent takes its allocation; a later
  // one (the same item logged by two syncs, a split extent) only another
  // reference.
  const bool first = op.new_data.len != 0 && claimed->erase(op.new_data.bytenr) > 0;
  COWKV_RETURN_IF_ERROR(op.item ? tree->Put(op.tree_key, *op.item) : tree->Delete(op.tree_key));
  if (op.old_data.len != 0 && op.new_data.len != 0 && op.old_data.bytenr == op.new_data.bytenr &&
      !first) {
    return absl::OkStatus();  // the same extent before and after (a trimmed file extent)
  }
  if (op.new_data.len != 0) txn_->AddDataRef(e.subvol, op.new_data, +1, first);
  if (op.old_data.len != 0 && options_.planted_bug == Options::PlantedBug::kEagerReplayDrops) {
    txn_->AddDataRef(e.subvol, op.old_data, -1, false);
  } else if (op.old_data.len != 0) {
    drops->push_back({e.subvol, op.old_data});
  }
  return absl::OkStatus();
}

// ---- KvTransaction and RunInTransaction ------------------------------------------------

KvTransaction::KvTransaction(StoreImpl* store, std::unique_ptr<KvTxnState> state)
    : store_(store), state_(std::move(state)) {}
KvTransaction::~KvTransaction() { Abort(); }
uint64_t KvTransaction::read_revision() const { return state_->read_revision; }

absl::StatusOr<KeyValue> KvTransaction::Get(absl::string_view key) {
  return store_->TxnGet(state_.get(), key);
}
absl::StatusOr<RangeResult> KvTransaction::Range(const RangeRequest& req) {
  return store_->TxnRange(state_.get(), req);
}
absl::Status KvTransaction::Put(absl::string_view key, absl::string_view value) {
  COWKV_RETURN_IF_ERROR(CheckActive(state_.get()));
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  COWKV_RETURN_IF_ERROR(kv::ValidateValue(value));
  BufferPut(&state_->ws, key, value);
  return absl::OkStatus();
}
absl::Status KvTransaction::Delete(absl::string_view key) {
  COWKV_RETURN_IF_ERROR(CheckActive(state_.get()));
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  BufferDelete(&state_->ws, key);
  return absl::OkStatus();
}
absl::Status KvTransaction::DeleteRange(absl::string_view start, absl::string_view end) {
  COWKV_RETURN_IF_ERROR(CheckActive(state_.get()));
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize + 1) {
    return absl::InvalidArgumentError("delete-range bound longer than the largest key");
  }
  BufferDeleteRange(&state_->ws, start, end);
  return absl::OkStatus();
}
absl::StatusOr<uint64_t> KvTransaction::Commit(Durability d) {
  return store_->TxnCommit(state_.get(), d);
}
void KvTransaction::Abort() { store_->TxnFinish(state_.get()); }

absl::Status Subvolume::RunInTransaction(const std::function<absl::Status(KvTransaction&)>& fn,
                                         Durability durability, int max_attempts) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    if (attempt > 0) {
      const int64_t cap_us = std::min<int64_t>(100000, int64_t{500} << std::min(attempt, 8));
      absl::SleepFor(absl::Microseconds(rng() % static_cast<uint64_t>(cap_us + 1)));
    }
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<KvTransaction> tx, BeginTransaction());
    last = fn(*tx);
    if (last.ok()) last = tx->Commit(durability).status();
    if (last.ok() || !Retryable(last)) return last;
  }
  return absl::Status(last.code(), absl::StrCat("gave up after ", max_attempts,
                                                " attempts: ", last.message()));
}

}  // namespace cowkv
