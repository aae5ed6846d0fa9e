#include "cowkv/store.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "cowkv/device.h"
#include "engine/store/store_impl.h"

namespace cowkv {

// ---- Iterator -------------------------------------------------------------------

// Iterates the KV key space of one subvolume tree: tree keys 'k' + key,
// values behind a KV item header (checked, so a corrupt header ends the
// iteration with DATA_LOSS instead of returning garbage).
class Iterator::Impl {
 public:
  using Loader = std::function<absl::StatusOr<std::string>(absl::string_view tree_key)>;
  Impl(absl::Mutex* mu, Tree* tree, Loader load) : mu_(mu), it_(tree), load_(std::move(load)) {}
  bool Valid() const { return valid_; }
  // After every move, without the lock: inside the key space? a sane item?
  // A value in a data extent is loaded through the store (under its lock,
  // from the key's current item).
  void Settle() {
    valid_ = it_.Valid() && kv::IsKvTreeKey(it_.key());
    if (!valid_) return;
    absl::StatusOr<kv::ItemView> item = kv::DecodeItem(it_.key(), it_.value());
    if (!item.ok()) return Fail(item.status());
    if (!item->in_extent) {
      value_ = item->value;
      return;
    }
    absl::StatusOr<std::string> loaded = load_(it_.key());
    if (absl::IsNotFound(loaded.status())) {
      return Fail(absl::AbortedError("the key was deleted while iterating; seek again"));
    }
    if (!loaded.ok()) return Fail(loaded.status());
    storage_ = *std::move(loaded);
    value_ = storage_;
  }
  void Fail(absl::Status s) {
    valid_ = false;
    status_ = std::move(s);
  }
  absl::Mutex* mu_;
  TreeIterator it_;
  Loader load_;
  bool valid_ = false;
  absl::string_view value_;
  std::string storage_;
  absl::Status status_;
};

Iterator::Iterator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Iterator::~Iterator() = default;
bool Iterator::Valid() const { return impl_->Valid(); }
void Iterator::SeekToFirst() {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    impl_->it_.Seek(std::string(1, kv::kKvPrefix));
  }
  impl_->Settle();
}
void Iterator::SeekToLast() {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    impl_->it_.SeekForPrev(std::string(1, kv::kKvPrefixEnd));
  }
  impl_->Settle();
}
void Iterator::Seek(absl::string_view key) {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    impl_->it_.Seek(kv::TreeKey(key));
  }
  impl_->Settle();
}
void Iterator::SeekForPrev(absl::string_view key) {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    impl_->it_.SeekForPrev(kv::TreeKey(key));
  }
  impl_->Settle();
}
void Iterator::Next() {
  if (!impl_->it_.TryFastNext()) {
    absl::ReaderMutexLock l(impl_->mu_);
    impl_->it_.Next();
  }
  impl_->Settle();
}
void Iterator::Prev() {
  if (!impl_->it_.TryFastPrev()) {
    absl::ReaderMutexLock l(impl_->mu_);
    impl_->it_.Prev();
  }
  impl_->Settle();
}
absl::string_view Iterator::key() const { return kv::UserKey(impl_->it_.key()); }
absl::string_view Iterator::value() const { return impl_->value_; }
absl::Status Iterator::status() const {
  return impl_->status_.ok() ? impl_->it_.status() : impl_->status_;
}

std::unique_ptr<Iterator> StoreImpl::NewIterator(uint64_t subvol) {
  Tree* tree;
  {
    absl::ReaderMutexLock l(&mu_);
    tree = txn_->fs_tree(subvol);  // subvolume trees live as long as the store
  }
  COWKV_CHECK(tree != nullptr);
  return std::make_unique<Iterator>(std::make_unique<Iterator::Impl>(
      &mu_, tree, [this, subvol](absl::string_view tk) { return LoadByTreeKey(subvol, tk); }));
}

// ---- Transaction ----------------------------------------------------------------

Transaction::~Transaction() { End(); }

absl::Status Transaction::Put(absl::string_view key, absl::string_view value) {
  if (ended_) return absl::FailedPreconditionError("transaction handle already ended");
  return store_->HandlePut(key, value);
}

