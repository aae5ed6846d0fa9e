// The committer: the one engine Commit (btrfs's transaction commit) and
// what triggers it — the committer thread (interval), dirty bytes, space,
// delayed refs, a full log, fsync — the Transaction handles a commit waits
// for, the throttler that paces writers (seed 001), and the store's side of
// durability: one log sync (RunLogSync) for LogSyncer, and WaitDurable,
// which commits when the log syncer answers kNeedsCommit.
#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/store/store_impl.h"

namespace cowkv {

void StoreImpl::CommitterLoop() {
  absl::MutexLock l(&handles_mu_);
  for (;;) {
    handles_mu_.AwaitWithTimeout(absl::Condition(
                                     +[](StoreImpl* s) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                       return s->stop_ || s->commit_requested_;
                                     },
                                     this),
                                 absl::Milliseconds(options_.commit_interval_ms));
    if (stop_) return;
    const CommitTrigger why = commit_requested_ ? requested_trigger_ : CommitTrigger::kInterval;
    commit_requested_ = false;
    handles_mu_.Unlock();
    Commit(why).IgnoreError();
    handles_mu_.Lock();
  }
}

void StoreImpl::KickCommit(CommitTrigger why) {
  if (!committer_.joinable()) {  // no background committer: commit here
    Commit(why).IgnoreError();
    return;
  }
  absl::MutexLock l(&handles_mu_);
  commit_requested_ = true;
  requested_trigger_ = why;
}

absl::StatusOr<std::unique_ptr<Transaction>> StoreImpl::Begin() {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  absl::MutexLock l(&handles_mu_);
  handles_mu_.Await(absl::Condition(
      +[](bool* wanted) { return !*wanted; }, &commit_wanted_));
  ++open_handles_;
  uint64_t gen;
  {
    absl::ReaderMutexLock tl(&mu_);
    gen = txn_->generation();
  }
  return std::unique_ptr<Transaction>(new Transaction(this, gen));
}

void StoreImpl::EndHandle() {
  absl::MutexLock l(&handles_mu_);
  COWKV_CHECK(open_handles_ > 0);
  --open_handles_;
}

// A write through an engine Transaction handle: a KV write of its own
// revision, outside the log (see Transaction in store.h).
absl::Status StoreImpl::WriteOnce(absl::string_view key, const absl::string_view* value) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  if (value != nullptr) COWKV_RETURN_IF_ERROR(kv::ValidateValue(*value));
  if (value != nullptr && value->size() <= max_value_size()) {
    // The common put: no write set, no extent (kv::KvSpace::PutInline).
    absl::WriterMutexLock l(&mu_);
    log_->MarkFull();
    return PutInlineLocked(format::kDefaultTreeId, key, *value).status();
  }
  kv::KvWriteSet ws;
  ws.writes[std::string(key)] =
      value ? std::optional<std::string>(std::string(*value)) : std::nullopt;
  absl::Status s = PrepareExtents(&ws.writes, &ws.extents);
  if (s.ok()) {
    absl::WriterMutexLock l(&mu_);
    absl::StatusOr<Tree*> tree = TreeFor(format::kDefaultTreeId);
    s = tree.status();
    // A missing key is NOT_FOUND, even on a full device.
    if (s.ok() && value == nullptr) s = (*tree)->Get(kv::TreeKey(key)).status();
    if (s.ok()) {
      log_->MarkFull();
      s = ApplyLocked(format::kDefaultTreeId, 0, kv::ReadSet{}, ws).status();
    }
  }
  if (!ws.extents.empty()) ReleaseUnusedExtents(ws);
  return s;
}

absl::Status StoreImpl::HandlePut(absl::string_view key, absl::string_view value) {
  return WriteOnce(key, &value);
}

absl::Status StoreImpl::HandleDelete(absl::string_view key) { return WriteOnce(key, nullptr); }

void StoreImpl::Throttle(const ThrottleSample& sample) {
  const uint64_t heads = sample.heads, dirty = sample.dirty, updates = sample.updates;
  auto wait_for_commit = [&](CommitTrigger why) {
    absl::Time start = absl::Now();
    Commit(why).IgnoreError();
    throttle_waits_.fetch_add(1, std::memory_order_relaxed);
    throttle_wait_us_.fetch_add(absl::ToInt64Microseconds(absl::Now() - start),
                                std::memory_order_relaxed);
  };
  if (options_.test_hooks.throttle_policy == Options::TestHooks::ThrottlePolicy::kReservedBytes) {
    if (dirty >= options_.test_hooks.throttle_dirty_bytes) {
      wait_for_commit(CommitTrigger::kDirtyBytes);
    } else {
      MaybeCommitForDirtyBytes(dirty);
    }
    return;
  }
  if (heads >= options_.delayed_refs_hard) {
    wait_for_commit(CommitTrigger::kDelayedRefs);
    return;
  }
  if (updates >= options_.delayed_refs_commit) {
    // Kick the commit and keep writing: the committer seals this
    // generation and writes it while writers fill the next one. Only the
    // hard limit makes a writer wait.
    KickCommit(CommitTrigger::kDelayedRefs);
    return;
  }
  MaybeCommitForDirtyBytes(dirty);
}

