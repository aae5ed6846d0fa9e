// WatchHub and WatchSink; see watch_hub.h.
#include "server/watch_hub.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "server/convert.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {

namespace {

// How often the hub looks again at streams too full for events.
constexpr absl::Duration kBlockedPoll = absl::Milliseconds(2);

// Unhandled requests a stream's reader may queue before it waits.
constexpr size_t kMaxQueuedRequests = 64;
// What a response costs beyond its keys and values.
constexpr uint64_t kEventOverhead = 64;

bool Covers(const Watcher& w, absl::string_view key) {
  return key >= w.start && (w.end.empty() || key < w.end);
}

uint64_t EventBytes(const WatchEvent& e, bool prev) {
  uint64_t n = e.kv.key.size() + e.kv.value.size() + kEventOverhead;
  if (prev && e.has_prev) n += e.prev_kv.key.size() + e.prev_kv.value.size();
  return n;
}

void ToProto(const WatchEvent& e, bool prev, v1::WatchEvent* out) {
  out->set_type(e.type == WatchEvent::Type::kPut ? v1::WatchEvent::PUT : v1::WatchEvent::DELETE);
  server::ToProto(e.kv, out->mutable_kv());
  if (prev && e.has_prev) server::ToProto(e.prev_kv, out->mutable_prev_kv());
}

}  // namespace

v1::WatchResponse CancelResponse(int64_t id, v1::WatchCancelCode code, const std::string& reason,
                                 const absl::Status& error) {
  v1::WatchResponse r;
  r.set_watch_id(id);
  r.set_canceled(true);
  r.set_cancel_code(code);
  r.set_cancel_reason(reason);
  if (!error.ok()) {
    const grpc::Status g = ToGrpcStatus(error);
    r.set_error_code(static_cast<int32_t>(g.error_code()));
    r.set_error_reason(ErrorInfoOf(g).reason);
    uint64_t floor = 0;
    absl::optional<absl::Cord> p = error.GetPayload(kCompactRevisionPayloadUrl);
    if (p.has_value() && absl::SimpleAtoi(std::string(*p), &floor)) r.set_compact_revision(floor);
  }
  return r;
}

static_assert(static_cast<int>(FileEvent::Type::kCreate) == v1::FileWatchEvent::CREATE &&
              static_cast<int>(FileEvent::Type::kRename) == v1::FileWatchEvent::RENAME &&
              static_cast<int>(FileEvent::Type::kXattr) == v1::FileWatchEvent::XATTR);

// ---- WatchSink ----

uint64_t StreamSoftBytes(const WatchLimits& l) {
  return std::min(l.stream_soft_bytes, l.stream_buffer_bytes / 2);
}

void WatchSink::Push(v1::WatchResponse r, uint64_t bytes) {
  out_bytes_ += bytes;
  out_.push_back(std::move(r));
  out_sizes_.push_back(bytes);
  cv_.Signal();
}

bool WatchSink::Send(Watcher* w, v1::WatchResponse r) {
  absl::MutexLock l(&mu_);
  if (w->canceled || closed_) return false;
  const uint64_t bytes = r.ByteSizeLong();
  if (out_bytes_ + bytes > buffer_bytes_) {
    w->canceled = true;
    v1::WatchResponse c = CancelResponse(
        w->id, v1::WATCH_CANCEL_SLOW_READER,
        absl::StrCat("the client reads slower than events arrive: its unsent responses passed ",
                     buffer_bytes_, " bytes; restart at the revision after the last event"));
    const uint64_t cbytes = c.ByteSizeLong();
    Push(std::move(c), cbytes);
    return false;
  }
  Push(std::move(r), bytes);
  return true;
}

bool WatchSink::Room(absl::Time now, absl::Duration slow_after, bool* stuck) {
  absl::MutexLock l(&mu_);
  *stuck = false;
  if (out_bytes_ < soft_bytes_ || closed_) {
    full_since_ = absl::InfiniteFuture();
    return !closed_;
  }
  if (full_since_ == absl::InfiniteFuture()) full_since_ = now;
  *stuck = now - std::max(full_since_, last_written_) > slow_after;
  return false;
}

