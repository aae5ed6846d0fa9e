// grpc_bench: cowkvd against etcd through gRPC, one load generator for both.
//
// The benchmark starts each server itself on loopback with a fresh data
// directory (cowkvd on a zeroed file-backed device, etcd 3.4 from Debian's
// etcd-server with --data-dir), then drives it with the same C++ code: C
// clients spread round-robin over K HTTP/2 connections, each client one
// call in flight (the next call starts when the last one answers), through
// gRPC's callback API on static stubs (no JSON, no reflection). Both
// servers run on the same machine in the same window, so their CPU and
// their disk are shared alike.
//
//   BM_GrpcPut/<sys>/clients:C/conns:K     one durable put (16 B key, 256 B
//                                          value) per call.
//   BM_GrpcGet/<sys>/...                   one read of a loaded key.
//   BM_GrpcTxn100/<sys>/...                100 puts in one Txn, durable;
//                                          items = keys.
//   BM_GrpcRangePage/<sys>/...             the 100 keys [k, k+100) of the
//                                          loaded keys, limit 100; items = keys.
//   BM_GrpcWatch/<sys>/watchers:W          W watchers of the prefix "watch/"
//                                          spread over min(W, 16) watch streams
//                                          (one connection each) while 16
//                                          clients put durably under it over 16
//                                          connections; items = events
//                                          delivered. Each value carries its
//                                          send time: event_lag_p50_us/p99_us
//                                          is from a put's send to its event's
//                                          arrival; events_per_put (= W when
//                                          nothing is lost) counts the events
//                                          of the window's acknowledged puts;
//                                          puts_per_second is the write rate
//                                          beside the watchers (compare with
//                                          BM_GrpcPut/<sys>/clients:16/conns:16);
//                                          canceled counts watchers the server
//                                          ended (cowkv cancels a reader slower
//                                          than its bound).
// <sys> is cowkv or etcd. Durable means cowkv DURABILITY_DURABLE (a log sync,
// group commit) and etcd's only mode (WAL fsync before the answer). Reads
// are etcd's default (linearizable) and cowkv's only kind.
//
// Each run: --warmup_s of load that is not counted, then --duration_s
// counted. items_per_second counts calls (keys for Txn100 and RangePage)
// answered inside the window; p50_us and p99_us are of those calls;
// server_cpu_us_per_op is the server process's user+system CPU over the
// window (/proc/PID/stat, all threads) divided by the calls; server_rss_mib
// is its resident set at the end of the window, server_peak_rss_mib its
// high-water mark so far; errors counts calls that failed (any failure
// fails the benchmark after the run).
//
// Flags (removed before benchmark::Initialize):
//   --duration_s=N   counted seconds per run (default 3)
//   --warmup_s=N     uncounted seconds of load first (default 1)
//   --prefill=N      keys loaded before the first read run (default 10000)
//   --cowkvd=PATH    default: the cowkvd beside this binary's runfiles
//   --etcd=PATH      default /usr/bin/etcd; missing: etcd runs are skipped
//                    with a message (apt-get install etcd-server)
//   --dir=PATH       where the data directories go (default $TEST_TMPDIR,
//                    else /tmp/cowkv-grpcbench)
// and every google-benchmark flag (--benchmark_filter=GrpcPut/.*/clients:16,
// --benchmark_format=json, ...).
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "bench/bench_util.h"
#include "bench/etcd/etcd_kv.grpc.pb.h"
#include "cowkv/v1/kv.grpc.pb.h"

namespace cowkv_bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kValueBytes = 256;
constexpr int kTxnKeys = 100;
constexpr int kPageKeys = 100;

struct Config {
  double duration_s = 3;
  double warmup_s = 1;
  uint64_t prefill = 10000;
  std::string cowkvd;
  std::string etcd = "/usr/bin/etcd";
  std::string dir;
} g_config;

std::string g_run_dir;

// 16-byte keys in numeric order: "key-" + 12 digits.
std::string Key(uint64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "key-%012llu", static_cast<unsigned long long>(i));
  return buf;
}

const std::string& Value() {
  static const std::string v(kValueBytes, 'v');
  return v;
}

// ---- Server processes -------------------------------------------------------

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

struct ProcTimes {
  double cpu_s = 0;         // user + system, all threads
  double rss_mib = 0;       // VmRSS
  double peak_rss_mib = 0;  // VmHWM
};

bool ReadProc(pid_t pid, ProcTimes* out) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // Fields after the command (which may hold spaces) start past the last ')'.
  const size_t close_paren = line.rfind(')');
  if (close_paren == std::string::npos) return false;
  std::istringstream rest(line.substr(close_paren + 2));
  std::vector<std::string> f;
  std::string tok;
  while (rest >> tok) f.push_back(tok);
  // rest[0] is field 3 (state): utime is field 14, stime 15.
  if (f.size() < 13) return false;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  out->cpu_s = (std::stod(f[11]) + std::stod(f[12])) / ticks;
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  while (std::getline(status, line)) {
    if (line.rfind("VmRSS:", 0) == 0) out->rss_mib = std::stod(line.substr(6)) / 1024;
    if (line.rfind("VmHWM:", 0) == 0) out->peak_rss_mib = std::stod(line.substr(6)) / 1024;
  }
  return true;
}