ThrottleSample StoreImpl::PayDelayedRefsLocked(uint64_t heads_before,
                                               const TxnManager::RefCounts& after) {
  TxnManager::RefCounts now = after;
  const uint64_t heads = after.heads;
  if (options_.test_hooks.throttle_policy == Options::TestHooks::ThrottlePolicy::kDelayedRefs &&
      heads >= options_.delayed_refs_soft && heads > heads_before) {
    const uint64_t n = std::min<uint64_t>(2 * (heads - heads_before), options_.delayed_refs_batch);
    if (txn_->RunDelayedRefBatch(static_cast<int>(n)).ok()) {
      throttle_batches_.fetch_add(1, std::memory_order_relaxed);
    }
    now = txn_->ref_counts();
  }
  return ThrottleSample{now.heads, txn_->dirty_bytes(), now.updates};
}

void StoreImpl::MaybeCommitForDirtyBytes(uint64_t dirty) {
  if (options_.dirty_bytes_max == 0 || dirty < options_.dirty_bytes_max) return;
  {
    absl::MutexLock hl(&handles_mu_);
    if (open_handles_ > 0 || commit_wanted_) return;  // never stall a writer on handles
  }
  KickCommit(CommitTrigger::kDirtyBytes);
}

// A pipelined commit: the engine transaction is sealed under the tree lock,
// written to the device without it (writers carry on in the next
// generation meanwhile), and published under the lock again. commit_mu_
// keeps commits in order: generation N+1 is never sealed before N is durable.
// Sealing also starts the next log chain; the old chain's blocks are freed
// once the generation that retires them is durable.
absl::Status StoreImpl::Commit(CommitTrigger trigger) {
  if (trigger != CommitTrigger::kClose) COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return absl::OkStatus();
  absl::MutexLock cl(&commit_mu_);
  const auto start = std::chrono::steady_clock::now();  // the commit's latency starts here
  DrainDelayedRefs();
  std::unique_ptr<TxnManager::CommitBatch> batch;
  std::vector<uint64_t> retired;
  uint64_t sealed_point = 0;
  uint64_t sealed_revision = 0;
  {
    absl::MutexLock hl(&handles_mu_);
    // Keep new handles out, then wait for the open ones to end.
    handles_mu_.Await(absl::Condition(
        +[](bool* wanted) { return !*wanted; }, &commit_wanted_));
    commit_wanted_ = true;
    handles_mu_.Await(absl::Condition(
        +[](int* n) { return *n == 0; }, &open_handles_));
    absl::StatusOr<std::unique_ptr<TxnManager::CommitBatch>> prepared;
    {
      absl::WriterMutexLock l(&mu_);
      if (txn_->HasChanges()) {
        sealed_point = SealLogLocked(&retired);
        sealed_revision = kv_->revision();
      }
      prepared = txn_->PrepareCommit();
    }
    commit_wanted_ = false;  // new handles join the next generation
    if (!prepared.ok()) {
      PublishDurable(0, 0, prepared.status());
      return prepared.status();
    }
    batch = std::move(*prepared);
  }
  if (batch == nullptr) {
    // Nothing changed since the last commit, which is durable (commits are
    // serialised): so is every durability point handed out so far.
    uint64_t point, revision;
    absl::Status fatal;
    {
      absl::ReaderMutexLock l(&mu_);
      point = durable_seq_;
      revision = kv_->revision();
      fatal = txn_->fatal();
    }
    PublishDurable(0, point, fatal, revision);
    return fatal;
  }
  absl::Status written = txn_->WriteCommit(*batch);
  const uint64_t gen = batch->generation;
  { absl::MutexLock ll(&log_mu_); }  // a sync into the old chain has finished
  absl::Status s;
  {
    absl::WriterMutexLock l(&mu_);
    s = txn_->FinishCommit(std::move(batch), written);
    if (s.ok()) txn_->FreeLogBlocks(retired);
    if (s.ok()) s = AfterCommitLocked(trigger, gen, start);
  }
  PublishDurable(gen, sealed_point, s, sealed_revision);
  return s;
}

// Before sealing, the committer runs the queued delayed refs in short
// batches, dropping the tree lock between them (btrfs runs them before its
// commit's critical section too): sealing must still run whatever is left,
// but that is now little, so writers are held off only briefly. Bounded:
// writers keep adding refs meanwhile.
void StoreImpl::DrainDelayedRefs() {
  constexpr int kBatch = 128;
  constexpr int kMaxRounds = 1024;
  for (int round = 0; round < kMaxRounds; ++round) {
    absl::WriterMutexLock l(&mu_);
    if (txn_->pending_ref_heads() <= static_cast<uint64_t>(kBatch)) return;
    if (!txn_->RunDelayedRefBatch(kBatch).ok()) return;  // the commit reports it
  }
}

