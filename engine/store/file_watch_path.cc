// The store's file watch (docs/design.md "File watch"): file events are
// recorded only while a subvolume has file watchers (StartFileEvents /
// StopFileEvents), written with the operation's items under a revision of
// their own, made durable by engine commits only, compacted to the history
// bound, and read up to the committed revision. The items are in
// engine/fs/fs_events.h.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"
#include "engine/base/status.h"
#include "engine/fs/fs_events.h"
#include "engine/kv/kv_space.h"
#include "engine/store/fs_backend_impl.h"
#include "engine/store/store_impl.h"

namespace cowkv {

namespace {

// Recorded events between compaction checks, and a check's bound on work:
// at most this many leaf runs of old events dropped.
constexpr uint64_t kFileEventCompactEvery = 64;
constexpr int kFileEventDropRuns = 8;
constexpr size_t kFileEventRunItems = 1024;

using Span = fs::FileWatchState::Span;

absl::Status LoadSpan(fs::FsBackend* be, fs::FileWatchState* fw) {
  COWKV_ASSIGN_OR_RETURN(fs::FileEventInfo info, fs::LoadFileEventInfo(be));
  fw->span = info.span_start != 0 ? Span::kOpen : Span::kClosed;
  fw->span_start = info.span_start;
  fw->floor = info.floor;
  return absl::OkStatus();
}

}  // namespace

void StoreImpl::FsBackendImpl::StageFileEventWrites(const std::vector<fs::FsWrite>& op_writes,
                                                    std::vector<fs::FsWrite>* all,
                                                    uint64_t* revision) {
  extra_.clear();
  extra_.reserve(events_.size() + 1);  // the writes below point into it
  *revision = 0;
  if (!events_.empty()) {
    COWKV_CHECK(events_.size() <= 0xffff);  // one operation makes one or two
    *revision = s_->kv_->revision() + 1;
    const size_t max_value = tree_->max_value_size();
    for (size_t i = 0; i < events_.size(); ++i) {
      extra_.emplace_back(fs::FileEventKey(*revision, static_cast<uint16_t>(i)),
                          fs::EncodeFileEvent(events_[i], max_value));
    }
  }
  if (close_span_.has_value()) {
    fs::FileEventInfo info = *close_span_;
    info.span_start = 0;
    extra_.emplace_back(fs::FileEventInfoKey(), fs::EncodeFileEventInfo(info));
  }
  all->reserve(op_writes.size() + extra_.size());
  *all = op_writes;
  for (const auto& [key, value] : extra_) all->push_back({key, &value, false, nullptr});
}

void StoreImpl::FsBackendImpl::FileEventsApplied(uint64_t revision) {
  if (revision != 0) {
    // The operation's own revision (the exclusive barrier is held: the
    // store records events only there).
    s_->kv_->set_revision(revision);
    events_written_ += events_.size();
    events_.clear();
  }
  if (close_span_.has_value()) {
    // Logged: any later log sync that makes an unrecorded change durable
    // carries the closed span too (docs/design.md "File watch").
    NoteLog(fs::FileEventInfoKey());
    span_closed_ = true;
    close_span_.reset();
  }
}

absl::Status StoreImpl::PrepareFileEvents(fs::FsState* st, FsBackendImpl* be, bool recording) {
  fs::FileWatchState& fw = st->file_watch;
  if (recording) {
    be->RecordFileEvents();
    return absl::OkStatus();
  }
  // Nobody watches: the write's only extra cost is this check, and once
  // after a mount the info's read. An open span is closed by the first
  // unrecorded write, in its batch.
  if (fw.span == Span::kUnknown) COWKV_RETURN_IF_ERROR(LoadSpan(be, &fw));
  if (fw.span == Span::kOpen) be->CloseFileEventSpan({fw.span_start, fw.floor});
  return absl::OkStatus();
}

void StoreImpl::FinishFileEvents(uint64_t subvol, Tree* tree, fs::FsState* st,
                                 const FsBackendImpl& be) {
  fs::FileWatchState& fw = st->file_watch;
  if (be.span_closed()) {
    fw.span = Span::kClosed;
    fw.span_start = 0;
    st->counters.span_closes.fetch_add(1, std::memory_order_relaxed);
  }
  const uint64_t n = be.events_written();
  if (n == 0) return;
  st->counters.file_events.fetch_add(n, std::memory_order_relaxed);
  fw.since_compact += n;
  if (fw.since_compact < kFileEventCompactEvery) return;
  fw.since_compact = 0;
  const uint64_t keep = std::max<uint64_t>(1, options_.history_revisions);
  const uint64_t rev = kv_->revision();
  if (rev <= keep || rev - keep <= fw.floor) return;
  const uint64_t target = rev - keep;
  // The floor first (events at or below it are never read again), then the
  // old events a leaf at a time; what a check leaves is dropped by the next.
  // Failures (ENOSPC, a read error) leave it for a later check; a tree
  // write that failed half way makes the store read-only.
  if (!txn_->ReserveForWrite(tree, TxnManager::WriteKind::kInsert, 1, 64).ok()) return;
  absl::Status s =
      tree->Put(fs::FileEventInfoKey(), fs::EncodeFileEventInfo({fw.span_start, target}));
  if (!s.ok()) {
    txn_->SetFatal(s);
    return;
  }
  fw.floor = target;
  const std::string to = fs::FileEventKey(target + 1, 0);
  for (int run = 0; run < kFileEventDropRuns; ++run) {
    std::string from;
    {
      TreeIterator it(tree);
      it.Seek(fs::FileEventKey(1, 0));
      if (!it.status().ok() || !it.Valid() || !fs::IsFileEventTreeKey(it.key()) || it.key() >= to) {
        return;
      }
      from = std::string(it.key());
    }
    if (!txn_->ReserveForWrite(tree, TxnManager::WriteKind::kDelete, 2, 64,
                               2 * static_cast<uint64_t>(tree->WorstCaseNodesPerOp()))
             .ok()) {
      return;
    }
    absl::StatusOr<size_t> dropped =
        tree->DeleteRun(from, to, kFileEventRunItems, [](absl::string_view k, absl::string_view v) {
          return fs::DecodeFileEvent(k, v).status();
        });
    if (!dropped.ok() || *dropped == 0) {
      if (!dropped.ok() && !absl::IsDataLoss(dropped.status())) txn_->SetFatal(dropped.status());
      return;
    }
  }
  (void)subvol;
}

absl::Status StoreImpl::CloseFileEventSpanAfterReplay(uint64_t subvol, Tree* tree) {
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> raw, tree->Lookup(fs::FileEventInfoKey()));
  if (!raw.has_value()) return absl::OkStatus();
  COWKV_ASSIGN_OR_RETURN(fs::FileEventInfo info, fs::DecodeFileEventInfo(*raw));
  if (info.span_start == 0) return absl::OkStatus();
  info.span_start = 0;
  COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(tree, TxnManager::WriteKind::kInsert, 1, 64));
  COWKV_RETURN_IF_ERROR(tree->Put(fs::FileEventInfoKey(), fs::EncodeFileEventInfo(info)));
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  st->file_watch.span = Span::kUnknown;
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> StoreImpl::StartFileEvents(uint64_t subvol) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) {
    return absl::FailedPreconditionError("the store is open read-only: its files never change");
  }
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  absl::WriterMutexLock l(&mu_);
  COWKV_RETURN_IF_ERROR(txn_->fatal());
  COWKV_ASSIGN_OR_RETURN(Tree * tree, WritableTree(subvol));
  fs::FileWatchState& fw = st->file_watch;
  FsBackendImpl be(this, subvol, tree);
  if (fw.span == Span::kUnknown) COWKV_RETURN_IF_ERROR(LoadSpan(&be, &fw));
  // The span goes on only when nothing changed the file tree unrecorded
  // since it was recorded last: an unrecorded write closed it, and a file
  // key in the log chain (an fsync since) could later make a change
  // durable whose event is not (events are never logged).
  if (fw.watchers.load(std::memory_order_relaxed) == 0 &&
      (fw.span != Span::kOpen || log_->HasFsEntries(subvol))) {
    const uint64_t start = kv_->revision() + 1;
    COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(tree, TxnManager::WriteKind::kInsert, 1, 64));
    absl::Status s = tree->Put(fs::FileEventInfoKey(), fs::EncodeFileEventInfo({start, fw.floor}));
    if (!s.ok()) {
      txn_->SetFatal(s);
      return s;
    }
    fw.span = Span::kOpen;
    fw.span_start = start;
  }
  fw.watchers.fetch_add(1, std::memory_order_relaxed);
  return fw.span_start;
}