class ServerProcess {
 public:
  ServerProcess(std::string name, std::vector<std::string> argv, std::string log)
      : name_(std::move(name)), argv_(std::move(argv)), log_(std::move(log)) {}
  ~ServerProcess() { Stop(); }

  // "" or what went wrong.
  std::string Start() {
    pid_ = fork();
    if (pid_ < 0) return "fork: " + std::string(std::strerror(errno));
    if (pid_ == 0) {
      int fd = open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
      }
      std::vector<char*> args;
      for (std::string& a : argv_) args.push_back(a.data());
      args.push_back(nullptr);
      execv(args[0], args.data());
      std::fprintf(stderr, "exec %s: %s\n", args[0], std::strerror(errno));
      _exit(127);
    }
    return "";
  }

  void Stop() {
    if (pid_ <= 0) return;
    kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {  // 20 s, then SIGKILL
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = 0;
        return;
      }
      usleep(100000);
    }
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = 0;
  }

  bool Alive() const {
    return pid_ > 0 && kill(pid_, 0) == 0 && waitpid(pid_, nullptr, WNOHANG) == 0;
  }
  pid_t pid() const { return pid_; }
  const std::string& log() const { return log_; }

 private:
  std::string name_;
  std::vector<std::string> argv_;
  std::string log_;
  pid_t pid_ = 0;
};

// ---- Load -------------------------------------------------------------------

// Starts one call for client `client` on connection `conn` (its `seq`-th);
// `done` runs exactly once with the call's status and the items it did.
using Done = std::function<void(const grpc::Status&, uint64_t items)>;
using Issue =
    std::function<void(int conn, int client, uint64_t seq, std::mt19937_64* rng, Done done)>;

struct LoadResult {
  uint64_t calls = 0;  // answered inside the window
  uint64_t items = 0;
  uint64_t errors = 0;  // failed calls, anywhere in the run
  std::string first_error;
  std::vector<double> latencies_s;
  double window_s = 0;
  ProcTimes before, after;
};

class LoadRun {
 public:
  LoadRun(Issue issue, int clients, int conns)
      : issue_(std::move(issue)), clients_(clients), conns_(conns), slots_(clients) {}

  // The counted window, computed as Run computes it (Run starts now).
  static std::pair<Clock::time_point, Clock::time_point> WindowFromNow() {
    const Clock::time_point start =
        Clock::now() + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(g_config.warmup_s));
    return {start, start + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(g_config.duration_s))};
  }

  LoadResult Run(pid_t server) {
    const Clock::time_point start = Clock::now();
    window_start_ = start + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(g_config.warmup_s));
    window_end_ = window_start_ + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(g_config.duration_s));
    {
      absl::MutexLock l(&mu_);
      active_ = clients_;
    }
    for (int i = 0; i < clients_; ++i) {
      slots_[i].rng.seed(0x9e3779b97f4a7c15ull * (i + 1));
      Fire(i);
    }
    LoadResult r;
    std::this_thread::sleep_until(window_start_);
    ReadProc(server, &r.before);
    std::this_thread::sleep_until(window_end_);
    ReadProc(server, &r.after);
    r.window_s = std::chrono::duration<double>(window_end_ - window_start_).count();
    {
      // Every client stops after its call that ends past the window; every
      // call has a deadline, so this wait ends.
      absl::MutexLock l(&mu_);
      while (active_ != 0) cv_.Wait(&mu_);
      r.errors = errors_;
      r.first_error = first_error_;
    }
    for (Slot& s : slots_) {
      r.calls += s.calls;
      r.items += s.items;
      r.latencies_s.insert(r.latencies_s.end(), s.latencies_s.begin(), s.latencies_s.end());
    }
    return r;
  }

 private:
  struct Slot {
    std::mt19937_64 rng;
    uint64_t seq = 0;
    uint64_t calls = 0;
    uint64_t items = 0;
    std::vector<double> latencies_s;
  };

  void Fire(int i) {
    Slot& s = slots_[i];
    const Clock::time_point t0 = Clock::now();
    issue_(i % conns_, i, s.seq++, &s.rng, [this, i, t0](const grpc::Status& st, uint64_t items) {
      const Clock::time_point t1 = Clock::now();
      Slot& s = slots_[i];
      if (!st.ok()) {
        absl::MutexLock l(&mu_);
        if (errors_++ == 0) {
          first_error_ = std::to_string(st.error_code()) + ": " + st.error_message();
        }
      } else if (t0 >= window_start_ && t1 <= window_end_) {
        ++s.calls;
        s.items += items;
        s.latencies_s.push_back(std::chrono::duration<double>(t1 - t0).count());
      }
      if (t1 < window_end_) {
        Fire(i);
        return;
      }
      absl::MutexLock l(&mu_);
      if (--active_ == 0) cv_.SignalAll();
    });
  }

  const Issue issue_;
  const int clients_;
  const int conns_;
  std::vector<Slot> slots_;
  Clock::time_point window_start_, window_end_;
  absl::Mutex mu_;
  absl::CondVar cv_;
  int active_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string first_error_ ABSL_GUARDED_BY(mu_);
};

// ---- Systems ----------------------------------------------------------------

enum class Workload { kPut, kGet, kTxn100, kRangePage };

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kPut:
      return "Put";
    case Workload::kGet:
      return "Get";
    case Workload::kTxn100:
      return "Txn100";
    case Workload::kRangePage:
      return "RangePage";
  }
  return "?";
}

