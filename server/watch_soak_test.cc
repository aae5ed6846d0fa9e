// Goal: many watchers on prefixes under a many-client write load lose,
// duplicate and reorder nothing, and cowkvd's memory stays bounded (issue
// 18's soak).
// Method: a cowkvd subprocess; WS_WATCHERS watchers (default 100; the manual
// target 1,000) on WS_PREFIXES prefixes, spread over WS_STREAMS watch
// streams, each on its own connection; a third ask for prev_kv; all start at
// the revision before the first write. WS_WRITERS writer threads (16), each
// on its own connection, put and delete keys of their own under random
// prefixes for WS_SECONDS (4; the manual target 600), recording the
// revision each acknowledged change got. Then every watcher must have
// received exactly the changes under its prefix, in revision order, each
// once, with the right type and value (and prev value where asked), and no
// watcher was cancelled. A sampler reads cowkvd's VmRSS from /proc every
// 100 ms: its peak must stay under WS_RSS_MIB (512). The throughput, event
// count and peak RSS are printed.
#include <algorithm>
#include <cstdlib>
#include <atomic>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cowkvd_process.h"

namespace cowkv {
namespace server {
namespace {

using testing_process::Cowkvd;
using testing_process::EnvInt;
using testing_process::NowNs;
using testing_process::TempDir;
using Stream = grpc::ClientReaderWriter<v1::WatchRequest, v1::WatchResponse>;

struct Config {
  int watchers = static_cast<int>(EnvInt("WS_WATCHERS", 100));
  int prefixes = static_cast<int>(EnvInt("WS_PREFIXES", 50));
  int streams = static_cast<int>(EnvInt("WS_STREAMS", 10));
  int writers = static_cast<int>(EnvInt("WS_WRITERS", 16));
  int64_t seconds = EnvInt("WS_SECONDS", 4);
  int64_t rss_mib = EnvInt("WS_RSS_MIB", 512);
};

// One acknowledged change.
struct Change {
  uint64_t revision = 0;
  std::string key, value;  // value empty: a delete
  std::string prev;        // the value it replaced ("" if none)
};

std::string PrefixOf(int p) { return absl::StrFormat("p%03d/", p); }
std::string RangeEnd(std::string p) {
  p.back()++;
  return p;
}

std::shared_ptr<grpc::Channel> OwnChannel(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // its own connection
  args.SetMaxReceiveMessageSize(-1);
  return grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                   grpc::InsecureChannelCredentials(), args);
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// One writer: puts and deletes keys only it writes, so it knows each
// change's previous value.
void Write(int port, int id, const Config& cfg, const std::atomic<bool>& stop,
           std::vector<Change>* out, std::string* error) {
  std::unique_ptr<v1::KV::Stub> kv = v1::KV::NewStub(OwnChannel(port));
  std::mt19937_64 rng(id * 7919 + 1);
  std::map<std::string, std::string> mine;  // key -> current value
  for (uint64_t n = 0; !stop.load(std::memory_order_relaxed); ++n) {
    const std::string key =
        absl::StrCat(PrefixOf(static_cast<int>(rng() % cfg.prefixes)), "w", id, "-", rng() % 64);
    auto it = mine.find(key);
    Change c{0, key, "", it == mine.end() ? "" : it->second};
    grpc::Status s;
    if (it != mine.end() && rng() % 4 == 0) {
      v1::DeleteRequest req;
      req.set_key(key);
      v1::DeleteResponse resp;
      s = kv->Delete(Ctx().get(), req, &resp);
      c.revision = resp.revision();
      if (s.ok()) mine.erase(it);
    } else {
      c.value = absl::StrCat("v", id, ".", n, std::string(rng() % 96, 'x'));
      v1::PutRequest req;
      req.set_key(key);
      req.set_value(c.value);
      v1::PutResponse resp;
      s = kv->Put(Ctx().get(), req, &resp);
      c.revision = resp.revision();
      if (s.ok()) mine[key] = c.value;
    }
    if (!s.ok()) {
      *error = absl::StrCat("writer ", id, ": ", s.error_message());
      return;
    }
    out->push_back(std::move(c));
  }
}

// One watch stream and what its watchers received.
struct WatchStream {
  std::unique_ptr<v1::KV::Stub> kv;
  grpc::ClientContext ctx;
  std::unique_ptr<Stream> stream;
  std::map<int64_t, int> prefix_of;  // watch id -> prefix
  std::map<int64_t, bool> prev_of;
  absl::Mutex mu;
  std::map<int64_t, std::vector<v1::WatchEvent>> got ABSL_GUARDED_BY(mu);
  std::vector<std::string> problems ABSL_GUARDED_BY(mu);
};

void Read(WatchStream* ws) {
  v1::WatchResponse r;
  while (ws->stream->Read(&r)) {
    absl::MutexLock l(&ws->mu);
    if (r.canceled()) {
      ws->problems.push_back(absl::StrCat("watcher ", r.watch_id(), " cancelled (code ",
                                          r.cancel_code(), "): ", r.cancel_reason()));
      continue;
    }
    std::vector<v1::WatchEvent>& v = ws->got[r.watch_id()];
    for (const v1::WatchEvent& e : r.events()) v.push_back(e);
  }
}

int64_t RssKib(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::atoll(line.c_str() + 6);
  }
  return 0;
}

// Opens the streams and creates every watcher from revision `start`.
std::vector<std::unique_ptr<WatchStream>> OpenWatchers(int port, const Config& cfg,
                                                       uint64_t start) {
  std::vector<std::unique_ptr<WatchStream>> streams;
  for (int s = 0; s < cfg.streams; ++s) {
    auto ws = std::make_unique<WatchStream>();
    ws->kv = v1::KV::NewStub(OwnChannel(port));
    ws->stream = ws->kv->Watch(&ws->ctx);
    streams.push_back(std::move(ws));
  }
  for (int w = 0; w < cfg.watchers; ++w) {
    WatchStream* ws = streams[w % cfg.streams].get();
    const int p = w % cfg.prefixes;
    v1::WatchRequest req;
    v1::WatchCreateRequest* c = req.mutable_create_request();
    c->set_key(PrefixOf(p));
    c->set_range_end(RangeEnd(PrefixOf(p)));
    c->set_start_revision(start);
    c->set_prev_kv(w % 3 == 0);
    c->set_watch_id(w + 1);
    ws->prefix_of[w + 1] = p;
    ws->prev_of[w + 1] = w % 3 == 0;
    EXPECT_TRUE(ws->stream->Write(req));
  }
  return streams;
}

// The watcher's events against every change under its prefix.
void CheckWatcher(int64_t id, int prefix, bool prev, const std::vector<v1::WatchEvent>& got,
                  const std::vector<Change>& all) {
  std::vector<const Change*> want;
  for (const Change& c : all) {
    if (c.key.rfind(PrefixOf(prefix), 0) == 0) want.push_back(&c);
  }
  ASSERT_EQ(got.size(), want.size()) << "watcher " << id << " on " << PrefixOf(prefix);
  for (size_t i = 0; i < got.size(); ++i) {
    const v1::WatchEvent& e = got[i];
    const Change& c = *want[i];
    ASSERT_EQ(e.kv().mod_revision(), c.revision) << "watcher " << id << " event " << i;
    ASSERT_EQ(e.kv().key(), c.key) << "watcher " << id << " event " << i;
    ASSERT_EQ(e.type() == v1::WatchEvent::DELETE, c.value.empty()) << "watcher " << id;
    if (!c.value.empty()) ASSERT_EQ(e.kv().value(), c.value) << "watcher " << id;
    if (prev) ASSERT_EQ(e.prev_kv().value(), c.prev) << "watcher " << id << " event " << i;
  }
}

TEST(WatchSoak, ManyWatchersUnderManyWritersLoseNothingInBoundedMemory) {
  const Config cfg;
  Cowkvd server(absl::StrCat(TempDir(), "/watch-soak-", getpid(), ".img"));
  ASSERT_TRUE(server.Start()) << server.Log();
  const int port = server.port();
  v1::PutRequest first;  // the revision before the writers start
  first.set_key("start");
  v1::PutResponse first_resp;
  ASSERT_TRUE(v1::KV::NewStub(OwnChannel(port))->Put(Ctx().get(), first, &first_resp).ok());
  std::vector<std::unique_ptr<WatchStream>> streams =
      OpenWatchers(port, cfg, first_resp.revision() + 1);
  std::vector<std::thread> readers;
  for (auto& ws : streams) readers.emplace_back(Read, ws.get());

  std::atomic<bool> stop{false}, sampling{true};
  std::atomic<int64_t> peak_kib{0};
  std::thread sampler([&] {
    while (sampling.load()) {
      peak_kib.store(std::max(peak_kib.load(), RssKib(server.pid())));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  std::vector<std::vector<Change>> logs(cfg.writers);
  std::vector<std::string> errors(cfg.writers);
  std::vector<std::thread> writers;
  const int64_t t0 = NowNs();
  for (int i = 0; i < cfg.writers; ++i) {
    writers.emplace_back(Write, port, i, std::cref(cfg), std::cref(stop), &logs[i], &errors[i]);
  }
  std::this_thread::sleep_for(std::chrono::seconds(cfg.seconds));
  stop.store(true);
  for (std::thread& t : writers) t.join();
  const double seconds = (NowNs() - t0) / 1e9;
  std::vector<Change> all;
  for (int i = 0; i < cfg.writers; ++i) {
    EXPECT_EQ(errors[i], "");
    all.insert(all.end(), logs[i].begin(), logs[i].end());
  }
  std::sort(all.begin(), all.end(),
            [](const Change& a, const Change& b) { return a.revision < b.revision; });

  // Every watcher got as many events as there were changes under its
  // prefix (or is stuck: the deadline says so, and the check below what).
  std::map<int, size_t> per_prefix;
  for (const Change& c : all) ++per_prefix[std::atoi(c.key.c_str() + 1)];
  const int64_t deadline = NowNs() + 120'000'000'000;
  for (auto& ws : streams) {
    for (const auto& [id, p] : ws->prefix_of) {
      while (NowNs() < deadline) {
        bool done = false;
        {
          absl::MutexLock l(&ws->mu);
          done = ws->got[id].size() >= per_prefix[p] || !ws->problems.empty();
        }
        if (done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
    }
  }
  sampling.store(false);
  sampler.join();
  uint64_t events = 0;
  for (auto& ws : streams) {
    ws->ctx.TryCancel();
    absl::MutexLock l(&ws->mu);
    for (const std::string& p : ws->problems) ADD_FAILURE() << p;
    for (const auto& [id, p] : ws->prefix_of) {
      events += ws->got[id].size();
      CheckWatcher(id, p, ws->prev_of[id], ws->got[id], all);
    }
  }
  for (std::thread& t : readers) t.join();
  const double peak_mib = peak_kib.load() / 1024.0;
  std::cout << absl::StrFormat(
                   "watch soak: %d watchers, %d writers, %.1f s: %zu changes (%.0f/s), %u events "
                   "delivered (%.0f/s), cowkvd peak RSS %.0f MiB\n",
                   cfg.watchers, cfg.writers, seconds, all.size(), all.size() / seconds, events,
                   events / seconds, peak_mib)
            << std::flush;
  EXPECT_GT(all.size(), 0u);
  EXPECT_LE(peak_mib, static_cast<double>(cfg.rss_mib)) << "cowkvd's memory is not bounded";
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

}  // namespace
}  // namespace server
}  // namespace cowkv

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    std::cerr << "usage: watch_soak_test COWKVD\n";
    return 2;
  }
  cowkv::server::testing_process::g_cowkvd = argv[1];
  return RUN_ALL_TESTS();
}
