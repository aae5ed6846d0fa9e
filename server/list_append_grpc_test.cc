// Goal: the isolation guarantees of interactive transactions hold as a
// client sees them over gRPC, including across kill -9 restarts of cowkvd:
// committed transactions are strictly serializable, every read of a
// transaction (committed or not) is one revision's state (issue 18),
// nothing acknowledged as durable is lost, and read-only transactions
// always commit.
// Method: Elle's list-append workload against a live server (a cowkvd
// subprocess, or an in-process server when an engine test hook is needed).
// N client threads (LA_THREADS, default 8), each on its own channel (its
// own connection, so a separate peer), run random transactions of 1-4
// micro-ops over a small key space through KV.Begin / TxnGet / TxnPut /
// Commit: a read of a key's list, or an append of a globally unique element
// (read, append ",<elem>", TxnPut); one in ten is abandoned (KV.Abort)
// instead of committed. Every attempt is recorded with its reads, appends,
// read revision, commit revision and start/end times, and goes to the
// list-append checker (engine/serial_test/list_append_checker.h): committed
// ones into the dependency graph, uncommitted ones for the one-revision
// rule. Outcomes as Elle: OK is committed; ABORTED/OUT_OF_RANGE, an Abort,
// or a handle the (restarted) server does not know is not committed; a
// Commit that fails otherwise (UNAVAILABLE when the server dies under it)
// is unknown: its appends may or may not have happened, so it counts as
// committed (with an unknown commit revision and no real-time successor)
// exactly when its elements are in the final lists. With faults
// (LA_RESTART_MS), a thread kill -9's cowkvd and restarts it on the same
// device and port every LA_RESTART_MS (jittered); commits are then all
// DURABLE (only those count as acknowledged), clients see UNAVAILABLE and go
// on once the server is back; a last kill -9 precedes reading the final
// lists, so every acknowledged append must have survived a crash.
// The bank run: accounts with balances, writers transferring between random
// pairs, and read-only audit transactions reading every account: every
// audit must commit at its first attempt and see the constant total.
// To show the checker fails when it should: the same workload on an
// in-process server with the planted bug kTxnReadsLatest (a transaction's
// Get reads the latest value, not its revision's).
// Sizes: LA_SECONDS (default 4), LA_THREADS, LA_RESTART_MS, LA_SEED;
// BANK_SECONDS (default 3). The manual targets set long runs.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "engine/serial_test/list_append_checker.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/cowkvd_process.h"
#include "server/server.h"

namespace cowkv {
namespace server {
namespace {

using serial_test::Elem;
using serial_test::History;
using serial_test::List;
using serial_test::MicroOp;
using serial_test::TxnRecord;

using testing_process::Cowkvd;
using testing_process::EnvInt;
using testing_process::NowNs;
using testing_process::TempDir;

// Its own connection (a local subchannel pool: channels do not share one),
// reconnecting quickly after a restart.
std::unique_ptr<v1::KV::Stub> NewStub(int port) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 250);
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  return v1::KV::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                   grpc::InsecureChannelCredentials(), args));
}