std::vector<std::shared_ptr<grpc::Channel>> Connect(int port, int conns) {
  std::vector<std::shared_ptr<grpc::Channel>> out;
  for (int i = 0; i < conns; ++i) {
    grpc::ChannelArguments args;
    // A channel of its own: one TCP connection per channel.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("cowkv.grpc_bench.connection", i);
    args.SetMaxReceiveMessageSize(64 << 20);
    out.push_back(grpc::CreateCustomChannel("127.0.0.1:" + std::to_string(port),
                                            grpc::InsecureChannelCredentials(), args));
  }
  return out;
}

// ---- Watch -----------------------------------------------------------------

constexpr char kWatchPrefix[] = "watch/";
constexpr char kWatchEnd[] = "watch0";  // '/' + 1: every key under the prefix
constexpr int kWatchWriters = 16;
constexpr int kMaxWatchStreams = 16;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// A put's value: its send time (ns, steady clock) in the first 8 bytes.
std::string StampedValue(int64_t ns) {
  std::string v(kValueBytes, 'w');
  std::memcpy(v.data(), &ns, sizeof(ns));
  return v;
}

int64_t StampOf(const std::string& v) {
  int64_t ns = -1;
  if (v.size() >= sizeof(ns)) std::memcpy(&ns, v.data(), sizeof(ns));
  return ns;
}

// The counted window in steady-clock ns, for the watch readers and the put
// callbacks (set before the load starts).
std::atomic<int64_t> g_watch_from_ns{0}, g_watch_to_ns{0};
std::atomic<uint64_t> g_watch_acked{0};  // acknowledged puts sent inside the window

bool InWatchWindow(int64_t ns) {
  return ns >= g_watch_from_ns.load(std::memory_order_relaxed) &&
         ns <= g_watch_to_ns.load(std::memory_order_relaxed);
}

// Event lags in buckets growing by 5 %, from 1 µs: percentiles without
// keeping every sample (1,000 watchers see millions of events).
class LagHistogram {
 public:
  void Add(int64_t ns) {
    const double us = std::max<double>(1.0, static_cast<double>(ns) / 1e3);
    const size_t b = std::min<size_t>(kBuckets - 1, static_cast<size_t>(std::log(us) / kLogStep));
    ++counts_[b];
    ++total_;
  }
  void Merge(const LagHistogram& o) {
    for (size_t i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
    total_ += o.total_;
  }
  double PercentileUs(double p) const {
    if (total_ == 0) return 0;
    const uint64_t want = static_cast<uint64_t>(p * static_cast<double>(total_ - 1)) + 1;
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= want) return std::exp(kLogStep * (static_cast<double>(i) + 0.5));
    }
    return std::exp(kLogStep * kBuckets);
  }
  uint64_t total() const { return total_; }

 private:
  static constexpr size_t kBuckets = 400;      // up to e^(0.04879 * 400) µs ≈ 300 s
  static constexpr double kLogStep = 0.04879;  // ln(1.05)
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t total_ = 0;
};

// What one stream's reader saw (its thread only, read after the join).
struct WatchTally {
  LagHistogram lags;  // events of puts sent inside the window
  uint64_t canceled = 0;
  std::string cancel_reason;
};

// A running set of watchers (WatchStreams), for System's Drain and Stop.
class WatchSet {
 public:
  virtual ~WatchSet() = default;
  // Waits until no event arrived for `quiet` (or `limit` passed).
  virtual void Drain(std::chrono::milliseconds quiet, std::chrono::seconds limit) = 0;
  // Ends the streams and sums what the readers saw.
  virtual WatchTally Stop() = 0;
};

