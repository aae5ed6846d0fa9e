// KV.Watch's server side (kv_watch_service.cc is the handler).
//
//   client ──stream──> handler thread (Run: auth, requests, writes)
//                        │  ▲ WatchSink: unsent responses (byte-bounded),
//                        │  │ requests read by the stream's reader thread
//                        ▼  │
//   WatchHub thread ── per subvolume: one ReadEvents of each new durable
//                      batch, fanned out to every synced watcher
//
// WatchHub: one thread for the server. It waits for the store's durable
// revision to move (Store::WaitDurable), then per subvolume with watchers
// reads the new revisions [cursor, durable] ONCE (kv ReadEvents, whole
// revisions, kWatchReadEvents at a time) and hands each synced watcher
// (next >= cursor) the events in its range, after its filters. A watcher
// created at an older revision is "unsynced" (next < cursor): it catches up
// with reads of its own key range, a page per round, until it reaches the
// cursor and joins the fan-out (etcd's synced/unsynced watcher groups). So
// N watchers of one subvolume cost one history read per durable batch, not
// N; the unsynced ones share one read per round too (from the oldest of
// their positions, over the union of their ranges). A watcher only ever
// advances `next` by what it was sent: never a gap, never a duplicate.
//
// Flow control (etcd's slow watchers): a stream whose unsent responses
// (queued, or taken by its handler and not yet written) pass the soft bound
// gets no more events; its watchers stay where they are, fall out of the
// fan-out (unsynced) and catch up from the history once the client has
// read the stream below the bound. So the server holds about the soft
// bound per stream however slowly clients read, and a slow client's
// events wait in the history, not in memory. Pacing (WatchLimits::
// fanout_share) pauses the hub only when it has nothing it could send now.
//
// Ends of a watcher, each one response with canceled = true: the client's
// cancel; a start at or below the compact revision, or falling behind it
// while waiting (COMPACTED, with the oldest revision served); its subvolume
// deleted (the store's epoch moves: ReadEvents answers NOT_FOUND); its
// stream full with nothing written for WatchLimits::slow_reader_after, or
// its responses passing the stream's hard byte bound (SLOW_READER); an
// event too large for a message, a history read error or the server
// stopping (SERVER, with the error).
//
// Locking: WatchHub::mu_ guards the subvolume map and counts; a sink's mu_
// guards its queues and its watchers' `canceled`; the hub never holds its
// mu_ while it reads the store or fills a sink. Order: hub mu_ -> sink mu_.
#ifndef COWKV_SERVER_WATCH_HUB_H_
#define COWKV_SERVER_WATCH_HUB_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cowkv/store.h"
#include "cowkv/v1/kv.pb.h"
#include "server/limits.h"

namespace cowkv {
namespace server {

struct WatchLimits {
  int per_stream = kMaxWatchersPerStream;
  int per_peer = kMaxWatchersPerPeer;
  int total = kMaxWatchersTotal;
  uint64_t stream_buffer_bytes = kWatchStreamBufferBytes;
  // Flow control: past this many unsent bytes a stream gets no more events
  // (at most half the hard bound); full this long with nothing written,
  // its waiting watchers end (SLOW_READER).
  uint64_t stream_soft_bytes = kWatchStreamSoftBytes;
  absl::Duration slow_reader_after = absl::Seconds(kWatchSlowReaderSeconds);
  uint64_t response_bytes = kWatchResponseBytes;
  uint64_t read_events = kWatchReadEvents;
  // progress_notify watchers get an empty response after this long
  // without one (etcd: 10 minutes).
  absl::Duration progress_interval = absl::Minutes(10);
  // The hub looks for new watchers and progress this often when nothing
  // becomes durable.
  absl::Duration poll = absl::Milliseconds(50);
  // Pacing: the hub's rounds take at most this share of one core while
  // writes keep coming. After a round that took T, the next starts no
  // sooner than T * (1 / share - 1) later; that pause collects the next
  // revisions into the same responses (one message per watcher for many
  // revisions), so writers keep the cores and watchers lag by about a
  // round (etcd lets events lag too). No pause while some watcher is
  // behind and its stream has room. 1 = no pacing.
  double fanout_share = 0.5;
};

// The soft bound a stream's sink gets from `l`.
uint64_t StreamSoftBytes(const WatchLimits& l);

// The pause after a fan-out round that took `took` (WatchLimits::fanout_share):
// none for rounds under 200 us, at most 200 ms.
absl::Duration PaceAfter(absl::Duration took, double share);

class WatchSink;

// One watcher: what it watches and how far it got. Fields other than
// `next`, `canceled` and `last_sent` are constant after creation.
struct Watcher {
  int64_t id = 0;
  uint64_t subvol = 0;
  std::string peer;
  std::string start, end;  // [start, end), end empty = through the last key
  bool no_put = false, no_delete = false, prev_kv = false, progress_notify = false;
  // A file watcher (WatchCreateRequest.files): its paths. It holds one
  // Subvolume::StartFileEvents registration, which Remove ends.
  bool files = false;
  std::string file_prefix;
  std::shared_ptr<WatchSink> sink;
  // The first revision not sent yet; written by the hub thread only.
  std::atomic<uint64_t> next{0};
  bool canceled = false;  // guarded by sink->mu_
  absl::Time last_sent;   // the hub thread's (progress_notify)
};

// A stream's queues: responses for the handler to write (the hub's events,
// bounded in bytes, and the handler's own answers), and requests the
// reader thread read. Thread-safe.
class WatchSink {
 public:
  WatchSink(uint64_t buffer_bytes, uint64_t soft_bytes)
      : buffer_bytes_(buffer_bytes), soft_bytes_(soft_bytes), last_written_(absl::Now()) {}