bool WatchSink::Full() const {
  absl::MutexLock l(&mu_);
  return out_bytes_ >= soft_bytes_;
}

void WatchSink::Written(uint64_t bytes) {
  absl::MutexLock l(&mu_);
  out_bytes_ -= std::min(out_bytes_, bytes);
  last_written_ = absl::Now();
}

bool WatchSink::IsCanceled(const Watcher* w) const {
  absl::MutexLock l(&mu_);
  return w->canceled;
}

void WatchSink::Cancel(Watcher* w, v1::WatchResponse r) {
  absl::MutexLock l(&mu_);
  if (w->canceled) return;
  w->canceled = true;
  if (closed_) return;
  const uint64_t bytes = r.ByteSizeLong();
  Push(std::move(r), bytes);
}

void WatchSink::Control(v1::WatchResponse r) {
  absl::MutexLock l(&mu_);
  if (closed_) return;
  const uint64_t bytes = r.ByteSizeLong();
  Push(std::move(r), bytes);
}

void WatchSink::PushRequest(v1::WatchRequest r) {
  absl::MutexLock l(&mu_);
  while (in_.size() >= kMaxQueuedRequests && !closed_) reader_cv_.Wait(&mu_);
  in_.push_back(std::move(r));
  cv_.Signal();
}

void WatchSink::ReaderDone() {
  absl::MutexLock l(&mu_);
  reader_done_ = true;
  cv_.Signal();
}

void WatchSink::Take(absl::Duration timeout, Work* work) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock l(&mu_);
  while (out_.empty() && in_.empty() && !reader_done_ && !woken_) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  woken_ = false;
  work->requests.swap(in_);
  in_.clear();
  work->responses.swap(out_);
  out_.clear();
  work->sizes.swap(out_sizes_);
  out_sizes_.clear();
  work->reader_done = reader_done_;
  reader_cv_.SignalAll();
}

void WatchSink::Wake() {
  absl::MutexLock l(&mu_);
  woken_ = true;
  cv_.Signal();
}

void WatchSink::Close() {
  absl::MutexLock l(&mu_);
  closed_ = true;
  out_.clear();
  out_sizes_.clear();
  out_bytes_ = 0;
  reader_cv_.SignalAll();
}

// ---- WatchHub ----

WatchHub::WatchHub(Store* store, WatchLimits limits) : store_(store), limits_(limits) {
  thread_ = std::thread([this] { Loop(); });
}

WatchHub::~WatchHub() { Stop(); }

int WatchHub::watchers() const {
  absl::MutexLock l(&mu_);
  return total_;
}

absl::Status WatchHub::Add(std::shared_ptr<Watcher> w, std::unique_ptr<Subvolume> sv,
                           v1::WatchResponse created) {
  if (stopping()) return absl::UnavailableError("the server is stopping");
  absl::MutexLock l(&mu_);
  int& mine = per_peer_[w->peer];
  absl::Status over;
  if (total_ >= limits_.total) {
    over = absl::ResourceExhaustedError(
        absl::StrCat("too many watchers on the server (limit ", limits_.total, ")"));
  } else if (mine >= limits_.per_peer) {
    over = absl::ResourceExhaustedError(
        absl::StrCat("too many watchers for client ", w->peer, " (limit ", limits_.per_peer, ")"));
  }
  if (!over.ok()) {
    if (mine == 0) per_peer_.erase(w->peer);
    if (w->files && sv != nullptr) sv->StopFileEvents();
    return WithServerReason(over, "TOO_MANY_WATCHERS");
  }
  SubvolHub& h = hubs_[w->subvol];
  if (h.sv == nullptr) {
    const DurableState d = store_->Durable();
    h.sv = std::move(sv);
    h.cursor = d.revision + 1;
    h.epoch = d.epoch;
  }
  w->last_sent = absl::Now();
  created.set_revision(store_->Durable().revision);
  w->sink->Control(std::move(created));
  h.watchers.push_back(std::move(w));
  ++mine;
  ++total_;
  return absl::OkStatus();
}