// W watchers over S streams of one system's Watch RPC (`Service::Stub::Watch`:
// cowkv's KV and etcd's Watch share the shape), each stream on its own
// connection with a reader thread. Both responses have created(),
// canceled(), cancel_reason() and events() of kv().value().
template <typename Service, typename Req, typename Resp>
class WatchStreams final : public WatchSet {
 public:
  // "" or what went wrong; every watcher is created when it returns "".
  std::string Start(int port, int streams, int watchers, const Req& create) {
    auto channels = Connect(port, streams);
    parts_.resize(streams);
    for (int i = 0; i < streams; ++i) {
      Part& p = parts_[i];
      p.stub = Service::NewStub(channels[i]);
      p.stream = p.stub->Watch(&p.ctx);
      p.want = watchers / streams + (i < watchers % streams ? 1 : 0);
      p.reader = std::thread([&p] { Read(&p); });
      for (int w = 0; w < p.want; ++w) {
        if (!p.stream->Write(create)) return "watch stream closed while creating watchers";
      }
    }
    const Clock::time_point deadline = Clock::now() + std::chrono::seconds(30);
    for (Part& p : parts_) {
      while (p.created.load() < p.want) {
        if (Clock::now() > deadline || p.done.load()) return "watchers not created in 30 s";
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    }
    return "";
  }

  WatchTally Stop() override {
    WatchTally sum;
    for (Part& p : parts_) {
      p.ctx.TryCancel();
      if (p.reader.joinable()) p.reader.join();
      if (p.stream) p.stream->Finish().ok();  // CANCELLED, by us
      sum.lags.Merge(p.tally.lags);
      sum.canceled += p.tally.canceled;
      if (sum.cancel_reason.empty()) sum.cancel_reason = p.tally.cancel_reason;
    }
    parts_.clear();
    return sum;
  }

  void Drain(std::chrono::milliseconds quiet, std::chrono::seconds limit) override {
    const Clock::time_point end = Clock::now() + limit;
    uint64_t last = Events();
    Clock::time_point still = Clock::now();
    while (Clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const uint64_t now = Events();
      if (now != last) {
        last = now;
        still = Clock::now();
      } else if (Clock::now() - still >= quiet) {
        return;
      }
    }
  }

  ~WatchStreams() override { Stop(); }

 private:
  struct Part {
    std::unique_ptr<typename Service::Stub> stub;
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<Req, Resp>> stream;
    std::thread reader;
    int want = 0;
    std::atomic<int> created{0};
    std::atomic<uint64_t> events{0};
    std::atomic<bool> done{false};
    WatchTally tally;
  };

  static void Read(Part* p) {
    Resp r;
    while (p->stream->Read(&r)) {
      const int64_t now = NowNs();
      if (r.created()) p->created.fetch_add(1);
      if (r.canceled()) {
        ++p->tally.canceled;
        if (p->tally.cancel_reason.empty()) p->tally.cancel_reason = r.cancel_reason();
      }
      for (const auto& e : r.events()) {
        const int64_t stamp = StampOf(e.kv().value());
        if (InWatchWindow(stamp)) p->tally.lags.Add(now - stamp);
      }
      p->events.fetch_add(r.events_size(), std::memory_order_relaxed);
    }
    p->done.store(true);
  }

  uint64_t Events() const {
    uint64_t n = 0;
    for (const Part& p : parts_) n += p.events.load(std::memory_order_relaxed);
    return n;
  }

  std::deque<Part> parts_;
};

// One system behind a port: how to start it and how to issue each workload.
class System {
 public:
  virtual ~System() = default;
  virtual const char* name() const = 0;
  // "" or why the system cannot run (then its benchmarks are skipped).
  virtual std::string Start() = 0;
  virtual pid_t pid() const = 0;
  // Sets up `conns` connections (reused by later runs with as many).
  virtual void UseConnections(int conns) = 0;
  virtual Issue IssueFor(Workload w) = 0;
  // Watch: W watchers of the prefix over S streams ("" or what went wrong),
  // the durable puts under it, the drain of events in flight, the tally.
  virtual std::string StartWatchers(int streams, int watchers) = 0;
  virtual Issue IssueWatchedPut() = 0;
  void DrainWatchers() {
    if (watch_) watch_->Drain(std::chrono::milliseconds(500), std::chrono::seconds(10));
  }
  WatchTally StopWatchers() {
    WatchTally t;
    if (watch_) t = watch_->Stop();
    watch_.reset();
    return t;
  }
  // Loads keys [0, prefill) once, before the first read.
  std::string EnsureLoaded() {
    if (loaded_) return "";
    UseConnections(1);
    std::string err;
    for (uint64_t first = 0; first < g_config.prefill && err.empty(); first += kTxnKeys) {
      absl::Notification finished;
      TxnOfKeys(first, static_cast<int>(std::min<uint64_t>(kTxnKeys, g_config.prefill - first)),
                [&](const grpc::Status& st, uint64_t) {
                  if (!st.ok()) err = "prefill: " + st.error_message();
                  finished.Notify();  // publishes `err`
                });
      finished.WaitForNotification();
    }
    loaded_ = err.empty();
    return err;
  }

 protected:
  // StartWatchers' watchers: the request creating one on the prefix.
  template <typename Service, typename Req, typename Resp>
  std::string StartWatchStreams(int port, int streams, int watchers) {
    Req create;
    create.mutable_create_request()->set_key(kWatchPrefix);
    create.mutable_create_request()->set_range_end(kWatchEnd);
    auto w = std::make_unique<WatchStreams<Service, Req, Resp>>();
    const std::string err = w->Start(port, streams, watchers, create);
    watch_ = std::move(w);  // stopped by StopWatchers also when Start failed
    return err;
  }
  std::unique_ptr<WatchSet> watch_;

  // A durable Txn putting keys [first, first + n).
  virtual void TxnOfKeys(uint64_t first, int n, Done done) = 0;

  // Waits until a first Put answers OK (the server is up).
  template <typename Fn>
  static std::string WaitReady(const ServerProcess& p, Fn try_once) {
    for (int i = 0; i < 300; ++i) {
      if (!p.Alive()) return "exited during start; see " + p.log();
      if (try_once()) return "";
      usleep(100000);
    }
    return "not ready after 30 s; see " + p.log();
  }

 private:
  bool loaded_ = false;
};

// One call in flight: its context (30 s deadline), request and response,
// deleted by the call's callback.
template <typename Req, typename Resp>
struct Call {
  Call() { ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30)); }
  grpc::ClientContext ctx;
  Req req;
  Resp resp;
};

// Picks the key of a read or write: uniform over the loaded keys.
uint64_t PickKey(std::mt19937_64* rng, uint64_t range) { return (*rng)() % range; }

class CowkvSystem final : public System {
 public:
  const char* name() const override { return "cowkv"; }
  pid_t pid() const override { return proc_ ? proc_->pid() : 0; }