  // Queues `r` for `w` unless `w` was cancelled; false (and `w` cancelled
  // with a SLOW_READER response queued instead) when the unsent responses
  // would pass the byte bound.
  bool Send(Watcher* w, v1::WatchResponse r);
  bool IsCanceled(const Watcher* w) const;
  // Cancels `w` (unless it was already) with the response `r`.
  void Cancel(Watcher* w, v1::WatchResponse r);
  // A response not about one watcher's events (created, progress).
  void Control(v1::WatchResponse r);

  // The reader thread: one request (waits while many are unhandled); the
  // end of the client's requests.
  void PushRequest(v1::WatchRequest r);
  void ReaderDone();
  // The handler: waits up to `timeout` for work, then takes it all.
  // Returns false once the reader is done and nothing is left.
  struct Work {
    std::deque<v1::WatchRequest> requests;
    std::deque<v1::WatchResponse> responses;
    std::deque<uint64_t> sizes;  // of each response, for Written
    bool reader_done = false;
  };
  void Take(absl::Duration timeout, Work* work);
  // The handler wrote a response of `bytes` it took: no longer unsent.
  void Written(uint64_t bytes);
  // Flow control (the hub): whether the unsent bytes are under the soft
  // bound. `stuck` (when not) is whether the stream has been full, with
  // nothing written, for longer than `slow_after`.
  bool Room(absl::Time now, absl::Duration slow_after, bool* stuck);
  // The unsent bytes are at or past the soft bound.
  bool Full() const;
  void Wake();
  // The stream ended: every later Send is dropped.
  void Close();

