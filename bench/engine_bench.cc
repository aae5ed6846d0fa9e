// engine_bench: cowkv against LMDB, in one process, on the same data.
//
// Workload source: LevelDB's db_bench (fillseq, fillrandom, readrandom,
// readseq) as ported to LMDB by Symas (db_bench_mdb, "Database Microbenchmarks",
// http://www.lmdb.tech/bench/microbench/): 16-byte keys, 100-byte values,
// N = 1,000,000 items, each fill in ONE write transaction with a durable
// commit. Added to it: a small-commit latency workload (1 put + durable commit,
// the cost btrfs-style commit ordering has to keep at 2 device flushes) and the
// raw device cost those commits are bounded by (4 KiB pwrite + fdatasync).
//
// What a good result is (cowkv relative to LMDB, same process, same files dir):
//   BM_FillRandom   items/s >= 1.0x LMDB
//   BM_ReadRandom   items/s >= 0.7x LMDB
//   BM_Scan         items/s >= 0.7x LMDB
//   BM_SmallCommit  cowkv flushes_per_commit <= 2 (latency then near
//                   2x BM_Fdatasync/device p50)
//   BM_FillSeq      reported, no target.
// bench/compare.py prints the ratios from --benchmark_format=json output.
//
// Names are exactly BM_<Workload>/<system>, system = cowkv | lmdb (and
// BM_Fdatasync/device). google-benchmark would append "/iterations:K",
// "/manual_time" or "/real_time" to them; the reporter below drops those
// suffixes, so the timing mode is documented here and in README.md instead:
//   FillSeq, FillRandom   manual time = fill + commit only (store creation and
//                         removal untimed), fresh store every iteration.
//   ReadRandom, Scan      real time, on a store filled once (untimed) by the
//                         same FillBatch call BM_FillRandom times.
//   SmallCommit, Fdatasync manual time per operation, K operations (K =
//                         --small_commits, default 200); p50_us/p99_us counters.
//
// Flags (parsed and removed before benchmark::Initialize):
//   --num=N                 items (default 1000000)
//   --small_commits=K       operations for SmallCommit and Fdatasync (200)
//   --stream_mib=M          MiB written by BM_StreamWrite (1024)
//   --stream_value_bytes=N  value size of BM_StreamWrite (1 MiB: data extents)
//   --lmdb_read_txn=per_read|batch
//                           LMDB ReadRandom: a read snapshot per Get (default,
//                           like cowkv's Store::Get) or one for the whole batch
// Files go under $TEST_TMPDIR if set, else /tmp, in a mkdtemp directory that
// is removed at exit.
#include "absl/synchronization/mutex.h"
#include "bench/subvol_bench.h"
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "bench/bench_util.h"
#include "bench/cowkv_peer.h"
#include "bench/kv_system.h"
#include "bench/lmdb_peer.h"

namespace cowkv_bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// ---- Configuration ---------------------------------------------------------------

struct Config {
  uint64_t num = 1000000;
  int64_t small_commits = 200;
  uint64_t stream_bytes = 1ull << 30;  // BM_StreamWrite total
  uint64_t stream_value_bytes = 1ull << 20;  // BM_StreamWrite value size
  bool lmdb_txn_per_read = true;
};

Config g_config;
std::unique_ptr<Dataset> g_data;
std::string g_dir;  // the mkdtemp directory everything lives in
uint64_t g_path_seq = 0;

enum class Sys { kCowkv, kLmdb };
const char* SysName(Sys s) { return s == Sys::kCowkv ? "cowkv" : "lmdb"; }

std::unique_ptr<KvSystem> NewSystem(Sys s) {
  if (s == Sys::kCowkv) return NewCowkvPeer();
  LmdbPeerOptions o;
  o.txn_per_read = g_config.lmdb_txn_per_read;
  return NewLmdbPeer(o);
}

// A fresh path in g_dir: a file for cowkv, a directory for LMDB.
std::string NewPath(Sys s, const char* what) {
  return g_dir + "/" + SysName(s) + "-" + what + "-" + std::to_string(++g_path_seq);
}

// ---- The filled store ReadRandom, Scan and SmallCommit share ----------------------

struct Filled {
  std::unique_ptr<KvSystem> sys;
  std::string path;
  std::string error;  // set once if building it failed
};
std::map<Sys, Filled> g_filled;