void WatchHub::Remove(const Watcher* w) {
  absl::MutexLock l(&mu_);
  auto h = hubs_.find(w->subvol);
  if (h == hubs_.end()) return;
  auto& ws = h->second.watchers;
  auto it = std::find_if(ws.begin(), ws.end(), [w](const auto& p) { return p.get() == w; });
  if (it == ws.end()) return;
  // Its file-event registration ends with it (store lock after the hub's).
  if ((*it)->files) h->second.sv->StopFileEvents();
  ws.erase(it);
  --total_;
  auto p = per_peer_.find(w->peer);
  if (p != per_peer_.end() && --p->second == 0) per_peer_.erase(p);
}

void WatchHub::Dropped(const std::vector<const Watcher*>& gone) {
  for (const Watcher* w : gone) Remove(w);
}

void WatchHub::Stop() {
  if (stopping_.exchange(true)) {
    if (thread_.joinable()) thread_.join();
    return;
  }
  if (thread_.joinable()) thread_.join();
  std::vector<std::shared_ptr<Watcher>> all;
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, h] : hubs_) all.insert(all.end(), h.watchers.begin(), h.watchers.end());
  }
  // UNAVAILABLE, as a stopping server answers any call (StoppingStatus;
  // ToGrpcStatus would make an UNAVAILABLE error INTERNAL).
  const grpc::Status stopping = StoppingStatus();
  for (const auto& w : all) {
    v1::WatchResponse r = CancelResponse(w->id, v1::WATCH_CANCEL_SERVER, "the server is stopping");
    r.set_error_code(static_cast<int32_t>(stopping.error_code()));
    r.set_error_reason(ErrorInfoOf(stopping).reason);
    w->sink->Cancel(w.get(), std::move(r));
    Remove(w.get());
  }
  stopped_.store(true, std::memory_order_release);
}

absl::Duration PaceAfter(absl::Duration took, double share) {
  if (share >= 1 || share <= 0 || took < absl::Microseconds(200)) return absl::ZeroDuration();
  return std::min(took * (1 / share - 1), absl::Milliseconds(200));
}

void WatchHub::Pause(absl::Duration d) {
  const absl::Time until = absl::Now() + d;
  for (absl::Time now = absl::Now(); now < until && !stopping(); now = absl::Now()) {
    absl::SleepFor(std::min(until - now, absl::Milliseconds(5)));  // Stop() waits <= 5 ms
  }
}

void WatchHub::Loop() {
  DurableState d = store_->Durable();
  while (!stopping()) {
    if (d.closed) return;
    const absl::Time start = absl::Now();
    const Left left = Round(d);
    // Work it could do now goes on at once; otherwise the pause collects
    // the next revisions into the same responses.
    const absl::Duration pause =
        left.busy ? absl::ZeroDuration() : PaceAfter(absl::Now() - start, limits_.fanout_share);
    CommitForFileWatchers(d);
    if (pause > absl::ZeroDuration()) {
      paced_.fetch_add(1, std::memory_order_relaxed);
      Pause(pause);
    }
    if (left.busy) {
      d = store_->Durable();
    } else if (left.blocked) {
      // Streams full: their clients read at their own pace; look again
      // soon (new revisions wait in the history meanwhile).
      Pause(kBlockedPoll);
      d = store_->Durable();
    } else {
      const uint64_t epoch = d.epoch;
      d = store_->WaitDurable(d, limits_.poll);
      // Nothing became durable for a poll: async writes would wait for the
      // next commit (--commit-interval) to reach watchers. While anyone
      // watches, a durable no-op makes them durable now — one log sync, and
      // nothing at all when every write is durable already.
      if (d.epoch == epoch && !d.closed && !stopping()) PushAsyncWrites();
    }
  }
}

