// The seed workloads (../shared/seeds): each optimisation against itself
// switched off, in one binary run.
//
//   bazel build --config=opt //bench:seeds_bench
//   bazel-bin/bench/seeds_bench [flags] [--benchmark_format=json]
//
// Workloads (names are exact: the "/iterations:K", "/manual_time" and
// "/real_time" parts google-benchmark would append are dropped by the
// reporter; how each is timed is written here; a --benchmark_filter sees
// the full names, so do not anchor it with '$'):
//
// BM_Fdatasync/device: 4 KiB pwrite + fdatasync of a file in --dir, 200
//   times; p50_us, p99_us: the floor of every fsync below, in the same run.
//
// BM_Seed003InodeInsert/{cowkv,cowkv_std_map}: --inodes inserts (5,000,000)
//   of consecutive inode numbers into the fs layer's inode cache (dense
//   radix array) vs a std::map (btrfs's rb-tree before the change), each
//   timed; counters mean/p50/p90/p95/p99 in ns (the seed: mean 776 -> 272 ns).
//
// BM_Seed000DirFsync/{cowkv,cowkv_no_dir_index_offset}: seed 000 (btrfs
//   fa4b8cb1). A fresh store; mkdir /testdir, then --seed000_files empty
//   files in it (1,000,000 in the seed), fsync of the directory after every
//   100. Manual time = the sum of the fsyncs (creates untimed); counters
//   mean/p50/p90/p95/p99/max fsync in us, total_fsync_ms, create_s (wall
//   time of the creates), files, and over the run log_syncs (one device
//   flush each), commit_flushes (the engine commits' flushes:
//   StoreStats::device_flushes minus the log syncs), commits (all triggers; log_full_commits
//   of them), fs_logged_keys, and used_mib at the end. Off: every fsync
//   re-logs the directory's entries from the first one this engine
//   transaction added, not from the last it logged.
//
// BM_Seed002Fiemap{,Cold,Shared}/{cowkv,cowkv_no_path_cache}: seed 002
//   (btrfs 12a824dc). One file /foobar of --seed002_extents (327,680)
//   separate 4 KiB extents, written once (untimed) into its own device
//   file, committed, and fiemap'd whole. Fiemap: metadata cached (one
//   untimed fiemap first, then the timed ones). Cold: store closed, the
//   device file's page cache dropped (posix_fadvise DONTNEED), store
//   reopened, then the first fiemap is timed. Shared: the same file in a
//   second device file where a read-only snapshot of the subvolume was
//   taken after the writes, so every extent is shared through the tree;
//   warm as Fiemap. Manual time
//   per fiemap, 3 iterations; counters extents, fiemap_ms (mean),
//   fiemap_cpu_ms (the calling thread's CPU time: fiemap is synchronous, so
//   this is its cost without the shared machine's preemptions), and per
//   fiemap fiemap_shared_checks, path_cache_hits, shared_extents.
//
// BM_Seed003Create/cowkv/threads:2: seed 003's fs_mark run (-S 0 -s 0: no
//   fsync, empty files), two threads each creating --seed003_files
//   (100,000) files in its own directory of a fresh store. Real time;
//   items_per_second = files/s over both threads; counters
//   inode_cache_hits/misses/evictions and commits over the run.
//   .../threads:1 is the same with one thread, for reference.
//
// BM_Seed003CreateSubvols/cowkv/threads:2: the same, but each thread creates
//   its files in a directory of its own subvolume (s1, s2: created, with
//   their directory, before the timed part), so the two writers share no
//   tree lock (issue 16: per-subvolume write paths). Good: close to 2x
//   .../threads:1 on an idle 2-core machine; threads:2 of BM_Seed003Create
//   (one subvolume) shows what writers of one tree still serialise on.
//
// BM_Seed004Rename/{cowkv,cowkv_no_logged_check}/N, N = 1000, 2000, 5000,
//   10000: seed 004 (btrfs 0f8ce498). A fresh store: mkdir /testdir, N empty
//   files, Store::Commit() (the seed's sync), /foo created, 4 KiB written
//   and fsync'd, one more file in /testdir; then (timed) every file_i is
//   renamed to file_i-RPMDELETE and /foo is fsync'd once more (the log
//   copies the keys renames noted at its next sync, so a false "logged"
//   answer costs there). Manual time = renames + that fsync; counters
//   rename_ms, rename_cpu_ms (the thread's CPU time in the renames), fsync_ms,
//   total_ms, and over the timed part fs_log_updates,
//   fs_logged_lookups, log_lookups, fs_logged_keys, log_syncs,
//   commit_flushes, commits.
//
// Stores: default cowkv::Options (30 s commit interval, as btrfs's default
// commit interval; 256 MiB node cache; engine commits also triggered by
// dirty bytes and delayed refs, as ever), with only the seed's switch
// changed, on a FileDevice over a file in --dir. Device files are written
// with zeros before mkfs (like a raw block device; --device=sparse for
// sparse files) and reused across benchmarks (mkfs each time).
//
// Flags (parsed and removed before benchmark::Initialize):
//   --dir=PATH             where the device files go (default $TEST_TMPDIR,
//                          else /tmp): a mkdtemp directory inside it, removed
//                          at exit
//   --device=zeroed|sparse device files written with zeros first (default)
//   --fs_device_mib=N      the device of seeds 000, 003, 004 (4096)
//   --inodes=N             BM_Seed003InodeInsert inserts (5000000)
//   --seed000_files=N      files of BM_Seed000DirFsync (100000)
//   --seed002_extents=N    extents of BM_Seed002Fiemap* (327680)
//   --seed003_files=N      files per thread of BM_Seed003Create{,Subvols} (100000)
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "bench/bench_util.h"
#include "benchmark/benchmark.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/fs/inode_cache.h"
#include "mount/fuse_fs.h"