  std::string Start() override {
    if (access(g_config.cowkvd.c_str(), X_OK) != 0) {
      return "no cowkvd at " + g_config.cowkvd + " (--cowkvd=PATH)";
    }
    port_ = FreePort();
    const std::string dir = g_run_dir + "/cowkv";
    mkdir(dir.c_str(), 0755);
    std::vector<std::string> argv = {g_config.cowkvd, "--device", dir + "/device.img",
                                     "--create-size", "4G", "--listen",
                                     "127.0.0.1:" + std::to_string(port_), "--metrics-listen", "",
                                     // One load generator stands for many clients: the per-address
                                     // call limit must not cut it.
                                     "--max-calls-per-client", "100000"};
    proc_ = std::make_unique<ServerProcess>("cowkvd", argv, dir + "/cowkvd.log");
    std::string err = proc_->Start();
    if (!err.empty()) return err;
    auto ch = Connect(port_, 1)[0];
    auto stub = cowkv::v1::KV::NewStub(ch);
    return WaitReady(*proc_, [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      cowkv::v1::PutRequest req;
      req.set_key("grpc_bench/ready");
      cowkv::v1::PutResponse resp;
      return stub->Put(&ctx, req, &resp).ok();
    });
  }

  void UseConnections(int conns) override {
    if (static_cast<int>(stubs_.size()) == conns) return;
    stubs_.clear();
    for (auto& ch : Connect(port_, conns)) stubs_.push_back(cowkv::v1::KV::NewStub(ch));
  }

  Issue IssueFor(Workload w) override {
    switch (w) {
      case Workload::kPut:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          auto* c = new Call<cowkv::v1::PutRequest, cowkv::v1::PutResponse>;
          c->req.set_key(Key(PickKey(rng, 1000000)));
          c->req.set_value(Value());
          c->req.set_durability(cowkv::v1::DURABILITY_DURABLE);
          stubs_[conn]->async()->Put(&c->ctx, &c->req, &c->resp, [c, done](grpc::Status st) {
            done(st, 1);
            delete c;
          });
        };
      case Workload::kGet:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          auto* c = new Call<cowkv::v1::GetRequest, cowkv::v1::GetResponse>;
          c->req.set_key(Key(PickKey(rng, g_config.prefill)));
          stubs_[conn]->async()->Get(&c->ctx, &c->req, &c->resp, [c, done](grpc::Status st) {
            if (st.ok() && c->resp.kv().value().size() != kValueBytes) {
              st = grpc::Status(grpc::StatusCode::DATA_LOSS, "wrong value for " + c->req.key());
            }
            done(st, 1);
            delete c;
          });
        };
      case Workload::kTxn100:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          TxnOn(conn, PickKey(rng, 1000000 - kTxnKeys), kTxnKeys, std::move(done));
        };
      case Workload::kRangePage:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          auto* c = new Call<cowkv::v1::RangeRequest, cowkv::v1::RangeResponse>;
          const uint64_t first = PickKey(rng, g_config.prefill - kPageKeys + 1);
          c->req.set_start(Key(first));
          c->req.set_end(Key(first + kPageKeys));
          c->req.set_limit(kPageKeys);
          stubs_[conn]->async()->Range(&c->ctx, &c->req, &c->resp, [c, done](grpc::Status st) {
            if (st.ok() && c->resp.kvs_size() != kPageKeys) {
              st = grpc::Status(grpc::StatusCode::DATA_LOSS, "short page");
            }
            done(st, kPageKeys);
            delete c;
          });
        };
    }
    return nullptr;
  }

  std::string StartWatchers(int streams, int watchers) override {
    return StartWatchStreams<cowkv::v1::KV, cowkv::v1::WatchRequest, cowkv::v1::WatchResponse>(
        port_, streams, watchers);
  }

  Issue IssueWatchedPut() override {
    return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
      auto* c = new Call<cowkv::v1::PutRequest, cowkv::v1::PutResponse>;
      const int64_t stamp = NowNs();
      c->req.set_key(kWatchPrefix + Key(PickKey(rng, 1000000)));
      c->req.set_value(StampedValue(stamp));
      c->req.set_durability(cowkv::v1::DURABILITY_DURABLE);
      stubs_[conn]->async()->Put(&c->ctx, &c->req, &c->resp, [c, done, stamp](grpc::Status st) {
        if (st.ok() && InWatchWindow(stamp)) g_watch_acked.fetch_add(1);
        done(st, 1);
        delete c;
      });
    };
  }

 protected:
  void TxnOfKeys(uint64_t first, int n, Done done) override { TxnOn(0, first, n, std::move(done)); }

 private:
  void TxnOn(int conn, uint64_t first, int n, Done done) {
    auto* c = new Call<cowkv::v1::TxnRequest, cowkv::v1::TxnResponse>;
    c->req.set_durability(cowkv::v1::DURABILITY_DURABLE);
    for (int i = 0; i < n; ++i) {
      cowkv::v1::PutOp* put = c->req.add_success()->mutable_put();
      put->set_key(Key(first + i));
      put->set_value(Value());
    }
    stubs_[conn]->async()->Txn(&c->ctx, &c->req, &c->resp, [c, n, done](grpc::Status st) {
      if (st.ok() && !c->resp.succeeded()) {
        st = grpc::Status(grpc::StatusCode::INTERNAL, "txn did not succeed");
      }
      done(st, n);
      delete c;
    });
  }

  int port_ = 0;
  std::unique_ptr<ServerProcess> proc_;
  std::vector<std::unique_ptr<cowkv::v1::KV::Stub>> stubs_;
};

