// Goal: the facade's basic contract — put/get/delete/iterate, commit and
// reopen, handles, input validation — on small and large trees.
// Method: direct cases on a MemDevice, each ending with a clean `check`.
#include "cowkv/store.h"

#include <atomic>
#include <chrono>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "cowkv/device.h"
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
    if (i % 5000 == 4999) {
      ASSERT_OK(store->Commit());
    }
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
  for (int i = 0; i < 3000; ++i)
    ASSERT_OK(store->Put("k" + std::to_string(i), std::string(100, 'x')));
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

// ---- Commit and log-sync latency ---------------------------------------------

const std::vector<std::string> kTriggers = {"explicit",     "interval", "dirty_bytes", "space",
                                            "delayed_refs", "log_full", "fsync"};

// A histogram's shape: 22 exponential bounds from 8 µs, cumulative counts
// that never decrease and reach `count` (nothing here takes 16 s), and a
// sum, mean and quantiles that agree with the count.
void ExpectWellFormed(const LatencyHistogramSnapshot& h, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(h.upper_bounds_seconds.size(), 22u);
  ASSERT_EQ(h.cumulative_counts.size(), h.upper_bounds_seconds.size());
  EXPECT_DOUBLE_EQ(h.upper_bounds_seconds[0], 8e-6);
  for (size_t i = 1; i < h.upper_bounds_seconds.size(); ++i) {
    EXPECT_DOUBLE_EQ(h.upper_bounds_seconds[i], 2 * h.upper_bounds_seconds[i - 1]);
    EXPECT_LE(h.cumulative_counts[i - 1], h.cumulative_counts[i]) << "bucket " << i;
  }
  EXPECT_EQ(h.cumulative_counts.back(), h.count);  // the +Inf bucket adds nothing
  if (h.count == 0) {
    EXPECT_EQ(h.sum_seconds, 0);
    return;
  }
  EXPECT_GT(h.sum_seconds, 0);
  EXPECT_DOUBLE_EQ(h.MeanSeconds(), h.sum_seconds / h.count);
  EXPECT_GT(h.QuantileSeconds(0.5), 0);
  EXPECT_LE(h.QuantileSeconds(0.5), h.QuantileSeconds(0.99));
  EXPECT_LE(h.QuantileSeconds(0.99), h.upper_bounds_seconds.back());
}

// Histogram counts by trigger, checked against the counters they must equal.
std::map<std::string, uint64_t> CommitCounts(const StoreStats& s) {
  std::map<std::string, uint64_t> out;
  std::vector<std::string> names;
  for (const CommitLatency& c : s.commit_latency) {
    names.push_back(c.trigger);
    out[c.trigger] = c.latency.count;
    ExpectWellFormed(c.latency, c.trigger);
  }
  EXPECT_EQ(names, kTriggers);
  EXPECT_EQ(out["explicit"], s.commits_by_explicit);
  EXPECT_EQ(out["interval"], s.commits_by_interval);
  EXPECT_EQ(out["dirty_bytes"], s.commits_by_dirty_bytes);
  EXPECT_EQ(out["space"], s.commits_by_space);
  EXPECT_EQ(out["delayed_refs"], s.commits_by_delayed_refs);
  EXPECT_EQ(out["log_full"], s.commits_by_log_full);
  EXPECT_EQ(out["fsync"], s.commits_by_fsync);
  EXPECT_EQ(s.log_sync_latency.count, s.log_syncs);
  ExpectWellFormed(s.log_sync_latency, "log sync");
  return out;
}

double CommitSum(const StoreStats& s, const std::string& trigger) {
  for (const CommitLatency& c : s.commit_latency) {
    if (c.trigger == trigger) return c.latency.sum_seconds;
  }
  ADD_FAILURE() << "no trigger " << trigger;
  return 0;
}

