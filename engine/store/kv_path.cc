// The KV call path: validation, large values into data extents, the write
// group (apply under one hold of the tree lock, then one wait for
// durability), and client transactions. The logic under the tree lock is
// kv::KvSpace (engine/kv/kv_space.h).
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

absl::StatusOr<KeyValue> StoreImpl::GetItem(uint64_t subvol, absl::string_view key,
                                            uint64_t max_value_load, uint64_t* revision) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  if (revision != nullptr) *revision = kv_->revision();
  return kv_->Get(tree, key, max_value_load);
}

absl::StatusOr<std::string> StoreImpl::GetValue(uint64_t subvol, absl::string_view key) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));  // as GetItem: file writers change it in place
  return kv_->GetValue(tree, key);
}

absl::StatusOr<std::string> StoreImpl::LoadByTreeKey(uint64_t subvol, absl::string_view tree_key) {
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  COWKV_ASSIGN_OR_RETURN(std::string raw, tree->Get(tree_key));
  COWKV_ASSIGN_OR_RETURN(kv::ItemView item, kv::DecodeItem(tree_key, raw));
  return kv_->LoadValue(item);
}

absl::StatusOr<RangeResult> StoreImpl::Range(uint64_t subvol, const RangeRequest& req) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  RangeRequest n = req;
  COWKV_RETURN_IF_ERROR(kv::NormaliseRange(req, &n.start, &n.end));
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  return kv_->Range(tree, n, n.limit);
}

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

absl::StatusOr<uint64_t> StoreImpl::ApplyLocked(uint64_t subvol, uint64_t read_revision,
                                                const kv::ReadSet& reads, kv::KvWriteSet& ws) {
  const uint64_t before = kv_->revision();
  absl::StatusOr<uint64_t> rev = kv_->Apply(
      subvol, [&] { return WritableTree(subvol); }, read_revision, reads, ws);
  COWKV_DCHECK(!rev.ok() || *rev >= before);
  if (rev.ok() && *rev > before) ++durable_seq_;  // a change the next log sync covers
  return rev;
}

absl::StatusOr<uint64_t> StoreImpl::PutInlineLocked(uint64_t subvol, absl::string_view key,
                                                    absl::string_view value) {
  COWKV_DCHECK(value.size() <= max_value_size());
  const uint64_t before = kv_->revision();
  COWKV_ASSIGN_OR_RETURN(Tree * tree, WritableTree(subvol));
  if (lessor_->PutNeedsApply(subvol, key)) {
    // Leases: the key may be attached to one, which this put detaches.
    kv::KvWriteSet ws;
    kv::BufferPut(&ws, key, value);
    return ApplyLocked(subvol, 0, kv::ReadSet{}, ws);
  }
  absl::StatusOr<uint64_t> rev = kv_->PutInline(subvol, tree, key, value);
  if (rev.ok() && *rev > before) ++durable_seq_;  // as ApplyLocked
  return rev;
}

void StoreImpl::RunInWriteGroup(GroupWrite* w) {
  write_group_.Run(w, [this](const std::vector<GroupWrite*>& batch) { RunWriteBatch(batch); });
}

// The leader's part: every write of the batch in one hold of the tree lock,
// then one wait for durability for the durable ones.
void StoreImpl::RunWriteBatch(const std::vector<GroupWrite*>& batch) {
  uint64_t durable_point = 0;
  {
    absl::WriterMutexLock l(&mu_);
    const uint64_t heads_before = txn_->pending_ref_heads();
    for (GroupWrite* g : batch) {
      g->before = kv_->revision();
      kv_->set_no_history(g->no_history, g->drop_history);
      g->rev = (*g->apply)();
      kv_->set_no_history(false, false);
      // A durable call waits for everything applied so far, also when it
      // changed nothing itself: its answer (0 keys deleted, a failed
      // compare) reflects async writes before it, which must survive a
      // crash once it returns (kv_gen_test: 'put a A; del b A;
      // delrange [b,+inf) D'). With nothing pending the wait is free.
      if (g->durable && g->rev.ok()) {
        if (g->defer) {
          g->point = durable_seq_;
        } else {
          durable_point = std::max(durable_point, durable_seq_);
        }
      }
    }
    const ThrottleSample sample = PayDelayedRefsLocked(heads_before, txn_->ref_counts());
    for (GroupWrite* g : batch) g->throttle = sample;
  }
  const absl::Status synced = durable_point > 0 ? WaitDurable(durable_point) : absl::OkStatus();
  for (GroupWrite* g : batch) g->durable_status = synced;
}

