// Goal: the facade's basic contract — put/get/delete/iterate, commit and
// reopen, handles, input validation — on small and large trees.
// Method: direct cases on a MemDevice, each ending with a clean `check`.
#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>

#include "engine/io/mem_device.h"
#include "engine/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;
using testing::StatusIs;
using testing::TestMkfs;
using testing::TestOptions;

TEST(Store, MkfsOpenEmpty) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  EXPECT_THAT(store->Get("x"), StatusIs(absl::StatusCode::kNotFound));
  auto it = store->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, PutGetCommitReopen) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
    for (int i = 0; i < 5000; ++i) {
      ASSERT_OK(store->Put("key" + std::to_string(i), std::string(i % 200, 'a' + i % 26)));
    }
    ASSERT_OK(store->Commit());
    for (int i = 0; i < 5000; i += 2) ASSERT_OK(store->Delete("key" + std::to_string(i)));
    EXPECT_THAT(store->Delete("key0"), StatusIs(absl::StatusCode::kNotFound));
    ASSERT_OK(store->Close());
  }
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  for (int i = 0; i < 5000; ++i) {
    auto v = store->Get("key" + std::to_string(i));
    if (i % 2 == 0) {
      EXPECT_THAT(v, StatusIs(absl::StatusCode::kNotFound));
    } else {
      ASSERT_OK(v);
      EXPECT_EQ(*v, std::string(i % 200, 'a' + i % 26));
    }
  }
  auto it = store->NewIterator();
  int n = 0;
  std::string prev;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
    EXPECT_LT(prev, std::string(it->key()));
    prev = std::string(it->key());
  }
  EXPECT_EQ(n, 2500);
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, RejectsBadSizes) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  EXPECT_THAT(store->Put("", "v"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->Put(std::string(1025, 'k'), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->Put("k", std::string((16 << 20) + 1, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(store->Put(std::string(1024, 'k'), std::string(store->max_value_size(), 'v')));
  ASSERT_OK(store->Put("extent", std::string(store->max_value_size() + 1, 'v')));
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, NodeCacheStaysWithinItsBound) {
  // Goal: the clean-node cache honours node_cache_bytes and evicted nodes are
  // read back correctly. Method: a 1 MiB cache over a tree of ~10 MiB.
  MemDevice dev(128 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  Options o = TestOptions();
  o.node_cache_bytes = 1 << 20;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  for (int i = 0; i < 40000; ++i) {
    ASSERT_OK(store->Put("key" + std::to_string(i), std::string(200, 'a' + i % 26)));
    if (i % 5000 == 4999) ASSERT_OK(store->Commit());
  }
  ASSERT_OK(store->Commit());
  for (int i = 0; i < 40000; i += 7) {
    auto v = store->Get("key" + std::to_string(i));
    ASSERT_OK(v);
    ASSERT_EQ(*v, std::string(200, 'a' + i % 26));
  }
  StoreStats st = store->Stats();
  EXPECT_LE(st.cache_bytes, (1u << 20) + 2 * 65536);
  EXPECT_GT(st.cache_evictions, 100u);
  EXPECT_GT(st.cache_misses, 100u);
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, CommitTriggers) {
  // Goal: the dirty-bytes and interval triggers commit on their own and are
  // counted by trigger; an explicit commit with nothing to do is free.
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  Options o = TestOptions();
  o.dirty_bytes_max = 256 << 10;
  o.commit_interval_ms = 20;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  auto wait_for = [&](auto pred) {
    for (int i = 0; i < 500 && !pred(store->Stats()); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return pred(store->Stats());
  };
  // The writer that crosses dirty_bytes_max kicks the background committer.
  for (int i = 0; i < 3000; ++i) ASSERT_OK(store->Put("k" + std::to_string(i), std::string(100, 'x')));
  EXPECT_TRUE(wait_for([](const StoreStats& s) { return s.commits_by_dirty_bytes > 0; }));
  // Below the threshold, the interval commits what is left.
  o.dirty_bytes_max = 0;
  ASSERT_OK(store->Close());
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, o));
  ASSERT_OK(store->Put("last", "v"));
  EXPECT_TRUE(wait_for([](const StoreStats& s) { return s.commits_by_interval > 0; }));
  uint64_t commits = store->Stats().commits;
  uint64_t flushes = store->Stats().device_flushes;
  ASSERT_OK(store->Commit());  // nothing new: no commit, no flush
  EXPECT_EQ(store->Stats().device_flushes, flushes);
  EXPECT_EQ(store->Stats().commits, commits);
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, CommitWaitsForOpenHandles) {
  // Goal: everything written through one handle lands in one engine
  // transaction: a commit started meanwhile waits for End().
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  ASSERT_OK_AND_ASSIGN(auto h, store->Begin());
  ASSERT_OK(h->Put("a", "1"));
  std::atomic<bool> committed{false};
  std::thread committer([&] {
    EXPECT_OK(store->Commit());
    committed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(committed.load());
  ASSERT_OK(h->Put("b", "2"));
  h->End();
  committer.join();
  EXPECT_TRUE(committed.load());
  EXPECT_THAT(h->Put("c", "3"), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, TestOptions()));
  EXPECT_OK(store->Get("a"));
  EXPECT_OK(store->Get("b"));
  ASSERT_OK(store->Close());
}

TEST(Store, ParanoidChecksAndReadOnly) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  {
    Options o = TestOptions();
    o.paranoid_checks = true;  // check after every commit
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
    for (int i = 0; i < 2000; ++i) ASSERT_OK(store->Put("k" + std::to_string(i), "v"));
    ASSERT_OK(store->Commit());
    ASSERT_OK(store->Close());
  }
  Options ro = TestOptions();
  ro.read_only = true;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, ro));
  EXPECT_OK(store->Get("k1"));
  EXPECT_THAT(store->Put("x", "y"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store->Begin(), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(store->Close());
  EXPECT_THAT(store->Get("k1"), StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace cowkv
