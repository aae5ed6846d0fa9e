// `cowkv bench [--load s|m|l|xl] [-s NAME] [--prefix P] [--duration SECONDS]
//              [--durability durable|async] [--clients N] [--rate R]
//              [--value-size BYTES]`
//
// etcdctl check perf for cowkvd (docs/cli.md, "bench"; the pure parts are in
// bench.h). A run, in order:
//
//   1. RefuseUsedPrefix: any key under the prefix refuses the run (exit 6)
//      before anything is written, so a user's keys are never touched.
//   2. OpenChannels, Probe: one channel (TCP connection) per 100 clients and
//      one unmeasured Put on each, so the connections are up and the
//      subvolume takes writes before the clock starts. A failed probe ends
//      the run with its status's exit code (after step 4).
//   3. Driver::Run: the load, for --duration or until SIGINT/SIGTERM.
//   4. DeletePrefix: every key under the prefix, whatever happened in 2-3.
//   5. The report; exit 0 on PASS, 1 on FAIL (one stderr line naming the
//      failed criteria), 128 + the signal's number when interrupted.
//
// The driver has `clients` Client objects, each owning a request, a
// response, a context and at most one call. One pacer thread takes a token
// from the bucket and an idle client and starts the client's Put with the
// callback API (stub->async()->Put); the callback, on a gRPC thread, records
// the latency or the error and queues the client as idle again. So there is
// no thread per client and no sleep per call: the pacer sleeps until the
// next token is due or until a client comes back. A client's states, all
// guarded by Driver::mu_:
//
//        +--- TakeReady(): token taken, leaves idle_ ---+
//        |                                              v
//     idle (in idle_)                  starting (pacer only) --Start()--> in flight
//        ^                                                                    |
//        +------------------- OnDone(): latency or error recorded ------------+
//
//   - idle: in idle_, in_flight false; nothing refers to its context.
//   - starting: in neither; only the pacer thread touches it.
//   - in flight: in_flight true, counted in in_flight_ (<= clients: bench.h
//     invariant 1); its request and response belong to gRPC until OnDone;
//     the drain may TryCancel its context after a signal.
#include "clients/cli/bench.h"

#include <grpcpp/grpcpp.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

constexpr char kOp[] = "bench";

// The longest the pacer and the drain go without looking at the signal flag.
constexpr int64_t kPollNs = 20'000'000;

// The signal that interrupted the run, 0 if none. The handler writes it and
// the pacer and the drain poll it: a lock-free atomic is safe in a signal
// handler, and relaxed order is enough because it publishes nothing else.
std::atomic<int> g_signal{0};
static_assert(std::atomic<int>::is_always_lock_free, "written by a signal handler");

extern "C" void OnBenchSignal(int signo) {
  // A second signal (say while the cleanup waits on a dead server): die of
  // it at once, as if the handler were not there.
  if (g_signal.exchange(signo, std::memory_order_relaxed) != 0) {
    signal(signo, SIG_DFL);
    raise(signo);
  }
}

// While it lives, SIGINT and SIGTERM only set g_signal, so that the run
// stops and still deletes its keys.
class SignalScope {
 public:
  SignalScope() {
    g_signal.store(0, std::memory_order_relaxed);
    struct sigaction sa = {};
    sa.sa_handler = OnBenchSignal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    sigaction(SIGTERM, &sa, &old_term_);
  }
  ~SignalScope() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;

 private:
  struct sigaction old_int_ = {};
  struct sigaction old_term_ = {};
};

bool Interrupted() { return g_signal.load(std::memory_order_relaxed) != 0; }

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void SetDeadline(grpc::ClientContext* context, absl::Duration timeout) {
  context->set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
}

// One writer: at most one Put in flight (states in the file comment).
struct Client {
  v1::KV::Stub* stub = nullptr;
  std::unique_ptr<grpc::ClientContext> context;  // a fresh one per call
  v1::PutRequest request;
  v1::PutResponse response;
  int64_t started_ns = 0;
  bool in_flight = false;  // guarded by Driver::mu_
};