// Callers hold log_mu_, so no log sync is in flight.
absl::Status StoreImpl::CommitLocked(CommitTrigger trigger) {
  commit_mu_.AssertHeld();
  if (!txn_->HasChanges()) {
    PublishDurable(0, durable_seq_, txn_->fatal(), kv_->revision());
    return txn_->fatal();
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint64_t> retired;
  const uint64_t sealed_point = SealLogLocked(&retired);
  const uint64_t sealed_revision = kv_->revision();
  const uint64_t gen = txn_->generation();
  absl::Status s = txn_->Commit();
  if (s.ok()) txn_->FreeLogBlocks(retired);
  if (s.ok()) s = AfterCommitLocked(trigger, gen, start);
  PublishDurable(gen, sealed_point, s, sealed_revision);
  return s;
}

uint64_t StoreImpl::SealLogLocked(std::vector<uint64_t>* retired) {
  log::LogAnchor anchor = log_->StartChain(txn_->generation(), retired);
  txn_->SetLogAnchor(anchor.log_root, anchor.nonce);
  txn_->SetRevision(kv_->revision());
  log_base_revision_.store(kv_->revision(), std::memory_order_relaxed);  // the new chain's base
  return durable_seq_;
}

void StoreImpl::PublishDurable(uint64_t generation, uint64_t point, const absl::Status& s,
                               uint64_t revision) {
  if (s.ok() && durable_rev_ != nullptr) {
    durable_rev_->Committed(generation, revision);
  }
  if (syncer_->PublishCommit(generation, point, s) && options_.on_event) {
    EngineEvent e;
    e.kind = EngineEvent::Kind::kReadOnly;
    e.generation = generation;
    e.detail = s.ToString();
    options_.on_event(e);
  }
}

const char* TriggerName(CommitTrigger trigger) {
  if (trigger == CommitTrigger::kClose) return "close";
  for (const auto& [t, name] : kTriggerNames) {
    if (t == trigger) return name;
  }
  return "unknown";
}

absl::Status StoreImpl::AfterCommitLocked(CommitTrigger trigger, uint64_t generation,
                                          std::chrono::steady_clock::time_point start) {
  // The clock stops before the paranoid check, which is not commit work.
  const CommitTrigger slot = trigger == CommitTrigger::kClose ? CommitTrigger::kExplicit : trigger;
  const auto took = std::chrono::steady_clock::now() - start;
  commit_latency_[static_cast<int>(slot)].Record(took);
  ReportIfSlow(EngineEvent::Kind::kSlowCommit, generation, took, TriggerName(trigger));
  ++commits_by_[static_cast<int>(trigger)];
  if (options_.paranoid_checks) {
    COWKV_ASSIGN_OR_RETURN(CheckReport r, Check(device_));
    if (!r.ok()) {
      return absl::InternalError(absl::StrCat("paranoid check after commit of generation ",
                                              r.generation, ": ", r.problems.front()));
    }
  }
  return absl::OkStatus();
}

void StoreImpl::ReportIfSlow(EngineEvent::Kind kind, uint64_t generation,
                             std::chrono::steady_clock::duration took, absl::string_view trigger) {
  const uint64_t micros =
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(took).count());
  if (!options_.on_event || options_.slow_op_ms == 0 || micros < options_.slow_op_ms * 1000) {
    return;
  }
  EngineEvent e;
  e.kind = kind;
  e.generation = generation;
  e.micros = micros;
  e.trigger = std::string(trigger);
  options_.on_event(e);
}

absl::Status StoreImpl::WaitDurable(uint64_t point) {
  for (;;) {
    COWKV_ASSIGN_OR_RETURN(LogSyncer::Outcome o, syncer_->WaitDurable(point));
    if (o == LogSyncer::Outcome::kDurable) return absl::OkStatus();
    // The log cannot take it: an engine commit makes everything durable.
    COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kLogFull));
  }
}

void StoreImpl::AfterDurable(uint64_t point, std::function<void(const absl::Status&)> done) {
  if (point == 0) {
    done(absl::OkStatus());
    return;
  }
  notifier_->Add(point, std::move(done));
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
    // Without the tree lock (LogManager's file comment says why that is
    // safe): a lone durable write takes it twice, to apply and to prepare.
    log_->FinishSync(*batch, w);
    if (!w.ok()) return std::nullopt;
    log_sync_latency_.Record(elapsed);  // with FinishSync's count
    ReportIfSlow(EngineEvent::Kind::kSlowLogSync, base, elapsed, "");
  }
  durable_rev_->Synced(base, rev);  // watchers see up to `rev` once `base` is durable
  return LogSyncer::Synced{point, base};
}

}  // namespace cowkv