void WatchHub::PushAsyncWrites() {
  Subvolume* sv = nullptr;
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, h] : hubs_) {
      if (!h.watchers.empty()) {
        sv = h.sv.get();  // only this thread erases hubs_ (Round): stays valid
        break;
      }
    }
  }
  if (sv == nullptr) return;
  TxnRequest nothing;
  nothing.durability = Durability::kDurable;
  sv->Txn(nothing).status().IgnoreError();  // a failure shows in the writes' own answers
}

WatchHub::Left WatchHub::Round(const DurableState& d) {
  std::vector<Snapshot> snaps;
  {
    absl::MutexLock l(&mu_);
    for (auto it = hubs_.begin(); it != hubs_.end();) {
      SubvolHub& h = it->second;
      if (h.watchers.empty()) {
        it = hubs_.erase(it);  // only this thread erases: Snapshot::sv stays valid
        continue;
      }
      snaps.push_back(Snapshot{it->first, h.sv.get(), h.cursor, h.epoch != d.epoch, h.watchers});
      h.epoch = d.epoch;
      ++it;
    }
  }
  Left left;
  for (Snapshot& s : snaps) {
    uint64_t cursor = s.cursor;
    const Left one = RoundOne(d, &s, &cursor);
    left.busy |= one.busy;
    left.blocked |= one.blocked;
    Progress(d, &s);
    absl::MutexLock l(&mu_);
    auto h = hubs_.find(s.subvol);
    if (h != hubs_.end()) h->second.cursor = std::max(h->second.cursor, cursor);
  }
  return left;
}

bool WatchHub::HasRoom(Watcher* w, absl::Time now, std::vector<const Watcher*>* gone) {
  bool stuck = false;
  if (w->sink->Room(now, limits_.slow_reader_after, &stuck)) return true;
  held_.fetch_add(1, std::memory_order_relaxed);
  if (stuck) {
    w->sink->Cancel(
        w, CancelResponse(w->id, v1::WATCH_CANCEL_SLOW_READER,
                          absl::StrCat("the client has not read its stream for ",
                                       absl::FormatDuration(limits_.slow_reader_after),
                                       " while events wait; restart at the revision after the "
                                       "last event")));
    gone->push_back(w);
  }
  return false;
}

namespace {

// How a failed read ends a watcher: COMPACTED with the oldest revision
// served, or SERVER with the error.
v1::WatchResponse ReadFailed(int64_t id, const absl::Status& s) {
  if (ReasonOf(s) == ErrorReason::kCompacted) {
    return CancelResponse(id, v1::WATCH_CANCEL_COMPACTED,
                          absl::StrCat("the start revision is compacted: ", s.message()), s);
  }
  return CancelResponse(id, v1::WATCH_CANCEL_SERVER,
                        absl::StrCat("reading the history failed: ", s.message()), s);
}

v1::WatchResponse Deleted(int64_t id) {
  return CancelResponse(id, v1::WATCH_CANCEL_SUBVOLUME_DELETED, "the subvolume was deleted");
}

}  // namespace

void WatchHub::CancelAll(Snapshot* s, const v1::WatchResponse& r) {
  std::vector<const Watcher*> gone;
  for (const auto& w : s->watchers) {
    v1::WatchResponse mine = r;
    mine.set_watch_id(w->id);
    w->sink->Cancel(w.get(), std::move(mine));
    gone.push_back(w.get());
  }
  s->watchers.clear();
  Dropped(gone);
}

WatchHub::Left WatchHub::RoundOne(const DurableState& d, Snapshot* s, uint64_t* new_cursor) {
  Left left;
  if (s->check_exists && absl::IsNotFound(s->sv->CompactRevision().status())) {
    CancelAll(s, Deleted(0));
    return left;
  }
  left.busy = FileRound(d, s);
  if (s->watchers.empty()) return left;  // the subvolume went
  std::vector<const Watcher*> gone;
  const Left caught = CatchUp(d, s, &gone);
  Dropped(gone);
  if (s->watchers.empty()) return left;  // the subvolume went
  left.busy |= caught.busy;
  left.blocked |= caught.blocked;
  if (d.revision < s->cursor) return left;
  const Left fanned = FanOut(d, s, new_cursor);
  left.busy |= fanned.busy;
  left.blocked |= fanned.blocked;
  return left;
}

