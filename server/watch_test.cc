// Goal: KV.Watch through the generated stub against an in-process server
// (issue 18): events of puts, deletes and Txns in revision order with
// prev_kv, a start in the history, COMPACTED, filters, cancel, progress,
// fragments of a large revision, many watchers served by one history read
// per batch, a deleted subvolume, a slow reader cancelled at its byte
// bound (its events up to then contiguous), the per-stream limit, access
// control, and bad create requests answered as refused watchers.
#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "gtest/gtest.h"
#include "server/server.h"
#include "server/server_test_util.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {
namespace {

using testing_util::Client;
using testing_util::Ctx;
using testing_util::TestOptions;
using Stream = grpc::ClientReaderWriter<v1::WatchRequest, v1::WatchResponse>;

class Watch : public ::testing::Test {
 public:
  static void SetUpTestSuite() {
    ServerOptions o = TestOptions("watch");
    o.watch.per_stream = 300;
    o.watch.response_bytes = 4096;
    o.watch.stream_buffer_bytes = 256u << 10;
    o.watch.slow_reader_after = absl::Seconds(1);
    o.watch.progress_interval = absl::Milliseconds(200);
    absl::StatusOr<TokenTable> tokens = TokenTable::Parse(
        "admin-token-0123456789 admin\n"
        "reader-token-012345678 read\n"
        "other-token-0123456789 read other\n");
    ASSERT_TRUE(tokens.ok()) << tokens.status();
    o.tokens = *tokens;
    absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = s->release();
    client_ = new Client(server_->port());
  }
  static void TearDownTestSuite() {
    delete client_;
    if (server_ != nullptr) EXPECT_TRUE(server_->Stop().ok());
    delete server_;
  }

 protected:
  static constexpr const char* kAdmin = "admin-token-0123456789";
  static Server* server_;
  static Client* client_;
  v1::KV::Stub& kv() { return *client_->kv; }