class Driver {
 public:
  // `stubs` (one per channel) must outlive the Driver; clients are spread
  // over them round robin. Keys are BenchKey(prefix, first_seq + n).
  Driver(const BenchConfig& c, const Connection& conn,
         const std::vector<std::unique_ptr<v1::KV::Stub>>& stubs, absl::Duration call_timeout,
         uint32_t first_seq);
  Driver(const Driver&) = delete;
  Driver& operator=(const Driver&) = delete;

  // Runs the load for the configured duration (or until a signal), then
  // waits until no call is in flight. Call once.
  BenchOutcome Run();

 private:
  bool HasIdle() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !idle_.empty(); }
  bool NoneInFlight() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return in_flight_ == 0; }
  void Pace(int64_t end_ns);
  void TakeReady(int64_t now_ns);
  void WaitForWork(int64_t now_ns, int64_t end_ns);
  void Start(Client* c);
  void OnDone(Client* c, const grpc::Status& status);
  void Drain();

  // Constant after construction.
  const BenchConfig& config_;
  const Connection& conn_;
  const absl::Duration call_timeout_;
  // Never resized: idle_ and the callbacks hold pointers into it.
  std::vector<Client> clients_;

  // The pacer thread's alone.
  TokenBucket bucket_;
  uint32_t next_seq_;
  int64_t start_ns_ = 0;
  std::vector<Client*> ready_;  // taken from idle_, to start outside mu_

  // Shared with the callbacks.
  absl::Mutex mu_;
  std::deque<Client*> idle_ ABSL_GUARDED_BY(mu_);
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  BenchOutcome outcome_ ABSL_GUARDED_BY(mu_);
  int64_t last_done_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

Driver::Driver(const BenchConfig& c, const Connection& conn,
               const std::vector<std::unique_ptr<v1::KV::Stub>>& stubs, absl::Duration call_timeout,
               uint32_t first_seq)
    : config_(c),
      conn_(conn),
      call_timeout_(call_timeout),
      clients_(c.clients),
      bucket_(c.rate_wps, c.burst),
      next_seq_(first_seq) {
  const std::string value = BenchValue(c.value_size);
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < clients_.size(); ++i) {
    Client& client = clients_[i];
    client.stub = stubs[i % stubs.size()].get();
    client.request.set_subvolume(c.subvolume);
    client.request.set_value(value);
    client.request.set_durability(c.durability_proto);
    idle_.push_back(&client);
  }
}

BenchOutcome Driver::Run() {
  start_ns_ = NowNs();
  const int64_t end_ns = start_ns_ + static_cast<int64_t>(config_.duration_s * 1e9);
  Pace(end_ns);
  const int64_t paced_until_ns = std::min(NowNs(), end_ns);
  Drain();
  absl::MutexLock lock(&mu_);
  outcome_.elapsed_s =
      static_cast<double>(std::max(last_done_ns_, paced_until_ns) - start_ns_) / 1e9;
  return outcome_;
}

void Driver::Pace(int64_t end_ns) {
  for (;;) {
    const int64_t now = NowNs();
    if (now >= end_ns || Interrupted()) return;
    TakeReady(now);
    for (Client* c : ready_) Start(c);
    WaitForWork(NowNs(), end_ns);
  }
}

// Moves idle clients to ready_, one token each, while both last.
void Driver::TakeReady(int64_t now_ns) {
  ready_.clear();
  absl::MutexLock lock(&mu_);
  while (!idle_.empty() && bucket_.TryTake(now_ns - start_ns_)) {
    Client* c = idle_.front();
    idle_.pop_front();
    c->in_flight = true;
    ready_.push_back(c);
  }
  in_flight_ += static_cast<int>(ready_.size());
  outcome_.peak_in_flight = std::max(outcome_.peak_in_flight, in_flight_);
}

