// Goal: power loss at any flush point during a concurrent KV workload never
// loses an acknowledged durable commit, never shows part of a transaction,
// keeps async commits as a prefix of the commit order, and leaves an image
// that mounts (replaying the log) and passes `check` — also when the power
// fails again during the replay.
// Method: four threads commit transactions that each write two keys of
// their own (durable; one thread async; one also deletes an earlier pair),
// and one thread asks for engine commits now and then, on a FaultDevice
// that cuts power at its k-th flush, for every k an uncut run reaches, in
// all four loss modes. Every acknowledged commit is recorded with its
// revision. After the cut the image is mounted and checked against the
// record: let R be the newest revision present; exactly the recorded
// commits with revision <= R are present (so every durable ack <= R is a
// must), both keys of a transaction agree, and nothing is present that was
// never written. Every fourth cut also crashes the mount's replay commit
// once before the final mount. The loop is testing::CrashHarness
// (engine/testing/crash_harness.h).
// Replay: --seed=N.
#include <atomic>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/loss_modes.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

constexpr int kThreads = 4;
constexpr int kTxnsPerThread = 40;

struct Acked {
  std::string key;  // the pair's prefix: <thread>/<seq>
  uint64_t revision;
  bool durable;
};

struct History {
  absl::Mutex mu;
  std::vector<Acked> acked;
};

std::string Value(const std::string& p) { return p + "=" + std::string(1200, 'v'); }

Options WorkloadOptions() {
  Options o = testing::TestOptions();
  o.default_durability = Durability::kDurable;
  return o;
}

void Writer(Store* store, int t, History* h) {
  absl::StatusOr<std::unique_ptr<Subvolume>> sv = store->DefaultSubvolume();
  if (!sv.ok()) return;
  const bool async = t == kThreads - 1;
  for (int i = 0; i < kTxnsPerThread; ++i) {
    const std::string p = absl::StrCat(t, "/", i);
    const bool del = t == 0 && i > 0;
    auto tx = (*sv)->BeginTransaction();
    if (!tx.ok()) return;
    // 1.2 KB values: one transaction's sync fits inline in its root block,
    // a group of them goes to log trees; both paths get cut.
    (void)(*tx)->Put(p + "/a", Value(p));
    (void)(*tx)->Put(p + "/b", Value(p));
    if (del) (void)(*tx)->DeleteRange(absl::StrCat(t, "/", i - 1, "/"), absl::StrCat(t, "/", i - 1, "0"));
    absl::StatusOr<uint64_t> rev = (*tx)->Commit(async ? Durability::kAsync : Durability::kDurable);
    if (!rev.ok()) return;
    absl::MutexLock l(&h->mu);
    h->acked.push_back({p, *rev, !async});
  }
}

// Runs the workload until it completes or the device dies.
void RunWorkload(BlockDevice* dev, History* h) {
  auto store = Store::Open(dev, WorkloadOptions());
  if (!store.ok()) return;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(Writer, store->get(), t, h);
  std::thread committer([&] {
    for (int i = 0; i < 3; ++i) {
      absl::SleepFor(absl::Milliseconds(2));
      if (!(*store)->Commit().ok()) return;
    }
  });
  for (auto& th : threads) th.join();
  committer.join();
  (void)(*store)->Close();
}

// Checks the mounted state against the history (see the header).
void CheckAgainstHistory(Store* store, const std::vector<Acked>& acked) {
  std::map<std::string, KeyValue> got;
  auto sv = store->DefaultSubvolume();
  ASSERT_OK(sv.status());
  RangeResult all;
  ASSERT_OK_AND_ASSIGN(all, (*sv)->Range(RangeRequest{}));
  uint64_t max_rev = 0;
  for (KeyValue& kv : all.kvs) {
    max_rev = std::max(max_rev, kv.mod_revision);
    got[kv.key] = std::move(kv);
  }
  // Pairs agree: both keys or neither, same revision.
  for (const auto& [k, kv] : got) {
    ASSERT_GE(k.size(), 2u);
    const std::string p = k.substr(0, k.size() - 2);
    ASSERT_TRUE(kv.value == Value(p)) << "key " << k << " holds a value never written";
    auto other = got.find(p + (k.back() == 'a' ? "/b" : "/a"));
    ASSERT_NE(other, got.end()) << "half a transaction present: " << k;
    ASSERT_EQ(other->second.mod_revision, kv.mod_revision) << k;
  }
  // Thread 0's commit i deletes its commit i-1, and commits of one thread
  // apply in order: below its newest present pair, none may be present.
  int last0 = -1;
  for (int i = 0; i < kTxnsPerThread; ++i) {
    if (got.count(absl::StrCat("0/", i, "/a"))) last0 = i;
  }
  for (int i = 0; i < last0; ++i) {
    ASSERT_EQ(got.count(absl::StrCat("0/", i, "/a")), 0u) << "deleted pair 0/" << i << " present";
  }
  // Exactly the acknowledged commits up to max_rev.
  for (const Acked& a : acked) {
    const bool present = got.count(a.key + "/a") > 0;
    const bool deleted = a.key[0] == '0' && std::stoi(a.key.substr(2)) < last0;
    if (a.revision <= max_rev && !deleted) {
      ASSERT_TRUE(present) << "commit " << a.key << " at revision " << a.revision
                           << " missing below the newest present revision " << max_rev
                           << (a.durable ? " (acknowledged durable)" : " (async: prefix broken)");
    }
    if (a.durable) {
      ASSERT_LE(a.revision, max_rev) << "acknowledged durable commit " << a.key << " lost";
    }
    if (present) {
      ASSERT_EQ(got[a.key + "/a"].mod_revision, a.revision) << a.key;
    }
  }
}

class KvCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(KvCrash, EveryFlushPointDuringDurableWorkload) {
  const std::string image = testing::FormattedImage(64ull << 20);
  testing::CrashPlan plan = testing::PlanForMode(&image, GetParam(), 7);
  // Every fourth cut also crashes the mount's replay commit once.
  plan.replay_cut = [](uint64_t, uint64_t k, size_t) { return k % 4 == 0 ? 1 + k / 4 % 2 : 0; };
  // The threads interleave differently on every run: a run may need fewer
  // flushes than the one without a cut.
  plan.skip_unreached = true;
  int replays = 0;
  testing::CrashHarness<std::vector<Acked>> harness(
      std::move(plan),
      [](FaultDevice* dev, const testing::Cut&, std::vector<std::string>*) {
        History h;
        RunWorkload(dev, &h);
        absl::MutexLock l(&h.mu);
        return h.acked;
      },
      [&replays](Store* store, const std::vector<Acked>& acked, const std::vector<Acked>&,
                 std::vector<std::string>*) {
        replays += store->Stats().log_replayed_entries > 0;
        CheckAgainstHistory(store, acked);
      });
  const testing::CrashReport report = harness.Sweep();
  EXPECT_EQ(harness.uncut().size(), size_t{kThreads * kTxnsPerThread});
  EXPECT_TRUE(report.ok()) << report.Failures();
  std::printf("%llu flush points, %llu cuts, %d mounts replayed a log\n",
              static_cast<unsigned long long>(report.flush_points),
              static_cast<unsigned long long>(report.cuts), replays);
  RecordProperty("cuts", static_cast<int>(report.cuts));
  EXPECT_GT(replays, static_cast<int>(report.cuts) / 4) << "the workload barely exercised the log";
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, KvCrash, testing::AllLossModes(), testing::LossModeName);

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