WatchHub::Left WatchHub::CatchUp(const DurableState& d, Snapshot* s,
                                 std::vector<const Watcher*>* gone) {
  Left left;
  const absl::Time now = absl::Now();
  std::vector<Watcher*> behind;
  EventsRequest q;
  q.from_revision = s->cursor;
  for (const auto& w : s->watchers) {
    const uint64_t next = w->next.load(std::memory_order_relaxed);
    if (w->files || next >= s->cursor) continue;
    if (!HasRoom(w.get(), now, gone)) {
      left.blocked = true;
      continue;
    }
    // The union of the ranges ([start, end), end empty = no end).
    if (behind.empty() || w->start < q.start) q.start = w->start;
    if (behind.empty() || (!q.end.empty() && (w->end.empty() || w->end > q.end))) q.end = w->end;
    q.from_revision = std::min(q.from_revision, next);
    q.prev_kv |= w->prev_kv;
    behind.push_back(w.get());
  }
  if (behind.empty()) return left;
  q.to_revision = s->cursor - 1;
  q.max_events = limits_.read_events;
  catchup_reads_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<EventsResult> r = s->sv->ReadEvents(q);
  if (absl::IsNotFound(r.status())) {
    Dropped(*gone);  // before CancelAll lets go of the watchers
    gone->clear();
    CancelAll(s, Deleted(0));
    return Left{};
  }
  // A COMPACTED read names the compact revision: the watchers at or below
  // it lost events and end; the others read again next round from their
  // own oldest position.
  uint64_t floor = 0;
  bool compacted = false;
  if (!r.ok() && ReasonOf(r.status()) == ErrorReason::kCompacted) {
    absl::optional<absl::Cord> p = r.status().GetPayload(kCompactRevisionPayloadUrl);
    compacted = p.has_value() && absl::SimpleAtoi(std::string(*p), &floor);
  }
  for (Watcher* w : behind) {
    const uint64_t next = w->next.load(std::memory_order_relaxed);
    if (compacted && next > floor) {
      left.busy = true;
    } else if (!r.ok()) {
      w->sink->Cancel(w, ReadFailed(w->id, r.status()));
      gone->push_back(w);
    } else if (uint64_t resume = 0; !Deliver(w, r->events, d.revision, next, &resume)) {
      gone->push_back(w);
    } else {
      const uint64_t now_next = resume != 0 ? resume : std::max(next, r->next_revision);
      w->next.store(now_next, std::memory_order_relaxed);
      left.busy |= now_next < s->cursor;
    }
  }
  return left;
}