// Builds it on first use (never timed): Create + FillBatch(random order), the
// same calls BM_FillRandom times.
KvSystem* GetFilled(Sys s, std::string* error) {
  Filled& f = g_filled[s];
  if (f.sys == nullptr && f.error.empty()) {
    f.path = NewPath(s, "filled");
    auto sys = NewSystem(s);
    std::string err = sys->Create(f.path);
    if (err.empty()) err = sys->FillBatch(*g_data, g_data->fill_random_order());
    if (err.empty()) {
      f.sys = std::move(sys);
    } else {
      f.error = "setup fill: " + err;
    }
  }
  *error = f.error;
  return f.sys.get();
}

std::string CloseFilled() {
  std::string first;
  for (auto& [s, f] : g_filled) {
    if (f.sys != nullptr) {
      std::string err = f.sys->Close();
      if (first.empty()) first = err;
      f.sys.reset();
    }
    if (!f.path.empty()) {
      std::string err = RemovePath(f.path);
      if (first.empty()) first = err;
    }
  }
  g_filled.clear();
  return first;
}

// ---- Benchmarks -------------------------------------------------------------------

// N puts in one write transaction + durable commit, fresh store per iteration.
void BM_Fill(benchmark::State& state, Sys s, bool random) {
  const std::vector<uint32_t>& order =
      random ? g_data->fill_random_order() : g_data->seq_order();
  uint64_t used = 0, flushes = 0;
  bool have_flushes = false;
  for (auto _ : state) {
    std::string path = NewPath(s, random ? "fillrandom" : "fillseq");
    auto sys = NewSystem(s);
    std::string err = sys->Create(path);
    uint64_t f0 = 0, f1 = 0;
    if (err.empty()) {
      have_flushes = sys->DeviceFlushes(&f0);
      Clock::time_point t0 = Clock::now();
      err = sys->FillBatch(*g_data, order);
      Clock::time_point t1 = Clock::now();
      state.SetIterationTime(Seconds(t0, t1));
      if (have_flushes) sys->DeviceFlushes(&f1);
      flushes = f1 - f0;
      used = sys->UsedBytes();
    }
    std::string close_err = sys->Close();
    if (err.empty()) err = close_err;
    std::string rm_err = RemovePath(path);
    if (err.empty()) err = rm_err;
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(g_data->size()));
  state.counters["db_bytes"] = static_cast<double>(used);
  if (have_flushes) state.counters["device_flushes"] = static_cast<double>(flushes);
}

