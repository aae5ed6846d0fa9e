// Goal: the delayed-ref throttler (seed 001) paces writers by pending
// delayed-ref heads — batches run by writers above the soft limit, commits
// at the trigger, waits above the hard limit — and the older bytes policy
// still works for comparison; a device filled by several writer threads
// across subvolumes and snapshots gives clean ENOSPC, never a failed commit,
// and deleting a snapshot gives the space back.
// Method: small limits so every mechanism fires in a short run; counters
// and a bound on pending heads are asserted; contents against a model;
// `check` at the end of each test.
#include <algorithm>
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

using testing::StatusIs;

Options SmallThrottle() {
  Options o = testing::TestOptions();
  o.delayed_refs_soft = 64;
  o.delayed_refs_commit = 256;
  o.delayed_refs_hard = 1024;
  o.delayed_refs_batch = 1;
  return o;
}

TEST(Throttle, DelayedRefPolicyPacesWriters) {
  MemDevice dev(256 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, SmallThrottle()));
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(3);
  uint64_t max_heads = 0;
  for (int i = 0; i < 30000; ++i) {
    std::string k = absl::StrCat("k", rng() % 200000), v(rng() % 300, 'v');
    ASSERT_OK(store->Put(k, v));
    model[k] = v;
    max_heads = std::max(max_heads, store->Stats().delayed_ref_heads);
  }
  StoreStats st = store->Stats();
  EXPECT_GT(st.throttle_batches, 10u);
  EXPECT_LT(max_heads, 256u + 64u) << "heads ran past the commit trigger";
  auto it = store->NewIterator();
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(m, model.end());
    ASSERT_EQ(it->key(), m->first);
    ASSERT_EQ(it->value(), m->second);
  }
  ASSERT_EQ(m, model.end());
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

// Each limit alone: the commit trigger, then the hard limit.
void RunWithLimits(uint64_t soft, uint64_t commit, uint64_t hard, StoreStats* st) {
  MemDevice dev(256 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  Options o = testing::TestOptions();
  o.delayed_refs_soft = soft;
  o.delayed_refs_commit = commit;
  o.delayed_refs_hard = hard;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  std::mt19937_64 rng(4);
  for (int i = 0; i < 20000; ++i) {
    ASSERT_OK(store->Put(absl::StrCat("k", rng() % 200000), std::string(rng() % 300, 'v')));
    ASSERT_LT(store->Stats().delayed_ref_heads, std::min(commit, hard) + 64);
  }
  *st = store->Stats();
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

TEST(Throttle, CommitTriggerAndHardLimit) {
  StoreStats st;
  ASSERT_NO_FATAL_FAILURE(RunWithLimits(1 << 30, 128, 1 << 30, &st));
  EXPECT_GT(st.commits_by_delayed_refs, 5u);
  EXPECT_EQ(st.throttle_waits, 0u);
  ASSERT_NO_FATAL_FAILURE(RunWithLimits(1 << 30, 1 << 30, 128, &st));
  EXPECT_GT(st.throttle_waits, 5u);
  EXPECT_GT(st.commits_by_delayed_refs, 5u);
}

TEST(Throttle, BytesPolicyWaitsForCommits) {
  MemDevice dev(256 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  Options o = testing::TestOptions();
  o.test_hooks.throttle_policy = Options::TestHooks::ThrottlePolicy::kReservedBytes;
  o.test_hooks.throttle_dirty_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  for (int i = 0; i < 20000; ++i) {
    ASSERT_OK(store->Put(absl::StrCat("k", i * 7919 % 20011), std::string(200, 'v')));
  }
  StoreStats st = store->Stats();
  EXPECT_GT(st.throttle_waits, 0u);
  EXPECT_EQ(st.throttle_batches, 0u);
  EXPECT_LE(st.dirty_bytes, 2u << 20);
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

TEST(Throttle, DeviceFullWithSeveralWriters) {
  MemDevice dev(32 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, SmallThrottle()));
  for (int i = 0; i < 3000; ++i)
    ASSERT_OK(store->Put(absl::StrCat("base", i), std::string(300, 'b')));
  ASSERT_OK(store->CreateSnapshot("default", "snap", false));
  ASSERT_OK(store->CreateSubvolume("other"));
  const std::vector<std::string> targets = {"default", "snap", "other"};
  std::atomic<int> other_errors{0};
  std::vector<std::thread> writers;
  for (size_t w = 0; w < targets.size(); ++w) {
    writers.emplace_back([&, w] {
      auto sv = store->OpenSubvolume(targets[w]);
      if (!sv.ok()) {
        ++other_errors;
        return;
      }
      for (int i = 0;; ++i) {
        absl::Status s = (*sv)->Put(absl::StrCat("w", w, "-", i), std::string(400, 'w'));
        if (absl::IsResourceExhausted(s)) return;
        if (!s.ok()) {
          ADD_FAILURE() << targets[w] << ": " << s;
          ++other_errors;
          return;
        }
      }
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(other_errors.load(), 0);
  ASSERT_OK(store->Commit());
  EXPECT_GT(store->Stats().enospc_errors, 0u);
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
  // Deleting the snapshot gives its space back.
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, SmallThrottle()));
  const uint64_t used_full = store->Stats().used_bytes;
  ASSERT_OK(store->DeleteSubvolume("snap"));
  ASSERT_OK(store->DropDeletedSubvolumes());
  ASSERT_OK(store->Commit());
  EXPECT_LT(store->Stats().used_bytes, used_full - (1u << 20));
  ASSERT_OK_AND_ASSIGN(auto other, store->OpenSubvolume("other"));
  for (int i = 0; i < 1000; ++i)
    ASSERT_OK(other->Put(absl::StrCat("after", i), std::string(400, 'a')));
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

}  // namespace
}  // namespace cowkv