namespace cowkv_bench {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// CPU time of the calling thread: what a synchronous operation itself
// cost, whatever else the (shared) machine was running.
double ThreadCpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Config {
  std::string dir;  // --dir; empty = default
  bool zero_device = true;
  uint64_t fs_device_bytes = 4096ull << 20;
  uint64_t inodes = 5000000;
  uint64_t seed000_files = 100000;
  uint64_t seed002_extents = 327680;
  uint64_t seed003_files = 100000;
};

Config g_config;
std::string g_run_dir;  // the mkdtemp directory everything lives in

// ---- Seed 003: inode cache inserts ---------------------------------------------------

// Roughly what an in-memory inode holds (item, refs, logged state).
struct FakeInode {
  uint64_t ino = 0;
  char payload[248] = {};
};

double Pct(std::vector<double>* v, double p) {
  if (v->empty()) return 0;
  size_t k = static_cast<size_t>(p * (v->size() - 1));
  std::nth_element(v->begin(), v->begin() + k, v->end());
  return (*v)[k];
}

// Each iteration inserts every inode into a fresh cache (built and torn
// down outside the timing); the latencies are those of the last iteration.
template <typename Cache, typename MakeCache>
void RunInserts(benchmark::State& state, MakeCache make) {
  const uint64_t n = g_config.inodes;
  std::vector<std::shared_ptr<FakeInode>> inodes(n);
  for (uint64_t i = 0; i < n; ++i) {
    inodes[i] = std::make_shared<FakeInode>();
    inodes[i]->ino = 256 + i;
  }
  std::vector<double> ns(n);
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Cache> cache = make();
    state.ResumeTiming();
    for (uint64_t i = 0; i < n; ++i) {
      auto t0 = Clock::now();
      benchmark::DoNotOptimize(cache->Insert(256 + i, inodes[i]));
      auto t1 = Clock::now();
      ns[i] = std::chrono::duration<double, std::nano>(t1 - t0).count();
    }
    state.PauseTiming();
    cache.reset();
    state.ResumeTiming();
  }
  double sum = 0;
  for (double v : ns) sum += v;
  state.counters["mean_ns"] = sum / static_cast<double>(ns.size());
  state.counters["p50_ns"] = Pct(&ns, 0.50);
  state.counters["p90_ns"] = Pct(&ns, 0.90);
  state.counters["p95_ns"] = Pct(&ns, 0.95);
  state.counters["p99_ns"] = Pct(&ns, 0.99);
  state.SetItemsProcessed(static_cast<int64_t>(n) * state.iterations());
}

void BM_Seed003InodeInsert(benchmark::State& state, bool std_map) {
  using Radix = cowkv::fs::InodeCache<FakeInode>;
  using Map = cowkv::fs::StdMapInodeCache<FakeInode>;
  if (std_map) {
    RunInserts<Map>(state, [] { return std::make_unique<Map>(); });
  } else {
    const uint64_t n = g_config.inodes;
    RunInserts<Radix>(state, [n] { return std::make_unique<Radix>(n + 1); });
  }
}

// ---- Stores on device files -----------------------------------------------------------

// Makes `path` a file of exactly `size` bytes; with --device=zeroed every
// byte is written once (so no write later waits for the host filesystem to
// allocate a block). Kept between benchmarks: only made once per size.
std::string PrepareImage(const std::string& path, uint64_t size) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) == size) return "";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return absl::StrCat("open ", path, ": ", std::strerror(errno));
  std::string err;
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    err = absl::StrCat("ftruncate ", path, ": ", std::strerror(errno));
  }
  if (err.empty() && g_config.zero_device) {
    const std::string zeros(8 << 20, '\0');
    for (uint64_t off = 0; off < size && err.empty(); off += zeros.size()) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(zeros.size(), size - off));
      if (pwrite(fd, zeros.data(), n, static_cast<off_t>(off)) != static_cast<ssize_t>(n)) {
        err = absl::StrCat("zero-fill ", path, ": ", std::strerror(errno));
      }
    }
    if (err.empty() && fdatasync(fd) != 0) {
      err = absl::StrCat("fdatasync ", path, ": ", std::strerror(errno));
    }
  }
  close(fd);
  return err;
}

// Drops the host page cache of a device file (its Store must be closed).
std::string DropPageCache(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) return absl::StrCat("open ", path, ": ", std::strerror(errno));
  std::string err;
  if (fdatasync(fd) != 0) err = absl::StrCat("fdatasync ", path, ": ", std::strerror(errno));
  int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  if (err.empty() && rc != 0) err = absl::StrCat("posix_fadvise ", path, ": ", std::strerror(rc));
  close(fd);
  return err;
}

std::string Err(const std::string& what, const absl::Status& s) {
  return what + ": " + s.ToString();
}

// A Store over a FileDevice on a device file.
struct FsStore {
  std::unique_ptr<cowkv::FileDevice> dev;
  std::unique_ptr<cowkv::Store> store;
  std::unique_ptr<cowkv::Subvolume> sv;