// N point reads in random order (a different permutation than the fill's).
void BM_ReadRandom(benchmark::State& state, Sys s) {
  std::string err;
  KvSystem* sys = GetFilled(s, &err);
  if (sys == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  uint64_t m0 = 0, m1 = 0;
  const bool have_misses = sys->CacheMisses(&m0);
  for (auto _ : state) {
    err = sys->ReadBatch(*g_data, g_data->read_random_order());
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(g_data->size()));
  if (have_misses && state.iterations() > 0) {
    sys->CacheMisses(&m1);
    state.counters["cache_misses_per_read"] =
        static_cast<double>(m1 - m0) / (state.iterations() * g_data->size());
  }
}

// A full forward scan; the count must be N.
void BM_Scan(benchmark::State& state, Sys s) {
  std::string err;
  KvSystem* sys = GetFilled(s, &err);
  if (sys == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  uint64_t bytes_total = 0;
  for (auto _ : state) {
    uint64_t items = 0, bytes = 0;
    err = sys->Scan(&items, &bytes);
    if (err.empty() && items != g_data->size()) {
      err = std::string(SysName(s)) + " scan saw " + std::to_string(items) +
            " items, expected " + std::to_string(g_data->size());
    }
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    bytes_total += bytes;
  }
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(g_data->size()));
  state.SetBytesProcessed(static_cast<int64_t>(bytes_total));
}

// One put (an overwrite of an existing key with a different value) + durable
// commit per iteration, on the filled store; manual time per operation.
void BM_SmallCommit(benchmark::State& state, Sys s) {
  std::string err;
  KvSystem* sys = GetFilled(s, &err);
  if (sys == nullptr) {
    state.SkipWithError(err.c_str());
    return;
  }
  static uint64_t cursor = 0;  // walks the read order, so keys differ per run
  std::vector<double> lat;
  lat.reserve(state.max_iterations);
  uint64_t f0 = 0, f1 = 0;
  const bool have_flushes = sys->DeviceFlushes(&f0);
  for (auto _ : state) {
    uint32_t i = g_data->read_random_order()[cursor++ % g_data->size()];
    Clock::time_point t0 = Clock::now();
    err = sys->PutCommit(g_data->key(i), g_data->alt_value(i));
    Clock::time_point t1 = Clock::now();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    state.SetIterationTime(Seconds(t0, t1));
    lat.push_back(Seconds(t0, t1));
  }
  if (lat.empty()) return;
  state.SetItemsProcessed(static_cast<int64_t>(lat.size()));
  if (have_flushes) {
    sys->DeviceFlushes(&f1);
    state.counters["flushes_per_commit"] = static_cast<double>(f1 - f0) / lat.size();
  }
  state.counters["p50_us"] = PercentileUs(&lat, 0.50);
  state.counters["p99_us"] = PercentileUs(&lat, 0.99);
}

// The floor for a durable commit: one 4 KiB pwrite + fdatasync, same directory.
void BM_FdatasyncDevice(benchmark::State& state) {
  const std::string path = g_dir + "/fdatasync-" + std::to_string(++g_path_seq);
  constexpr size_t kBlock = 4096, kBlocks = 256;
  std::string err;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) err = "open " + path + ": " + std::strerror(errno);
  alignas(4096) static char buf[kBlock];
  std::memset(buf, 0xab, sizeof(buf));
  // Allocate every block first so the timed writes overwrite, like a commit.
  for (size_t b = 0; err.empty() && b < kBlocks; ++b) {
    if (pwrite(fd, buf, kBlock, b * kBlock) != static_cast<ssize_t>(kBlock)) {
      err = std::string("pwrite: ") + std::strerror(errno);
    }
  }
  if (err.empty() && fdatasync(fd) != 0) err = std::string("fdatasync: ") + std::strerror(errno);
  if (!err.empty()) {
    state.SkipWithError(err.c_str());
    if (fd >= 0) close(fd);
    (void)RemovePath(path);
    return;
  }
  std::vector<double> lat;
  lat.reserve(state.max_iterations);
  uint64_t n = 0;
  for (auto _ : state) {
    buf[0] = static_cast<char>(n);
    Clock::time_point t0 = Clock::now();
    if (pwrite(fd, buf, kBlock, (n++ % kBlocks) * kBlock) != static_cast<ssize_t>(kBlock)) {
      err = std::string("pwrite: ") + std::strerror(errno);
    } else if (fdatasync(fd) != 0) {
      err = std::string("fdatasync: ") + std::strerror(errno);
    }
    Clock::time_point t1 = Clock::now();
    if (!err.empty()) {
      state.SkipWithError(err.c_str());
      break;
    }
    state.SetIterationTime(Seconds(t0, t1));
    lat.push_back(Seconds(t0, t1));
  }
  if (close(fd) != 0 && err.empty()) {
    err = std::string("close: ") + std::strerror(errno);
    state.SkipWithError(err.c_str());
  }
  std::string rm = RemovePath(path);
  if (!rm.empty() && err.empty()) state.SkipWithError(rm.c_str());
  if (lat.empty()) return;
  state.SetItemsProcessed(static_cast<int64_t>(lat.size()));
  state.counters["p50_us"] = PercentileUs(&lat, 0.50);
  state.counters["p99_us"] = PercentileUs(&lat, 0.99);
}

void RegisterAll() {
  const Sys kSystems[] = {Sys::kCowkv, Sys::kLmdb};
  auto name = [](const char* workload, Sys s) {
    return std::string("BM_") + workload + "/" + SysName(s);
  };
  for (Sys s : kSystems) {
    benchmark::RegisterBenchmark(name("FillSeq", s).c_str(), BM_Fill, s, false)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Sys s : kSystems) {
    benchmark::RegisterBenchmark(name("FillRandom", s).c_str(), BM_Fill, s, true)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Sys s : kSystems) {
    benchmark::RegisterBenchmark(name("ReadRandom", s).c_str(), BM_ReadRandom, s)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Sys s : kSystems) {
    benchmark::RegisterBenchmark(name("Scan", s).c_str(), BM_Scan, s)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  }
  for (Sys s : kSystems) {
    benchmark::RegisterBenchmark(name("SmallCommit", s).c_str(), BM_SmallCommit, s)
        ->UseManualTime()
        ->Iterations(g_config.small_commits)
        ->Unit(benchmark::kMicrosecond);
  }
  benchmark::RegisterBenchmark("BM_Fdatasync/device", BM_FdatasyncDevice)
      ->UseManualTime()
      ->Iterations(g_config.small_commits)
      ->Unit(benchmark::kMicrosecond);
  RegisterSubvolumeBenchmarks(g_dir, g_config.stream_bytes, g_config.stream_value_bytes);
}