absl::Status Transaction::Delete(absl::string_view key) {
  if (ended_) return absl::FailedPreconditionError("transaction handle already ended");
  return store_->HandleDelete(key);
}

absl::StatusOr<std::string> Transaction::Get(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(KeyValue kv, store_->GetItem(format::kDefaultTreeId, key));
  return std::move(kv.value);
}

void Transaction::End() {
  if (ended_) return;
  ended_ = true;
  store_->EndHandle();
}

// ---- StoreImpl ------------------------------------------------------------------

StoreImpl::StoreImpl(BlockDevice* device, std::unique_ptr<BlockDevice> owned,
                     const Options& options, std::unique_ptr<TxnManager> txn)
    : device_(device),
      owned_device_(std::move(owned)),
      options_(options),
      nodesize_(txn->nodesize()),
      fs_options_(FsOptionsFromStore()),
      txn_(std::move(txn)) {}

absl::Status StoreImpl::Init() {
  COWKV_ASSIGN_OR_RETURN(log::Recovered r, log::LogManager::Recover(device_, txn_->superblock()));
  {
    absl::MutexLock cl(&commit_mu_);
    absl::WriterMutexLock l(&mu_);
    const format::Superblock& sb = txn_->superblock();
    subvols_ = std::make_unique<Subvolumes>(txn_.get());
    COWKV_RETURN_IF_ERROR(subvols_->Load());
    log_ = std::make_unique<log::LogManager>(txn_.get(), options_.log_max_pending_keys);
    kv_ = std::make_unique<kv::KvSpace>(txn_.get(), log_.get(), device_,
                                        options_.conflict_window_keys,
                                        std::max(sb.revision, r.revision));
    if (r.root_blocks == 0) {
      if (!options_.read_only) COWKV_RETURN_IF_ERROR(log_->ContinueChain(sb));
    } else {
      COWKV_RETURN_IF_ERROR(ReplayLog(r));
    }
  }
  {
    syncer_ = std::make_unique<LogSyncer>([this] { return RunLogSync(); },
                                          txn_->superblock().generation);
  }
  if (r.root_blocks > 0 && !options_.read_only) {
    // The replayed state becomes an engine commit; the chain is retired.
    COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kExplicit));
  }
  if (options_.commit_interval_ms > 0 && !options_.read_only) {
    committer_ = std::thread([this] { CommitterLoop(); });
  }
  if (options_.background_cleaner && !options_.read_only) {
    cleaner_work_ = subvols_->HasDeadRoots();  // resume a deletion a crash interrupted
    cleaner_ = std::thread([this] { CleanerLoop(); });
  }
  return absl::OkStatus();
}

StoreImpl::~StoreImpl() { Close().IgnoreError(); }

absl::Status StoreImpl::CheckOpen() const {
  if (closed_.load(std::memory_order_acquire)) {
    return absl::FailedPreconditionError("store is closed");
  }
  return absl::OkStatus();
}