  ~FsStore() { (void)Close(); }

  cowkv::Files files() { return sv->files(); }

  // mkfs (when `format`) and open.
  std::string Open(const std::string& path, const cowkv::Options& opts, bool format) {
    auto d = cowkv::FileDevice::Open(path, cowkv::FileDeviceOptions{});
    if (!d.ok()) return Err("FileDevice::Open " + path, d.status());
    dev = std::move(*d);
    if (format) {
      absl::Status s = cowkv::Store::Mkfs(dev.get(), cowkv::MkfsOptions{});
      if (!s.ok()) return Err("Store::Mkfs", s);
    }
    auto st = cowkv::Store::Open(dev.get(), opts);
    if (!st.ok()) return Err("Store::Open", st.status());
    store = std::move(*st);
    auto v = store->DefaultSubvolume();
    if (!v.ok()) return Err("Store::DefaultSubvolume", v.status());
    sv = std::move(*v);
    return "";
  }

  std::string Close() {
    std::string err;
    sv.reset();
    if (store != nullptr) {
      absl::Status s = store->Close();
      if (!s.ok()) err = Err("Store::Close", s);
      store.reset();
    }
    dev.reset();
    return err;
  }
};

std::string FsImagePath() { return g_run_dir + "/fs.img"; }

// A fresh store for one benchmark run on the shared fs.img.
std::string FreshStore(const cowkv::Options& opts, FsStore* s) {
  std::string err = PrepareImage(FsImagePath(), g_config.fs_device_bytes);
  if (!err.empty()) return err;
  return s->Open(FsImagePath(), opts, /*format=*/true);
}

void Fail(benchmark::State& state, const std::string& what) { state.SkipWithError(what.c_str()); }

// Durability work between two Stats() samples: log syncs (one flush each),
// the engine commits' own flushes, commits, and keys the fs noted for the log.
void SyncCounters(benchmark::State& state, const cowkv::StoreStats& before,
                  const cowkv::StoreStats& after) {
  state.counters["log_syncs"] = static_cast<double>(after.log_syncs - before.log_syncs);
  state.counters["commit_flushes"] = static_cast<double>(
      (after.device_flushes - after.log_syncs) - (before.device_flushes - before.log_syncs));
  state.counters["commits"] = static_cast<double>(after.commits - before.commits);
  state.counters["fs_logged_keys"] =
      static_cast<double>(after.fs_logged_keys - before.fs_logged_keys);
}

// ---- The device's floor ----------------------------------------------------------------

// 4 KiB pwrite + fdatasync to a file of 256 allocated blocks in --dir, the
// blocks in turn: what one durable write costs on this disk.
void BM_Fdatasync(benchmark::State& state) {
  constexpr size_t kBlock = 4096, kBlocks = 256;
  const std::string path = g_run_dir + "/fdatasync.dat";
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Fail(state, absl::StrCat("open ", path, ": ", std::strerror(errno)));
  std::string buf(kBlock, 'x');
  std::string err;
  for (size_t b = 0; b < kBlocks && err.empty(); ++b) {
    if (pwrite(fd, buf.data(), kBlock, b * kBlock) != static_cast<ssize_t>(kBlock)) {
      err = absl::StrCat("pwrite: ", std::strerror(errno));
    }
  }
  if (err.empty() && fsync(fd) != 0) err = absl::StrCat("fsync: ", std::strerror(errno));
  std::vector<double> lat;
  size_t b = 0;
  for (auto _ : state) {
    if (!err.empty()) break;
    buf[0] = static_cast<char>(b);
    auto t0 = Clock::now();
    if (pwrite(fd, buf.data(), kBlock, (b++ % kBlocks) * kBlock) != static_cast<ssize_t>(kBlock) ||
        fdatasync(fd) != 0) {
      err = absl::StrCat("pwrite/fdatasync: ", std::strerror(errno));
      break;
    }
    auto t1 = Clock::now();
    state.SetIterationTime(Seconds(t0, t1));
    lat.push_back(Seconds(t0, t1));
  }
  close(fd);
  unlink(path.c_str());
  if (!err.empty()) return Fail(state, err);
  state.counters["p50_us"] = PercentileUs(&lat, 0.50);
  state.counters["p99_us"] = PercentileUs(&lat, 0.99);
}

// ---- Seed 000: directory fsync every 100 files ---------------------------------------

