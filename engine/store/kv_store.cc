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

bool Retryable(const absl::Status& s) { return absl::IsAborted(s) || absl::IsOutOfRange(s); }

}  // namespace

// ---- Reads ------------------------------------------------------------------------

absl::StatusOr<KeyValue> StoreImpl::GetItem(uint64_t subvol, absl::string_view key,
                                           uint64_t max_value_load) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  return kv_->Get(tree, key, max_value_load);
}

absl::StatusOr<std::string> StoreImpl::LoadByTreeKey(uint64_t subvol, absl::string_view tree_key) {
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
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
  return kv_->Range(tree, n, n.limit);
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

absl::StatusOr<uint64_t> StoreImpl::ApplyLocked(uint64_t subvol, uint64_t read_revision,
                                                const kv::ReadSet& reads, kv::KvWriteSet& ws) {
  const uint64_t before = kv_->revision();
  absl::StatusOr<uint64_t> rev =
      kv_->Apply(subvol, [&] { return WritableTree(subvol); }, read_revision, reads, ws);
  if (rev.ok() && *rev > before) ++durable_seq_;  // a change the next log sync covers
  return rev;
}

absl::Status StoreImpl::ConflictOf(const KeyValue& kv, uint64_t read_revision) {
  return kv_->Conflict(kv, read_revision);  // counts with an atomic: no lock
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
  const absl::Status synced = durable_point > 0 ? WaitDurable(durable_point) : absl::OkStatus();
  for (GroupWrite* g : batch) g->durable_status = synced;
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

void StoreImpl::ReleaseUnusedExtents(const kv::KvWriteSet& ws) {
  absl::WriterMutexLock l(&mu_);
  for (const auto& [key, ref] : ws.extents) {
    if (ws.used.count(key) == 0) txn_->ReleaseUnusedData({ref.bytenr, ref.disk_len});
  }
}

absl::StatusOr<uint64_t> StoreImpl::KvWriteSetWrite(
    kv::KvWriteSet* ws, const std::function<absl::StatusOr<uint64_t>()>& apply, Durability d) {
  absl::Status s = PrepareExtents(&ws->writes, &ws->extents);
  absl::StatusOr<uint64_t> rev = s.ok() ? KvWrite(apply, d) : absl::StatusOr<uint64_t>(s);
  if (!ws->extents.empty()) ReleaseUnusedExtents(*ws);
  return rev;
}

absl::Status StoreImpl::Put(uint64_t subvol, absl::string_view key, absl::string_view value,
                            Durability d) {
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  COWKV_RETURN_IF_ERROR(kv::ValidateValue(value));
  kv::KvWriteSet ws;
  kv::BufferPut(&ws, key, value);
  return KvWriteSetWrite(&ws, [&] { return ApplyLocked(subvol, 0, kv::ReadSet{}, ws); }, d)
      .status();
}

absl::Status StoreImpl::Delete(uint64_t subvol, absl::string_view key, Durability d) {
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  kv::KvWriteSet ws;
  kv::BufferDelete(&ws, key);
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

absl::StatusOr<TxnResponse> StoreImpl::Txn(uint64_t subvol, const TxnRequest& req) {
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
      prepared.ok() ? KvWrite(
                          [&]() -> absl::StatusOr<uint64_t> {
                            COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
                            const uint64_t before = kv_->revision();
                            COWKV_ASSIGN_OR_RETURN(
                                resp, kv_->Txn(subvol, tree, [&] { return WritableTree(subvol); },
                                               req, branches));
                            if (resp.revision > before) ++durable_seq_;
                            return resp.revision;
                          },
                          req.durability)
                    : absl::StatusOr<uint64_t>(prepared);
  for (const kv::KvWriteSet& b : branches) {
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
  --open_txns_;
}

namespace {
absl::Status CheckActive(const KvTxnState* t) {
  if (t->finished) return absl::FailedPreconditionError("transaction already committed or aborted");
  return absl::OkStatus();
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
    if (kv::InRange(key, s, e)) return absl::NotFoundError("key deleted in this transaction");
  }
  t->reads.keys.emplace_back(t->subvol, std::string(key));
  absl::StatusOr<KeyValue> kv = GetItem(t->subvol, key);
  if (kv.ok() && kv->mod_revision > t->read_revision) return ConflictOf(*kv, t->read_revision);
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
  COWKV_RETURN_IF_ERROR(CheckActive(t));
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
    COWKV_ASSIGN_OR_RETURN(r, kv_->Range(tree, scan, overlap ? 0 : n.limit, &cut));
    if (overlap && cut) {
      return LimitError(absl::StrCat(
          "range overlapping this transaction's own writes reads more than ", kOverlapScanBytes,
          " bytes; narrow it, or read it before writing into it"));
    }
  }
  for (const KeyValue& kv : r.kvs) {
    if (kv.mod_revision > t->read_revision) return ConflictOf(kv, t->read_revision);
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
  kv::KvWriteSet ws = std::move(t->ws);
  absl::StatusOr<uint64_t> rev;
  if (ws.empty()) {
    // Read-only: valid if nothing it read changed; nothing to apply.
    absl::Status v;
    {
      absl::ReaderMutexLock l(&mu_);
      v = kv_->Validate(t->read_revision, t->reads);
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
    COWKV_ASSIGN_OR_RETURN(LogSyncer::Outcome o, syncer_->WaitDurable(point));
    if (o == LogSyncer::Outcome::kDurable) return absl::OkStatus();
    // The log cannot take it: an engine commit makes everything durable.
    COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kLogFull));
  }
}

absl::StatusOr<std::optional<LogSyncer::Synced>> StoreImpl::RunLogSync() {
  absl::MutexLock ll(&log_mu_);
  std::unique_ptr<log::LogManager::SyncBatch> batch;
  uint64_t rev, base, point;
  {
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(txn_->fatal());
    if (log_->needs_full_commit()) return std::nullopt;
    rev = kv_->revision();
    point = durable_seq_;
    base = log_->chain_base();
    absl::StatusOr<std::unique_ptr<log::LogManager::SyncBatch>> p = log_->PrepareSync(rev);
    if (!p.ok()) return std::nullopt;
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
    if (!w.ok()) return std::nullopt;
  }
  return LogSyncer::Synced{point, base};
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
  kv::KvOp op{e.key, std::nullopt, {}, {}};
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
  kv::BufferPut(&state_->ws, key, value);
  return absl::OkStatus();
}
absl::Status KvTransaction::Delete(absl::string_view key) {
  COWKV_RETURN_IF_ERROR(CheckActive(state_.get()));
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  kv::BufferDelete(&state_->ws, key);
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