  struct Open {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<Stream> stream;
  };
  Open OpenStream(const std::string& token = kAdmin) {
    Open o;
    o.ctx = Ctx(token);
    o.stream = kv().Watch(o.ctx.get());
    return o;
  }
  static v1::WatchRequest CreateReq(const std::string& key, const std::string& end,
                                    uint64_t start = 0, bool prev = false, int64_t id = 0) {
    v1::WatchRequest r;
    v1::WatchCreateRequest* c = r.mutable_create_request();
    c->set_key(key);
    c->set_range_end(end);
    c->set_start_revision(start);
    c->set_prev_kv(prev);
    c->set_watch_id(id);
    return r;
  }
  static v1::WatchResponse Next(Stream* s) {
    v1::WatchResponse r;
    EXPECT_TRUE(s->Read(&r)) << "the stream ended";
    return r;
  }
  // Creates a watcher; returns its id (the created response checked).
  int64_t Create(Stream* s, const v1::WatchRequest& req) {
    EXPECT_TRUE(s->Write(req));
    v1::WatchResponse r = Next(s);
    EXPECT_TRUE(r.created());
    EXPECT_FALSE(r.canceled()) << r.cancel_reason();
    return r.watch_id();
  }
  uint64_t Put(const std::string& k, const std::string& v, const std::string& sv = "") {
    v1::PutRequest req;
    req.set_subvolume(sv);
    req.set_key(k);
    req.set_value(v);
    v1::PutResponse resp;
    grpc::Status s = kv().Put(Ctx(kAdmin).get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.revision();
  }
  uint64_t Delete(const std::string& k) {
    v1::DeleteRequest req;
    req.set_key(k);
    v1::DeleteResponse resp;
    grpc::Status s = kv().Delete(Ctx(kAdmin).get(), req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.revision();
  }
  // Reads responses until `n` events arrived; they and the responses.
  std::vector<v1::WatchEvent> Events(Stream* s, size_t n, std::vector<v1::WatchResponse>* rs) {
    std::vector<v1::WatchEvent> out;
    while (out.size() < n) {
      v1::WatchResponse r = Next(s);
      if (r.canceled() || r.events_size() == 0) {
        ADD_FAILURE() << "expected events, got " << r.ShortDebugString();
        break;
      }
      for (const v1::WatchEvent& e : r.events()) out.push_back(e);
      if (rs != nullptr) rs->push_back(r);
    }
    return out;
  }
  static std::string Prefix(const std::string& p) {
    std::string e = p;
    e.back()++;
    return e;
  }
};
Server* Watch::server_ = nullptr;
Client* Watch::client_ = nullptr;

TEST_F(Watch, PutsAndDeletesInRevisionOrderWithPrevKv) {
  Open o = OpenStream();
  const int64_t id = Create(o.stream.get(), CreateReq("a/", Prefix("a/"), 0, true));
  const uint64_t r1 = Put("a/1", "one");
  const uint64_t r2 = Put("a/1", "uno");
  Put("b/other", "not watched");
  const uint64_t r3 = Delete("a/1");
  std::vector<v1::WatchEvent> ev = Events(o.stream.get(), 3, nullptr);
  ASSERT_EQ(ev.size(), 3u);
  EXPECT_EQ(ev[0].type(), v1::WatchEvent::PUT);
  EXPECT_EQ(ev[0].kv().value(), "one");
  EXPECT_EQ(ev[0].kv().mod_revision(), r1);
  EXPECT_EQ(ev[0].kv().version(), 1u);
  EXPECT_FALSE(ev[0].has_prev_kv());
  EXPECT_EQ(ev[1].kv().value(), "uno");
  EXPECT_EQ(ev[1].kv().mod_revision(), r2);
  EXPECT_EQ(ev[1].prev_kv().value(), "one");
  EXPECT_EQ(ev[2].type(), v1::WatchEvent::DELETE);
  EXPECT_EQ(ev[2].kv().key(), "a/1");
  EXPECT_EQ(ev[2].kv().mod_revision(), r3);
  EXPECT_EQ(ev[2].prev_kv().value(), "uno");
  // A second watcher from r1 replays the same events from the history.
  const int64_t old = Create(o.stream.get(), CreateReq("a/1", "", r1, true));
  EXPECT_NE(old, id);
  std::vector<v1::WatchEvent> again = Events(o.stream.get(), 3, nullptr);
  ASSERT_EQ(again.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(again[i].ShortDebugString(), ev[i].ShortDebugString());
  o.stream->WritesDone();
  v1::WatchResponse r;
  while (o.stream->Read(&r)) {
  }
  EXPECT_TRUE(o.stream->Finish().ok());
}

// An async write reaches a watcher without waiting for an engine commit
// (the tests' server has none: commit_interval_ms 0): the hub makes it
// durable with a durable no-op when nothing became durable for a poll.
TEST_F(Watch, AsyncWritesReachWatchersWithoutACommit) {
  Open o;
  o.ctx = Ctx(kAdmin);
  o.ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  o.stream = kv().Watch(o.ctx.get());
  Create(o.stream.get(), CreateReq("async/", Prefix("async/")));
  v1::PutRequest req;
  req.set_key("async/1");
  req.set_value("later");
  req.set_durability(v1::DURABILITY_ASYNC);
  v1::PutResponse resp;
  grpc::Status st = kv().Put(Ctx(kAdmin).get(), req, &resp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  const absl::Time t0 = absl::Now();
  std::vector<v1::WatchEvent> ev = Events(o.stream.get(), 1, nullptr);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kv().value(), "later");
  EXPECT_EQ(ev[0].kv().mod_revision(), resp.revision());
  EXPECT_LT(absl::Now() - t0, absl::Seconds(5));
  o.ctx->TryCancel();
}

TEST_F(Watch, CompactedStartIsCancelledWithTheCompactRevision) {
  Put("c/1", "x");
  const uint64_t r = Put("c/1", "y");
  Put("c/1", "z");
  v1::CompactRequest cq;
  cq.set_revision(r);
  v1::CompactResponse cr;
  ASSERT_GRPC_OK(kv().Compact(Ctx(kAdmin).get(), cq, &cr));
  Open o = OpenStream();
  Create(o.stream.get(), CreateReq("c/1", "", 1));
  v1::WatchResponse c = Next(o.stream.get());
  EXPECT_TRUE(c.canceled());
  EXPECT_EQ(c.cancel_code(), v1::WATCH_CANCEL_COMPACTED);
  EXPECT_EQ(c.compact_revision(), cr.compact_revision() + 1);
  EXPECT_EQ(c.error_reason(), "COMPACTED");
  // Restarting there works.
  Create(o.stream.get(), CreateReq("c/1", "", c.compact_revision()));
  std::vector<v1::WatchEvent> ev = Events(o.stream.get(), 1, nullptr);
  EXPECT_EQ(ev[0].kv().value(), "z");
}

TEST_F(Watch, FiltersCancelAndProgress) {
  Open o = OpenStream();
  v1::WatchRequest req = CreateReq("f/", Prefix("f/"));
  req.mutable_create_request()->add_filters(v1::WatchCreateRequest::NOPUT);
  const int64_t id = Create(o.stream.get(), req);
  Put("f/1", "x");
  const uint64_t d = Delete("f/1");
  std::vector<v1::WatchEvent> ev = Events(o.stream.get(), 1, nullptr);
  EXPECT_EQ(ev[0].type(), v1::WatchEvent::DELETE);
  EXPECT_EQ(ev[0].kv().mod_revision(), d);
  v1::WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(id);
  ASSERT_TRUE(o.stream->Write(cancel));
  v1::WatchResponse c = Next(o.stream.get());
  EXPECT_TRUE(c.canceled());
  EXPECT_EQ(c.cancel_code(), v1::WATCH_CANCEL_CLIENT);
  Put("f/2", "after the cancel");
  v1::WatchRequest progress;
  progress.mutable_progress_request();
  ASSERT_TRUE(o.stream->Write(progress));
  v1::WatchResponse p = Next(o.stream.get());  // nothing of the cancelled watcher first
  EXPECT_EQ(p.watch_id(), -1);
  EXPECT_EQ(p.events_size(), 0);
  // progress_notify: an empty response while nothing changes.
  v1::WatchRequest pn = CreateReq("quiet/", Prefix("quiet/"));
  pn.mutable_create_request()->set_progress_notify(true);
  const int64_t q = Create(o.stream.get(), pn);
  v1::WatchResponse n = Next(o.stream.get());
  EXPECT_EQ(n.watch_id(), q);
  EXPECT_EQ(n.events_size(), 0);
  EXPECT_GE(n.revision(), d);
}

TEST_F(Watch, LargeRevisionIsFragmented) {
  Open o = OpenStream();
  Create(o.stream.get(), CreateReq("big/", Prefix("big/")));
  v1::TxnRequest t;
  for (int i = 0; i < 10; ++i) {
    v1::RequestOp* op = t.add_success();
    op->mutable_put()->set_key(absl::StrCat("big/", i));
    op->mutable_put()->set_value(std::string(1500, 'a' + i));
  }
  v1::TxnResponse tr;
  ASSERT_GRPC_OK(kv().Txn(Ctx(kAdmin).get(), t, &tr));
  std::vector<v1::WatchResponse> rs;
  std::vector<v1::WatchEvent> ev = Events(o.stream.get(), 10, &rs);
  ASSERT_EQ(ev.size(), 10u);
  ASSERT_GT(rs.size(), 1u);  // 15 KB over 4 KB responses
  for (size_t i = 0; i < rs.size(); ++i) {
    EXPECT_EQ(rs[i].fragment(), i + 1 < rs.size()) << i;
  }
  for (const v1::WatchEvent& e : ev) EXPECT_EQ(e.kv().mod_revision(), tr.revision());
}

TEST_F(Watch, ManyWatchersShareOneHistoryRead) {
  Open o = OpenStream();
  constexpr int kWatchers = 200, kPuts = 10;
  for (int i = 0; i < kWatchers; ++i) Create(o.stream.get(), CreateReq("m/", Prefix("m/")));
  const uint64_t reads = server_->watch_hub().hub_reads();
  const uint64_t catchups = server_->watch_hub().catchup_reads();
  for (int i = 0; i < kPuts; ++i) Put(absl::StrCat("m/", i), "v");
  std::map<int64_t, int> got;
  size_t done = 0;
  while (done < kWatchers) {
    v1::WatchResponse r = Next(o.stream.get());
    ASSERT_FALSE(r.canceled()) << r.cancel_reason();
    if ((got[r.watch_id()] += r.events_size()) == kPuts) ++done;
  }
  EXPECT_LE(server_->watch_hub().hub_reads() - reads, static_cast<uint64_t>(kPuts));
  EXPECT_EQ(server_->watch_hub().catchup_reads() - catchups, 0u);
}

TEST_F(Watch, DeletedSubvolumeCancelsItsWatchers) {
  v1::CreateSubvolumeRequest cs;
  cs.set_name("doomed");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(client_->subvolumes->Create(Ctx(kAdmin).get(), cs, &info));
  Open o = OpenStream();
  v1::WatchRequest req = CreateReq("k", "");
  req.mutable_create_request()->set_subvolume("doomed");
  Create(o.stream.get(), req);
  Put("k", "v", "doomed");
  EXPECT_EQ(Events(o.stream.get(), 1, nullptr)[0].kv().value(), "v");
  v1::DeleteSubvolumeRequest ds;
  ds.set_name("doomed");
  v1::DeleteSubvolumeResponse dr;
  ASSERT_GRPC_OK(client_->subvolumes->Delete(Ctx(kAdmin).get(), ds, &dr));
  v1::WatchResponse c = Next(o.stream.get());
  EXPECT_TRUE(c.canceled());
  EXPECT_EQ(c.cancel_code(), v1::WATCH_CANCEL_SUBVOLUME_DELETED);
}

// Revisions are store-wide: a watcher created on a subvolume before its
// first KV change still gets that change when other subvolumes took the
// revisions in between (it was told COMPACTED before the events floor).
TEST_F(Watch, WatcherBeforeASubvolumesFirstPutIsNotCompacted) {
  v1::CreateSubvolumeRequest cs;
  cs.set_name("late");
  v1::SubvolumeInfo info;
  ASSERT_GRPC_OK(client_->subvolumes->Create(Ctx(kAdmin).get(), cs, &info));
  // A watcher from "now" (a revision seen before the subvolume's first
  // put), created live, and one created afterwards from the same start
  // (it catches up from the history).
  const uint64_t now = Put("elsewhere", "x");
  Open o = OpenStream();
  v1::WatchRequest req = CreateReq("k", "", now + 1);
  req.mutable_create_request()->set_subvolume("late");
  Create(o.stream.get(), req);
  for (int i = 0; i < 5; ++i) Put("elsewhere", "x");
  const uint64_t rev = Put("k", "first", "late");
  std::vector<v1::WatchEvent> ev = Events(o.stream.get(), 1, nullptr);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kv().value(), "first");
  EXPECT_EQ(ev[0].kv().mod_revision(), rev);
  Open later = OpenStream();
  Create(later.stream.get(), req);
  ev = Events(later.stream.get(), 1, nullptr);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].kv().mod_revision(), rev);
}

TEST_F(Watch, SlowReaderIsCancelledAfterContiguousEvents) {
  Open o = OpenStream();
  Create(o.stream.get(), CreateReq("slow/", Prefix("slow/")));
  // Not reading: gRPC's windows fill, then the stream's soft bound; the
  // stream stays full, nothing written, past slow_reader_after (1 s).
  const std::string v(60000, 's');
  uint64_t first = 0;
  for (int i = 0; i < 150; ++i) {
    const uint64_t r = Put(absl::StrCat("slow/", i % 7), v);
    if (i == 0) first = r;
  }
  absl::SleepFor(absl::Milliseconds(2500));
  uint64_t expect = first;
  int events = 0;
  for (;;) {
    v1::WatchResponse r = Next(o.stream.get());
    if (r.canceled()) {
      EXPECT_EQ(r.cancel_code(), v1::WATCH_CANCEL_SLOW_READER) << r.cancel_reason();
      break;
    }
    for (const v1::WatchEvent& e : r.events()) {
      EXPECT_GE(e.kv().mod_revision(), expect);
      expect = e.kv().mod_revision() + 1;
      ++events;
    }
    ASSERT_LT(events, 150) << "never cancelled";
  }
  EXPECT_GT(events, 0);
}

// Unsynced watchers (created at a past revision) of different ranges catch
// up together: one history read per page for all, not one per watcher, and
// each gets exactly its own events, in order.
TEST_F(Watch, UnsyncedWatchersShareTheirCatchUpReads) {
  constexpr int kKeys = 8, kRounds = 5, kWatchers = 40;
  uint64_t first = 0;
  for (int r = 0; r < kRounds; ++r) {
    for (int k = 0; k < kKeys; ++k) {
      const uint64_t rev = Put(absl::StrCat("cu/", k, "/x"), absl::StrCat(r));
      if (first == 0) first = rev;
    }
  }
  Open o = OpenStream();
  const uint64_t catchups = server_->watch_hub().catchup_reads();
  // Watcher i watches key class i % kKeys from revision first + i.
  std::map<int64_t, int> class_of;
  std::map<int64_t, uint64_t> from;
  for (int i = 0; i < kWatchers; ++i) {
    ASSERT_TRUE(o.stream->Write(CreateReq(absl::StrCat("cu/", i % kKeys, "/"),
                                          Prefix(absl::StrCat("cu/", i % kKeys, "/")), first + i)));
  }
  std::map<int64_t, std::vector<uint64_t>> got;
  int created = 0;
  size_t events = 0, want = 0;
  for (int i = 0; i < kWatchers; ++i) {
    // Events of class c at revisions >= first + i: rounds whose put of c is there.
    for (int r = 0; r < kRounds; ++r) want += first + r * kKeys + (i % kKeys) >= first + i;
  }
  while (created < kWatchers || events < want) {
    v1::WatchResponse r = Next(o.stream.get());
    ASSERT_FALSE(r.canceled()) << r.cancel_reason();
    if (r.created()) {
      class_of[r.watch_id()] = created % kKeys;
      from[r.watch_id()] = first + created;
      ++created;
      continue;
    }
    for (const v1::WatchEvent& e : r.events()) {
      got[r.watch_id()].push_back(e.kv().mod_revision());
      EXPECT_EQ(e.kv().key(), absl::StrCat("cu/", class_of[r.watch_id()], "/x"));
      EXPECT_GE(e.kv().mod_revision(), from[r.watch_id()]);
      ++events;
    }
  }
  EXPECT_EQ(events, want);
  for (const auto& [id, revs] : got) {
    EXPECT_TRUE(std::is_sorted(revs.begin(), revs.end())) << id;
    EXPECT_EQ(std::adjacent_find(revs.begin(), revs.end()), revs.end()) << id;
  }
  // Created in one burst, caught up by a few shared reads (one per
  // watcher before: kWatchers).
  EXPECT_LE(server_->watch_hub().catchup_reads() - catchups, 10u);
}

TEST_F(Watch, BadCreatesAreRefused) {
  Open o = OpenStream();
  auto refused = [&](const v1::WatchRequest& req) {
    EXPECT_TRUE(o.stream->Write(req));
    v1::WatchResponse r = Next(o.stream.get());
    EXPECT_TRUE(r.canceled());
    EXPECT_EQ(r.cancel_code(), v1::WATCH_CANCEL_REFUSED);
    return r.error_code();
  };
  EXPECT_EQ(refused(CreateReq("", "")), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused(CreateReq("b", "a")), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused(CreateReq("a", "", 0, false, -3)), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(refused(CreateReq(std::string(1025, 'k'), "")), grpc::StatusCode::INVALID_ARGUMENT);
  v1::WatchRequest bad_filter = CreateReq("a", "");
  bad_filter.mutable_create_request()->add_filters(
      static_cast<v1::WatchCreateRequest::FilterType>(7));
  EXPECT_EQ(refused(bad_filter), grpc::StatusCode::INVALID_ARGUMENT);
  v1::WatchRequest missing = CreateReq("a", "");
  missing.mutable_create_request()->set_subvolume("no-such-subvolume");
  EXPECT_EQ(refused(missing), grpc::StatusCode::NOT_FOUND);
  Create(o.stream.get(), CreateReq("a", "", 0, false, 42));
  EXPECT_EQ(refused(CreateReq("a", "", 0, false, 42)), grpc::StatusCode::ALREADY_EXISTS);
  v1::WatchRequest empty;
  EXPECT_TRUE(o.stream->Write(empty));
  EXPECT_EQ(Next(o.stream.get()).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  v1::WatchRequest cancel;
  cancel.mutable_cancel_request()->set_watch_id(9999);
  EXPECT_TRUE(o.stream->Write(cancel));
  EXPECT_EQ(Next(o.stream.get()).error_code(), grpc::StatusCode::NOT_FOUND);
  // The per-stream bound (300 here).
  for (int i = 1; i < 300; ++i) Create(o.stream.get(), CreateReq("a", ""));
  v1::WatchRequest one_more = CreateReq("a", "");
  EXPECT_TRUE(o.stream->Write(one_more));
  v1::WatchResponse r = Next(o.stream.get());
  EXPECT_EQ(r.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(r.error_reason(), "TOO_MANY_WATCHERS");
}

TEST_F(Watch, AccessControl) {
  // A read token may watch.
  Open reader = OpenStream("reader-token-012345678");
  Create(reader.stream.get(), CreateReq("acl", ""));
  // A token limited to "other" may not watch "default".
  Open other = OpenStream("other-token-0123456789");
  ASSERT_TRUE(other.stream->Write(CreateReq("acl", "")));
  v1::WatchResponse r = Next(other.stream.get());
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  // No token at all: the stream itself is refused.
  Open none = OpenStream("");
  none.stream->WritesDone();
  v1::WatchResponse x;
  EXPECT_FALSE(none.stream->Read(&x));
  EXPECT_EQ(none.stream->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
}

// Goal: stopping the server ends every watch stream at once (its watchers
// cancelled WATCH_CANCEL_SERVER with UNAVAILABLE, then the stream), well within the
// drain timeout, and the store closes cleanly.
// Pacing: a round's pause keeps the hub at `share` of a core, not for
// short rounds, never past 200 ms, and off at share 1.
TEST(WatchPace, PauseKeepsTheHubToItsShare) {
  EXPECT_EQ(PaceAfter(absl::Milliseconds(4), 0.5), absl::Milliseconds(4));
  EXPECT_EQ(PaceAfter(absl::Milliseconds(4), 0.25), absl::Milliseconds(12));
  EXPECT_EQ(PaceAfter(absl::Milliseconds(4), 1), absl::ZeroDuration());
  EXPECT_EQ(PaceAfter(absl::Microseconds(150), 0.5), absl::ZeroDuration());
  EXPECT_EQ(PaceAfter(absl::Seconds(1), 0.5), absl::Milliseconds(200));
  EXPECT_EQ(PaceAfter(absl::Milliseconds(4), 0), absl::ZeroDuration());
}

// Flow control: a client that stops reading holds the server to about the
// soft bound per stream; its events wait in the history and all arrive,
// once, in order, when it reads again — no SLOW_READER for a client that
// is only slow (the stream's 256 KiB hard bound is far below what waits).
TEST(WatchFlow, ASlowStreamIsHeldNotCancelled) {
  ServerOptions o = TestOptions("watch-flow");
  o.watch.response_bytes = 4096;
  o.watch.stream_buffer_bytes = 256u << 10;
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  Client c((*s)->port());
  auto ctx = Ctx();
  auto stream = c.kv->Watch(ctx.get());
  v1::WatchRequest req;
  req.mutable_create_request()->set_key("f/");
  req.mutable_create_request()->set_range_end("f0");
  ASSERT_TRUE(stream->Write(req));
  v1::WatchResponse r;
  ASSERT_TRUE(stream->Read(&r));
  ASSERT_TRUE(r.created());
  constexpr int kPuts = 150;  // 9 MB of values, 35x the hard bound
  const std::string v(60000, 'f');
  uint64_t first = 0;
  for (int i = 0; i < kPuts; ++i) {
    v1::PutRequest p;
    p.set_key(absl::StrCat("f/", i % 7));
    p.set_value(v);
    v1::PutResponse pr;
    ASSERT_TRUE(c.kv->Put(Ctx().get(), p, &pr).ok());
    if (i == 0) first = pr.revision();
  }
  absl::SleepFor(absl::Milliseconds(300));
  EXPECT_GT((*s)->watch_hub().held(), 0u) << "the stream never filled: no flow control tested";
  uint64_t expect = first;
  int events = 0;
  while (events < kPuts) {
    ASSERT_TRUE(stream->Read(&r));
    ASSERT_FALSE(r.canceled()) << r.cancel_reason();
    for (const v1::WatchEvent& e : r.events()) {
      EXPECT_EQ(e.kv().mod_revision(), expect);  // no gap, no duplicate
      expect = e.kv().mod_revision() + 1;
      ++events;
    }
  }
  ctx->TryCancel();
  EXPECT_TRUE((*s)->Stop().ok());
}

TEST(WatchStop, ServerStopCancelsWatchersAndEndsStreams) {
  ServerOptions o = TestOptions("watch-stop");
  o.drain_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<Server>> s = Server::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  Client c((*s)->port());
  auto ctx = Ctx();
  auto stream = c.kv->Watch(ctx.get());
  v1::WatchRequest req;
  req.mutable_create_request()->set_key("k");
  ASSERT_TRUE(stream->Write(req));
  v1::WatchResponse r;
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_TRUE(r.created());
  const absl::Time start = absl::Now();
  EXPECT_TRUE((*s)->Stop().ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  ASSERT_TRUE(stream->Read(&r));
  EXPECT_TRUE(r.canceled());
  EXPECT_EQ(r.cancel_code(), v1::WATCH_CANCEL_SERVER);
  EXPECT_EQ(r.error_code(), grpc::StatusCode::UNAVAILABLE);
  while (stream->Read(&r)) {
  }
  // The server cancels the call to end the stream's reader: CANCELLED (the
  // watcher's response above carries UNAVAILABLE).
  EXPECT_FALSE(stream->Finish().ok());
}

}  // namespace
}  // namespace server
}  // namespace cowkv
