// Goal: writers, readers, iterators, snapshots and pipelined commits running
// at the same time never lose or corrupt a write: sealed nodes being written
// are CoWed, not changed, by the next generation's writers.
// Method: two writer threads (disjoint key ranges, puts and deletes) and a
// reader thread scanning and reading, while the background committer
// commits every 5 ms, dirty-bytes kicks add more, and a fourth thread takes
// snapshots. Afterwards every key equals the writers' models, each snapshot
// is internally sorted, and after close and reopen `check` is clean and the
// data is unchanged.
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using KV = std::map<std::string, std::string>;

TEST(Concurrency, WritersReadersSnapshotsAndPipelinedCommits) {
  MemDevice dev(512ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  Options o = testing::TestOptions();
  o.commit_interval_ms = 5;
  o.dirty_bytes_max = 512 << 10;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  std::atomic<bool> stop{false};
  std::vector<KV> models(2);
  std::vector<std::thread> threads;
  for (int w = 0; w < 2; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(w + 1);
      for (int i = 0; i < 20000; ++i) {
        std::string k = absl::StrCat("w", w, "-", rng() % 4000);
        if (rng() % 4 == 0 && models[w].count(k)) {
          ASSERT_OK(store->Delete(k));
          models[w].erase(k);
        } else {
          std::string v(rng() % 200, static_cast<char>('a' + i % 26));
          ASSERT_OK(store->Put(k, v));
          models[w][k] = v;
        }
      }
    });
  }
  threads.emplace_back([&] {  // reader: scans must always be sorted
    while (!stop) {
      auto it = store->NewIterator();
      std::string prev;
      for (it->SeekToFirst(); it->Valid(); it->Next()) {
        ASSERT_LT(prev, std::string(it->key()));
        prev = std::string(it->key());
      }
      ASSERT_OK(it->status());
    }
  });
  std::atomic<int> snapshots{0};
  threads.emplace_back([&] {
    while (!stop && snapshots < 20) {
      ASSERT_OK(store->CreateSnapshot("default", absl::StrCat("s", snapshots.load()), true));
      ++snapshots;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  threads[0].join();
  threads[1].join();
  stop = true;
  for (size_t i = 2; i < threads.size(); ++i) threads[i].join();
  EXPECT_GT(store->Stats().commits, 5u);
  auto verify = [&](Store* s) {
    KV all;
    for (const KV& m : models) all.insert(m.begin(), m.end());
    auto it = s->NewIterator();
    auto e = all.begin();
    for (it->SeekToFirst(); it->Valid(); it->Next(), ++e) {
      ASSERT_NE(e, all.end());
      ASSERT_EQ(it->key(), e->first);
      ASSERT_EQ(it->value(), e->second);
    }
    ASSERT_OK(it->status());
    ASSERT_EQ(e, all.end());
  };
  ASSERT_NO_FATAL_FAILURE(verify(store.get()));
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_NO_FATAL_FAILURE(verify(store.get()));
  EXPECT_EQ(store->ListSubvolumes().size(), 1u + snapshots.load());
  ASSERT_OK(store->Close());
}

}  // namespace
}  // namespace cowkv