absl::StatusOr<uint64_t> StoreImpl::KvWrite(const std::function<absl::StatusOr<uint64_t>()>& apply,
                                            Durability d, uint64_t* defer_point) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  for (int attempt = 0;; ++attempt) {
    GroupWrite w;
    w.apply = &apply;
    w.durable = Resolve(d) == Durability::kDurable;
    w.defer = defer_point != nullptr;
    // Space beats history: a write that found no space after a commit
    // compacts the subvolume's history and goes without history entries
    // (KvSpace::set_no_history), then once more after a commit returned
    // what the compaction freed (without compacting again: what that CoWs
    // would take the room the commit gave back).
    w.no_history = attempt >= 2;
    w.drop_history = attempt == 2;
    RunInWriteGroup(&w);
    if (absl::IsResourceExhausted(w.rev.status()) && !IsLimitError(w.rev.status()) && attempt < 3) {
      // Space freed in this generation is pinned until it commits.
      if (attempt != 1) COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kSpace));
      continue;
    }
    // Also for a durable call that fails or changes nothing: its answer
    // reflects the writes before it (see RunWriteBatch).
    if (defer_point != nullptr) *defer_point = w.durable ? w.point : 0;
    COWKV_RETURN_IF_ERROR(w.rev.status());
    const bool changed = *w.rev > w.before;
    if (w.durable && !w.defer) {
      COWKV_RETURN_IF_ERROR(w.durable_status);  // also a call that changed nothing
    }
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
    COWKV_DCHECK(d->len >= value->size());  // the value's sectors, rounded up
    kv::ExtentRef ref{d->bytenr, d->len, value->size(), Crc32c(value->data(), value->size())};
    (*extents)[key] = ref;  // released with the others if anything fails
    COWKV_RETURN_IF_ERROR(device_->WriteAt(ref.bytenr, value->data(), value->size()));
  }
  return absl::OkStatus();
}

void StoreImpl::ReleaseUnusedExtents(const kv::KvWriteSet& ws) {
  absl::WriterMutexLock l(&mu_);
  for (const auto& [key, ref] : ws.extents) {
    if (ws.used.count(key) == 0) txn_->ReleaseUnusedData({ref.bytenr, ref.disk_len});
  }
}

absl::StatusOr<uint64_t> StoreImpl::KvWriteSetWrite(
    kv::KvWriteSet* ws, const std::function<absl::StatusOr<uint64_t>()>& apply, Durability d,
    uint64_t* defer_point) {
  absl::Status s = PrepareExtents(&ws->writes, &ws->extents);
  absl::StatusOr<uint64_t> rev =
      s.ok() ? KvWrite(apply, d, defer_point) : absl::StatusOr<uint64_t>(s);
  if (!ws->extents.empty()) ReleaseUnusedExtents(*ws);
  return rev;
}

absl::StatusOr<uint64_t> StoreImpl::Put(uint64_t subvol, absl::string_view key,
                                        absl::string_view value, Durability d,
                                        uint64_t* defer_point) {
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  COWKV_RETURN_IF_ERROR(kv::ValidateValue(value));
  if (value.size() <= max_value_size()) {
    return KvWrite([&] { return PutInlineLocked(subvol, key, value); }, d, defer_point);
  }
  kv::KvWriteSet ws;
  kv::BufferPut(&ws, key, value);
  return KvWriteSetWrite(
      &ws, [&] { return ApplyLocked(subvol, 0, kv::ReadSet{}, ws); }, d, defer_point);
}

absl::StatusOr<uint64_t> StoreImpl::Delete(uint64_t subvol, absl::string_view key, Durability d,
                                           uint64_t* defer_point) {
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  kv::KvWriteSet ws;
  kv::BufferDelete(&ws, key);
  const std::string tk = kv::TreeKey(key);
  bool found = true;
  COWKV_ASSIGN_OR_RETURN(uint64_t rev, KvWrite(
                                           [&]() -> absl::StatusOr<uint64_t> {
                                             COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
                                             absl::Status got = tree->Get(tk).status();
                                             if (absl::IsNotFound(got)) {
                                               found = false;
                                               return kv_->revision();
                                             }
                                             COWKV_RETURN_IF_ERROR(got);
                                             return ApplyLocked(subvol, 0, kv::ReadSet{}, ws);
                                           },
                                           d, defer_point));
  // A missing key is NOT_FOUND, even on a full device; a durable delete
  // answers it once the state it saw (async writes before it) is durable,
  // as a durable Txn whose compare failed does.
  if (!found) return absl::NotFoundError("key not found");
  return rev;
}

