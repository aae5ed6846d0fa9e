// Receive: a send stream into a hidden subvolume that becomes a visible
// read-only snapshot only once the whole stream verified.
//
// States of one ReceiveSession:
//
//   reading header --Step: kHeader, OnHeader--> receiving (hidden tree made:
//        |                                     Subvolumes::BeginReceive, committed)
//        +--Step: kResume, OnResume--> receiving (the partial receive the token names)
//        |                 receiving --Write: Step under the locks, per batch--> receiving
//        |                 receiving --Finish: kEnd verified, AdoptReceived--> done (visible)
//        +--any error, or dropped unfinished--> failed (AbortReceive: tree dropped)
//        +--the same, resumable, before kEnd--> kept (a partial receive; tree and
//                                               progress item stay, claim released)
//
//   - reading header: nothing written.
//   - receiving, resumable: each batch ends by writing the progress item
//     (format::kReceiveProgressKey) with the last record boundary outside
//     an extent, under the same locks as the records, so every engine
//     commit holds a tree and a progress item that agree; the batch that
//     meets kEnd deletes it (and a failure after that drops the tree).
//   - receiving: the tree has kRootFlagReceiving and no name; commits may
//     write it (it is ordinary metadata), but mount drops such a tree, so a
//     crash leaves nothing visible (receive_crash_test).
//   - done: the name, read-only flag and received identity were committed
//     in one engine transaction.
//
// Locks: each batch of records takes the barrier shared and the hidden
// tree's lock exclusive, as a file writer does; the parent (read-only) is
// read under the barrier alone (see send_path.cc). Creating, naming and
// dropping the tree go through ManageSubvolumes (exclusive, committing).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/lease/lease_item.h"
#include "engine/send/receiver.h"
#include "engine/send/resume_token.h"
#include "engine/send/stream_format.h"
#include "engine/store/fs_backend_impl.h"
#include "engine/store/store_impl.h"

namespace cowkv {

namespace {
// Records applied per hold of the locks.
constexpr int kRecordsPerBatch = 256;
}  // namespace

// The hidden tree (and the parent) as engine/send's receiver sees them;
// bound to the trees anew for each batch, under the locks.
class StoreImpl::ReceiveTargetImpl : public send::ReceiveTarget {
 public:
  ReceiveTargetImpl(StoreImpl* s, uint64_t id) : s_(s), id_(id) {}
  void Bind(Tree* tree, Tree* parent) {
    tree_ = tree;
    parent_ = parent;
  }

  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key) override {
    return tree_->Lookup(key);
  }
  absl::StatusOr<std::optional<std::string>> GetParent(absl::string_view key) override {
    if (parent_ == nullptr) return std::optional<std::string>();
    return parent_->Lookup(key);
  }
  absl::Status Apply(absl::string_view key, const std::optional<std::string>& value,
                     bool first_ref) override {
    FsBackendImpl be(s_, id_, tree_);
    fs::FsWrite w;
    w.key = key;
    w.value = &value;
    w.first_ref = first_ref;
    return be.Apply({w});
  }
  absl::StatusOr<format::DataRef> AllocData(uint64_t len) override {
    return s_->txn_->AllocDataExtent(len);
  }
  absl::Status WriteDataAt(const format::DataRef& d, uint64_t offset,
                           absl::string_view bytes) override {
    if (offset + bytes.size() > d.len) {
      return absl::InternalError("receive: data past the extent allocated for it");
    }
    return s_->device_->WriteAt(d.bytenr + offset, bytes.data(), bytes.size());
  }
  void ReleaseData(const format::DataRef& d) override { s_->txn_->ReleaseUnusedData(d); }

 private:
  StoreImpl* const s_;
  const uint64_t id_;
  Tree* tree_ = nullptr;
  Tree* parent_ = nullptr;
};

class StoreImpl::ReceiveSession : public ReceiveStream {
 public:
  ReceiveSession(StoreImpl* s, ReceiveOptions o)
      : s_(s), o_(std::move(o)), resumable_(o_.resumable) {}
  ~ReceiveSession() override {
    if (!finished_ && !failed_) Fail(absl::CancelledError("receive abandoned")).IgnoreError();
  }

  absl::Status Write(absl::string_view bytes) override {
    COWKV_RETURN_IF_ERROR(Usable());
    absl::Status s = rx_.Feed(bytes);
    if (s.ok()) s = Pump();
    return s.ok() ? s : Fail(s);
  }

  absl::StatusOr<ReceiveReport> Finish() override {
    COWKV_RETURN_IF_ERROR(Usable());
    absl::Status s = rx_.Finish();
    if (s.ok() && !o_.dry_run) s = Adopt();
    if (!s.ok()) return Fail(s);
    finished_ = true;
    Release();
    const send::ReceiveStats st = rx_.stats();
    report_.incremental = rx_.header().incremental();
    report_.records = st.records;
    report_.bytes = st.bytes;
    report_.items = st.items;
    report_.deletes = st.deletes;
    report_.clones = st.clones;
    report_.data_bytes = st.data_bytes;
    return report_;
  }