// With a client idle, sleeps until the next token; with none, until one
// comes back. Never past the end, nor longer than kPollNs.
void Driver::WaitForWork(int64_t now_ns, int64_t end_ns) {
  int64_t until = std::min(end_ns, now_ns + kPollNs);
  mu_.Lock();
  if (idle_.empty()) {
    mu_.AwaitWithTimeout(absl::Condition(this, &Driver::HasIdle),
                         absl::Nanoseconds(until - now_ns));
    mu_.Unlock();
    return;
  }
  mu_.Unlock();
  until = std::min(until, start_ns_ + bucket_.NextTokenNs(now_ns - start_ns_));
  if (until > now_ns) absl::SleepFor(absl::Nanoseconds(until - now_ns));
}

void Driver::Start(Client* c) {
  c->context = std::make_unique<grpc::ClientContext>();
  SetDeadline(c->context.get(), call_timeout_);
  conn_.Authorize(c->context.get());
  c->request.set_key(BenchKey(config_.prefix, next_seq_++));
  c->started_ns = NowNs();
  // The callback may run on this thread before Put returns (a call that
  // fails at once): mu_ is not held here, so it can take it.
  c->stub->async()->Put(c->context.get(), &c->request, &c->response,
                        [this, c](grpc::Status status) { OnDone(c, status); });
}

void Driver::OnDone(Client* c, const grpc::Status& status) {
  const int64_t now = NowNs();
  absl::MutexLock lock(&mu_);
  if (status.ok()) {
    outcome_.latency.Record(static_cast<uint64_t>((now - c->started_ns + 500) / 1000));
  } else {
    outcome_.AddError(StatusCodeName(status.error_code()), status.error_message());
  }
  last_done_ns_ = std::max(last_done_ns_, now);
  c->in_flight = false;
  --in_flight_;
  idle_.push_back(c);
}

// Waits for the calls in flight; each has a deadline, so this ends. After a
// signal, cancels them once rather than wait out their deadlines.
void Driver::Drain() {
  bool cancelled = false;
  for (;;) {
    std::vector<grpc::ClientContext*> live;
    mu_.Lock();
    const bool done = mu_.AwaitWithTimeout(absl::Condition(this, &Driver::NoneInFlight),
                                           absl::Nanoseconds(kPollNs));
    if (!done && !cancelled && Interrupted()) {
      for (Client& c : clients_) {
        if (c.in_flight) live.push_back(c.context.get());
      }
    }
    mu_.Unlock();
    if (done) return;
    // Outside mu_: a cancelled call's callback takes it. The contexts stay
    // valid: only the pacer, which has stopped, replaces them.
    for (grpc::ClientContext* context : live) context->TryCancel();
    cancelled = cancelled || !live.empty();
  }
}

// Step 1: a prefix that holds any key is refused (exit 6).
int RefuseUsedPrefix(Connection& conn, const BenchConfig& c) {
  v1::RangeRequest req;
  req.set_subvolume(c.subvolume);
  req.set_prefix(c.prefix);
  req.set_keys_only(true);
  req.set_limit(1);
  v1::RangeResponse resp;
  grpc::Status s = Call(conn, conn.kv(), &v1::KV::Stub::Range, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, conn.globals());
  if (resp.kvs_size() == 0) return kExitOk;
  return Fail(kOp,
              absl::StrCat("prefix \"", EscapeBytes(c.prefix), "\" in subvolume ", c.subvolume,
                           " already holds keys (first: \"", EscapeBytes(resp.kvs(0).key()),
                           "\"); bench deletes every key under its prefix when done, so it "
                           "runs only on an empty one: choose another --prefix"),
              kExitPrecondition);
}

// The channels of step 2, each its own connection, and a KV stub on each.
struct Channels {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  std::vector<std::unique_ptr<v1::KV::Stub>> stubs;
};

Channels OpenChannels(const Connection& conn, int n) {
  Channels out;
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("cowkv.bench_channel", i);  // distinct arguments: distinct subchannels
    out.channels.push_back(conn.NewChannel(args));
    out.stubs.push_back(v1::KV::NewStub(out.channels.back()));
  }
  return out;
}