void BM_Seed000DirFsync(benchmark::State& state, bool optimised) {
  cowkv::Options opts;
  opts.fs_dir_index_offset = optimised;
  const uint64_t n = g_config.seed000_files;
  constexpr uint64_t kPeriod = 100;
  for (auto _ : state) {
    FsStore s;
    std::string err = FreshStore(opts, &s);
    if (!err.empty()) return Fail(state, err);
    cowkv::Files f = s.files();
    auto dir = f.Mkdir("/testdir");
    if (!dir.ok()) return Fail(state, Err("Mkdir", dir.status()));
    const cowkv::StoreStats before = s.store->Stats();
    std::vector<double> lat;  // seconds
    lat.reserve(n / kPeriod);
    double create_s = 0;
    auto c0 = Clock::now();
    for (uint64_t i = 1; i <= n; ++i) {
      auto c = f.Create(absl::StrCat("/testdir/file_", i));
      if (!c.ok()) return Fail(state, Err("Create", c.status()));
      if (i % kPeriod == 0) {
        auto t0 = Clock::now();
        absl::Status fs = f.Fsync(dir->ino);
        auto t1 = Clock::now();
        if (!fs.ok()) return Fail(state, Err("Fsync", fs));
        lat.push_back(Seconds(t0, t1));
        create_s += Seconds(c0, t0);
        c0 = t1;
      }
    }
    const cowkv::StoreStats after = s.store->Stats();
    double total = 0;
    for (double v : lat) total += v;
    state.SetIterationTime(total);
    state.counters["files"] = static_cast<double>(n);
    state.counters["fsyncs"] = static_cast<double>(lat.size());
    state.counters["total_fsync_ms"] = total * 1e3;
    state.counters["create_s"] = create_s;
    state.counters["mean_us"] = lat.empty() ? 0 : total / lat.size() * 1e6;
    state.counters["p50_us"] = PercentileUs(&lat, 0.50);
    state.counters["p90_us"] = PercentileUs(&lat, 0.90);
    state.counters["p95_us"] = PercentileUs(&lat, 0.95);
    state.counters["p99_us"] = PercentileUs(&lat, 0.99);
    state.counters["max_us"] = PercentileUs(&lat, 1.0);
    SyncCounters(state, before, after);
    state.counters["log_full_commits"] =
        static_cast<double>(after.commits_by_log_full - before.commits_by_log_full);
    state.counters["used_mib"] = static_cast<double>(after.used_bytes) / (1 << 20);
    err = s.Close();
    if (!err.empty()) return Fail(state, err);
  }
}

// ---- Seed 002: fiemap of a file with many extents -------------------------------------

constexpr uint64_t kExtentBytes = 4096;
bool g_seed002_built[2] = {false, false};  // plain, with a snapshot

std::string Seed002Path(bool shared) {
  return g_run_dir + (shared ? "/seed002-shared.img" : "/seed002.img");
}

// The device file holding /foobar, written once per process run. `shared`:
// its own device file, where a read-only snapshot of the subvolume was taken
// after the writes (so the plain file's runs never see a snapshot, whatever
// order the runs come in).
std::string BuildSeed002(bool shared) {
  if (g_seed002_built[shared]) return "";
  const uint64_t n = g_config.seed002_extents;
  // Data plus metadata (two items per extent, CoW) with room to spare.
  const uint64_t size = std::max<uint64_t>(1ull << 30, n * kExtentBytes * 2 + (512ull << 20));
  std::string err = PrepareImage(Seed002Path(shared), size);
  if (!err.empty()) return err;
  FsStore s;
  err = s.Open(Seed002Path(shared), cowkv::Options{}, /*format=*/true);
  if (!err.empty()) return err;
  cowkv::Files f = s.files();
  auto c = f.Create("/foobar");
  if (!c.ok()) return Err("Create", c.status());
  const std::string data(kExtentBytes, '\xab');
  for (uint64_t i = 0; i < n; ++i) {
    absl::Status w = f.Write(c->ino, i * kExtentBytes, data);
    if (!w.ok()) return Err("Write", w);
  }
  absl::Status cm = s.store->Commit();
  if (!cm.ok()) return Err("Commit", cm);
  if (shared) {
    auto snap = s.store->CreateSnapshot("default", "snap", /*read_only=*/true);
    if (!snap.ok()) return Err("CreateSnapshot", snap.status());
  }
  auto m = f.Fiemap(c->ino, 0, 0);
  if (!m.ok()) return Err("Fiemap", m.status());
  if (m->size() != n) return absl::StrCat("fiemap found ", m->size(), " extents, wanted ", n);
  err = s.Close();
  if (!err.empty()) return err;
  g_seed002_built[shared] = true;
  return "";
}

enum class FiemapMode { kWarm, kCold, kShared };

void BM_Seed002Fiemap(benchmark::State& state, FiemapMode mode, bool optimised) {
  const bool shared = mode == FiemapMode::kShared;
  const std::string path = Seed002Path(shared);
  std::string err = BuildSeed002(shared);
  if (!err.empty()) return Fail(state, err);
  cowkv::Options opts;
  opts.fiemap_path_cache = optimised;
  auto s = std::make_unique<FsStore>();
  err = s->Open(path, opts, /*format=*/false);
  if (!err.empty()) return Fail(state, err);
  auto ino = s->files().Lookup("/foobar");
  if (!ino.ok()) return Fail(state, Err("Lookup", ino.status()));
  double total_s = 0, cpu_s = 0, checks = 0, hits = 0, extents = 0, shared_n = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    if (mode == FiemapMode::kCold) {
      err = s->Close();
      if (err.empty()) err = DropPageCache(path);
      s = std::make_unique<FsStore>();
      if (err.empty()) err = s->Open(path, opts, /*format=*/false);
      if (!err.empty()) return Fail(state, err);
    } else {
      // Metadata cached: an untimed fiemap first.
      auto w = s->files().Fiemap(*ino, 0, 0);
      if (!w.ok()) return Fail(state, Err("Fiemap", w.status()));
    }
    cowkv::Files f = s->files();
    const cowkv::StoreStats before = s->store->Stats();
    const double cpu0 = ThreadCpuSeconds();
    auto t0 = Clock::now();
    auto m = f.Fiemap(*ino, 0, 0);
    auto t1 = Clock::now();
    cpu_s += ThreadCpuSeconds() - cpu0;
    if (!m.ok()) return Fail(state, Err("Fiemap", m.status()));
    const cowkv::StoreStats after = s->store->Stats();
    state.SetIterationTime(Seconds(t0, t1));
    total_s += Seconds(t0, t1);
    checks += static_cast<double>(after.fiemap_shared_checks - before.fiemap_shared_checks);
    hits += static_cast<double>(after.fiemap_path_cache_hits - before.fiemap_path_cache_hits);
    extents = static_cast<double>(m->size());
    shared_n = 0;
    for (const cowkv::FiemapExtent& e : *m) {
      if (e.flags & cowkv::kFiemapExtentShared) ++shared_n;
    }
    ++runs;
  }
  if (runs == 0) return;
  state.counters["extents"] = extents;
  state.counters["shared_extents"] = shared_n;
  state.counters["fiemap_ms"] = total_s / runs * 1e3;
  state.counters["fiemap_cpu_ms"] = cpu_s / runs * 1e3;
  state.counters["fiemap_shared_checks"] = checks / runs;
  state.counters["path_cache_hits"] = hits / runs;
  err = s->Close();
  if (!err.empty()) return Fail(state, err);
}

