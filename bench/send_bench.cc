// send_bench: what a send stream costs (issue 19; docs/design.md "Send and
// receive"). Workloads, on one store on a device file in --dir:
//
//  - BM_SendFull/cowkv: a full send of a read-only snapshot of a subvolume
//    holding --num items (16 B keys, --value_bytes values), node cache and
//    the file's page cache dropped before each run (store reopened,
//    posix_fadvise DONTNEED), to a sink that counts bytes. Reports
//    bytes_per_second (stream bytes) and device_mb_per_s (the store's used
//    bytes read per second).
//  - BM_SequentialRead/device: the same device file's first used_bytes read
//    sequentially in 1 MiB preads after the same page-cache drop: the
//    ceiling a full send is measured against (a good result: BM_SendFull's
//    device_mb_per_s within 2-3x of it; the send walks a tree, the read does
//    not).
//  - BM_SendIncremental/cowkv/changed_pct:P/items:N: before each run,
//    overwrite P % of the N items (random, at least one), snapshot, then
//    time `send -p previous new`. For N = --num (1M by default) and N =
//    --small_num (10k): the cost must track the change, not the size (a good
//    result: the 0.01 % run on 1M items costs about what the 1 % run on 10k
//    items costs, and far less than a full send). Reports nodes_read,
//    subtrees_skipped, stream bytes and items sent.
//
// Flags: --num=N (1000000), --small_num=N (10000), --value_bytes=B (100),
// --dir=DIR (default $TEST_TMPDIR or /tmp), --incremental_runs=K (5), and
// google benchmark's (--benchmark_format=json, --benchmark_filter=...).
// Build with --config=opt for figures; `--num=10000` is a quick smoke run.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_util.h"
#include "benchmark/benchmark.h"
#include "cowkv/device.h"
#include "cowkv/store.h"

namespace cowkv_bench {
namespace {

struct Config {
  uint64_t num = 1000000;
  uint64_t small_num = 10000;
  uint64_t value_bytes = 100;
  uint64_t incremental_runs = 5;
  std::string dir;
};
Config g_config;

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string Key(uint64_t i) {
  char k[17];
  std::snprintf(k, sizeof(k), "%016llx", static_cast<unsigned long long>(i * 2654435761ull));
  return std::string(k, 16);
}

cowkv::Options StoreOptions() {
  cowkv::Options o;
  o.commit_interval_ms = 0;
  o.default_durability = cowkv::Durability::kAsync;  // engine commits only
  o.node_cache_bytes = 256ull << 20;
  return o;
}

// One store with one filled subvolume and its latest read-only snapshot.
class SendStore {
 public:
  ~SendStore() { Close(); }

  // Makes DIR/send-N.img holding N items in "default", snapshot "s0".
  std::string Create(uint64_t items) {
    items_ = items;
    path_ = absl::StrCat(g_config.dir, "/send-", items, ".img");
    unlink(path_.c_str());
    cowkv::FileDeviceOptions fo;
    fo.create_size = std::max<uint64_t>(256ull << 20, items * (g_config.value_bytes + 64) * 16);
    auto dev = cowkv::FileDevice::Open(path_, fo);
    if (!dev.ok()) return dev.status().ToString();
    absl::Status s = cowkv::Store::Mkfs(dev->get(), cowkv::MkfsOptions{});
    dev->reset();
    if (!s.ok()) return s.ToString();
    std::string err = Reopen();
    if (err.empty()) err = Write(0, items);
    if (err.empty()) err = Snapshot();
    return err;
  }

  // Closes and opens the store: a cold node cache; drops the file's pages.
  std::string Reopen() {
    Close();
    cowkv::FileDeviceOptions fo;
    auto dev = cowkv::FileDevice::Open(path_, fo);
    if (!dev.ok()) return dev.status().ToString();
    dev_ = std::move(*dev);
    DropPageCache();
    auto store = cowkv::Store::Open(dev_.get(), StoreOptions());
    if (!store.ok()) return store.status().ToString();
    store_ = std::move(*store);
    return "";
  }

  void DropPageCache() const {
    const int fd = open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
  }

  // Overwrites `count` items chosen at random (with a fresh value).
  std::string Change(uint64_t count, std::mt19937_64* rng) {
    auto h = store_->Begin();
    if (!h.ok()) return h.status().ToString();
    std::string value(g_config.value_bytes, 'c');
    for (uint64_t i = 0; i < count; ++i) {
      value[0] = static_cast<char>('a' + (*rng)() % 26);
      absl::Status s = (*h)->Put(Key((*rng)() % items_), value);
      if (!s.ok()) return s.ToString();
    }
    (*h)->End();
    absl::Status s = store_->Commit();
    return s.ok() ? "" : s.ToString();
  }