 private:
  absl::Status Usable() const {
    if (failed_) return absl::FailedPreconditionError("receive: already failed");
    if (finished_) return absl::FailedPreconditionError("receive: already finished");
    return absl::OkStatus();
  }
  absl::Status Pump();
  // Deletes up to kRecordsPerBatch items of the hidden tree that a stream
  // never carries — KV history and leases a local parent had (a receive
  // into the store the stream came from) — so the received subvolume has
  // none, as it would in any other store. True once none is left.
  absl::StatusOr<bool> PurgeUnsentLocked(Tree* tree);
  absl::StatusOr<send::Receiver::Event> StepBatch();
  // Resumable: writes the progress item if the boundary moved (or, at
  // kEnd, deletes it). Under the batch's locks.
  absl::Status SaveProgressLocked(bool end);
  absl::Status OnHeader();
  absl::Status OnResume();
  absl::Status FindParent(const send::StreamHeader& h);
  absl::Status Adopt();
  absl::Status Fail(absl::Status why);
  // Gives back this receive's claim on its tree and name.
  void Release() {
    if (claimed_) s_->ReleasePartial(report_.name);
    claimed_ = false;
  }

  StoreImpl* const s_;
  const ReceiveOptions o_;
  send::Receiver rx_;
  std::unique_ptr<ReceiveTargetImpl> target_;
  uint64_t hidden_ = 0;   // the tree being filled; 0 until OnHeader (and in a dry run)
  uint64_t parent_ = 0;   // the local parent (incremental streams)
  bool claimed_ = false;  // report_.name (and hidden_) are this session's in receiving_
  bool purged_ = false;   // PurgeUnsentLocked found nothing left
  bool resumable_;
  // Resumable: the last boundary met, and the one the progress item holds.
  std::optional<send::ResumePoint> clean_, saved_;
  bool progress_ok_ = true;        // no failure left item and tree disagreeing
  bool progress_removed_ = false;  // kEnd met: the item is gone
  ReceiveReport report_;
  bool finished_ = false;
  bool failed_ = false;
};

absl::Status StoreImpl::ReceiveSession::Pump() {
  for (;;) {
    send::Receiver::Event e;
    if (target_ == nullptr) {  // the header, or a dry run: nothing to lock
      COWKV_ASSIGN_OR_RETURN(e, rx_.Step());
      if (e == send::Receiver::Event::kHeader) COWKV_RETURN_IF_ERROR(OnHeader());
      if (e == send::Receiver::Event::kResume) COWKV_RETURN_IF_ERROR(OnResume());
    } else {
      COWKV_ASSIGN_OR_RETURN(e, StepBatch());
    }
    if (e == send::Receiver::Event::kNeedMore || e == send::Receiver::Event::kEnd) {
      return absl::OkStatus();
    }
  }
}

// Up to kRecordsPerBatch records under the locks, then the writer's share
// of delayed refs and its pacing, as a file write pays them.
absl::StatusOr<send::Receiver::Event> StoreImpl::ReceiveSession::StepBatch() {
  send::Receiver::Event e = send::Receiver::Event::kRecord;
  absl::Status s;
  ThrottleSample sample;
  {
    absl::ReaderMutexLock l(&s_->mu_);
    COWKV_RETURN_IF_ERROR(s_->CheckOpen());
    Tree* tree = s_->txn_->fs_tree(hidden_);
    Tree* parent = parent_ != 0 ? s_->txn_->fs_tree(parent_) : nullptr;
    if (tree == nullptr || (parent_ != 0 && parent == nullptr)) {
      return send::ParentMismatch("the parent was deleted during the receive", true);
    }
    absl::MutexLock tl(s_->TreeLock(hidden_));
    COWKV_ASSIGN_OR_RETURN(const uint64_t heads_before, s_->txn_->BeginWrite(hidden_));
    target_->Bind(tree, parent);
    if (!purged_) {
      absl::StatusOr<bool> done = PurgeUnsentLocked(tree);
      if (!done.ok()) s = done.status();
      purged_ = done.ok() && *done;
    }
    for (int i = 0; i < kRecordsPerBatch && s.ok() && purged_; ++i) {
      absl::StatusOr<send::Receiver::Event> step = rx_.Step();
      if (!step.ok()) s = step.status();
      if (s.ok()) e = *step;
      if (s.ok() && resumable_ && rx_.at_boundary()) clean_ = rx_.Position();
      if (e != send::Receiver::Event::kRecord) break;
    }
    if (!s.ok()) rx_.Abort();  // an extent allocated for a record not finished
    if (resumable_) {
      absl::Status ps = SaveProgressLocked(s.ok() && e == send::Receiver::Event::kEnd);
      if (!ps.ok()) progress_ok_ = false;
      if (s.ok()) s = ps;
    }
    const TxnManager::RefCounts after = s_->txn_->EndWrite(hidden_);
    if (s.ok()) sample = s_->PayDelayedRefsLocked(heads_before, after);
  }
  if (!s.ok()) return s;
  s_->Throttle(sample);
  return e;
}