// ---- Seed 003: two threads creating empty files ----------------------------------------

FsStore* g_seed003 = nullptr;
cowkv::StoreStats g_seed003_before;
// With `subvols`: thread t's subvolume s<t+1> (else empty: the default).
std::vector<std::unique_ptr<cowkv::Subvolume>> g_seed003_subvols;

void BM_Seed003Create(benchmark::State& state, bool subvols) {
  if (state.thread_index() == 0) {
    auto s = std::make_unique<FsStore>();
    std::string err = FreshStore(cowkv::Options{}, s.get());
    g_seed003_subvols.clear();
    for (int t = 0; err.empty() && subvols && t < state.threads(); ++t) {
      const std::string name = absl::StrCat("s", t + 1);
      absl::Status c = s->store->CreateSubvolume(name).status();
      auto sv = c.ok() ? s->store->OpenSubvolume(name)
                       : absl::StatusOr<std::unique_ptr<cowkv::Subvolume>>(c);
      if (!sv.ok()) {
        err = Err("CreateSubvolume " + name, sv.status());
      } else {
        g_seed003_subvols.push_back(std::move(*sv));
      }
    }
    for (int t = 0; err.empty() && t < state.threads(); ++t) {
      cowkv::Files f = subvols ? g_seed003_subvols[t]->files() : s->files();
      auto d = f.Mkdir(absl::StrCat("/d", t + 1));
      if (!d.ok()) err = Err("Mkdir", d.status());
    }
    if (err.empty()) {
      g_seed003_before = s->store->Stats();
      g_seed003 = s.release();
    } else {
      Fail(state, err);  // still enters the loop below: its start and end are barriers
    }
  }
  // The loop's start is a barrier: thread 0's store is ready past it.
  const std::string prefix = absl::StrCat("/d", state.thread_index() + 1, "/f");
  uint64_t i = 0;
  for (auto _ : state) {
    if (g_seed003 == nullptr) {
      state.SkipWithError("no store");
      break;
    }
    auto c = (subvols ? g_seed003_subvols[state.thread_index()]->files() : g_seed003->files())
                 .Create(absl::StrCat(prefix, i++));
    if (!c.ok()) {
      state.SkipWithError(Err("Create", c.status()).c_str());
      break;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(i));
  // ... and its end: every thread is done past it.
  if (state.thread_index() == 0 && g_seed003 != nullptr) {
    const cowkv::StoreStats after = g_seed003->store->Stats();
    state.counters["inode_cache_hits"] =
        static_cast<double>(after.inode_cache_hits - g_seed003_before.inode_cache_hits);
    state.counters["inode_cache_misses"] =
        static_cast<double>(after.inode_cache_misses - g_seed003_before.inode_cache_misses);
    state.counters["inode_cache_evictions"] =
        static_cast<double>(after.inode_cache_evictions - g_seed003_before.inode_cache_evictions);
    state.counters["commits"] = static_cast<double>(after.commits - g_seed003_before.commits);
    g_seed003_subvols.clear();
    std::string err = g_seed003->Close();
    delete g_seed003;
    g_seed003 = nullptr;
    if (!err.empty()) return Fail(state, err);
  }
}

// ---- Seed 004: renames after an unrelated fsync ---------------------------------------

void BM_Seed004Rename(benchmark::State& state, bool optimised) {
  cowkv::Options opts;
  opts.fs_precise_logged_check = optimised;
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    FsStore s;
    std::string err = FreshStore(opts, &s);
    if (!err.empty()) return Fail(state, err);
    cowkv::Files f = s.files();
    auto dir = f.Mkdir("/testdir");
    if (!dir.ok()) return Fail(state, Err("Mkdir", dir.status()));
    for (uint64_t i = 1; i <= n; ++i) {
      auto c = f.Create(absl::StrCat("/testdir/file_", i));
      if (!c.ok()) return Fail(state, Err("Create", c.status()));
    }
    absl::Status cm = s.store->Commit();
    if (!cm.ok()) return Fail(state, Err("Commit", cm));
    auto foo = f.Create("/foo");
    if (!foo.ok()) return Fail(state, Err("Create /foo", foo.status()));
    absl::Status st = f.Write(foo->ino, 0, std::string(4096, 'f'));
    if (st.ok()) st = f.Fsync(foo->ino);
    if (!st.ok()) return Fail(state, Err("write+fsync /foo", st));
    auto last = f.Create(absl::StrCat("/testdir/file_", n + 1));
    if (!last.ok()) return Fail(state, Err("Create", last.status()));

    const cowkv::StoreStats before = s.store->Stats();
    const double cpu0 = ThreadCpuSeconds();
    auto t0 = Clock::now();
    for (uint64_t i = 1; i <= n; ++i) {
      const std::string from = absl::StrCat("/testdir/file_", i);
      absl::Status r = f.Rename(from, from + "-RPMDELETE");
      if (!r.ok()) return Fail(state, Err("Rename", r));
    }
    auto t1 = Clock::now();
    const double cpu1 = ThreadCpuSeconds();
    st = f.Fsync(foo->ino);
    auto t2 = Clock::now();
    if (!st.ok()) return Fail(state, Err("Fsync /foo", st));
    const cowkv::StoreStats after = s.store->Stats();
    state.SetIterationTime(Seconds(t0, t2));
    state.counters["files"] = static_cast<double>(n);
    state.counters["rename_ms"] = Seconds(t0, t1) * 1e3;
    state.counters["rename_cpu_ms"] = (cpu1 - cpu0) * 1e3;
    state.counters["fsync_ms"] = Seconds(t1, t2) * 1e3;
    state.counters["total_ms"] = Seconds(t0, t2) * 1e3;
    state.counters["fs_log_updates"] =
        static_cast<double>(after.fs_log_updates - before.fs_log_updates);
    state.counters["fs_logged_lookups"] =
        static_cast<double>(after.fs_logged_lookups - before.fs_logged_lookups);
    state.counters["log_lookups"] = static_cast<double>(after.log_lookups - before.log_lookups);
    SyncCounters(state, before, after);
    err = s.Close();
    if (!err.empty()) return Fail(state, err);
  }
}

