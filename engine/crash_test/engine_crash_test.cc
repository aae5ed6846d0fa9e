// Goal: power loss at any flush point never loses a committed engine
// transaction, never exposes half of one, and never leaves an image that
// fails to mount or fails `check`.
// Method: a deterministic workload of engine transactions (each a handle
// with ~60 random puts/deletes, then Commit) runs on a FaultDevice that cuts
// power at its k-th flush, for every k the workload reaches. After the cut,
// the pending (unflushed) writes are resolved four ways: all dropped, all
// kept, a random subset kept, and a random subset kept with torn sectors.
// Then the image is mounted and must equal the model of the last
// acknowledged commit — or of the commit in flight, whose superblock may
// have reached the media — and after close `check` must be clean. The loop
// is testing::CrashHarness (engine/testing/crash_harness.h).
// Replay: --seed=N (the workload seed; printed on failure).
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
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

using Model = std::map<std::string, std::string>;

constexpr int kTxns = 24;
constexpr int kOpsPerTxn = 60;

struct Outcome {
  std::vector<Model> committed;  // committed[i] = state after i acked commits
  bool in_flight = false;        // a commit had started when the device died
};

// Runs the workload until it completes or the device dies. Deterministic in
// the test seed regardless of where it stops.
Outcome RunWorkload(FaultDevice* dev, const testing::Cut& cut, std::vector<std::string>*) {
  const uint64_t seed = cut.test_seed;
  Outcome out;
  Model model;
  out.committed.push_back(model);
  auto store = Store::Open(dev, testing::TestOptions());
  if (!store.ok()) return out;
  std::mt19937_64 rng(seed);
  for (int t = 0; t < kTxns; ++t) {
    auto h = (*store)->Begin();
    if (!h.ok()) return out;
    for (int i = 0; i < kOpsPerTxn; ++i) {
      if (rng() % 4 == 0 && !model.empty()) {
        auto it = model.lower_bound(absl::StrCat("k", rng() % 5000));
        if (it == model.end()) it = model.begin();
        std::string k = it->first;
        if (!(*h)->Delete(k).ok()) return out;
        model.erase(k);
      } else {
        std::string k = absl::StrCat("k", rng() % 5000);
        std::string v(rng() % 300, static_cast<char>('a' + t));
        if (!(*h)->Put(k, v).ok()) return out;
        model[k] = v;
      }
    }
    (*h)->End();
    out.in_flight = true;
    if (!(*store)->Commit().ok()) return out;
    out.in_flight = false;
    out.committed.push_back(model);
  }
  (*store)->Close().IgnoreError();
  return out;
}

// The mounted state must be the last acknowledged commit or the one in
// flight, whose superblock may have reached the media (only the final flush
// was cut); `uncut` holds every commit.
void Verify(Store* store, const Outcome& o, const Outcome& uncut,
            std::vector<std::string>* problems) {
  const Model got = testing::ReadAll(store);
  const size_t acked = o.committed.size() - 1;
  const bool ok = got == o.committed[acked] || (o.in_flight && acked + 1 < uncut.committed.size() &&
                                                got == uncut.committed[acked + 1]);
  if (!ok) {
    problems->push_back(absl::StrCat("mounted state is neither commit ", acked,
                                     " nor the one in flight (", got.size(), " keys)"));
  }
}

class EngineCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(EngineCrash, EveryFlushPoint) {
  const std::string image = testing::FormattedImage(96ull << 20);
  testing::CrashPlan plan = testing::PlanForMode(&image, GetParam(), 42);
  testing::CrashHarness<Outcome> harness(std::move(plan), RunWorkload, Verify);
  const testing::CrashReport report = harness.Sweep();
  EXPECT_EQ(harness.uncut().committed.size(), kTxns + 1u);
  EXPECT_GE(report.flush_points, 2u * kTxns);
  EXPECT_TRUE(report.ok()) << report.Failures();
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, EngineCrash, testing::AllLossModes(), testing::LossModeName);

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