TEST(Store, CommitAndLogSyncLatencyHistograms) {
  // Goal: every engine commit is timed under its trigger and every log sync
  // is timed: per trigger the count moves by exactly the commits made (and
  // equals commits_by_<trigger>), the log-sync count by exactly the syncs
  // made (and equals log_syncs); the sums grow with them; buckets are
  // cumulative and end at the count.
  // Method: no background commits, so every commit is the test's: an
  // explicit commit, sequential durable puts (one log sync each), a durable
  // put after an engine handle's write (the log cannot take it: log_full),
  // then, reopened with a small dirty_bytes_max, async puts until the writer
  // commits for dirty bytes itself.
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  StoreStats before = store->Stats();
  std::map<std::string, uint64_t> want = CommitCounts(before);
  for (const std::string& t : kTriggers) EXPECT_EQ(want[t], 0u) << t;
  EXPECT_EQ(before.log_sync_latency.count, 0u);

  // An explicit commit (it also starts the log chain the durable puts use).
  ASSERT_OK(store->Put("seed", "v"));
  ASSERT_OK(store->Commit());
  StoreStats after = store->Stats();
  ++want["explicit"];
  EXPECT_EQ(CommitCounts(after), want);
  EXPECT_GT(CommitSum(after, "explicit"), 0);
  EXPECT_EQ(after.log_sync_latency.count, 0u);

  // Five durable puts, one after another: five log syncs, no commit.
  before = after;
  for (int i = 0; i < 5; ++i) {
    ASSERT_OK(store->Put("durable" + std::to_string(i), "v", Durability::kDurable));
  }
  after = store->Stats();
  EXPECT_EQ(CommitCounts(after), want);
  EXPECT_EQ(after.log_sync_latency.count, before.log_sync_latency.count + 5);
  EXPECT_GT(after.log_sync_latency.sum_seconds, before.log_sync_latency.sum_seconds);

  // A handle's write makes the next durable put an engine commit.
  before = after;
  {
    ASSERT_OK_AND_ASSIGN(auto h, store->Begin());
    ASSERT_OK(h->Put("handle", "v"));
    h->End();
  }
  ASSERT_OK(store->Put("after-handle", "v", Durability::kDurable));
  after = store->Stats();
  ++want["log_full"];
  EXPECT_EQ(CommitCounts(after), want);
  EXPECT_GT(CommitSum(after, "log_full"), 0);
  EXPECT_EQ(after.log_sync_latency.count, before.log_sync_latency.count);
  // Commit() with nothing new to write is no commit and is not timed.
  ASSERT_OK(store->Commit());
  EXPECT_EQ(CommitCounts(store->Stats()), want);
  ASSERT_OK(store->Close());

  // Dirty bytes: with no background committer the writer commits itself.
  Options o = TestOptions();
  o.dirty_bytes_max = 64 << 10;
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, o));
  for (int i = 0; i < 20000 && store->Stats().commits_by_dirty_bytes < 2; ++i) {
    ASSERT_OK(store->Put("k" + std::to_string(i), std::string(200, 'd')));
  }
  after = store->Stats();
  want = CommitCounts(after);
  EXPECT_GE(want["dirty_bytes"], 2u);
  EXPECT_GT(CommitSum(after, "dirty_bytes"), 0);
  for (const std::string& t : kTriggers) {
    if (t != "dirty_bytes") {
      EXPECT_EQ(want[t], 0u) << t;
    }
  }
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, LatencySnapshotMeanAndQuantiles) {
  // Goal: the mean and the quantile estimates read a snapshot as
  // Prometheus's histogram_quantile does. Method: a hand-made snapshot.
  LatencyHistogramSnapshot h;
  EXPECT_EQ(h.MeanSeconds(), 0);
  EXPECT_EQ(h.QuantileSeconds(0.5), 0);
  h.upper_bounds_seconds = {1, 2, 4};
  h.cumulative_counts = {0, 10, 10};
  h.count = 12;  // two past the last bound
  h.sum_seconds = 30;
  EXPECT_DOUBLE_EQ(h.MeanSeconds(), 2.5);
  EXPECT_DOUBLE_EQ(h.QuantileSeconds(0.25), 1.3);  // rank 3 of the 10 in (1, 2]
  EXPECT_DOUBLE_EQ(h.QuantileSeconds(0.5), 1.6);
  EXPECT_DOUBLE_EQ(h.QuantileSeconds(0.99), 4);  // in the +Inf bucket: the last bound
}