// ---- main -------------------------------------------------------------------------

// Removes our flags from argv; false on a bad value.
bool ParseOwnFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    std::string a = argv[i];
    uint64_t v = 0;
    if (a.rfind("--num=", 0) == 0) {
      if (!ParseU64(a.c_str() + 6, &v) || v == 0 || v > 0xffffffffull) {
        std::fprintf(stderr, "bad %s\n", a.c_str());
        return false;
      }
      g_config.num = v;
    } else if (a.rfind("--small_commits=", 0) == 0) {
      if (!ParseU64(a.c_str() + 16, &v) || v == 0) {
        std::fprintf(stderr, "bad %s\n", a.c_str());
        return false;
      }
      g_config.small_commits = static_cast<int64_t>(v);
    } else if (a.rfind("--stream_mib=", 0) == 0) {
      if (!ParseU64(a.c_str() + 13, &v) || v == 0) {
        std::fprintf(stderr, "bad %s\n", a.c_str());
        return false;
      }
      g_config.stream_bytes = v << 20;
    } else if (a.rfind("--stream_value_bytes=", 0) == 0) {
      if (!ParseU64(a.c_str() + 21, &v) || v == 0 || v > (16u << 20)) {
        std::fprintf(stderr, "bad %s\n", a.c_str());
        return false;
      }
      g_config.stream_value_bytes = v;
    } else if (a == "--lmdb_read_txn=per_read") {
      g_config.lmdb_txn_per_read = true;
    } else if (a == "--lmdb_read_txn=batch") {
      g_config.lmdb_txn_per_read = false;
    } else {
      argv[out++] = argv[i];
      continue;
    }
  }
  *argc = out;
  argv[out] = nullptr;
  return true;
}

int Main(int argc, char** argv) {
  if (!ParseOwnFlags(&argc, argv)) return 2;
  // benchmark::Initialize consumes --benchmark_out*, so look first.
  OutFlags out_flags;
  if (!ReadOutFlags(argc, argv, "engine_bench", &out_flags)) return 2;


  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string err;
  g_dir = MakeRunDir(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", "engine_bench", &err);
  if (g_dir.empty()) {
    std::fprintf(stderr, "engine_bench: %s\n", err.c_str());
    return 1;
  }

  g_data = std::make_unique<Dataset>(g_config.num);
  RegisterAll();
  benchmark::AddCustomContext("num", std::to_string(g_config.num));
  benchmark::AddCustomContext("key_bytes", std::to_string(kKeySize));
  benchmark::AddCustomContext("value_bytes", std::to_string(kValueSize));
  benchmark::AddCustomContext("small_commits", std::to_string(g_config.small_commits));
  benchmark::AddCustomContext("lmdb_read_txn", g_config.lmdb_txn_per_read ? "per_read" : "batch");
  benchmark::AddCustomContext("files_dir", g_dir);

  // Debian builds Abseil without NDEBUG, which turns on Mutex deadlock
  // detection (a graph update on every lock); production binaries turn it
  // off the same way.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::Initialize(&argc, argv);
  int rc = 0;
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) {
    rc = 1;
  } else {
    RunWithExactNames(out_flags);
  }
  benchmark::Shutdown();

  err = CloseFilled();
  if (!err.empty()) {
    std::fprintf(stderr, "engine_bench: closing filled stores: %s\n", err.c_str());
    rc = 1;
  }
  err = RemovePath(g_dir);
  if (!err.empty()) {
    std::fprintf(stderr, "engine_bench: %s\n", err.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace cowkv_bench

int main(int argc, char** argv) { return cowkv_bench::Main(argc, argv); }
