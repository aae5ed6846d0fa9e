// The seed workloads (../shared/seeds): each optimisation against itself
// switched off, in one binary. So far seed 003: inode cache inserts into the
// dense radix array vs a std::map (btrfs's rb-tree before the change).
//
//   bazel build --config=opt //bench:seeds_bench
//   bazel-bin/bench/seeds_bench [--inodes=N] [--benchmark_format=json]
//
// BM_Seed003InodeInsert/{cowkv,cowkv_std_map}: N (5,000,000) inserts of
// consecutive inode numbers, each timed; counters mean/p50/p90/p95/p99 in ns
// (the seed's figures: mean 776 → 272 ns).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "benchmark/benchmark.h"
#include "engine/fs/inode_cache.h"

namespace {

uint64_t g_inodes = 5000000;

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
  std::vector<std::shared_ptr<FakeInode>> inodes(g_inodes);
  for (uint64_t i = 0; i < g_inodes; ++i) {
    inodes[i] = std::make_shared<FakeInode>();
    inodes[i]->ino = 256 + i;
  }
  std::vector<double> ns(g_inodes);
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<Cache> cache = make();
    state.ResumeTiming();
    for (uint64_t i = 0; i < g_inodes; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      benchmark::DoNotOptimize(cache->Insert(256 + i, inodes[i]));
      auto t1 = std::chrono::steady_clock::now();
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
  state.SetItemsProcessed(static_cast<int64_t>(g_inodes) * state.iterations());
}

void BM_Seed003InodeInsert(benchmark::State& state, bool std_map) {
  using Radix = cowkv::fs::InodeCache<FakeInode>;
  using Map = cowkv::fs::StdMapInodeCache<FakeInode>;
  if (std_map) {
    RunInserts<Map>(state, [] { return std::make_unique<Map>(); });
  } else {
    RunInserts<Radix>(state, [] { return std::make_unique<Radix>(g_inodes + 1); });
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--inodes=", 0) == 0) {
      g_inodes = std::strtoull(a.c_str() + 9, nullptr, 10);
      if (g_inodes == 0) {
        std::fprintf(stderr, "bad %s\n", a.c_str());
        return 2;
      }
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rargc = static_cast<int>(rest.size());
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  benchmark::RegisterBenchmark("BM_Seed003InodeInsert/cowkv", BM_Seed003InodeInsert, false)
      ->Unit(benchmark::kMillisecond);
  benchmark::RegisterBenchmark("BM_Seed003InodeInsert/cowkv_std_map", BM_Seed003InodeInsert, true)
      ->Unit(benchmark::kMillisecond);
  benchmark::Initialize(&rargc, rest.data());
  if (benchmark::ReportUnrecognizedArguments(rargc, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