class EtcdSystem final : public System {
 public:
  const char* name() const override { return "etcd"; }
  pid_t pid() const override { return proc_ ? proc_->pid() : 0; }

  std::string Start() override {
    if (access(g_config.etcd.c_str(), X_OK) != 0) {
      return "no etcd at " + g_config.etcd + " (apt-get install etcd-server, or --etcd=PATH)";
    }
    port_ = FreePort();
    const int peer = FreePort();
    const std::string dir = g_run_dir + "/etcd";
    mkdir(dir.c_str(), 0755);
    const std::string client_url = "http://127.0.0.1:" + std::to_string(port_);
    const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
    std::vector<std::string> argv = {g_config.etcd,
                                     "--name=bench",
                                     "--data-dir=" + dir + "/data",
                                     "--listen-client-urls=" + client_url,
                                     "--advertise-client-urls=" + client_url,
                                     "--listen-peer-urls=" + peer_url,
                                     "--initial-advertise-peer-urls=" + peer_url,
                                     "--initial-cluster=bench=" + peer_url,
                                     "--logger=zap",
                                     "--log-level=error"};
    proc_ = std::make_unique<ServerProcess>("etcd", argv, dir + "/etcd.log");
    std::string err = proc_->Start();
    if (!err.empty()) return err;
    auto ch = Connect(port_, 1)[0];
    auto stub = etcdserverpb::KV::NewStub(ch);
    return WaitReady(*proc_, [&] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
      etcdserverpb::PutRequest req;
      req.set_key("grpc_bench/ready");
      etcdserverpb::PutResponse resp;
      return stub->Put(&ctx, req, &resp).ok();
    });
  }

  void UseConnections(int conns) override {
    if (static_cast<int>(stubs_.size()) == conns) return;
    stubs_.clear();
    for (auto& ch : Connect(port_, conns)) stubs_.push_back(etcdserverpb::KV::NewStub(ch));
  }

  Issue IssueFor(Workload w) override {
    switch (w) {
      case Workload::kPut:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          auto* c = new Call<etcdserverpb::PutRequest, etcdserverpb::PutResponse>;
          c->req.set_key(Key(PickKey(rng, 1000000)));
          c->req.set_value(Value());
          stubs_[conn]->async()->Put(&c->ctx, &c->req, &c->resp, [c, done](grpc::Status st) {
            done(st, 1);
            delete c;
          });
        };
      case Workload::kGet:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          auto* c = new Call<etcdserverpb::RangeRequest, etcdserverpb::RangeResponse>;
          c->req.set_key(Key(PickKey(rng, g_config.prefill)));
          stubs_[conn]->async()->Range(&c->ctx, &c->req, &c->resp, [c, done](grpc::Status st) {
            if (st.ok() &&
                (c->resp.kvs_size() != 1 || c->resp.kvs(0).value().size() != kValueBytes)) {
              st = grpc::Status(grpc::StatusCode::DATA_LOSS, "wrong value for " + c->req.key());
            }
            done(st, 1);
            delete c;
          });
        };
      case Workload::kTxn100:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          TxnOn(conn, PickKey(rng, 1000000 - kTxnKeys), kTxnKeys, std::move(done));
        };
      case Workload::kRangePage:
        return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
          auto* c = new Call<etcdserverpb::RangeRequest, etcdserverpb::RangeResponse>;
          const uint64_t first = PickKey(rng, g_config.prefill - kPageKeys + 1);
          c->req.set_key(Key(first));
          c->req.set_range_end(Key(first + kPageKeys));
          c->req.set_limit(kPageKeys);
          stubs_[conn]->async()->Range(&c->ctx, &c->req, &c->resp, [c, done](grpc::Status st) {
            if (st.ok() && c->resp.kvs_size() != kPageKeys) {
              st = grpc::Status(grpc::StatusCode::DATA_LOSS, "short page");
            }
            done(st, kPageKeys);
            delete c;
          });
        };
    }
    return nullptr;
  }

  std::string StartWatchers(int streams, int watchers) override {
    return StartWatchStreams<etcdserverpb::Watch, etcdserverpb::WatchRequest,
                             etcdserverpb::WatchResponse>(port_, streams, watchers);
  }

  Issue IssueWatchedPut() override {
    return [this](int conn, int, uint64_t, std::mt19937_64* rng, Done done) {
      auto* c = new Call<etcdserverpb::PutRequest, etcdserverpb::PutResponse>;
      const int64_t stamp = NowNs();
      c->req.set_key(kWatchPrefix + Key(PickKey(rng, 1000000)));
      c->req.set_value(StampedValue(stamp));
      stubs_[conn]->async()->Put(&c->ctx, &c->req, &c->resp, [c, done, stamp](grpc::Status st) {
        if (st.ok() && InWatchWindow(stamp)) g_watch_acked.fetch_add(1);
        done(st, 1);
        delete c;
      });
    };
  }

 protected:
  void TxnOfKeys(uint64_t first, int n, Done done) override { TxnOn(0, first, n, std::move(done)); }

 private:
  void TxnOn(int conn, uint64_t first, int n, Done done) {
    auto* c = new Call<etcdserverpb::TxnRequest, etcdserverpb::TxnResponse>;
    for (int i = 0; i < n; ++i) {
      etcdserverpb::PutRequest* put = c->req.add_success()->mutable_request_put();
      put->set_key(Key(first + i));
      put->set_value(Value());
    }
    stubs_[conn]->async()->Txn(&c->ctx, &c->req, &c->resp, [c, n, done](grpc::Status st) {
      if (st.ok() && !c->resp.succeeded()) {
        st = grpc::Status(grpc::StatusCode::INTERNAL, "txn did not succeed");
      }
      done(st, n);
      delete c;
    });
  }

  int port_ = 0;
  std::unique_ptr<ServerProcess> proc_;
  std::vector<std::unique_ptr<etcdserverpb::KV::Stub>> stubs_;
};