// ---- Seeds 000, 003, 004 through `cowkv mount` ------------------------------------------
//
// The same workloads as syscalls on a FUSE mount of the same kind of store
// (mount/fuse_fs.h, served by threads of this process): `cowkv_fuse` over
// `cowkv` is what FUSE costs a user of the mount.

// A mount of `s`'s default subvolume at a fresh directory, for one run.
class BenchMount {
 public:
  std::string Start(FsStore* s) {
    mp_ = g_run_dir + "/mnt";
    std::error_code ec;
    std::filesystem::create_directories(mp_, ec);
    cowkv::mount::MountConfig c;
    c.mountpoint = mp_;
    absl::StatusOr<std::unique_ptr<cowkv::mount::FuseMount>> m =
        cowkv::mount::FuseMount::Mount(s->store.get(), s->files(), c);
    if (!m.ok()) return Err("FuseMount::Mount " + mp_, m.status());
    m_ = std::move(*m);
    m_->ServeInBackground();
    return "";
  }
  ~BenchMount() {
    if (m_ != nullptr) (void)m_->Unmount();
  }
  std::string Path(const std::string& p) const { return mp_ + p; }

 private:
  std::string mp_;
  std::unique_ptr<cowkv::mount::FuseMount> m_;
};

std::string Sys(const std::string& what) { return absl::StrCat(what, ": ", strerror(errno)); }

bool CreateEmpty(const std::string& path) {
  const int fd = open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY, 0644);
  if (fd < 0) return false;
  close(fd);
  return true;
}

void BM_Seed000DirFsyncFuse(benchmark::State& state) {
  const uint64_t n = g_config.seed000_files;
  constexpr uint64_t kPeriod = 100;
  for (auto _ : state) {
    FsStore s;
    std::string err = FreshStore(cowkv::Options{}, &s);
    if (!err.empty()) return Fail(state, err);
    BenchMount m;
    err = m.Start(&s);
    if (!err.empty()) return Fail(state, err);
    const std::string dir = m.Path("/testdir");
    if (mkdir(dir.c_str(), 0755) != 0) return Fail(state, Sys("mkdir"));
    std::vector<double> lat;
    lat.reserve(n / kPeriod);
    for (uint64_t i = 1; i <= n; ++i) {
      if (!CreateEmpty(absl::StrCat(dir, "/file_", i))) return Fail(state, Sys("create"));
      if (i % kPeriod == 0) {
        const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY);
        if (fd < 0) return Fail(state, Sys("open dir"));
        auto t0 = Clock::now();
        const int r = fsync(fd);
        auto t1 = Clock::now();
        close(fd);
        if (r != 0) return Fail(state, Sys("fsync dir"));
        lat.push_back(Seconds(t0, t1));
      }
    }
    double total = 0;
    for (double v : lat) total += v;
    state.SetIterationTime(total);
    state.counters["files"] = static_cast<double>(n);
    state.counters["fsyncs"] = static_cast<double>(lat.size());
    state.counters["total_fsync_ms"] = total * 1e3;
    state.counters["mean_us"] = lat.empty() ? 0 : total / lat.size() * 1e6;
    state.counters["p50_us"] = PercentileUs(&lat, 0.50);
    state.counters["p99_us"] = PercentileUs(&lat, 0.99);
    state.counters["max_us"] = PercentileUs(&lat, 1.0);
  }
}

