// --seed=N --ops=M --seeds=K for randomized tests, so every failure replays:
// a failing test prints the exact flags to rerun it (TigerBeetle's VOPR).
// Use COWKV_TEST_MAIN() instead of gtest_main.
#ifndef COWKV_ENGINE_TESTING_TEST_FLAGS_H_
#define COWKV_ENGINE_TESTING_TEST_FLAGS_H_

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gtest/gtest.h"

namespace cowkv {
namespace testing {

struct TestFlags {
  uint64_t seed = 0;   // 0 = the test's default seeds
  uint64_t ops = 0;    // 0 = the test's default
  uint64_t seeds = 0;  // how many consecutive seeds (0 = default)
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
        take("--seeds=", &Flags().seeds)) {
      continue;
    }
    argv[out++] = argv[i];
  }
  *argc = out;
}

}  // namespace testing
}  // namespace cowkv

#define COWKV_TEST_MAIN()                                   \
  int main(int argc, char** argv) {                         \
    ::cowkv::testing::ParseTestFlags(&argc, argv);          \
    ::testing::InitGoogleTest(&argc, argv);                 \
    return RUN_ALL_TESTS();                                 \
  }

#endif  // COWKV_ENGINE_TESTING_TEST_FLAGS_H_