void StoreImpl::CommitterLoop() {
  absl::MutexLock l(&handles_mu_);
  for (;;) {
    handles_mu_.AwaitWithTimeout(
        absl::Condition(
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

absl::Status StoreImpl::Close() {
  if (closed_.load(std::memory_order_acquire)) return absl::OkStatus();
  {
    absl::MutexLock l(&handles_mu_);
    stop_ = true;
  }
  if (committer_.joinable()) committer_.join();
  if (cleaner_.joinable()) cleaner_.join();
  absl::Status s;
  if (!options_.read_only) s = Commit(CommitTrigger::kClose);
  closed_.store(true, std::memory_order_release);
  return s;
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

absl::StatusOr<Tree*> StoreImpl::TreeFor(uint64_t tree_id) {
  Tree* tree = txn_->fs_tree(tree_id);
  if (tree == nullptr) return absl::NotFoundError(absl::StrCat("no subvolume with id ", tree_id));
  return tree;
}

// A write through an engine Transaction handle: a KV write of its own
// revision, outside the log (see Transaction in store.h).
absl::Status StoreImpl::WriteOnce(absl::string_view key, const absl::string_view* value) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  if (value != nullptr) COWKV_RETURN_IF_ERROR(kv::ValidateValue(*value));
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

absl::StatusOr<uint64_t> StoreImpl::ManageSubvolumes(
    const std::function<absl::StatusOr<uint64_t>(Subvolumes*)>& op, bool commit_first,
    TxnManager::WriteKind kind) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  absl::MutexLock cl(&commit_mu_);
  absl::MutexLock ll(&log_mu_);  // no log sync runs meanwhile (CommitLocked)
  absl::MutexLock hl(&handles_mu_);
  handles_mu_.Await(absl::Condition(+[](bool* wanted) { return !*wanted; }, &commit_wanted_));
  commit_wanted_ = true;
  handles_mu_.Await(absl::Condition(+[](int* n) { return *n == 0; }, &open_handles_));
  absl::StatusOr<uint64_t> id;
  {
    absl::WriterMutexLock l(&mu_);
    absl::Status s = commit_first ? CommitLocked(CommitTrigger::kExplicit) : absl::OkStatus();
    if (s.ok()) s = txn_->ReserveForWrite(txn_->fs_tree(format::kDefaultTreeId), kind);
    id = s.ok() ? op(subvols_.get()) : absl::StatusOr<uint64_t>(s);
    if (id.ok()) s = CommitLocked(CommitTrigger::kExplicit);
    if (!s.ok()) id = s;
  }
  commit_wanted_ = false;
  return id;
}

absl::Status StoreImpl::DeleteSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(ManageSubvolumes(
                            [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                              COWKV_ASSIGN_OR_RETURN(uint64_t id, t->Lookup(name));
                              COWKV_RETURN_IF_ERROR(t->Delete(id));
                              ForgetFsState(id);
                              return id;
                            },
                            false, TxnManager::WriteKind::kDelete)
                            .status());
  absl::MutexLock hl(&handles_mu_);
  cleaner_work_ = true;
  return absl::OkStatus();
}

absl::StatusOr<int> StoreImpl::CleanerBatch(int max_steps) {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> h, Begin());
  absl::StatusOr<int> steps;
  {
    absl::WriterMutexLock l(&mu_);
    steps = subvols_->CleanDeadRoots(max_steps);
    if (steps.ok()) cleaner_steps_ += *steps;
    if (steps.ok() && *steps > 0) drop_epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  h->End();
  if (absl::IsResourceExhausted(steps.status())) {
    // The drop needs a little space for CoW; what it freed is pinned.
    COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kSpace));
    return 0;
  }
  if (steps.ok()) {
    uint64_t dirty;
    {
      absl::ReaderMutexLock l(&mu_);
      dirty = txn_->dirty_bytes();
    }
    MaybeCommitForDirtyBytes(dirty);
  }
  return steps;
}

void StoreImpl::CleanerLoop() {
  constexpr int kBatch = 256;  // child pointers per lock hold
  for (;;) {
    {
      absl::MutexLock hl(&handles_mu_);
      handles_mu_.Await(absl::Condition(
          +[](StoreImpl* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->stop_ || s->cleaner_work_; },
          this));
      if (stop_) return;
    }
    absl::StatusOr<int> steps = CleanerBatch(kBatch);
    bool more;
    {
      absl::ReaderMutexLock l(&mu_);
      more = subvols_->HasDeadRoots();
    }
    if (!steps.ok() || !more) {
      absl::MutexLock hl(&handles_mu_);
      cleaner_work_ = more && steps.ok();
      if (!steps.ok()) {
        // Retry later (e.g. after other deletions free space); not busily.
        handles_mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(1));
        cleaner_work_ = true;
      }
    }
  }
}

absl::Status StoreImpl::DropDeletedSubvolumes(uint64_t max_steps) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  uint64_t done = 0;
  for (;;) {
    {
      absl::ReaderMutexLock l(&mu_);
      if (!subvols_->HasDeadRoots()) break;
    }
    if (max_steps != 0 && done >= max_steps) break;
    int batch = max_steps == 0 ? 256 : static_cast<int>(std::min<uint64_t>(256, max_steps - done));
    COWKV_ASSIGN_OR_RETURN(int steps, CleanerBatch(batch));
    done += steps;
  }
  return Commit(CommitTrigger::kExplicit);
}