FsStore* g_seed003_fuse = nullptr;
BenchMount* g_seed003_mount = nullptr;

void BM_Seed003CreateFuse(benchmark::State& state) {
  if (state.thread_index() == 0) {
    auto s = std::make_unique<FsStore>();
    auto m = std::make_unique<BenchMount>();
    std::string err = FreshStore(cowkv::Options{}, s.get());
    if (err.empty()) err = m->Start(s.get());
    for (int t = 0; err.empty() && t < state.threads(); ++t) {
      if (mkdir(m->Path(absl::StrCat("/d", t + 1)).c_str(), 0755) != 0) err = Sys("mkdir");
    }
    if (err.empty()) {
      g_seed003_fuse = s.release();
      g_seed003_mount = m.release();
    } else {
      Fail(state, err);
    }
  }
  // The loop's start is a barrier: thread 0's mount is up past it, so the
  // prefix is taken at the first iteration, never before.
  std::string prefix;
  uint64_t i = 0;
  for (auto _ : state) {
    if (g_seed003_mount == nullptr) {
      state.SkipWithError("no mount");
      break;
    }
    if (prefix.empty()) {
      prefix = g_seed003_mount->Path(absl::StrCat("/d", state.thread_index() + 1, "/f"));
    }
    if (!CreateEmpty(absl::StrCat(prefix, i++))) {
      state.SkipWithError(Sys("create").c_str());
      break;
    }
  }
  state.SetItemsProcessed(static_cast<int64_t>(i));
  if (state.thread_index() == 0 && g_seed003_fuse != nullptr) {
    delete g_seed003_mount;
    g_seed003_mount = nullptr;
    std::string err = g_seed003_fuse->Close();
    delete g_seed003_fuse;
    g_seed003_fuse = nullptr;
    if (!err.empty()) return Fail(state, err);
  }
}

void BM_Seed004RenameFuse(benchmark::State& state) {
  const uint64_t n = static_cast<uint64_t>(state.range(0));
  for (auto _ : state) {
    FsStore s;
    std::string err = FreshStore(cowkv::Options{}, &s);
    if (!err.empty()) return Fail(state, err);
    BenchMount m;
    err = m.Start(&s);
    if (!err.empty()) return Fail(state, err);
    const std::string dir = m.Path("/testdir");
    if (mkdir(dir.c_str(), 0755) != 0) return Fail(state, Sys("mkdir"));
    for (uint64_t i = 1; i <= n; ++i) {
      if (!CreateEmpty(absl::StrCat(dir, "/file_", i))) return Fail(state, Sys("create"));
    }
    absl::Status cm = s.store->Commit();
    if (!cm.ok()) return Fail(state, Err("Commit", cm));
    const int foo = open(m.Path("/foo").c_str(), O_CREAT | O_RDWR, 0644);
    if (foo < 0) return Fail(state, Sys("create /foo"));
    const std::string block(4096, 'f');
    if (pwrite(foo, block.data(), block.size(), 0) != 4096 || fsync(foo) != 0) {
      close(foo);
      return Fail(state, Sys("write+fsync /foo"));
    }
    if (!CreateEmpty(absl::StrCat(dir, "/file_", n + 1))) return Fail(state, Sys("create"));
    auto t0 = Clock::now();
    for (uint64_t i = 1; i <= n; ++i) {
      const std::string from = absl::StrCat(dir, "/file_", i);
      if (rename(from.c_str(), (from + "-RPMDELETE").c_str()) != 0) {
        close(foo);
        return Fail(state, Sys("rename"));
      }
    }
    auto t1 = Clock::now();
    const int r = fsync(foo);
    auto t2 = Clock::now();
    close(foo);
    if (r != 0) return Fail(state, Sys("fsync /foo"));
    state.SetIterationTime(Seconds(t0, t2));
    state.counters["files"] = static_cast<double>(n);
    state.counters["rename_ms"] = Seconds(t0, t1) * 1e3;
    state.counters["fsync_ms"] = Seconds(t1, t2) * 1e3;
    state.counters["total_ms"] = Seconds(t0, t2) * 1e3;
  }
}