// Something outside the store formats its device while it is mounted (an
// mkfs that ignored the lock): the next log sync or commit finds the
// primary superblock changed and refuses to write, the store stays
// read-only, and the new filesystem is left intact.
TEST(Store, StopsWritingWhenItsDeviceIsReformatted) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  ASSERT_OK(store->Put("before", "1", Durability::kDurable));
  ASSERT_OK(store->Commit());
  ASSERT_OK(store->Put("after-commit", "2", Durability::kDurable));  // a log sync
  MkfsOptions other = TestMkfs();
  other.fsid = std::string(16, '\x42');
  ASSERT_OK(Store::Mkfs(&dev, other));
  EXPECT_THAT(store->Put("lost", "3", Durability::kDurable),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store->Commit(), StatusIs(absl::StatusCode::kFailedPrecondition));
  absl::Status again = store->Put("again", "4", Durability::kAsync);
  EXPECT_FALSE(again.ok() && store->Commit().ok()) << "the store must stay read-only";
  (void)store->Close();
  store.reset();
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(auto fresh, Store::Open(&dev, TestOptions()));
  EXPECT_THAT(fresh->Get("before"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(fresh->Get("lost"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(fresh->Close());
}

// A MemDevice whose flushes take `flush_delay` once armed.
class SlowFlushDevice : public MemDevice {
 public:
  using MemDevice::MemDevice;
  absl::Status Flush() override {
    if (slow.load()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return MemDevice::Flush();
  }
  std::atomic<bool> slow{false};
};

// Goal: the operator events (Options::on_event) fire for a slow commit, a
// slow log sync and the switch to read-only — once — and not for fast ones.
TEST(Store, ReportsSlowCommitsSlowLogSyncsAndTheSwitchToReadOnly) {
  SlowFlushDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  Options o = TestOptions();
  o.slow_op_ms = 10;
  absl::Mutex mu;
  std::vector<EngineEvent> events;
  o.on_event = [&](const EngineEvent& e) {
    absl::MutexLock l(&mu);
    events.push_back(e);
  };
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  ASSERT_OK(store->Put("fast", "1", Durability::kDurable));
  ASSERT_OK(store->Commit());
  {
    absl::MutexLock l(&mu);
    EXPECT_TRUE(events.empty()) << "fast commits and syncs are not events";
  }
  dev.slow = true;
  ASSERT_OK(store->Put("slow", "2", Durability::kDurable));  // a log sync: one flush
  ASSERT_OK(store->Commit());
  dev.slow = false;
  {
    absl::MutexLock l(&mu);
    ASSERT_EQ(events.size(), 2u);
    EXPECT_EQ(events[0].kind, EngineEvent::Kind::kSlowLogSync);
    EXPECT_GE(events[0].micros, 20000u);
    EXPECT_EQ(events[1].kind, EngineEvent::Kind::kSlowCommit);
    EXPECT_EQ(events[1].trigger, "explicit");
    EXPECT_GE(events[1].micros, 20000u);
    // The sync extends the last durable generation; the commit seals the next.
    EXPECT_EQ(events[0].generation + 1, events[1].generation);
    events.clear();
  }
  MkfsOptions other = TestMkfs();
  other.fsid = std::string(16, '\x42');
  ASSERT_OK(Store::Mkfs(&dev, other));
  EXPECT_FALSE(store->Put("lost", "3", Durability::kDurable).ok());
  EXPECT_FALSE(store->Put("lost2", "4", Durability::kDurable).ok());
  {
    absl::MutexLock l(&mu);
    ASSERT_EQ(events.size(), 1u) << "the switch to read-only is reported once";
    EXPECT_EQ(events[0].kind, EngineEvent::Kind::kReadOnly);
    EXPECT_NE(events[0].detail.find("superblock was overwritten"), std::string::npos)
        << events[0].detail;
  }
  (void)store->Close();
}

}  // namespace
}  // namespace cowkv