WatchHub::Left WatchHub::FanOut(const DurableState& d, Snapshot* s, uint64_t* new_cursor) {
  // One read of the new revisions for every synced watcher with room; a
  // synced watcher without it stays behind (unsynced) and catches up later.
  Left left;
  const absl::Time now = absl::Now();
  std::vector<const Watcher*> gone;
  std::vector<Watcher*> ready;
  bool prev = false;
  for (const auto& w : s->watchers) {
    if (w->files || w->next.load(std::memory_order_relaxed) < s->cursor) continue;
    if (!HasRoom(w.get(), now, &gone)) {
      left.blocked = true;
      continue;
    }
    prev |= w->prev_kv;
    ready.push_back(w.get());
  }
  if (ready.empty()) {
    // Every synced watcher waits: keep the cursor, so they stay one group
    // and share the read once their streams drain.
    Dropped(gone);
    return left;
  }
  EventsRequest q;
  q.from_revision = s->cursor;
  q.to_revision = d.revision;
  q.prev_kv = prev;
  q.max_events = limits_.read_events;
  hub_reads_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<EventsResult> r = s->sv->ReadEvents(q);
  if (absl::IsNotFound(r.status())) {
    Dropped(gone);
    CancelAll(s, Deleted(0));
    return Left{};
  }
  for (Watcher* w : ready) {
    const uint64_t next = w->next.load(std::memory_order_relaxed);
    if (!r.ok()) {
      w->sink->Cancel(w, ReadFailed(w->id, r.status()));
      gone.push_back(w);
    } else if (uint64_t resume = 0; !Deliver(w, r->events, d.revision, next, &resume)) {
      gone.push_back(w);
    } else {
      w->next.store(resume != 0 ? resume : std::max(next, r->next_revision),
                    std::memory_order_relaxed);
    }
  }
  Dropped(gone);
  if (!r.ok()) {
    // Compacted past the cursor (a hub far behind): its watchers ended;
    // the cursor moves to the oldest revision served.
    uint64_t floor = 0;
    absl::optional<absl::Cord> p = r.status().GetPayload(kCompactRevisionPayloadUrl);
    if (p.has_value() && absl::SimpleAtoi(std::string(*p), &floor)) *new_cursor = floor;
    return left;
  }
  *new_cursor = r->next_revision;
  left.busy |= r->more;
  return left;
}

bool WatchHub::Deliver(Watcher* w, const std::vector<WatchEvent>& events, uint64_t header,
                       uint64_t min_revision, uint64_t* resume) {
  *resume = 0;
  v1::WatchResponse r;
  uint64_t bytes = 0, last = 0;
  auto fresh = [&] {
    r.Clear();
    r.set_watch_id(w->id);
    r.set_revision(header);
    bytes = 0;
  };
  fresh();
  for (const WatchEvent& e : events) {
    if (e.revision() < min_revision || !Covers(*w, e.kv.key)) continue;
    if (e.type == WatchEvent::Type::kPut ? w->no_put : w->no_delete) continue;
    const uint64_t size = EventBytes(e, w->prev_kv);
    if (size + 4096 > kMaxMessageBytes) {
      w->sink->Cancel(
          w, CancelResponse(w->id, v1::WATCH_CANCEL_SERVER,
                            absl::StrCat("an event of ", size, " bytes at revision ", e.revision(),
                                         " does not fit a message (watch without prev_kv)"),
                            WithReason(absl::ResourceExhaustedError("event larger than a message"),
                                       ErrorReason::kLimit)));
      return false;
    }
    if (r.events_size() > 0 && bytes + size > limits_.response_bytes) {
      const bool fragment = e.revision() == last;  // the revision goes on in the next response
      r.set_fragment(fragment);
      if (!w->sink->Send(w, std::move(r))) return false;
      w->last_sent = absl::Now();
      // Flow control: stop at a whole revision once the stream is full;
      // the rest waits in the history (the caller resumes from here).
      if (!fragment && w->sink->Full()) {
        *resume = e.revision();
        return true;
      }
      fresh();
    }
    ToProto(e, w->prev_kv, r.add_events());
    bytes += size;
    last = e.revision();
  }
  if (r.events_size() == 0) return true;
  w->last_sent = absl::Now();
  return w->sink->Send(w, std::move(r));
}

bool WatchHub::FileRound(const DurableState& d, Snapshot* s) {
  bool busy = false;
  std::vector<const Watcher*> gone;
  for (const auto& w : s->watchers) {
    if (!w->files) continue;
    const uint64_t next = w->next.load(std::memory_order_relaxed);
    if (next > d.committed_revision) continue;
    FileEventsRequest q;
    q.from_revision = next;
    q.to_revision = d.committed_revision;
    q.prefix = w->file_prefix;
    q.max_events = limits_.read_events;
    file_reads_.fetch_add(1, std::memory_order_relaxed);
    absl::StatusOr<FileEventsResult> r = s->sv->ReadFileEvents(q);
    if (absl::IsNotFound(r.status())) {
      CancelAll(s, Deleted(0));
      return false;
    }
    if (!r.ok()) {
      w->sink->Cancel(w.get(), ReadFailed(w->id, r.status()));
      gone.push_back(w.get());
    } else if (!DeliverFiles(w.get(), r->events, d.committed_revision)) {
      gone.push_back(w.get());
    } else {
      w->next.store(r->next_revision, std::memory_order_relaxed);
      busy |= r->more;
    }
  }
  Dropped(gone);
  return busy;
}