// Step 2's probes: one Put per channel, keys BenchKey(prefix, 0..n-1).
grpc::Status Probe(const Connection& conn, const BenchConfig& c, const Channels& ch,
                   absl::Duration timeout) {
  v1::PutRequest req;
  req.set_subvolume(c.subvolume);
  req.set_value(BenchValue(c.value_size));
  req.set_durability(c.durability_proto);
  for (size_t i = 0; i < ch.stubs.size(); ++i) {
    grpc::ClientContext context;
    SetDeadline(&context, timeout);
    conn.Authorize(&context);
    req.set_key(BenchKey(c.prefix, static_cast<uint32_t>(i)));
    v1::PutResponse resp;
    grpc::Status s = ch.stubs[i]->Put(&context, req, &resp);
    if (!s.ok()) return s;
  }
  return grpc::Status::OK;
}

// Steps 2 and 3. Returns a failed probe's status; OK when the load ran.
grpc::Status RunLoad(const Connection& conn, const BenchConfig& c, absl::Duration timeout,
                     BenchOutcome* outcome) {
  const Channels ch = OpenChannels(conn, c.channels);
  grpc::Status s = Probe(conn, c, ch, timeout);
  if (!s.ok() || Interrupted()) return s;
  Driver driver(c, conn, ch.stubs, timeout, static_cast<uint32_t>(c.channels));
  *outcome = driver.Run();
  return grpc::Status::OK;
}

// Step 4: Range a page of keys under the prefix, DeleteRange exactly its
// span (DeleteRange takes at most 10,000 keys a call), until none is left;
// at most `rounds` pages, so it ends even if someone keeps writing there.
grpc::Status DeletePrefix(Connection& conn, const BenchConfig& c, uint64_t rounds,
                          uint64_t* deleted) {
  for (uint64_t round = 0; round < rounds; ++round) {
    v1::RangeRequest page_req;
    page_req.set_subvolume(c.subvolume);
    page_req.set_prefix(c.prefix);
    page_req.set_keys_only(true);
    page_req.set_limit(kBenchDeletePageKeys);
    v1::RangeResponse page;
    grpc::Status s = Call(conn, conn.kv(), &v1::KV::Stub::Range, page_req, &page);
    if (!s.ok()) return s;
    if (page.kvs_size() == 0) return grpc::Status::OK;
    v1::DeleteRangeRequest del;
    del.set_subvolume(c.subvolume);
    del.set_start(page.kvs(0).key());
    del.set_end(page.kvs(page.kvs_size() - 1).key() + std::string(1, '\0'));
    del.set_durability(v1::DURABILITY_DURABLE);
    v1::DeleteRangeResponse resp;
    s = Call(conn, conn.kv(), &v1::KV::Stub::DeleteRange, del, &resp);
    if (!s.ok()) return s;
    *deleted += resp.deleted();
  }
  return grpc::Status(grpc::StatusCode::UNKNOWN,
                      absl::StrCat("keys still under the prefix after ", rounds, " rounds"));
}

std::string CleanupProblem(const BenchConfig& c, const grpc::Status& s) {
  return absl::StrCat("could not delete the bench keys under \"", EscapeBytes(c.prefix),
                      "\": ", StatusCodeName(s.error_code()), ": ", s.error_message(),
                      "; delete them with 'cowkv kv del -s ", c.subvolume, " --prefix ",
                      EscapeBytes(c.prefix), "'");
}

// Step 5.
int Report(const BenchConfig& c, const BenchOutcome& o, const grpc::Status& load,
           const grpc::Status& cleanup, const Globals& g) {
  if (!load.ok()) {
    if (cleanup.ok()) return RpcFail(kOp, load, g);
    return RpcFail(kOp,
                   grpc::Status(load.error_code(), absl::StrCat(load.error_message(), "; ",
                                                                CleanupProblem(c, cleanup))),
                   g);
  }
  if (const int signo = g_signal.load(std::memory_order_relaxed); signo != 0) {
    return Fail(kOp,
                absl::StrCat("interrupted by ", signo == SIGINT ? "SIGINT" : "SIGTERM", "; ",
                             cleanup.ok() ? absl::StrCat(o.deleted, " bench keys deleted")
                                          : CleanupProblem(c, cleanup)),
                128 + signo);
  }
  const BenchVerdict v = JudgeBench(c, o);
  const int rc = Emit(kOp, g.json ? DumpJson(BenchJson(c, o, v, g.server)) : BenchText(c, o, v));
  if (rc != kExitOk) return rc;
  if (!cleanup.ok())
    return Fail(kOp, CleanupProblem(c, cleanup), ExitCodeFor(cleanup.error_code()));
  if (!v.pass) return Fail(kOp, BenchFailReason(c, o, v), kExitFailure);
  return kExitOk;
}

