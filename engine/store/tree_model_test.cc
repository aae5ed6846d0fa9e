// Goal: the CoW B+tree behind the store is exactly a sorted map, across
// splits, merges, borrowing, root growth and collapse, commits and reopens,
// at nodesizes 4 KiB and 16 KiB.
// Method: a seeded random mix of inserts, overwrites, deletes (present and
// absent), point reads and forward/reverse range scans, applied to the store
// and to a std::map model and compared after every operation; keys 1..1024
// bytes, values 0..the inline limit. Commits at random intervals, each
// followed by the full `check` (structure, fences, refcounts, space);
// close/reopen at random intervals followed by a full comparison.
// Replay: --seed=N --ops=M (printed on failure).
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;
using testing::Flags;
using testing::StatusIs;

class ModelRun {
 public:
  ModelRun(uint32_t nodesize, uint64_t seed) : nodesize_(nodesize), rng_(seed) {}

  std::string RandomKey() {
    // Mostly short keys from a small space (so overwrites and deletes hit),
    // sometimes long ones up to the 1 KiB limit.
    uint64_t r = rng_() % 100;
    if (r < 70) return absl::StrCat("k", rng_() % 20000);
    if (r < 95)
      return std::string(1 + rng_() % 64, static_cast<char>('a' + rng_() % 26)) +
             absl::StrCat(rng_() % 1000);
    std::string k(1 + rng_() % kMaxKeySize, '\0');
    for (char& c : k) c = static_cast<char>(rng_());
    return k;
  }

  std::string RandomValue(size_t limit) {
    uint64_t r = rng_() % 100;
    size_t len = r < 80 ? rng_() % 120 : (r < 97 ? rng_() % (limit / 4 + 1) : limit - rng_() % 3);
    std::string v(len, '\0');
    char c = static_cast<char>(rng_());
    for (size_t i = 0; i < len; ++i) v[i] = static_cast<char>(c + i);
    return v;
  }

  std::string ExistingKey() {
    auto it = model_.lower_bound(RandomKey());
    if (it == model_.end()) it = model_.begin();
    return it->first;
  }

  void CompareAll(Store* store) {
    auto it = store->NewIterator();
    auto m = model_.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
      ASSERT_NE(m, model_.end()) << "store has extra key";
      ASSERT_EQ(it->key(), m->first);
      ASSERT_EQ(it->value(), m->second);
    }
    ASSERT_OK(it->status());
    ASSERT_EQ(m, model_.end()) << "store lacks keys";
  }

  void Scan(Store* store) {
    std::string start = RandomKey();
    bool reverse = rng_() % 2;
    int limit = 1 + rng_() % 50;
    auto it = store->NewIterator();
    if (!reverse) {
      it->Seek(start);
      auto m = model_.lower_bound(start);
      for (int i = 0; i < limit && m != model_.end(); ++i, ++m, it->Next()) {
        ASSERT_TRUE(it->Valid()) << it->status();
        ASSERT_EQ(it->key(), m->first);
        ASSERT_EQ(it->value(), m->second);
      }
      if (model_.lower_bound(start) == model_.end()) {
        ASSERT_FALSE(it->Valid());
      }
    } else {
      it->SeekForPrev(start);
      auto m = model_.upper_bound(start);
      for (int i = 0; i < limit && m != model_.begin(); ++i, it->Prev()) {
        --m;
        ASSERT_TRUE(it->Valid()) << it->status();
        ASSERT_EQ(it->key(), m->first);
        ASSERT_EQ(it->value(), m->second);
      }
      if (model_.upper_bound(start) == model_.begin()) {
        ASSERT_FALSE(it->Valid());
      }
    }
  }

  void Run(uint64_t ops) {
    MemDevice dev(512ull << 20);
    ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(nodesize_)));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<Store> store, Store::Open(&dev, testing::TestOptions()));
    const size_t limit = store->max_value_size();
    uint64_t next_commit = 500 + rng_() % 3000, next_reopen = 10000 + rng_() % 30000;
    for (uint64_t op = 0; op < ops; ++op) {
      SCOPED_TRACE(absl::StrCat("op ", op));
      uint64_t r = rng_() % 100;
      if (r < 45 || model_.empty()) {
        std::string k = RandomKey(), v = RandomValue(limit);
        ASSERT_OK(store->Put(k, v));
        model_[k] = v;
      } else if (r < 60) {
        std::string k = ExistingKey(), v = RandomValue(limit);
        ASSERT_OK(store->Put(k, v));
        model_[k] = v;
      } else if (r < 85) {
        std::string k = rng_() % 5 ? ExistingKey() : RandomKey();
        absl::Status s = store->Delete(k);
        if (model_.erase(k)) {
          ASSERT_OK(s);
        } else {
          ASSERT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
        }
      } else if (r < 93) {
        std::string k = rng_() % 2 ? ExistingKey() : RandomKey();
        auto v = store->Get(k);
        auto m = model_.find(k);
        if (m == model_.end()) {
          ASSERT_THAT(v, StatusIs(absl::StatusCode::kNotFound));
        } else {
          ASSERT_OK(v);
          ASSERT_EQ(*v, m->second);
        }
      } else {
        ASSERT_NO_FATAL_FAILURE(Scan(store.get()));
      }
      if (op == next_commit) {
        ASSERT_OK(store->Commit());
        ASSERT_NO_FATAL_FAILURE(ExpectCheckClean(&dev));
        next_commit = op + 500 + rng_() % 3000;
      }
      if (op == next_reopen) {
        ASSERT_OK(store->Close());
        store.reset();
        ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
        ASSERT_NO_FATAL_FAILURE(CompareAll(store.get()));
        next_reopen = op + 10000 + rng_() % 30000;
      }
    }
    ASSERT_NO_FATAL_FAILURE(CompareAll(store.get()));
    ASSERT_OK(store->Close());
    ASSERT_NO_FATAL_FAILURE(ExpectCheckClean(&dev));
  }

 private:
  const uint32_t nodesize_;
  std::mt19937_64 rng_;
  std::map<std::string, std::string> model_;
};

void RunSeeds(uint32_t nodesize, uint64_t default_seed, uint64_t default_ops) {
  uint64_t first = Flags().seed ? Flags().seed : default_seed;
  uint64_t seeds = Flags().seeds ? Flags().seeds : 1;
  uint64_t ops = Flags().ops ? Flags().ops : default_ops;
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    SCOPED_TRACE(
        absl::StrCat("replay: --seed=", seed, " --ops=", ops, " (nodesize ", nodesize, ")"));
    ModelRun run(nodesize, seed);
    run.Run(ops);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// 200,000 operations at each nodesize in the default run.
TEST(TreeModel, Nodesize4K) { RunSeeds(4096, 1, 200000); }
TEST(TreeModel, Nodesize16K) { RunSeeds(16384, 2, 200000); }
// Regression: a non-root internal node left with one (1 KiB) separator was
// not underfull by bytes, so it was never merged.
TEST(TreeModel, RegressionSeed300SingleChildInternalNode) {
  if (Flags().seed != 0) GTEST_SKIP() << "replaying another seed";
  RunSeeds(4096, 300, 300000);
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
