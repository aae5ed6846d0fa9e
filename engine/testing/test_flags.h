// --seed=N --ops=M --seeds=K for randomized tests, so every failure replays:
// a failing test prints the exact flags to rerun it (TigerBeetle's VOPR).
// The crash generators (kv_gen_test, fs_gen_test) add --full, --samples=N,
// --max_ops=N and --only='<workload>', and shard their workloads themselves
// (ShardIndex/ShardCount). Use COWKV_TEST_MAIN() (a self-sharded test:
// COWKV_SELF_SHARDED_TEST_MAIN()) instead of gtest_main.
#ifndef COWKV_ENGINE_TESTING_TEST_FLAGS_H_
#define COWKV_ENGINE_TESTING_TEST_FLAGS_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace cowkv {
namespace testing {

struct TestFlags {
  uint64_t seed = 0;   // 0 = the test's default seeds
  uint64_t ops = 0;    // 0 = the test's default
  uint64_t seeds = 0;  // how many consecutive seeds (0 = default)
  // Crash generators:
  bool full = false;     // the whole space, not a sample
  uint64_t samples = 0;  // workloads in the sample (0 = default)
  uint64_t max_ops = 0;  // longest workload (0 = default)
  std::string only;      // a workload description to run alone (from a failure message)
  uint64_t ref_item_names = 0;  // fs generators: names per INODE_REF item (0 = as many as fit)
};

inline TestFlags& Flags() {
  static TestFlags f;
  return f;
}

inline void ParseTestFlags(int* argc, char** argv) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    auto take = [&](const char* name, uint64_t* v) {
      size_t n = std::strlen(name);
      if (std::strncmp(argv[i], name, n) != 0) return false;
      *v = std::strtoull(argv[i] + n, nullptr, 10);
      return true;
    };
    if (take("--seed=", &Flags().seed) || take("--ops=", &Flags().ops) ||
        take("--seeds=", &Flags().seeds) || take("--samples=", &Flags().samples) ||
        take("--max_ops=", &Flags().max_ops) ||
        take("--ref_item_names=", &Flags().ref_item_names)) {
      continue;
    }
    if (std::strcmp(argv[i], "--full") == 0) {
      Flags().full = true;
      continue;
    }
    if (std::strncmp(argv[i], "--only=", 7) == 0) {
      Flags().only = argv[i] + 7;
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
}

// Bazel's test sharding, for tests that spread their own workloads over the
// shards (a test of a self-sharded binary runs on every shard).
inline int ShardIndex() {
  const char* i = std::getenv("TEST_SHARD_INDEX");
  return i ? std::atoi(i) : 0;
}
inline int ShardCount() {
  const char* n = std::getenv("TEST_TOTAL_SHARDS");
  return n ? std::max(1, std::atoi(n)) : 1;
}
// Tells Bazel the binary knows about sharding.
inline void TouchShardFile() {
  if (const char* p = std::getenv("TEST_SHARD_STATUS_FILE")) std::ofstream(p).flush();
}

// A model test's seeded runs: seeds --seed (else `first`) on, --seeds of
// them (else `seeds`; with `fixed`, always `seeds`). `run(seed)` returns
// what disagreed with the model; every run must return nothing, and a
// failure names the seed that replays it.
template <typename Run>
void ExpectSeededRunsAgree(uint64_t first, uint64_t seeds, bool fixed, Run run) {
  if (Flags().seed != 0) first = Flags().seed;
  if (!fixed && Flags().seeds != 0) seeds = Flags().seeds;
  for (uint64_t s = first; s < first + seeds; ++s) {
    const std::vector<std::string> p = run(s);
    std::string all;
    for (const std::string& line : p) all += line + "\n";
    EXPECT_TRUE(p.empty()) << "--seed=" << s << ":\n" << all;
  }
}

// How many of seeds 1..`seeds` a planted bug's run disagreed with the model.
template <typename Run>
int SeedsCatching(uint64_t seeds, Run run) {
  int caught = 0;
  for (uint64_t s = 1; s <= seeds; ++s) caught += run(s).empty() ? 0 : 1;
  return caught;
}

}  // namespace testing
}  // namespace cowkv

#define COWKV_TEST_MAIN()                                   \
  int main(int argc, char** argv) {                         \
    ::cowkv::testing::ParseTestFlags(&argc, argv);          \
    ::testing::InitGoogleTest(&argc, argv);                 \
    return RUN_ALL_TESTS();                                 \
  }

// The tests shard their workloads themselves (ShardIndex): gtest must not
// also spread the tests over the shards.
#define COWKV_SELF_SHARDED_TEST_MAIN()             \
  int main(int argc, char** argv) {                \
    unsetenv("GTEST_TOTAL_SHARDS");                \
    unsetenv("GTEST_SHARD_INDEX");                 \
    ::cowkv::testing::ParseTestFlags(&argc, argv); \
    ::testing::InitGoogleTest(&argc, argv);        \
    return RUN_ALL_TESTS();                        \
  }

#endif  // COWKV_ENGINE_TESTING_TEST_FLAGS_H_