// Started on first use, stopped at exit.
struct Fixture {
  std::unique_ptr<System> system;
  bool started = false;
  std::string start_error;
};
std::map<std::string, Fixture> g_systems;

System* SystemNamed(const std::string& name, std::string* err) {
  Fixture& f = g_systems[name];
  if (!f.started) {
    f.started = true;
    if (name == "cowkv") {
      f.system = std::make_unique<CowkvSystem>();
    } else {
      f.system = std::make_unique<EtcdSystem>();
    }
    f.start_error = f.system->Start();
    if (!f.start_error.empty())
      std::fprintf(stderr, "grpc_bench: %s: %s\n", name.c_str(), f.start_error.c_str());
  }
  *err = f.start_error;
  return f.start_error.empty() ? f.system.get() : nullptr;
}

void StopAll() {
  g_systems.clear();  // ~ServerProcess sends SIGTERM and waits
}

void RunGrpc(benchmark::State& state, Workload w, const std::string& sys_name, int clients,
             int conns) {
  std::string err;
  System* sys = SystemNamed(sys_name, &err);
  if (sys == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  if (w == Workload::kGet || w == Workload::kRangePage) {
    err = sys->EnsureLoaded();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      return;
    }
  }
  sys->UseConnections(conns);
  LoadResult r;
  for (auto _ : state) {
    LoadRun run(sys->IssueFor(w), clients, conns);
    r = run.Run(sys->pid());
    state.SetIterationTime(r.window_s);
  }
  if (r.errors > 0) {
    const std::string msg = std::to_string(r.errors) + " calls failed; first: " + r.first_error;
    state.SkipWithError(msg.c_str());
    return;
  }
  state.SetItemsProcessed(static_cast<int64_t>(r.items));
  state.counters["calls"] = static_cast<double>(r.calls);
  state.counters["p50_us"] = PercentileUs(&r.latencies_s, 0.50);
  state.counters["p99_us"] = PercentileUs(&r.latencies_s, 0.99);
  state.counters["server_cpu_us_per_op"] =
      r.calls == 0 ? 0 : (r.after.cpu_s - r.before.cpu_s) * 1e6 / static_cast<double>(r.calls);
  state.counters["server_cpu_cores"] = (r.after.cpu_s - r.before.cpu_s) / r.window_s;
  state.counters["server_rss_mib"] = r.after.rss_mib;
  state.counters["server_peak_rss_mib"] = r.after.peak_rss_mib;
}

void RunWatch(benchmark::State& state, const std::string& sys_name, int watchers) {
  std::string err;
  System* sys = SystemNamed(sys_name, &err);
  if (sys == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  const int streams = std::min(watchers, kMaxWatchStreams);
  err = sys->StartWatchers(streams, watchers);
  if (!err.empty()) {
    sys->StopWatchers();
    state.SkipWithError(err.c_str());
    return;
  }
  sys->UseConnections(kWatchWriters);
  LoadResult r;
  for (auto _ : state) {
    const auto window = LoadRun::WindowFromNow();
    g_watch_from_ns.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(window.first.time_since_epoch())
            .count());
    g_watch_to_ns.store(
        std::chrono::duration_cast<std::chrono::nanoseconds>(window.second.time_since_epoch())
            .count());
    g_watch_acked.store(0);
    LoadRun run(sys->IssueWatchedPut(), kWatchWriters, kWatchWriters);
    r = run.Run(sys->pid());
    state.SetIterationTime(r.window_s);
  }
  sys->DrainWatchers();
  const WatchTally t = sys->StopWatchers();
  if (r.errors > 0) {
    const std::string msg = std::to_string(r.errors) + " puts failed; first: " + r.first_error;
    state.SkipWithError(msg.c_str());
    return;
  }
  const double acked = static_cast<double>(g_watch_acked.load());
  state.SetItemsProcessed(static_cast<int64_t>(t.lags.total()));
  state.counters["puts_per_second"] = static_cast<double>(r.calls) / r.window_s;
  state.counters["put_p50_us"] = PercentileUs(&r.latencies_s, 0.50);
  state.counters["events_per_put"] = acked == 0 ? 0 : static_cast<double>(t.lags.total()) / acked;
  state.counters["event_lag_p50_us"] = t.lags.PercentileUs(0.50);
  state.counters["event_lag_p99_us"] = t.lags.PercentileUs(0.99);
  state.counters["canceled"] = static_cast<double>(t.canceled);
  state.counters["server_cpu_cores"] = (r.after.cpu_s - r.before.cpu_s) / r.window_s;
  state.counters["server_peak_rss_mib"] = r.after.peak_rss_mib;
  if (t.canceled > 0)
    std::fprintf(stderr, "grpc_bench: %s: %s\n", sys_name.c_str(), t.cancel_reason.c_str());
}