absl::Status StoreImpl::ReceiveSession::SaveProgressLocked(bool end) {
  if (end) {
    progress_removed_ = true;
    return target_->Apply(format::kReceiveProgressKey, std::nullopt, false);
  }
  if (!clean_.has_value()) return absl::OkStatus();
  clean_->name = report_.name;
  if (saved_.has_value() && *saved_ == *clean_) return absl::OkStatus();
  const std::string v = send::EncodeReceiveProgress(*clean_, parent_, rx_.header());
  COWKV_RETURN_IF_ERROR(target_->Apply(format::kReceiveProgressKey, v, false));
  saved_ = clean_;
  return absl::OkStatus();
}

absl::StatusOr<bool> StoreImpl::ReceiveSession::PurgeUnsentLocked(Tree* tree) {
  std::vector<std::string> keys;
  for (const char prefix : {lease::kLeasePrefix, format::kKvHistoryPrefix}) {
    TreeIterator it(tree);
    for (it.Seek(std::string(1, prefix));
         it.Valid() && it.key()[0] == prefix && keys.size() < kRecordsPerBatch; it.Next()) {
      keys.emplace_back(it.key());
    }
    COWKV_RETURN_IF_ERROR(it.status());
  }
  for (const std::string& k : keys) COWKV_RETURN_IF_ERROR(target_->Apply(k, std::nullopt, false));
  return keys.empty();
}

absl::Status StoreImpl::ReceiveSession::FindParent(const send::StreamHeader& h) {
  const std::string want(reinterpret_cast<const char*>(h.parent_uuid.data()), h.parent_uuid.size());
  absl::ReaderMutexLock l(&s_->mu_);
  bool uuid_seen = false;
  for (const SubvolInfo& s : s_->subvols_->List()) {
    const bool by_received = s.received_uuid == want;
    const bool by_own = s.received_uuid.empty() && s.uuid == want;
    if (!by_received && !by_own) continue;
    uuid_seen = true;
    const uint64_t gen = by_received ? s.received_generation : s.generation;
    if (gen != h.parent_stransid || !(s.flags & format::kRootFlagReadOnly)) continue;
    parent_ = s.id;
    report_.parent = s.name;
    return absl::OkStatus();
  }
  const std::string id =
      absl::StrCat(absl::BytesToHexString(want), " at generation ", h.parent_stransid);
  if (uuid_seen) {
    return send::ParentMismatch(
        absl::StrCat("the parent here (", absl::BytesToHexString(want),
                     ") is not the snapshot the stream was made against (generation ",
                     h.parent_stransid, ", or it is writable)"),
        false);
  }
  return send::ParentMismatch(absl::StrCat("no parent subvolume ", id, " here"), true);
}

absl::Status StoreImpl::ReceiveSession::OnHeader() {
  const send::StreamHeader& h = rx_.header();
  const format::Superblock& sb = s_->txn_->superblock();
  if (h.nodesize != sb.nodesize || h.sectorsize != sb.sectorsize) {
    return absl::FailedPreconditionError(absl::StrCat(
        "receive: the stream comes from a store of nodesize ", h.nodesize, " and sectorsize ",
        h.sectorsize, "; this one has ", sb.nodesize, " and ", sb.sectorsize));
  }
  report_.name = o_.name.empty() ? h.name : o_.name;
  COWKV_RETURN_IF_ERROR(ValidateSubvolName(report_.name));
  if (h.incremental()) COWKV_RETURN_IF_ERROR(FindParent(h));
  {
    absl::ReaderMutexLock l(&s_->mu_);
    if (s_->subvols_->Lookup(report_.name).ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat("receive: subvolume '", report_.name, "' already exists"));
    }
  }
  COWKV_RETURN_IF_ERROR(s_->CheckPartialNameFree(report_.name));
  if (o_.dry_run) return absl::OkStatus();
  if (s_->options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  if (!s_->ClaimPartial(0, report_.name)) return s_->PartialBusy(report_.name);
  claimed_ = true;
  absl::StatusOr<uint64_t> id = s_->ManageSubvolumes(
      [&](Subvolumes* t) { return t->BeginReceive(parent_); }, /*commit_first=*/true);
  if (!id.ok()) return id.status();
  hidden_ = *id;
  s_->SetClaimedTree(report_.name, hidden_);
  target_ = std::make_unique<ReceiveTargetImpl>(s_, hidden_);
  rx_.SetTarget(target_.get());
  if (resumable_) clean_ = rx_.Position();
  return absl::OkStatus();
}