void StoreImpl::StopFileEvents(uint64_t subvol) {
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  absl::WriterMutexLock l(&mu_);
  // Nothing is written: the next unrecorded write closes the span, so a
  // watcher that comes back before any write goes on where it was.
  if (st->file_watch.watchers.load(std::memory_order_relaxed) > 0) {
    st->file_watch.watchers.fetch_sub(1, std::memory_order_relaxed);
  }
}

absl::StatusOr<FileEventsResult> StoreImpl::ReadFileEvents(uint64_t subvol,
                                                           const FileEventsRequest& req) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (req.from_revision == 0) {
    return absl::InvalidArgumentError("file events start at revision 1 or later");
  }
  FileEventsRequest n = req;
  n.prefix = fs::NormaliseEventPrefix(req.prefix);
  using Bug = Options::TestHooks::PlantedBug;
  const uint64_t committed = durable_rev_->state().committed_revision;
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  if (n.to_revision == 0) {
    n.to_revision = options_.test_hooks.planted_bug == Bug::kFileWatchSeesUncommitted
                        ? kv_->revision()
                        : committed;
  }
  if (n.to_revision > kv_->revision()) {
    return kv::FutureRevisionError(n.to_revision, kv_->revision());
  }
  FsBackendImpl be(this, subvol, tree);
  COWKV_ASSIGN_OR_RETURN(fs::FileEventInfo info, fs::LoadFileEventInfo(&be));
  if (info.span_start == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the file events of subvolume ", subvol, " are not recorded: start a file watch first"));
  }
  if (n.from_revision < info.span_start)
    return kv::CompactedError(n.from_revision, info.span_start);
  if (n.from_revision <= info.floor) return kv::CompactedError(n.from_revision, info.floor + 1);
  return fs::ScanFileEvents(&be, n,
                            options_.test_hooks.planted_bug == Bug::kFileEventMatchesOldPath);
}

absl::StatusOr<uint64_t> Subvolume::StartFileEvents() { return store_->StartFileEvents(id_); }

void Subvolume::StopFileEvents() { store_->StopFileEvents(id_); }

absl::StatusOr<FileEventsResult> Subvolume::ReadFileEvents(const FileEventsRequest& req) {
  return store_->ReadFileEvents(id_, req);
}

}  // namespace cowkv