  std::string Snapshot() {
    const std::string name = absl::StrCat("s", snapshots_);
    auto r = store_->CreateSnapshot("default", name, true);
    if (!r.ok()) return r.status().ToString();
    ++snapshots_;
    return "";
  }
  std::string latest() const { return absl::StrCat("s", snapshots_ - 1); }
  std::string previous() const { return absl::StrCat("s", snapshots_ - 2); }

  absl::StatusOr<cowkv::SendReport> Send(const std::string& snap, const std::string& parent) {
    cowkv::SendOptions o;
    o.snapshot = snap;
    o.parent = parent;
    return store_->Send(o, [](absl::string_view) { return absl::OkStatus(); });
  }

  uint64_t used_bytes() { return store_->Stats().used_bytes; }
  const std::string& path() const { return path_; }

 private:
  std::string Write(uint64_t from, uint64_t to) {
    const std::string value(g_config.value_bytes, 'v');
    for (uint64_t done = from; done < to;) {
      auto h = store_->Begin();
      if (!h.ok()) return h.status().ToString();
      const uint64_t end = std::min(to, done + 100000);
      for (; done < end; ++done) {
        absl::Status s = (*h)->Put(Key(done), value);
        if (!s.ok()) return s.ToString();
      }
      (*h)->End();
      absl::Status s = store_->Commit();
      if (!s.ok()) return s.ToString();
    }
    return "";
  }

  void Close() {
    if (store_) store_->Close().IgnoreError();
    store_.reset();
    dev_.reset();
  }