// A continuation stream: the partial receive its token names, at the
// position the token says, becomes this session's.
absl::Status StoreImpl::ReceiveSession::OnResume() {
  if (o_.dry_run) {
    return absl::InvalidArgumentError(
        "receive: a dry run cannot check a continuation stream (it continues a partial receive)");
  }
  if (s_->options_.read_only) return ReadOnlyStoreError("store is opened read-only");
  COWKV_ASSIGN_OR_RETURN(send::ResumePoint tok, send::DecodeResumePoint(rx_.resume_token()));
  report_.name = o_.name.empty() ? tok.name : o_.name;
  if (tok.name != report_.name) {
    return send::ResumeMismatch(absl::StrCat("the token is for the partial receive '", tok.name,
                                             "', not '", report_.name, "'"),
                                false);
  }
  COWKV_ASSIGN_OR_RETURN(PartialState p, s_->FindPartial(report_.name));
  if (p.progress.point != tok) {
    return send::ResumeMismatch(
        absl::StrCat("the partial receive '", report_.name, "' is at record ",
                     p.progress.point.records, " (byte ", p.progress.point.offset,
                     "), the token at record ", tok.records, " (byte ", tok.offset,
                     "), or of another stream: ask for its token again"),
        false);
  }
  if (!s_->ClaimPartial(p.id, report_.name)) return s_->PartialBusy(report_.name);
  claimed_ = true;
  hidden_ = p.id;
  parent_ = p.progress.parent_id;
  resumable_ = true;
  saved_ = clean_ = p.progress.point;
  if (parent_ != 0) {
    absl::ReaderMutexLock l(&s_->mu_);
    absl::StatusOr<SubvolInfo> info = s_->subvols_->Get(parent_);
    if (!info.ok()) return send::ParentMismatch("the partial receive's parent is gone", true);
    report_.parent = info->name;
  }
  target_ = std::make_unique<ReceiveTargetImpl>(s_, hidden_);
  rx_.SetTarget(target_.get());
  return rx_.ContinueFrom(p.progress.header, p.progress.point);
}

absl::Status StoreImpl::ReceiveSession::Adopt() {
  const send::StreamHeader& h = rx_.header();
  const std::string uuid(reinterpret_cast<const char*>(h.uuid.data()), h.uuid.size());
  COWKV_RETURN_IF_ERROR(s_->ManageSubvolumes(
                              [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                                COWKV_RETURN_IF_ERROR(t->AdoptReceived(hidden_, report_.name,
                                                                       parent_, uuid, h.stransid));
                                return hidden_;
                              },
                              /*commit_first=*/false)
                            .status());
  report_.id = hidden_;
  return absl::OkStatus();
}

absl::Status StoreImpl::ReceiveSession::Fail(absl::Status why) {
  failed_ = true;
  {
    absl::ReaderMutexLock l(&s_->mu_);
    rx_.Abort();  // an extent allocated for a record not finished goes back
  }
  rx_.SetTarget(nullptr);
  const bool keep = resumable_ && progress_ok_ && !progress_removed_ && saved_.has_value();
  if (hidden_ != 0 && keep) {
    Release();
    return WithContext(
        why, absl::StrCat("receive: partial receive '", report_.name, "' kept at record ",
                          saved_->records, " (cowkv receive --resume-token ", report_.name, ")"));
  }
  if (hidden_ != 0) {
    absl::Status s = s_->ManageSubvolumes(
                           [&](Subvolumes* t) -> absl::StatusOr<uint64_t> {
                             COWKV_RETURN_IF_ERROR(t->AbortReceive(hidden_));
                             return hidden_;
                           },
                           /*commit_first=*/false, TxnManager::WriteKind::kDelete)
                         .status();
    (void)s;  // a store that cannot commit any more drops the tree at its next mount
    absl::MutexLock hl(&s_->handles_mu_);
    s_->cleaner_work_ = true;
    hidden_ = 0;
  }
  Release();
  return why;
}

absl::StatusOr<std::unique_ptr<ReceiveStream>> StoreImpl::Receive(const ReceiveOptions& o) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (!o.name.empty()) COWKV_RETURN_IF_ERROR(ValidateSubvolName(o.name));
  if (o.resumable && o.dry_run) {
    return absl::InvalidArgumentError("receive: a dry run writes nothing to resume");
  }
  return std::unique_ptr<ReceiveStream>(new ReceiveSession(this, o));
}

}  // namespace cowkv