namespace {
SubvolumeInfo ToSubvolumeInfo(const SubvolInfo& s) {
  SubvolumeInfo out;
  out.id = s.id;
  out.name = s.name;
  out.parent_id = s.parent_id;
  out.generation = s.generation;
  out.last_snapshot = s.last_snapshot;
  out.created_unix_ms = s.ctime_ms;
  out.read_only = s.flags & format::kRootFlagReadOnly;
  return out;
}
}  // namespace

absl::StatusOr<SubvolumeInfo> StoreImpl::ShowSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(uint64_t id, subvols_->Lookup(name));
  COWKV_ASSIGN_OR_RETURN(SubvolInfo s, subvols_->Get(id));
  return ToSubvolumeInfo(s);
}

std::vector<SubvolumeInfo> StoreImpl::ListSubvolumes() {
  std::vector<SubvolumeInfo> out;
  absl::ReaderMutexLock l(&mu_);
  for (const SubvolInfo& s : subvols_->List()) out.push_back(ToSubvolumeInfo(s));
  return out;
}

absl::StatusOr<SubvolumeInfo> StoreImpl::CreateSubvolume(absl::string_view name) {
  COWKV_ASSIGN_OR_RETURN(uint64_t id,
                         ManageSubvolumes([&](Subvolumes* t) { return t->Create(name); }, false));
  (void)id;
  return ShowSubvolume(name);
}

absl::StatusOr<SubvolumeInfo> StoreImpl::CreateSnapshot(absl::string_view source,
                                                        absl::string_view name, bool read_only) {
  COWKV_RETURN_IF_ERROR(ValidateSubvolName(name));
  COWKV_ASSIGN_OR_RETURN(uint64_t id, ManageSubvolumes(
                                          [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                                            COWKV_ASSIGN_OR_RETURN(uint64_t src, t->Lookup(source));
                                            snapshot_epoch_.fetch_add(1, std::memory_order_acq_rel);
                                            return t->Snapshot(src, name, read_only);
                                          },
                                          true));
  (void)id;
  return ShowSubvolume(name);
}

absl::Status StoreImpl::RenameSubvolume(absl::string_view name, absl::string_view new_name) {
  return ManageSubvolumes(
             [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
               COWKV_ASSIGN_OR_RETURN(uint64_t id, t->Lookup(name));
               COWKV_RETURN_IF_ERROR(t->Rename(id, new_name));
               return id;
             },
             false)
      .status();
}

absl::StatusOr<std::unique_ptr<Subvolume>> StoreImpl::OpenSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(uint64_t id, subvols_->Lookup(name));
  return std::unique_ptr<Subvolume>(new Subvolume(this, id));
}