bool WatchHub::DeliverFiles(Watcher* w, const std::vector<FileEvent>& events, uint64_t header) {
  v1::WatchResponse r;
  uint64_t bytes = 0, last = 0;
  auto fresh = [&] {
    r.Clear();
    r.set_watch_id(w->id);
    r.set_revision(header);
    bytes = 0;
  };
  fresh();
  for (const FileEvent& e : events) {
    const uint64_t size = e.path.size() + e.new_path.size() + kEventOverhead;
    if (r.file_events_size() > 0 && bytes + size > limits_.response_bytes) {
      r.set_fragment(e.revision == last);
      if (!w->sink->Send(w, std::move(r))) return false;
      fresh();
    }
    v1::FileWatchEvent* out = r.add_file_events();
    out->set_type(static_cast<v1::FileWatchEvent::Type>(static_cast<int>(e.type)));
    out->set_revision(e.revision);
    out->set_ino(e.ino);
    out->set_path(e.path);
    out->set_new_path(e.new_path);
    out->set_paths_lost(e.paths_lost);
    bytes += size;
    last = e.revision;
  }
  if (r.file_events_size() == 0) return true;
  w->last_sent = absl::Now();
  return w->sink->Send(w, std::move(r));
}

void WatchHub::CommitForFileWatchers(const DurableState& d) {
  if (stopping()) return;
  const absl::Time now = absl::Now();
  if (now - last_file_commit_ < limits_.poll) return;
  // Per subvolume with file watchers, the oldest revision one still waits
  // for (at or after the span start: a read from before it is refused).
  std::vector<std::pair<Subvolume*, uint64_t>> watched;
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, h] : hubs_) {
      uint64_t from = 0;
      for (const auto& w : h.watchers) {
        if (!w->files) continue;
        const uint64_t next = w->next.load(std::memory_order_relaxed);
        from = from == 0 ? next : std::min(from, next);
      }
      // Only this thread erases hubs_: the pointer stays valid.
      if (from != 0) watched.push_back({h.sv.get(), from});
    }
  }
  for (const auto& [sv, waiting] : watched) {
    // The current revision (a read reports it whether or not the key
    // exists), then events past the committed revision (one seek): a
    // commit shows them. File writes do not move the durable watermark.
    uint64_t current = 0;
    (void)sv->GetItem(std::string(1, '\0'), 1, &current);
    if (current <= d.committed_revision) continue;
    FileEventsRequest q;
    q.from_revision = std::max(d.committed_revision + 1, waiting);
    if (q.from_revision > current) continue;
    q.to_revision = current;
    q.max_events = 1;
    absl::StatusOr<FileEventsResult> r = sv->ReadFileEvents(q);
    if (!r.ok() || r->events.empty()) continue;
    last_file_commit_ = now;
    file_commits_.fetch_add(1, std::memory_order_relaxed);
    store_->Commit().IgnoreError();  // a failure shows in the writes' own answers
    return;
  }
}

void WatchHub::Progress(const DurableState& d, Snapshot* s) {
  const absl::Time now = absl::Now();
  for (const auto& w : s->watchers) {
    if (!w->progress_notify || now - w->last_sent < limits_.progress_interval) continue;
    const uint64_t next = w->next.load(std::memory_order_relaxed);
    if (next < s->cursor) continue;  // still catching up: its events say how far
    v1::WatchResponse r;
    r.set_watch_id(w->id);
    r.set_revision(std::min(next - 1, d.revision));
    w->last_sent = now;
    if (!w->sink->Send(w.get(), std::move(r))) Remove(w.get());
  }
}

}  // namespace server
}  // namespace cowkv