absl::StatusOr<TxnResponse> StoreImpl::Txn(uint64_t subvol, const TxnRequest& req,
                                           uint64_t* defer_point) {
  for (const Compare& c : req.compare) COWKV_RETURN_IF_ERROR(kv::ValidateKey(c.key));
  COWKV_RETURN_IF_ERROR(kv::ValidateTxnOps(req.success));
  COWKV_RETURN_IF_ERROR(kv::ValidateTxnOps(req.failure));
  // Large values of either branch go to data extents before the lock; the
  // branch not taken releases its own.
  kv::KvWriteSet branches[2];
  for (int b = 0; b < 2; ++b) {
    for (const TxnOp& op : b == 0 ? req.success : req.failure) {
      if (op.type == TxnOp::Type::kPut) kv::BufferPut(&branches[b], op.key, op.value);
    }
  }
  absl::Status prepared = PrepareExtents(&branches[0].writes, &branches[0].extents);
  if (prepared.ok()) prepared = PrepareExtents(&branches[1].writes, &branches[1].extents);
  TxnResponse resp;
  absl::StatusOr<uint64_t> rev =
      prepared.ok()
          ? KvWrite(
                [&]() -> absl::StatusOr<uint64_t> {
                  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
                  const uint64_t before = kv_->revision();
                  COWKV_ASSIGN_OR_RETURN(
                      resp, kv_->Txn(
                                subvol, tree, [&] { return WritableTree(subvol); }, req, branches));
                  if (resp.revision > before) ++durable_seq_;
                  return resp.revision;
                },
                req.durability, defer_point)
          : absl::StatusOr<uint64_t>(prepared);
  for (const kv::KvWriteSet& b : branches) {
    if (!b.extents.empty()) ReleaseUnusedExtents(b);
  }
  COWKV_RETURN_IF_ERROR(rev.status());
  return resp;
}

absl::StatusOr<std::unique_ptr<KvTransaction>> StoreImpl::BeginTransaction(uint64_t subvol) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  auto state = std::make_unique<KvTxnState>();
  state->subvol = subvol;
  {
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(TreeFor(subvol).status());
    state->read_revision = kv_->revision();
    kv_->OpenTxn();
    ++open_txns_;
  }
  return std::unique_ptr<KvTransaction>(new KvTransaction(this, std::move(state)));
}

void StoreImpl::TxnFinish(KvTxnState* t) {
  if (t->finished) return;
  t->finished = true;
  absl::WriterMutexLock l(&mu_);
  kv_->CloseTxn();
  COWKV_CHECK(open_txns_ > 0);
  --open_txns_;
}

absl::StatusOr<KeyValue> StoreImpl::TxnGet(KvTxnState* t, absl::string_view key) {
  COWKV_RETURN_IF_ERROR(t->CheckActive());
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
    if (kv::InRange(key, s, e)) return absl::NotFoundError("key deleted in this transaction");
  }
  t->reads.keys.emplace_back(t->subvol, std::string(key));
  // At the read revision, from the history when the key changed since: no
  // eager abort (a conflict is found at Commit, for a transaction that
  // writes); OUT_OF_RANGE only if the history no longer keeps it.
  absl::StatusOr<KeyValue> kv = GetItemAt(t->subvol, key, t->read_revision);
  if (kv.ok() &&
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kTxnReadsLatest) {
    kv = GetItem(t->subvol, key);  // the planted bug: the latest value
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
    for (auto it = merged.lower_bound(s); it != merged.end() && kv::InRange(it->first, s, e);) {
      it = merged.erase(it);
    }
  }
  for (auto it = t.ws.writes.lower_bound(n.start);
       it != t.ws.writes.end() && kv::InRange(it->first, n.start, n.end); ++it) {
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
  COWKV_RETURN_IF_ERROR(t->CheckActive());
  RangeRequest n = req;
  COWKV_RETURN_IF_ERROR(kv::NormaliseRange(req, &n.start, &n.end));
  bool overlap = false;
  for (auto it = t->ws.writes.lower_bound(n.start); it != t->ws.writes.end(); ++it) {
    overlap = kv::InRange(it->first, n.start, n.end);
    break;
  }
  for (const auto& [s, e] : t->ws.delete_ranges) {
    overlap = overlap || ((n.end.empty() || s < n.end) && (e.empty() || n.start < e));
  }
  RangeResult r;
  {
    absl::ReaderMutexLock l(&mu_);
    COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(t->subvol));
    absl::ReaderMutexLock tl(TreeLock(t->subvol));
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
    // At the read revision: from the history if anything changed since.
    COWKV_ASSIGN_OR_RETURN(
        r, kv_->RangeAtRevision(tree, scan, t->read_revision, overlap ? 0 : n.limit, &cut));
    if (overlap && cut) {
      return LimitError(
          absl::StrCat("range overlapping this transaction's own writes reads more than ",
                       kOverlapScanBytes, " bytes; narrow it, or read it before writing into it"));
    }
  }
  for (const KeyValue& kv : r.kvs) COWKV_DCHECK(kv.mod_revision <= t->read_revision);
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
  COWKV_RETURN_IF_ERROR(t->CheckActive());
  kv::KvWriteSet ws = std::move(t->ws);
  absl::StatusOr<uint64_t> rev;
  if (ws.empty()) {
    // Read-only: every read was at the read revision (from the history),
    // so the transaction saw exactly that revision's state: it commits,
    // serialized at its read revision, whatever was written since.
    rev = t->read_revision;
  } else {
    rev = KvWriteSetWrite(
        &ws, [&] { return ApplyLocked(t->subvol, t->read_revision, t->reads, ws); }, d);
  }
  TxnFinish(t);
  return rev;
}

}  // namespace cowkv