void RegisterAll() {
  benchmark::RegisterBenchmark("BM_Fdatasync/device", BM_Fdatasync)
      ->UseManualTime()
      ->Iterations(200)
      ->Unit(benchmark::kMicrosecond);
  benchmark::RegisterBenchmark("BM_Seed003InodeInsert/cowkv", BM_Seed003InodeInsert, false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Seed003InodeInsert/cowkv_std_map", BM_Seed003InodeInsert, true)
      ->Unit(benchmark::kMillisecond);

  const std::pair<const char*, bool> s000[] = {{"cowkv", true},
                                               {"cowkv_no_dir_index_offset", false}};
  for (const auto& [v, on] : s000) {
    benchmark::RegisterBenchmark(absl::StrCat("BM_Seed000DirFsync/", v).c_str(),
                                 BM_Seed000DirFsync, on)
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }

  benchmark::RegisterBenchmark("BM_Seed000DirFsync/cowkv_fuse", BM_Seed000DirFsyncFuse)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);

  const std::pair<const char*, FiemapMode> s002[] = {{"BM_Seed002Fiemap", FiemapMode::kWarm},
                                                     {"BM_Seed002FiemapCold", FiemapMode::kCold},
                                                     {"BM_Seed002FiemapShared",
                                                      FiemapMode::kShared}};
  for (const auto& [name, mode] : s002) {
    for (const auto& [v, on] : {std::pair<const char*, bool>{"cowkv", true},
                                std::pair<const char*, bool>{"cowkv_no_path_cache", false}}) {
      benchmark::RegisterBenchmark(absl::StrCat(name, "/", v).c_str(), BM_Seed002Fiemap, mode, on)
          ->UseManualTime()
          ->Iterations(3)
          ->Unit(benchmark::kMillisecond);
    }
  }

  for (const auto& [name, subvols] :
       {std::pair<const char*, bool>{"BM_Seed003Create/cowkv", false},
        std::pair<const char*, bool>{"BM_Seed003CreateSubvols/cowkv", true}}) {
    benchmark::RegisterBenchmark(name, BM_Seed003Create, subvols)
        ->Threads(1)
        ->Threads(2)
        ->UseRealTime()
        ->Iterations(static_cast<int64_t>(g_config.seed003_files))
        ->Unit(benchmark::kMillisecond);
  }

  benchmark::RegisterBenchmark("BM_Seed003Create/cowkv_fuse", BM_Seed003CreateFuse)
      ->Threads(1)
      ->Threads(2)
      ->UseRealTime()
      ->Iterations(static_cast<int64_t>(g_config.seed003_files))
      ->Unit(benchmark::kMillisecond);

  const std::pair<const char*, bool> s004[] = {{"cowkv", true}, {"cowkv_no_logged_check", false}};
  for (const auto& [v, on] : s004) {
    benchmark::RegisterBenchmark(absl::StrCat("BM_Seed004Rename/", v).c_str(), BM_Seed004Rename,
                                 on)
        ->Arg(1000)
        ->Arg(2000)
        ->Arg(5000)
        ->Arg(10000)
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::RegisterBenchmark("BM_Seed004Rename/cowkv_fuse", BM_Seed004RenameFuse)
      ->Arg(1000)
      ->Arg(10000)
      ->UseManualTime()
      ->Iterations(1)
      ->Unit(benchmark::kMillisecond);
}

// ---- main -----------------------------------------------------------------------------

bool ParseCount(const std::string& a, const char* flag, uint64_t* out) {
  const size_t len = std::strlen(flag);
  if (a.compare(0, len, flag) != 0) return false;
  uint64_t v = 0;
  if (!ParseU64(a.c_str() + len, &v) || v == 0) {
    std::fprintf(stderr, "seeds_bench: bad %s\n", a.c_str());
    std::exit(2);
  }
  *out = v;
  return true;
}

// Removes our flags from argv.
void ParseOwnFlags(int* argc, char** argv) {
  int out = 1;
  uint64_t mib = 0;
  for (int i = 1; i < *argc; ++i) {
    const std::string a = argv[i];
    if (ParseCount(a, "--inodes=", &g_config.inodes) ||
        ParseCount(a, "--seed000_files=", &g_config.seed000_files) ||
        ParseCount(a, "--seed002_extents=", &g_config.seed002_extents) ||
        ParseCount(a, "--seed003_files=", &g_config.seed003_files)) {
      continue;
    }
    if (ParseCount(a, "--fs_device_mib=", &mib)) {
      g_config.fs_device_bytes = mib << 20;
    } else if (a.rfind("--dir=", 0) == 0 && a.size() > 6) {
      g_config.dir = a.substr(6);
    } else if (a == "--device=zeroed" || a == "--device=sparse") {
      g_config.zero_device = (a == "--device=zeroed");
    } else if (a.rfind("--dir", 0) == 0 || a.rfind("--device", 0) == 0) {
      std::fprintf(stderr, "seeds_bench: bad %s\n", a.c_str());
      std::exit(2);
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
  argv[out] = nullptr;
}

int Main(int argc, char** argv) {
  ParseOwnFlags(&argc, argv);
  // benchmark::Initialize consumes --benchmark_out*, so look first.
  OutFlags out_flags;
  if (!ReadOutFlags(argc, argv, "seeds_bench", &out_flags)) return 2;
  // Debian builds Abseil without NDEBUG, which turns on Mutex deadlock
  // detection (a graph update on every lock); production binaries turn it off.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  RegisterAll();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
  {
    std::string base = g_config.dir;
    if (base.empty()) {
      const char* tmp = std::getenv("TEST_TMPDIR");
      base = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp";
    }
    std::string err;
    g_run_dir = MakeRunDir(base, "seeds_bench", &err);
    if (g_run_dir.empty()) {
      std::fprintf(stderr, "seeds_bench: %s\n", err.c_str());
      return 1;
    }
  }
  benchmark::AddCustomContext("files_dir", g_run_dir);
  benchmark::AddCustomContext("device", g_config.zero_device ? "zeroed" : "sparse");
  benchmark::AddCustomContext("seed000_files", std::to_string(g_config.seed000_files));
  benchmark::AddCustomContext("seed002_extents", std::to_string(g_config.seed002_extents));
  benchmark::AddCustomContext("seed003_files", std::to_string(g_config.seed003_files));

  RunWithExactNames(out_flags);
  benchmark::Shutdown();
  int rc = 0;
  std::string err = RemovePath(g_run_dir);
  if (!err.empty()) {
    std::fprintf(stderr, "seeds_bench: %s\n", err.c_str());
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace cowkv_bench

int main(int argc, char** argv) { return cowkv_bench::Main(argc, argv); }