void StoreImpl::Throttle(const ThrottleSample& sample) {
  const uint64_t heads = sample.heads, dirty = sample.dirty, updates = sample.updates;
  auto wait_for_commit = [&](CommitTrigger why) {
    absl::Time start = absl::Now();
    Commit(why).IgnoreError();
    throttle_waits_.fetch_add(1, std::memory_order_relaxed);
    throttle_wait_us_.fetch_add(absl::ToInt64Microseconds(absl::Now() - start),
                                std::memory_order_relaxed);
  };
  if (options_.throttle_policy == Options::ThrottlePolicy::kReservedBytes) {
    if (dirty >= options_.throttle_dirty_bytes) {
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

ThrottleSample StoreImpl::PayDelayedRefsLocked(uint64_t heads_before) {
  const uint64_t heads = txn_->pending_ref_heads();
  if (options_.throttle_policy == Options::ThrottlePolicy::kDelayedRefs &&
      heads >= options_.delayed_refs_soft && heads > heads_before) {
    const uint64_t n = std::min<uint64_t>(2 * (heads - heads_before), options_.delayed_refs_batch);
    if (txn_->RunDelayedRefBatch(static_cast<int>(n)).ok()) ++throttle_batches_;
  }
  return ThrottleSample{txn_->pending_ref_heads(), txn_->dirty_bytes(),
                        txn_->ref_updates_this_txn()};
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
  {
    absl::MutexLock hl(&handles_mu_);
    // Keep new handles out, then wait for the open ones to end.
    handles_mu_.Await(absl::Condition(+[](bool* wanted) { return !*wanted; }, &commit_wanted_));
    commit_wanted_ = true;
    handles_mu_.Await(absl::Condition(+[](int* n) { return *n == 0; }, &open_handles_));
    absl::StatusOr<std::unique_ptr<TxnManager::CommitBatch>> prepared;
    {
      absl::WriterMutexLock l(&mu_);
      if (txn_->HasChanges()) sealed_point = SealLogLocked(&retired);
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
    uint64_t point;
    absl::Status fatal;
    {
      absl::ReaderMutexLock l(&mu_);
      point = durable_seq_;
      fatal = txn_->fatal();
    }
    PublishDurable(0, point, fatal);
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
    if (s.ok()) s = AfterCommitLocked(trigger, start);
  }
  PublishDurable(gen, sealed_point, s);
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
    PublishDurable(0, durable_seq_, txn_->fatal());
    return txn_->fatal();
  }
  const auto start = std::chrono::steady_clock::now();
  std::vector<uint64_t> retired;
  const uint64_t sealed_point = SealLogLocked(&retired);
  const uint64_t gen = txn_->generation();
  absl::Status s = txn_->Commit();
  if (s.ok()) txn_->FreeLogBlocks(retired);
  if (s.ok()) s = AfterCommitLocked(trigger, start);
  PublishDurable(gen, sealed_point, s);
  return s;
}

uint64_t StoreImpl::SealLogLocked(std::vector<uint64_t>* retired) {
  log::LogAnchor anchor = log_->StartChain(txn_->generation(), retired);
  txn_->SetLogAnchor(anchor.log_root, anchor.nonce);
  txn_->SetRevision(kv_->revision());
  return durable_seq_;
}

void StoreImpl::PublishDurable(uint64_t generation, uint64_t point, const absl::Status& s) {
  if (syncer_->PublishCommit(generation, point, s) && options_.on_event) {
    EngineEvent e{EngineEvent::Kind::kReadOnly};
    e.generation = generation;
    e.detail = s.ToString();
    options_.on_event(e);
  }
}

namespace {

// Every trigger but kClose (counted as explicit); names as in Stats.
constexpr std::pair<CommitTrigger, const char*> kTriggerNames[] = {
    {CommitTrigger::kExplicit, "explicit"},       {CommitTrigger::kInterval, "interval"},
    {CommitTrigger::kDirtyBytes, "dirty_bytes"},  {CommitTrigger::kSpace, "space"},
    {CommitTrigger::kDelayedRefs, "delayed_refs"}, {CommitTrigger::kLogFull, "log_full"},
    {CommitTrigger::kFsync, "fsync"},
};

const char* TriggerName(CommitTrigger trigger) {
  if (trigger == CommitTrigger::kClose) return "close";
  for (const auto& [t, name] : kTriggerNames) {
    if (t == trigger) return name;
  }
  return "unknown";
}

}  // namespace

absl::Status StoreImpl::AfterCommitLocked(CommitTrigger trigger,
                                          std::chrono::steady_clock::time_point start) {
  // The clock stops before the paranoid check, which is not commit work.
  const CommitTrigger slot = trigger == CommitTrigger::kClose ? CommitTrigger::kExplicit : trigger;
  const auto took = std::chrono::steady_clock::now() - start;
  commit_latency_[static_cast<int>(slot)].Record(took);
  ReportIfSlow(EngineEvent::Kind::kSlowCommit, took, TriggerName(trigger));
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

void StoreImpl::ReportIfSlow(EngineEvent::Kind kind, std::chrono::steady_clock::duration took,
                             absl::string_view trigger) {
  const uint64_t micros = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(took).count());
  if (!options_.on_event || options_.slow_op_ms == 0 || micros < options_.slow_op_ms * 1000) {
    return;
  }
  EngineEvent e{kind};
  e.generation = txn_->generation();
  e.micros = micros;
  e.trigger = std::string(trigger);
  options_.on_event(e);
}

namespace {

LatencyHistogramSnapshot ToSnapshot(const LatencyRecorder::Reading& r) {
  LatencyHistogramSnapshot out;
  out.upper_bounds_seconds.reserve(LatencyRecorder::kBuckets);
  out.cumulative_counts.reserve(LatencyRecorder::kBuckets);
  uint64_t cumulative = 0;
  for (int i = 0; i < LatencyRecorder::kBuckets; ++i) {
    cumulative += r.buckets[i];
    out.upper_bounds_seconds.push_back(static_cast<double>(LatencyRecorder::UpperBoundNs(i)) *
                                       1e-9);
    out.cumulative_counts.push_back(cumulative);
  }
  out.count = r.count;
  out.sum_seconds = static_cast<double>(r.sum_ns) * 1e-9;
  COWKV_DCHECK(cumulative + r.buckets[LatencyRecorder::kBuckets] == out.count);
  return out;
}

// StoreStats' trigger names, in the order of its commits_by_* fields
// (kClose is counted as kExplicit).

}  // namespace

double LatencyHistogramSnapshot::MeanSeconds() const {
  return count == 0 ? 0 : sum_seconds / static_cast<double>(count);
}

double LatencyHistogramSnapshot::QuantileSeconds(double q) const {
  if (count == 0 || upper_bounds_seconds.empty()) return 0;
  const double rank = std::min(std::max(q, 0.0), 1.0) * static_cast<double>(count);
  uint64_t below = 0;  // observations in the buckets before i
  for (size_t i = 0; i < cumulative_counts.size(); ++i) {
    if (static_cast<double>(cumulative_counts[i]) >= rank && cumulative_counts[i] > below) {
      const double lo = i == 0 ? 0 : upper_bounds_seconds[i - 1];
      const double in_bucket = static_cast<double>(cumulative_counts[i] - below);
      return lo + (upper_bounds_seconds[i] - lo) * (rank - static_cast<double>(below)) / in_bucket;
    }
    below = cumulative_counts[i];
  }
  return upper_bounds_seconds.back();  // in the +Inf bucket
}

void StoreImpl::LatencyStatsLocked(StoreStats* s) {
  s->commit_latency.clear();
  for (const auto& [trigger, name] : kTriggerNames) {
    s->commit_latency.push_back(
        CommitLatency{name, ToSnapshot(commit_latency_[static_cast<int>(trigger)].Read())});
  }
  s->log_sync_latency = ToSnapshot(log_sync_latency_.Read());
}

namespace {

void CopyFreeSpaceShape(const TxnStats& t, StoreStats* s) {
  s->free_fragments = t.free_fragments;
  s->free_largest_bytes = t.free_largest_bytes;
  s->usable_for_4k = t.usable_for_4k;
  s->usable_for_64k = t.usable_for_64k;
  s->usable_for_1m = t.usable_for_1m;
  s->usable_for_16m = t.usable_for_16m;
}

}  // namespace

StoreStats StoreImpl::Stats() {
  absl::ReaderMutexLock l(&mu_);
  TxnStats t = txn_->Stats();
  StoreStats s;
  s.generation = t.generation;
  s.nodesize = nodesize_;
  s.total_bytes = t.total_bytes;
  s.used_bytes = t.used_bytes;
  s.free_bytes = t.free_bytes;
  s.pinned_bytes = t.pinned_bytes;
  CopyFreeSpaceShape(t, &s);
  s.commits = t.commits;
  s.commits_by_explicit = commits_by_[static_cast<int>(CommitTrigger::kExplicit)] +
                          commits_by_[static_cast<int>(CommitTrigger::kClose)];
  s.commits_by_interval = commits_by_[static_cast<int>(CommitTrigger::kInterval)];
  s.commits_by_dirty_bytes = commits_by_[static_cast<int>(CommitTrigger::kDirtyBytes)];
  s.commits_by_space = commits_by_[static_cast<int>(CommitTrigger::kSpace)];
  s.commits_by_delayed_refs = commits_by_[static_cast<int>(CommitTrigger::kDelayedRefs)];
  s.commits_by_log_full = commits_by_[static_cast<int>(CommitTrigger::kLogFull)];
  s.commits_by_fsync = commits_by_[static_cast<int>(CommitTrigger::kFsync)];
  s.throttle_batches = throttle_batches_;
  s.throttle_waits = throttle_waits_.load(std::memory_order_relaxed);
  s.throttle_wait_us = throttle_wait_us_.load(std::memory_order_relaxed);
  s.device_flushes = t.device_flushes;
  s.dirty_nodes = t.cache.dirty_nodes;
  s.dirty_bytes = t.cache.dirty_bytes;
  s.delayed_ref_heads = t.refs.heads;
  s.delayed_ref_updates = t.refs.updates;
  s.delayed_ref_runs = t.refs.runs;
  s.delayed_refs_run_total = t.refs.heads_run;
  s.cache_hits = t.cache.hits;
  s.cache_misses = t.cache.misses;
  s.cache_bytes = t.cache.clean_bytes;
  s.cache_evictions = t.cache.evictions;
  s.corruptions_detected = CorruptionsDetected();
  s.enospc_errors = t.enospc_errors;
  s.subvolumes = subvols_->List().size();
  s.deleted_subvolumes_pending = subvols_->dead_roots();
  s.cleaner_steps = cleaner_steps_;
  s.revision = kv_->revision();
  s.kv_commits = kv_->commits();
  s.durable_commits = durable_commits_.load(std::memory_order_relaxed);
  log::LogStats ls = log_->Stats();
  s.log_syncs = ls.syncs;
  s.device_flushes += ls.syncs;  // one flush per log sync
  s.log_inline_syncs = ls.inline_syncs;
  s.log_synced_keys = ls.synced_keys;
  s.log_sync_bytes = ls.sync_bytes;
  s.log_replayed_entries = replayed_entries_;
  s.kv_conflicts = kv_->conflicts();
  s.kv_too_old = kv_->too_old();
  s.kv_range_value_bytes = kv_->range_value_bytes();
  s.open_transactions = open_txns_;
  s.log_lookups = log_->Stats().lookups;
  LatencyStatsLocked(&s);
  absl::MutexLock fl(&fs_mu_);
  for (const auto& [id, st] : fs_states_) {
    const fs::FsCounters& c = st->counters;
    s.fs_fsyncs += c.fsyncs.load(std::memory_order_relaxed);
    s.fs_logged_keys += c.logged_keys.load(std::memory_order_relaxed);
    s.fs_log_updates += c.log_updates.load(std::memory_order_relaxed);
    s.fs_logged_lookups += c.logged_lookups.load(std::memory_order_relaxed);
    s.inode_cache_hits += c.inode_cache_hits.load(std::memory_order_relaxed);
    s.inode_cache_misses += c.inode_cache_misses.load(std::memory_order_relaxed);
    s.inode_cache_evictions += st->cache.evictions();
    s.fiemap_path_cache_hits += c.path_cache_hits.load(std::memory_order_relaxed);
    s.fiemap_shared_checks += c.shared_checks.load(std::memory_order_relaxed);
  }
  return s;
}

// ---- Store ------------------------------------------------------------------------

Store::Store(std::unique_ptr<StoreImpl> impl) : impl_(std::move(impl)) {}
Store::~Store() = default;

absl::Status Store::Mkfs(BlockDevice* device, const MkfsOptions& options) {
  std::string fsid = options.fsid;
  if (fsid.empty()) {
    std::random_device rd;
    std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
    fsid.resize(format::kFsidSize);
    for (char& c : fsid) c = static_cast<char>(rng());
  }
  return TxnManager::Mkfs(device, options.nodesize, options.sectorsize, fsid,
                         &Subvolumes::NameDefault);
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(BlockDevice* device, const Options& options) {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<TxnManager> txn,
                         TxnManager::Mount(device, options.node_cache_bytes));
  auto impl = std::make_unique<StoreImpl>(device, nullptr, options, std::move(txn));
  COWKV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path, const Options& options) {
  FileDeviceOptions fo;
  fo.read_only = options.read_only;
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<FileDevice> dev, FileDevice::Open(path, fo));
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<TxnManager> txn,
                         TxnManager::Mount(dev.get(), options.node_cache_bytes));
  BlockDevice* raw = dev.get();
  auto impl = std::make_unique<StoreImpl>(raw, std::move(dev), options, std::move(txn));
  COWKV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::Status Store::Close() { return impl_->Close(); }
absl::Status Store::Put(absl::string_view key, absl::string_view value, Durability d) {
  return impl_->Put(format::kDefaultTreeId, key, value, d);
}
absl::StatusOr<std::string> Store::Get(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(KeyValue kv, impl_->GetItem(format::kDefaultTreeId, key));
  return std::move(kv.value);
}
absl::Status Store::Delete(absl::string_view key, Durability d) {
  return impl_->Delete(format::kDefaultTreeId, key, d);
}
absl::StatusOr<std::unique_ptr<Subvolume>> Store::DefaultSubvolume() {
  return impl_->OpenSubvolume("default");
}
std::unique_ptr<Iterator> Store::NewIterator() { return impl_->NewIterator(format::kDefaultTreeId); }
absl::StatusOr<SubvolumeInfo> Store::CreateSubvolume(absl::string_view name) {
  return impl_->CreateSubvolume(name);
}
absl::StatusOr<SubvolumeInfo> Store::CreateSnapshot(absl::string_view source,
                                                    absl::string_view name, bool read_only) {
  return impl_->CreateSnapshot(source, name, read_only);
}
absl::Status Store::RenameSubvolume(absl::string_view name, absl::string_view new_name) {
  return impl_->RenameSubvolume(name, new_name);
}
absl::Status Store::DeleteSubvolume(absl::string_view name) {
  return impl_->DeleteSubvolume(name);
}
absl::Status Store::DropDeletedSubvolumes(uint64_t max_steps) {
  return impl_->DropDeletedSubvolumes(max_steps);
}
absl::StatusOr<SubvolumeInfo> Store::ShowSubvolume(absl::string_view name) {
  return impl_->ShowSubvolume(name);
}
std::vector<SubvolumeInfo> Store::ListSubvolumes() { return impl_->ListSubvolumes(); }
absl::StatusOr<std::unique_ptr<Subvolume>> Store::OpenSubvolume(absl::string_view name) {
  return impl_->OpenSubvolume(name);
}

absl::Status Subvolume::Put(absl::string_view key, absl::string_view value, Durability d) {
  return store_->Put(id_, key, value, d);
}
absl::StatusOr<std::string> Subvolume::Get(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(KeyValue kv, store_->GetItem(id_, key));
  return std::move(kv.value);
}
absl::StatusOr<KeyValue> Subvolume::GetItem(absl::string_view key) {
  return store_->GetItem(id_, key);
}
absl::Status Subvolume::Delete(absl::string_view key, Durability d) {
  return store_->Delete(id_, key, d);
}
absl::StatusOr<RangeResult> Subvolume::Range(const RangeRequest& req) {
  return store_->Range(id_, req);
}
std::unique_ptr<Iterator> Subvolume::NewIterator() { return store_->NewIterator(id_); }
absl::StatusOr<TxnResponse> Subvolume::Txn(const TxnRequest& req) { return store_->Txn(id_, req); }
absl::StatusOr<std::unique_ptr<KvTransaction>> Subvolume::BeginTransaction() {
  return store_->BeginTransaction(id_);
}
absl::StatusOr<std::unique_ptr<Transaction>> Store::Begin() { return impl_->Begin(); }
absl::Status Store::Commit() { return impl_->Commit(CommitTrigger::kExplicit); }
StoreStats Store::Stats() { return impl_->Stats(); }
uint32_t Store::nodesize() const { return impl_->nodesize(); }
size_t Store::max_value_size() const { return impl_->max_value_size(); }

}  // namespace cowkv