 private:
  void Push(v1::WatchResponse r, uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t buffer_bytes_;
  const uint64_t soft_bytes_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;         // work for the handler
  absl::CondVar reader_cv_;  // room for the reader
  std::deque<v1::WatchResponse> out_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> out_sizes_ ABSL_GUARDED_BY(mu_);
  // Unsent: queued in out_, or taken and not yet Written.
  uint64_t out_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time last_written_ ABSL_GUARDED_BY(mu_);
  absl::Time full_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  std::deque<v1::WatchRequest> in_ ABSL_GUARDED_BY(mu_);
  bool reader_done_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

class WatchHub {
 public:
  WatchHub(Store* store, WatchLimits limits);
  ~WatchHub();
  WatchHub(const WatchHub&) = delete;
  WatchHub& operator=(const WatchHub&) = delete;

  const WatchLimits& limits() const { return limits_; }
  // Registers `w` on subvolume `sv` and queues `created` on its sink
  // before any event can follow it; RESOURCE_EXHAUSTED (TOO_MANY_WATCHERS)
  // past the per-peer or total bound, UNAVAILABLE once stopping (then
  // nothing is queued).
  absl::Status Add(std::shared_ptr<Watcher> w, std::unique_ptr<Subvolume> sv,
                   v1::WatchResponse created);
  // Unregisters `w` (a cancel, or its stream ended); idempotent.
  void Remove(const Watcher* w);
  // Cancels every watcher with SERVER "the server is stopping" and ends the
  // thread; Add fails from then on.
  void Stop();
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }
  // Stop() has queued every watcher's cancel: a stream that sees this
  // finds them in its sink, writes them and ends.
  bool stopped() const { return stopped_.load(std::memory_order_acquire); }

  // Statistics, for tests and metrics: shared reads of new revisions (one
  // per subvolume per batch), catch-up reads, watchers now.
  uint64_t hub_reads() const { return hub_reads_.load(std::memory_order_relaxed); }
  uint64_t catchup_reads() const { return catchup_reads_.load(std::memory_order_relaxed); }
  // Rounds followed by a pause (WatchLimits::fanout_share).
  uint64_t paced() const { return paced_.load(std::memory_order_relaxed); }
  // Times a watcher was passed over because its stream was full.
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  // File watchers' reads, and the commits the hub ran for them.
  uint64_t file_reads() const { return file_reads_.load(std::memory_order_relaxed); }
  uint64_t file_commits() const { return file_commits_.load(std::memory_order_relaxed); }
  int watchers() const;

 private:
  struct SubvolHub {
    std::unique_ptr<Subvolume> sv;
    uint64_t cursor = 0;  // the first revision not read yet
    uint64_t epoch = 0;   // the store's epoch at the last existence check
    std::vector<std::shared_ptr<Watcher>> watchers;
  };
  struct Snapshot {
    uint64_t subvol = 0;
    Subvolume* sv = nullptr;  // lives while its SubvolHub does (only the hub thread erases)
    uint64_t cursor = 0;
    bool check_exists = false;
    std::vector<std::shared_ptr<Watcher>> watchers;
  };
  void Loop();
  // Sleeps `d`, or until Stop().
  void Pause(absl::Duration d);
  // A durable no-op: async writes become durable (and watchable) now.
  void PushAsyncWrites();
  // What a round left: work it could do now (a watcher with room still
  // catching up, more new revisions than one read), or watchers waiting
  // for their streams to drain.
  struct Left {
    bool busy = false;
    bool blocked = false;
  };
  Left Round(const DurableState& d);
  Left RoundOne(const DurableState& d, Snapshot* s, uint64_t* new_cursor);
  // RoundOne's shared read of [cursor, durable] for the synced watchers
  // whose streams have room.
  Left FanOut(const DurableState& d, Snapshot* s, uint64_t* new_cursor);
  // RoundOne's shared read for the unsynced watchers with room: from the
  // oldest of their positions up to the cursor, over the union of their
  // ranges, a page per round.
  Left CatchUp(const DurableState& d, Snapshot* s, std::vector<const Watcher*>* gone);
  // Whether `w`'s stream takes events now; a stream stuck full past
  // WatchLimits::slow_reader_after cancels `w` (SLOW_READER) into `gone`.
  bool HasRoom(Watcher* w, absl::Time now, std::vector<const Watcher*>* gone);
  // Sends `events` from revision `min_revision` on to `w` (its range and
  // filters), grouped into responses of whole revisions; false when `w`
  // ended (cancelled meanwhile, slow). When the stream fills, stops at a
  // revision boundary and sets `resume` to the first revision not sent
  // (else 0: all sent).
  bool Deliver(Watcher* w, const std::vector<WatchEvent>& events, uint64_t header,
               uint64_t min_revision, uint64_t* resume);
  // Ends every watcher of `s` with `r` (a deleted subvolume, a read error).
  void CancelAll(Snapshot* s, const v1::WatchResponse& r);
  void Progress(const DurableState& d, Snapshot* s);
  // File watchers (docs/design.md "File watch"): each reads its own
  // prefix from its next revision up to the committed revision, a page
  // per round; true when some have more.
  bool FileRound(const DurableState& d, Snapshot* s);
  bool DeliverFiles(Watcher* w, const std::vector<FileEvent>& events, uint64_t header);
  // File events wait for an engine commit: when a file watcher's subvolume
  // has events past the committed revision, commit (at most once a poll).
  void CommitForFileWatchers(const DurableState& d);
  void Dropped(const std::vector<const Watcher*>& gone);

  Store* const store_;
  const WatchLimits limits_;
  mutable absl::Mutex mu_;
  std::map<uint64_t, SubvolHub> hubs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, int> per_peer_ ABSL_GUARDED_BY(mu_);
  int total_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> hub_reads_{0};
  std::atomic<uint64_t> catchup_reads_{0};
  std::atomic<uint64_t> paced_{0};
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> file_reads_{0};
  std::atomic<uint64_t> file_commits_{0};
  absl::Time last_file_commit_;  // the hub thread's
  std::thread thread_;
};

// The response that cancels watcher `id`: `code`, a reason, and for an
// error the gRPC code and ErrorInfo reason it maps to.
v1::WatchResponse CancelResponse(int64_t id, v1::WatchCancelCode code, const std::string& reason,
                                 const absl::Status& error = absl::OkStatus());

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_WATCH_HUB_H_