std::unique_ptr<grpc::ClientContext> Ctx() {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// ---- The list-append workload --------------------------------------------------------------

constexpr int kKeys = 12;
constexpr int kMaxOpsPerTxn = 4;
constexpr uint64_t kAppendsPerKey = 400;  // per key generation (Elle's max-writes-per-key)
constexpr char kPrefix[] = "la/";

struct Config {
  int threads = 8;
  int64_t run_ms = 4000;
  int64_t restart_ms = 0;  // 0: no faults
  uint64_t seed = 1;
};

Config ConfigFromEnv(int64_t default_restart_ms) {
  Config c;
  c.threads = static_cast<int>(EnvInt("LA_THREADS", 8));
  c.run_ms = EnvInt("LA_SECONDS", 4) * 1000;
  c.restart_ms = EnvInt("LA_RESTART_MS", default_restart_ms);
  c.seed = static_cast<uint64_t>(EnvInt("LA_SEED", 1));
  return c;
}

enum class Outcome { kCommitted, kNotCommitted, kUnknown };

struct Shared {
  explicit Shared(Config c) : cfg(c), per_thread(c.threads) {}
  const Config cfg;
  int port = 0;
  std::atomic<bool> stop{false};
  // Bumped before each kill: a NOT_FOUND handle after it is a lost one.
  std::atomic<uint64_t> epoch{0};
  std::atomic<Elem> next_elem{1};
  std::atomic<uint64_t> committed_appends{0};
  std::atomic<uint64_t> attempts{0}, aborted{0}, abandoned{0}, lost{0}, unknown{0};
  std::atomic<uint64_t> refused{0};  // Begin failed: the server was down
  // Read-only commits: made, refused (ABORTED/OUT_OF_RANGE: must never
  // happen), failed by a restart.
  std::atomic<uint64_t> readonly_commits{0}, readonly_refused{0}, readonly_faulted{0};
  mutable absl::Mutex mu;
  std::map<grpc::StatusCode, uint64_t> fault_codes ABSL_GUARDED_BY(mu);  // calls a restart failed
  // Gaps between successive Begins (any client): the unavailability.
  std::atomic<int64_t> last_begun_ns{0}, longest_gap_ns{0}, gaps_over_100ms_ns{0};
  void NoteBegun() {
    const int64_t now = NowNs();
    const int64_t last = last_begun_ns.exchange(now);
    const int64_t gap = last == 0 ? 0 : now - last;
    if (gap > 100'000'000) gaps_over_100ms_ns.fetch_add(gap);
    int64_t longest = longest_gap_ns.load();
    while (gap > longest && !longest_gap_ns.compare_exchange_weak(longest, gap)) {
    }
  }
  void FaultCode(grpc::StatusCode code) {
    absl::MutexLock l(&mu);
    ++fault_codes[code];
  }
  struct PerThread {
    std::vector<TxnRecord> committed, uncommitted, unknown;
    // The channel saw UNAVAILABLE: open a new one (gRPC's reconnect backoff
    // would keep this one failing for up to seconds after the restart).
    bool reconnect = false;
  };
  std::vector<PerThread> per_thread;
};

std::string KeyFor(const Shared& s, int slot) {
  const uint64_t generation = s.committed_appends.load() / (kKeys * kAppendsPerKey);
  return absl::StrFormat("%sk%06d", kPrefix, generation * kKeys + slot);
}

bool Retryable(const grpc::Status& s) {
  return s.error_code() == grpc::StatusCode::ABORTED ||
         s.error_code() == grpc::StatusCode::OUT_OF_RANGE;
}

// One attempt's state on the wire.
struct Attempt {
  Shared* s;
  v1::KV::Stub* kv;
  uint64_t handle = 0;
  uint64_t epoch = 0;
  TxnRecord rec;
};

// TxnGet of `key` as a list; NOT_FOUND is the empty list unless a restart
// came since Begin (then the handle is what is missing).
grpc::Status ReadList(Attempt* a, const std::string& key, std::string* value, List* list) {
  v1::TxnGetRequest req;
  req.set_handle(a->handle);
  req.set_key(key);
  v1::GetResponse resp;
  grpc::Status st = a->kv->TxnGet(Ctx().get(), req, &resp);
  if (st.error_code() == grpc::StatusCode::NOT_FOUND && a->s->epoch.load() == a->epoch) {
    st = grpc::Status::OK;
    resp.Clear();
  }
  if (!st.ok()) return st;
  *value = resp.kv().value();
  absl::StatusOr<List> parsed = serial_test::ParseList(*value);
  if (!parsed.ok()) return grpc::Status(grpc::StatusCode::DATA_LOSS, parsed.status().ToString());
  *list = *std::move(parsed);
  return grpc::Status::OK;
}

// Begin, then the planned reads and appends; the failing status if any.
grpc::Status RunOps(Attempt* a, std::mt19937_64& rng, bool* wrote) {
  v1::BeginRequest begin;
  v1::BeginResponse begun;
  a->epoch = a->s->epoch.load();
  a->rec.start_ns = NowNs();
  grpc::Status st = a->kv->Begin(Ctx().get(), begin, &begun);
  if (!st.ok()) return st;
  a->handle = begun.handle();
  a->s->NoteBegun();
  a->rec.read_revision = begun.read_revision();
  const int n = 1 + static_cast<int>(rng() % kMaxOpsPerTxn);
  for (int i = 0; i < n; ++i) {
    const bool append = rng() % 2 == 0;
    std::string key = KeyFor(*a->s, static_cast<int>(rng() % kKeys));
    std::string value;
    List list;
    st = ReadList(a, key, &value, &list);
    if (!st.ok()) return st;
    if (!append) {
      a->rec.ops.push_back(MicroOp::Read(std::move(key), std::move(list)));
      continue;
    }
    const Elem elem = a->s->next_elem.fetch_add(1);
    v1::TxnPutRequest put;
    put.set_handle(a->handle);
    put.set_key(key);
    put.set_value(serial_test::AppendToValue(value, elem));
    v1::TxnPutResponse put_resp;
    st = a->kv->TxnPut(Ctx().get(), put, &put_resp);
    if (!st.ok()) return st;
    a->rec.ops.push_back(MicroOp::Append(std::move(key), std::move(list), elem));
    *wrote = true;
  }
  return grpc::Status::OK;
}

// Commits (or abandons) a transaction whose ops went through.
Outcome Finish(Attempt* a, std::mt19937_64& rng, bool wrote) {
  Shared* s = a->s;
  if (rng() % 10 == 0) {
    v1::AbortRequest req;
    req.set_handle(a->handle);
    v1::AbortResponse resp;
    a->kv->Abort(Ctx().get(), req, &resp).ok();  // uncommitted whatever it answers
    s->abandoned.fetch_add(1);
    return Outcome::kNotCommitted;
  }
  v1::CommitRequest req;
  req.set_handle(a->handle);
  const bool durable = s->cfg.restart_ms > 0 || rng() % 8 == 0;
  req.set_durability(durable ? v1::DURABILITY_DURABLE : v1::DURABILITY_ASYNC);
  v1::CommitResponse resp;
  const grpc::Status st = a->kv->Commit(Ctx().get(), req, &resp);
  a->rec.end_ns = NowNs();
  if (st.ok()) {
    a->rec.revision = resp.revision();
    if (!wrote) s->readonly_commits.fetch_add(1);
    return Outcome::kCommitted;
  }
  if (!wrote) (Retryable(st) ? s->readonly_refused : s->readonly_faulted).fetch_add(1);
  if (Retryable(st)) {
    s->aborted.fetch_add(1);
    return Outcome::kNotCommitted;
  }
  // The restarted server does not know the handle: the Commit never
  // reached the one that did (a lost response would be UNAVAILABLE).
  if (st.error_code() == grpc::StatusCode::NOT_FOUND && s->epoch.load() != a->epoch) {
    s->lost.fetch_add(1);
    return Outcome::kNotCommitted;
  }
  s->unknown.fetch_add(1);
  s->FaultCode(st.error_code());
  if (s->cfg.restart_ms == 0)
    ADD_FAILURE() << "Commit: " << st.error_code() << " " << st.error_message();
  return Outcome::kUnknown;
}

// One attempt of a random transaction, recorded by its outcome; false on an
// error that no fault explains.
bool RunAttempt(Shared* s, v1::KV::Stub* kv, int thread, std::mt19937_64& rng) {
  Attempt a{s, kv};
  a.rec.thread = thread;
  s->attempts.fetch_add(1);
  bool wrote = false;
  const grpc::Status st = RunOps(&a, rng, &wrote);
  Shared::PerThread& mine = s->per_thread[thread];
  if (!st.ok()) {
    if (Retryable(st)) {
      mine.uncommitted.push_back(std::move(a.rec));
      s->aborted.fetch_add(1);
      return true;
    }
    (a.handle == 0 ? s->refused : s->lost).fetch_add(1);
    s->FaultCode(st.error_code());
    if (s->cfg.restart_ms == 0) {
      ADD_FAILURE() << "thread " << thread << ": " << st.error_code() << " " << st.error_message();
      return false;
    }
    mine.reconnect = st.error_code() == grpc::StatusCode::UNAVAILABLE;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the server restarts
    return true;
  }
  switch (Finish(&a, rng, wrote)) {
    case Outcome::kCommitted:
      for (const MicroOp& op : a.rec.ops) {
        s->committed_appends.fetch_add(op.kind == MicroOp::Kind::kAppend);
      }
      mine.committed.push_back(std::move(a.rec));
      break;
    case Outcome::kNotCommitted:
      mine.uncommitted.push_back(std::move(a.rec));
      break;
    case Outcome::kUnknown:
      mine.unknown.push_back(std::move(a.rec));
      break;
  }
  return true;
}

void RunClient(Shared* s, int thread) {
  std::mt19937_64 rng(s->cfg.seed * 1000003 + thread);
  std::unique_ptr<v1::KV::Stub> kv = NewStub(s->port);
  while (!s->stop.load()) {
    if (!RunAttempt(s, kv.get(), thread, rng)) {
      s->stop = true;
      return;
    }
    if (s->per_thread[thread].reconnect) {
      kv = NewStub(s->port);
      s->per_thread[thread].reconnect = false;
    }
  }
}

// Every key's list, read outside any transaction (page by page).
bool ReadFinalLists(int port, std::map<std::string, List>* lists) {
  std::unique_ptr<v1::KV::Stub> kv = NewStub(port);
  v1::RangeRequest req;
  req.set_prefix(kPrefix);
  for (;;) {
    v1::RangeResponse resp;
    const grpc::Status st = kv->Range(Ctx().get(), req, &resp);
    if (!st.ok()) {
      ADD_FAILURE() << "final Range: " << st.error_code() << " " << st.error_message();
      return false;
    }
    for (const v1::KeyValue& item : resp.kvs()) {
      absl::StatusOr<List> list = serial_test::ParseList(item.value());
      if (!list.ok()) {
        ADD_FAILURE() << list.status();
        return false;
      }
      (*lists)[item.key()] = *std::move(list);
    }
    if (!resp.more()) return true;
    req.set_page_token(resp.next_page_token());
  }
}

struct RunResult {
  History history;
  uint64_t unknown_applied = 0;  // unknown outcomes found in the final lists
  uint64_t unknown_partial = 0;  // ... with only some of their appends there
  uint64_t restarts = 0;
  serial_test::CheckResult check;
};

// Elle's rule for unknown outcomes: committed iff its appends are in the
// final lists (then at an unknown revision, and with no real-time
// successor: it may have committed as late as the crash).
void ResolveUnknown(Shared* s, RunResult* r) {
  std::set<Elem> present;
  for (const auto& [key, list] : r->history.final_lists) present.insert(list.begin(), list.end());
  for (Shared::PerThread& t : s->per_thread) {
    for (TxnRecord& rec : t.unknown) {
      uint64_t appends = 0, found = 0;
      for (const MicroOp& op : rec.ops) {
        if (op.kind != MicroOp::Kind::kAppend) continue;
        ++appends;
        found += present.count(op.elem);
      }
      if (found == 0) continue;                   // did not happen (or wrote nothing)
      if (found < appends) ++r->unknown_partial;  // the checker reports the lost ones
      ++r->unknown_applied;
      rec.revision = 0;
      rec.end_ns = INT64_MAX;
      r->history.txns.push_back(std::move(rec));
    }
  }
}

void Gather(Shared* s, RunResult* r) {
  for (Shared::PerThread& t : s->per_thread) {
    for (TxnRecord& rec : t.committed) r->history.txns.push_back(std::move(rec));
    for (TxnRecord& rec : t.uncommitted) r->history.attempts.push_back(std::move(rec));
  }
  ResolveUnknown(s, r);
}

// kill -9 and restart every restart_ms (jittered +-50%) until `stop`.
void RunFaults(Shared* s, Cowkvd* server, std::atomic<uint64_t>* restarts) {
  std::mt19937_64 rng(s->cfg.seed * 31337);
  while (!s->stop.load()) {
    const int64_t wait_ms = s->cfg.restart_ms / 2 + static_cast<int64_t>(rng() % s->cfg.restart_ms);
    const int64_t until = NowNs() + wait_ms * 1'000'000;
    while (!s->stop.load() && NowNs() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (s->stop.load()) return;
    s->epoch.fetch_add(1);
    server->Kill9();
    if (!server->Start()) {
      ADD_FAILURE() << "cowkvd did not restart:\n" << server->Log();
      s->stop = true;
      return;
    }
    restarts->fetch_add(1);
  }
}

void PrintSummary(const char* name, const Shared& s, const RunResult& r, double seconds) {
  std::cout << name << ": " << r.history.txns.size() << " committed transactions checked ("
            << s.readonly_commits.load() << " read-only; " << s.committed_appends.load()
            << " acknowledged appends over " << r.history.final_lists.size() << " keys) and "
            << r.history.attempts.size() << " uncommitted attempts, in " << seconds << " s by "
            << s.cfg.threads << " clients; " << s.attempts.load()
            << " attempts: " << s.aborted.load() << " aborted, " << s.abandoned.load()
            << " abandoned, " << s.lost.load() << " lost to a restart, " << s.refused.load()
            << " refused while it restarted, " << s.unknown.load() << " unknown outcomes ("
            << r.unknown_applied << " applied, " << r.unknown_partial
            << " partly); read-only commits refused: " << s.readonly_refused.load()
            << ", failed by a restart: " << s.readonly_faulted.load() << "; " << r.restarts
            << " kill -9 restarts; graph: " << r.check.ww_edges << " ww, " << r.check.wr_edges
            << " wr, " << r.check.rw_edges << " rw, " << r.check.rt_edges << " rt edges\n";
  absl::MutexLock l(&s.mu);
  if (s.fault_codes.empty()) return;
  std::cout << "  no Begin succeeded for " << s.gaps_over_100ms_ns.load() / 1e9
            << " s in all (gaps over 100 ms; longest " << s.longest_gap_ns.load() / 1e6
            << " ms); calls failed by restarts, by code:";
  for (const auto& [code, n] : s.fault_codes) std::cout << " " << code << ":" << n;
  std::cout << "\n";
}

// The workload for cfg.run_ms against `port` (with faults on `server`), then
// a last kill -9 when faulting, the final lists and the checker.
RunResult RunWorkload(Shared* s, Cowkvd* server, const char* name) {
  RunResult r;
  s->port = server ? server->port() : s->port;
  const int64_t t0 = NowNs();
  std::vector<std::thread> threads;
  for (int t = 0; t < s->cfg.threads; ++t) threads.emplace_back(RunClient, s, t);
  std::atomic<uint64_t> restarts{0};
  std::thread faults;
  if (s->cfg.restart_ms > 0) faults = std::thread(RunFaults, s, server, &restarts);
  while (!s->stop.load() && NowNs() < t0 + s->cfg.run_ms * 1'000'000) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  s->stop = true;
  for (std::thread& t : threads) t.join();
  if (faults.joinable()) faults.join();
  const double seconds = (NowNs() - t0) / 1e9;
  r.restarts = restarts.load();
  if (s->cfg.restart_ms > 0) {
    server->Kill9();  // what the clients were told is durable must survive this
    if (!server->Start()) ADD_FAILURE() << "cowkvd did not restart:\n" << server->Log();
    ++r.restarts;
  }
  if (!ReadFinalLists(s->port, &r.history.final_lists)) return r;
  Gather(s, &r);
  r.check = serial_test::CheckListAppend(r.history);
  PrintSummary(name, *s, r, seconds);
  return r;
}

// "internal x3, no single revision x17" (the checker keeps the first 20).
std::string ProblemKinds(const serial_test::CheckResult& r) {
  std::map<std::string, int> kinds;
  for (const std::string& p : r.problems) {
    if (p.find("no single revision") != std::string::npos) {
      ++kinds["no single revision explains the reads"];
    } else if (p.find("does not explain") != std::string::npos) {
      ++kinds["read revision does not explain the reads"];
    } else {
      ++kinds[p.substr(0, p.find(':'))];
    }
  }
  std::vector<std::string> parts;
  for (const auto& [kind, n] : kinds) parts.push_back(absl::StrCat(kind, " x", n));
  return absl::StrJoin(parts, ", ");
}

std::string Problems(const serial_test::CheckResult& r) {
  return absl::StrCat(r.problems.size(), " problem(s):\n", absl::StrJoin(r.problems, "\n"));
}

void RunAgainstCowkvd(int64_t default_restart_ms, const char* name) {
  const Config cfg = ConfigFromEnv(default_restart_ms);
  SCOPED_TRACE(absl::StrCat("replay: LA_SEED=", cfg.seed, " LA_SECONDS=", cfg.run_ms / 1000,
                            " LA_THREADS=", cfg.threads, " LA_RESTART_MS=", cfg.restart_ms));
  Cowkvd server(absl::StrCat(TempDir(), "/la-", getpid(), "-", name, ".img"));
  ASSERT_TRUE(server.Start()) << server.Log();
  Shared s(cfg);
  RunResult r = RunWorkload(&s, &server, name);
  EXPECT_TRUE(r.check.ok()) << Problems(r.check);
  EXPECT_GT(r.history.txns.size(), 100u);
  EXPECT_GT(s.aborted.load(), 0u) << "no conflict: the run exercised nothing";
  EXPECT_GT(r.check.rw_edges, 0u);
  EXPECT_EQ(s.readonly_refused.load(), 0u) << "a read-only transaction was refused its commit";
  if (cfg.restart_ms > 0) {
    EXPECT_GE(r.restarts, 2u);
  }
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

// A short run, one kill -9 restart in it (about LA_SECONDS / 2 in) and the
// last one before the final read.
TEST(ListAppendGrpc, StrictlySerializableAcrossKill9) {
  const Config cfg = ConfigFromEnv(0);
  RunAgainstCowkvd(cfg.run_ms / 2, "short");
}

// The same without faults: async and durable commits mixed.
TEST(ListAppendGrpc, StrictlySerializableNoFaults) {
  if (EnvInt("LA_RESTART_MS", 0) > 0) GTEST_SKIP() << "faults asked for";
  RunAgainstCowkvd(0, "nofault");
}

// An in-process server (cowkvd has no flag for engine test hooks) with the
// planted bug kTxnReadsLatest.
ServerOptions PlantedServerOptions(const std::string& name) {
  ServerOptions o;
  o.device.path = absl::StrCat(TempDir(), "/", name, "-planted-", getpid(), ".img");
  o.device.create_size = 256ull << 20;
  o.listen = "127.0.0.1:0";
  o.metrics_listen = "";
  o.engine.commit_interval_ms = 100;
  o.engine.test_hooks.planted_bug = Options::TestHooks::PlantedBug::kTxnReadsLatest;
  return o;
}

// The planted bug kTxnReadsLatest on an in-process server: what the
// transactions saw is no single revision's state, and the checker says so.
TEST(ListAppendGrpc, CatchesPlantedTxnReadsLatest) {
  ServerOptions o = PlantedServerOptions("la");
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  Config cfg;
  cfg.run_ms = 2000;
  Shared s(cfg);
  s.port = (*server)->port();
  RunResult r = RunWorkload(&s, nullptr, "planted kTxnReadsLatest");
  ASSERT_FALSE(r.check.ok()) << "reads of the latest value went unnoticed";
  std::cout << "the checker on kTxnReadsLatest over gRPC: " << ProblemKinds(r.check)
            << "; the first:\n"
            << r.check.problems[0] << "\n";
  ASSERT_TRUE((*server)->Stop().ok());
}

// ---- Bank transfers with read-only audits ----------------------------------------------------

constexpr int kAccounts = 8;
constexpr int64_t kInitialBalance = 1000;

std::string Account(int i) { return absl::StrFormat("bank/a%02d", i); }

struct Bank {
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> transfers{0}, conflicts{0};
  std::atomic<uint64_t> audits{0}, audit_failures{0}, wrong_totals{0};
  mutable absl::Mutex mu;
  std::string first_failure ABSL_GUARDED_BY(mu);
  void Fail(std::string what) {
    absl::MutexLock l(&mu);
    if (first_failure.empty()) first_failure = std::move(what);
  }
  bool first_failure_empty() {
    absl::MutexLock l(&mu);
    return first_failure.empty();
  }
};

grpc::Status BankGet(v1::KV::Stub* kv, uint64_t handle, int account, int64_t* balance) {
  v1::TxnGetRequest req;
  req.set_handle(handle);
  req.set_key(Account(account));
  v1::GetResponse resp;
  grpc::Status st = kv->TxnGet(Ctx().get(), req, &resp);
  if (st.ok() && !absl::SimpleAtoi(resp.kv().value(), balance)) {
    st = grpc::Status(grpc::StatusCode::DATA_LOSS, "balance is not a number");
  }
  return st;
}

grpc::Status BankPut(v1::KV::Stub* kv, uint64_t handle, int account, int64_t balance) {
  v1::TxnPutRequest req;
  req.set_handle(handle);
  req.set_key(Account(account));
  req.set_value(absl::StrCat(balance));
  v1::TxnPutResponse resp;
  return kv->TxnPut(Ctx().get(), req, &resp);
}

grpc::Status BankCommit(v1::KV::Stub* kv, uint64_t handle, v1::Durability d) {
  v1::CommitRequest req;
  req.set_handle(handle);
  req.set_durability(d);
  v1::CommitResponse resp;
  return kv->Commit(Ctx().get(), req, &resp);
}

// One transfer attempt between two random accounts.
grpc::Status Transfer(v1::KV::Stub* kv, std::mt19937_64& rng) {
  v1::BeginResponse begun;
  grpc::Status st = kv->Begin(Ctx().get(), v1::BeginRequest(), &begun);
  if (!st.ok()) return st;
  const int from = static_cast<int>(rng() % kAccounts);
  const int to = (from + 1 + static_cast<int>(rng() % (kAccounts - 1))) % kAccounts;
  int64_t a = 0, b = 0;
  if (!(st = BankGet(kv, begun.handle(), from, &a)).ok()) return st;
  if (!(st = BankGet(kv, begun.handle(), to, &b)).ok()) return st;
  const int64_t amount = std::min<int64_t>(a, static_cast<int64_t>(rng() % 50));
  if (!(st = BankPut(kv, begun.handle(), from, a - amount)).ok()) return st;
  if (!(st = BankPut(kv, begun.handle(), to, b + amount)).ok()) return st;
  return BankCommit(kv, begun.handle(),
                    rng() % 8 == 0 ? v1::DURABILITY_DURABLE : v1::DURABILITY_ASYNC);
}

void RunTransfers(Bank* bank, int port, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::unique_ptr<v1::KV::Stub> kv = NewStub(port);
  while (!bank->stop.load()) {
    const grpc::Status st = Transfer(kv.get(), rng);
    if (st.ok()) {
      bank->transfers.fetch_add(1);
    } else if (Retryable(st)) {
      bank->conflicts.fetch_add(1);
    } else {
      bank->Fail(absl::StrCat("transfer: ", st.error_code(), " ", st.error_message()));
      return;
    }
  }
}

// One audit: every account in a read-only transaction, which must commit.
void Audit(Bank* bank, v1::KV::Stub* kv) {
  v1::BeginResponse begun;
  grpc::Status st = kv->Begin(Ctx().get(), v1::BeginRequest(), &begun);
  int64_t total = 0;
  for (int i = 0; i < kAccounts && st.ok(); ++i) {
    int64_t balance = 0;
    st = BankGet(kv, begun.handle(), i, &balance);
    total += balance;
  }
  if (st.ok()) st = BankCommit(kv, begun.handle(), v1::DURABILITY_DEFAULT);
  if (!st.ok()) {
    bank->audit_failures.fetch_add(1);
    bank->Fail(absl::StrCat("audit: ", st.error_code(), " ", st.error_message()));
    return;
  }
  bank->audits.fetch_add(1);
  if (total != kAccounts * kInitialBalance) {
    bank->wrong_totals.fetch_add(1);
    bank->Fail(absl::StrCat("audit at revision ", begun.read_revision(), " saw total ", total));
  }
}

void RunAudits(Bank* bank, int port) {
  std::unique_ptr<v1::KV::Stub> kv = NewStub(port);
  while (!bank->stop.load()) Audit(bank, kv.get());
}

bool SeedAccounts(int port) {
  std::unique_ptr<v1::KV::Stub> kv = NewStub(port);
  v1::BeginResponse begun;
  grpc::Status st = kv->Begin(Ctx().get(), v1::BeginRequest(), &begun);
  for (int i = 0; i < kAccounts && st.ok(); ++i) {
    st = BankPut(kv.get(), begun.handle(), i, kInitialBalance);
  }
  if (st.ok()) st = BankCommit(kv.get(), begun.handle(), v1::DURABILITY_DURABLE);
  return st.ok();
}

// Six writers and two auditors for `seconds` (or until the first failure).
void RunBank(Bank* bank, int port, int64_t seconds) {
  ASSERT_TRUE(SeedAccounts(port));
  std::vector<std::thread> threads;
  for (int w = 0; w < 6; ++w) threads.emplace_back(RunTransfers, bank, port, 100 + w);
  for (int a = 0; a < 2; ++a) threads.emplace_back(RunAudits, bank, port);
  const int64_t until = NowNs() + seconds * 1'000'000'000;
  while (NowNs() < until && bank->first_failure_empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  bank->stop = true;
  for (std::thread& t : threads) t.join();
  const uint64_t audits = bank->audits.load(), failed = bank->audit_failures.load();
  std::cout << "bank over gRPC: " << bank->transfers.load() << " transfers committed, "
            << bank->conflicts.load() << " aborted by conflicts; audits (read-only, " << kAccounts
            << " accounts each): " << audits << " committed of " << audits + failed << " ("
            << (audits + failed ? 100.0 * audits / (audits + failed) : 0) << "%), "
            << bank->wrong_totals.load() << " saw a wrong total\n";
}

// Issue 18's figure: read-only audits under the transfer load all commit.
TEST(BankGrpc, AuditsAllCommitAndSeeTheTotal) {
  Cowkvd server(absl::StrCat(TempDir(), "/bank-", getpid(), ".img"));
  ASSERT_TRUE(server.Start()) << server.Log();
  Bank bank;
  ASSERT_NO_FATAL_FAILURE(RunBank(&bank, server.port(), EnvInt("BANK_SECONDS", 3)));
  {
    absl::MutexLock l(&bank.mu);
    EXPECT_TRUE(bank.first_failure.empty()) << bank.first_failure;
  }
  EXPECT_EQ(bank.audit_failures.load(), 0u);
  EXPECT_EQ(bank.wrong_totals.load(), 0u);
  EXPECT_GT(bank.audits.load(), 10u);
  EXPECT_GT(bank.transfers.load(), 10u);
  EXPECT_GT(bank.conflicts.load(), 0u) << "no contention: the run exercised nothing";
  EXPECT_EQ(server.Stop(), 0) << server.Log();
}

// The audit is a real check: with kTxnReadsLatest an audit sums balances of
// different revisions and sees a wrong total.
TEST(BankGrpc, AuditCatchesPlantedTxnReadsLatest) {
  ServerOptions o = PlantedServerOptions("bank");
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  Bank bank;
  ASSERT_NO_FATAL_FAILURE(RunBank(&bank, (*server)->port(), 10));
  EXPECT_GT(bank.wrong_totals.load(), 0u) << "audits reading the latest values went unnoticed";
  absl::MutexLock l(&bank.mu);
  std::cout << "the audit on kTxnReadsLatest: " << bank.first_failure << "\n";
  ASSERT_TRUE((*server)->Stop().ok());
}

}  // namespace
}  // namespace server
}  // namespace cowkv

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  if (argc < 2) {
    fprintf(stderr, "usage: list_append_grpc_test PATH_TO_COWKVD\n");
    return 2;
  }
  cowkv::server::testing_process::g_cowkvd = argv[1];
  return RUN_ALL_TESTS();
}