  std::string path_;
  uint64_t items_ = 0;
  int snapshots_ = 0;
  std::unique_ptr<cowkv::FileDevice> dev_;
  std::unique_ptr<cowkv::Store> store_;
};

// The filled stores, made on first use and kept for the run.
absl::Mutex g_mu;
std::unique_ptr<SendStore> g_stores[2];  // [0]: --num items, [1]: --small_num

SendStore* StoreFor(uint64_t items, std::string* err) {
  absl::MutexLock l(&g_mu);
  std::unique_ptr<SendStore>& s = g_stores[items == g_config.num ? 0 : 1];
  if (!s) {
    s = std::make_unique<SendStore>();
    *err = s->Create(items);
    if (!err->empty()) s.reset();
  }
  return s.get();
}

void BM_SendFull(benchmark::State& state) {
  std::string err;
  SendStore* s = StoreFor(g_config.num, &err);
  if (s == nullptr) return state.SkipWithError(err.c_str());
  uint64_t stream = 0, device = 0;
  for (auto _ : state) {
    err = s->Reopen();
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const uint64_t used = s->used_bytes();
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<cowkv::SendReport> r = s->Send("s0", "");
    const Clock::time_point t1 = Clock::now();
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    state.SetIterationTime(Seconds(t0, t1));
    stream += r->bytes;
    device += used;
    state.counters["nodes_read"] = static_cast<double>(r->nodes_read);
  }
  state.SetBytesProcessed(static_cast<int64_t>(stream));
  state.counters["device_mb_per_s"] =
      benchmark::Counter(static_cast<double>(device) / 1e6, benchmark::Counter::kIsRate);
  state.counters["items"] = static_cast<double>(g_config.num);
}

void BM_SequentialReadDevice(benchmark::State& state) {
  std::string err;
  SendStore* s = StoreFor(g_config.num, &err);
  if (s == nullptr) return state.SkipWithError(err.c_str());
  const uint64_t used = s->used_bytes();
  std::vector<char> buf(1 << 20);
  uint64_t total = 0;
  for (auto _ : state) {
    s->DropPageCache();
    const int fd = open(s->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return state.SkipWithError(std::strerror(errno));
    const Clock::time_point t0 = Clock::now();
    uint64_t off = 0;
    while (off < used) {
      const ssize_t n = pread(fd, buf.data(), buf.size(), static_cast<off_t>(off));
      if (n <= 0) break;
      off += static_cast<uint64_t>(n);
    }
    const Clock::time_point t1 = Clock::now();
    close(fd);
    state.SetIterationTime(Seconds(t0, t1));
    total += off;
  }
  state.SetBytesProcessed(static_cast<int64_t>(total));
  state.counters["device_mb_per_s"] =
      benchmark::Counter(static_cast<double>(total) / 1e6, benchmark::Counter::kIsRate);
}

// pct_x100: the changed share in hundredths of a percent (100 = 1 %).
void BM_SendIncremental(benchmark::State& state, uint64_t items, uint64_t pct_x100) {
  std::string err;
  SendStore* s = StoreFor(items, &err);
  if (s == nullptr) return state.SkipWithError(err.c_str());
  std::mt19937_64 rng(items * 31 + pct_x100);
  const uint64_t changed = std::max<uint64_t>(1, items * pct_x100 / 10000);
  cowkv::SendReport last;
  for (auto _ : state) {
    err = s->Change(changed, &rng);
    if (err.empty()) err = s->Snapshot();
    if (err.empty()) err = s->Reopen();
    if (!err.empty()) return state.SkipWithError(err.c_str());
    const Clock::time_point t0 = Clock::now();
    absl::StatusOr<cowkv::SendReport> r = s->Send(s->latest(), s->previous());
    const Clock::time_point t1 = Clock::now();
    if (!r.ok()) return state.SkipWithError(r.status().ToString().c_str());
    state.SetIterationTime(Seconds(t0, t1));
    last = *r;
  }
  state.counters["changed_items"] = static_cast<double>(changed);
  state.counters["items_sent"] = static_cast<double>(last.items);
  state.counters["stream_bytes"] = static_cast<double>(last.bytes);
  state.counters["nodes_read"] = static_cast<double>(last.nodes_read);
  state.counters["subtrees_skipped"] = static_cast<double>(last.subtrees_skipped);
}

std::string PctName(uint64_t pct_x100) {
  return pct_x100 % 100 == 0 ? absl::StrCat(pct_x100 / 100)
                             : absl::StrCat("0.", pct_x100 < 10 ? "0" : "", pct_x100);
}

void RegisterAll() {
  benchmark::RegisterBenchmark("BM_SendFull/cowkv", BM_SendFull)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_SequentialRead/device", BM_SequentialReadDevice)
      ->UseManualTime()
      ->Iterations(3)
      ->Unit(benchmark::kMillisecond);
  std::vector<uint64_t> sizes = {g_config.num};
  if (g_config.small_num != g_config.num) sizes.push_back(g_config.small_num);
  for (uint64_t items : sizes) {
    for (uint64_t pct_x100 : {uint64_t{100}, uint64_t{1}}) {
      const std::string name = absl::StrCat(
          "BM_SendIncremental/cowkv/changed_pct:", PctName(pct_x100), "/items:", items);
      benchmark::RegisterBenchmark(name.c_str(), BM_SendIncremental, items, pct_x100)
          ->UseManualTime()
          ->Iterations(static_cast<int64_t>(g_config.incremental_runs))
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

// Removes our flags from argv; false on a bad value.
bool ParseOwnFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    uint64_t v = 0;
    uint64_t* target = nullptr;
    size_t skip = 0;
    const std::pair<const char*, uint64_t*> kFlags[] = {
        {"--num=", &g_config.num},
        {"--small_num=", &g_config.small_num},
        {"--value_bytes=", &g_config.value_bytes},
        {"--incremental_runs=", &g_config.incremental_runs}};
    for (const auto& [prefix, field] : kFlags) {
      if (a.rfind(prefix, 0) == 0) {
        target = field;
        skip = std::strlen(prefix);
      }
    }
    if (target != nullptr) {
      if (!ParseU64(a.c_str() + skip, &v) || v == 0) {
        std::fprintf(stderr, "send_bench: bad %s\n", a.c_str());
        return false;
      }
      *target = v;
    } else if (a.rfind("--dir=", 0) == 0) {
      g_config.dir = a.substr(6);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
  if (g_config.small_num > g_config.num) g_config.small_num = g_config.num;
  if (g_config.value_bytes > 4096) {
    std::fprintf(stderr, "send_bench: --value_bytes at most 4096 (inline values)\n");
    return false;
  }
  return true;
}

int Main(int argc, char** argv) {
  if (!ParseOwnFlags(&argc, argv)) return 2;
  OutFlags out_flags;
  if (!ReadOutFlags(argc, argv, "send_bench", &out_flags)) return 2;
  std::string base = g_config.dir;
  if (base.empty()) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    base = tmp != nullptr && *tmp != '\0' ? tmp : "/tmp";
  }
  std::string err;
  g_config.dir = MakeRunDir(base, "send_bench", &err);
  if (g_config.dir.empty()) {
    std::fprintf(stderr, "send_bench: %s\n", err.c_str());
    return 1;
  }
  RegisterAll();
  benchmark::AddCustomContext("num", std::to_string(g_config.num));
  benchmark::AddCustomContext("small_num", std::to_string(g_config.small_num));
  benchmark::AddCustomContext("value_bytes", std::to_string(g_config.value_bytes));
  benchmark::AddCustomContext("files_dir", g_config.dir);
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::Initialize(&argc, argv);
  int rc = 0;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    rc = 1;
  } else {
    RunWithExactNames(out_flags);
  }
  benchmark::Shutdown();
  g_stores[0].reset();
  g_stores[1].reset();
  err = RemovePath(g_config.dir);
  if (!err.empty()) {
    std::fprintf(stderr, "send_bench: %s\n", err.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace cowkv_bench

int main(int argc, char** argv) { return cowkv_bench::Main(argc, argv); }