// Each write's deadline: --timeout when given (and not 0), else 5 s.
absl::Duration CallTimeout(const Globals& g) {
  if (g.timeout_given && g.timeout_seconds > 0) return absl::Seconds(g.timeout_seconds);
  return absl::Seconds(kBenchDefaultCallTimeoutS);
}

struct BenchArgs {
  BenchFlags flags;
  std::string value_size = "256";
};

int RunBench(const BenchArgs& a, const Globals& g) {
  BenchFlags f = a.flags;
  absl::StatusOr<uint64_t> value_size = ParseSize(a.value_size);
  if (!value_size.ok())
    return Fail(kOp, absl::StrCat("--value-size: ", value_size.status().message()), kExitUsage);
  f.value_size = *value_size;
  absl::StatusOr<BenchConfig> c = ResolveBench(f);
  if (!c.ok()) return Fail(kOp, c.status().message(), kExitUsage);
  if (std::string p = SubvolumeNameProblem(c->subvolume); !p.empty()) {
    return Fail(kOp, p, kExitInvalidArgument);
  }
  int rc = 0;
  std::unique_ptr<Connection> conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  if ((rc = RefuseUsedPrefix(*conn, *c)) != kExitOk) return rc;
  if (!g.json && (rc = Emit(kOp, BenchHeaderText(*c, g.server))) != kExitOk) return rc;
  SignalScope signals;
  BenchOutcome o;
  const grpc::Status load = RunLoad(*conn, *c, CallTimeout(g), &o);
  const uint64_t issued = static_cast<uint64_t>(c->channels) + o.latency.count() + o.errors;
  const grpc::Status cleanup =
      DeletePrefix(*conn, *c, issued / kBenchDeletePageKeys + 3, &o.deleted);
  return Report(*c, o, load, cleanup, g);
}

}  // namespace

RunFn AddBench(CLI::App* app, const GlobalsPtr& g) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app->add_subcommand(
      "bench",
      "Can cowkvd and its disk carry a load? Writes at a target rate under a prefix, "
      "reports PASS or FAIL, deletes the keys (as etcdctl check perf; online)");
  cmd->add_option("--load", a->flags.load,
                  "s: 50 clients, 150 writes/s; m: 200, 1000; l: 500, 8000; xl: 1000, 15000")
      ->check(CLI::IsMember({"s", "m", "l", "xl"}))
      ->default_str("s");
  cmd->add_option("-s,--subvolume", a->flags.subvolume, "Subvolume to write in")
      ->capture_default_str();
  cmd->add_option("--prefix", a->flags.prefix,
                  "Keys go under this prefix; it must hold no key, and every key under it is "
                  "deleted at the end")
      ->capture_default_str();
  cmd->add_option("--duration", a->flags.duration_s, "Seconds of load")
      ->type_name("SECONDS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--durability", a->flags.durability,
                  "When the server acknowledges a write: durable or async")
      ->check(CLI::IsMember({"durable", "async"}))
      ->capture_default_str();
  cmd->add_option("--clients", a->flags.clients,
                  "Writers, each with one write in flight (instead of the load's)")
      ->check(CLI::Range(1, kBenchMaxClients));
  cmd->add_option("--rate", a->flags.rate_wps,
                  "Target writes/s of all clients together (instead of the load's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--value-size", a->value_size, "Bytes per value (K, M suffixes)")
      ->capture_default_str();
  return [a, g] { return RunBench(*a, *g); };
}

}  // namespace cli
}  // namespace cowkv