void RegisterAll() {
  struct Shape {
    int clients, conns;
  };
  const std::vector<Shape> shapes = {{1, 1}, {16, 1}, {16, 16}, {256, 1}, {256, 16}};
  for (Workload w : {Workload::kPut, Workload::kGet, Workload::kTxn100, Workload::kRangePage}) {
    std::vector<Shape> these = shapes;
    // A thousand clients: does the server stay up, with bounded memory?
    if (w == Workload::kPut) these.push_back({1000, 16});
    for (const Shape& s : these) {
      // cowkv and etcd back to back for each shape: the same window.
      for (const char* sys : {"cowkv", "etcd"}) {
        const std::string name = std::string("BM_Grpc") + WorkloadName(w) + "/" + sys +
                                 "/clients:" + std::to_string(s.clients) +
                                 "/conns:" + std::to_string(s.conns);
        const std::string sys_name = sys;
        benchmark::RegisterBenchmark(name.c_str(),
                                     [w, sys_name, s](benchmark::State& st) {
                                       RunGrpc(st, w, sys_name, s.clients, s.conns);
                                     })
            ->Iterations(1)
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }
}

void RegisterWatch() {
  for (int watchers : {1, 100, 1000}) {
    for (const char* sys : {"cowkv", "etcd"}) {
      const std::string name =
          std::string("BM_GrpcWatch/") + sys + "/watchers:" + std::to_string(watchers);
      const std::string sys_name = sys;
      benchmark::RegisterBenchmark(
          name.c_str(),
          [sys_name, watchers](benchmark::State& st) { RunWatch(st, sys_name, watchers); })
          ->Iterations(1)
          ->UseManualTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
}

bool ParseDouble(const std::string& s, double* out) {
  char* end = nullptr;
  *out = std::strtod(s.c_str(), &end);
  return end != s.c_str() && *end == '\0' && *out > 0;
}

bool ParseOwnFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return a.compare(0, n, flag) == 0 ? argv[i] + n : nullptr;
    };
    bool ok = true;
    if (const char* v = value("--duration_s=")) {
      ok = ParseDouble(v, &g_config.duration_s);
    } else if (const char* v = value("--warmup_s=")) {
      ok = ParseDouble(v, &g_config.warmup_s);
    } else if (const char* v = value("--prefill=")) {
      ok = ParseU64(v, &g_config.prefill) && g_config.prefill >= kPageKeys;
    } else if (const char* v = value("--cowkvd=")) {
      g_config.cowkvd = v;
    } else if (const char* v = value("--etcd=")) {
      g_config.etcd = v;
    } else if (const char* v = value("--dir=")) {
      g_config.dir = v;
    } else {
      argv[out++] = argv[i];
      continue;
    }
    if (!ok) {
      std::fprintf(stderr, "grpc_bench: bad %s\n", a.c_str());
      return false;
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

// The cowkvd built with this binary: bazel-bin/bench/grpc_bench.runfiles/
// cowkv/server/cowkvd, or bazel-bin/server/cowkvd beside bazel-bin/bench.
std::string DefaultCowkvd(const char* argv0) {
  const std::string self = argv0;
  for (const std::string& p : {self + ".runfiles/cowkv/server/cowkvd",
                               self.substr(0, self.rfind('/') + 1) + "../server/cowkvd"}) {
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "cowkvd";
}

int Main(int argc, char** argv) {
  g_config.cowkvd = DefaultCowkvd(argv[0]);
  if (!ParseOwnFlags(&argc, argv)) return 2;
  OutFlags out_flags;
  if (!ReadOutFlags(argc, argv, "grpc_bench", &out_flags)) return 2;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  signal(SIGPIPE, SIG_IGN);
  {
    std::string base = g_config.dir;
    if (base.empty()) {
      const char* tmp = std::getenv("TEST_TMPDIR");
      base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/cowkv-grpcbench";
    }
    std::string err;
    g_run_dir = MakeRunDir(base, "grpc_bench", &err);
    if (g_run_dir.empty()) {
      std::fprintf(stderr, "grpc_bench: %s\n", err.c_str());
      return 1;
    }
  }
  RegisterAll();
  RegisterWatch();
  benchmark::AddCustomContext("cowkvd", g_config.cowkvd);
  benchmark::AddCustomContext("etcd", g_config.etcd);
  benchmark::AddCustomContext("duration_s", std::to_string(g_config.duration_s));
  benchmark::AddCustomContext("warmup_s", std::to_string(g_config.warmup_s));
  benchmark::AddCustomContext("key_bytes", "16");
  benchmark::AddCustomContext("value_bytes", std::to_string(kValueBytes));
  benchmark::AddCustomContext("files_dir", g_run_dir);
  RunWithExactNames(out_flags);
  benchmark::Shutdown();
  StopAll();
  const std::string err = RemovePath(g_run_dir);
  if (!err.empty()) {
    std::fprintf(stderr, "grpc_bench: %s\n", err.c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace cowkv_bench

int main(int argc, char** argv) { return cowkv_bench::Main(argc, argv); }
