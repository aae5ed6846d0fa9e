// Goal: power loss during snapshot creation, subvolume deletion or the
// cleaner's drop never leaves a half-made snapshot, a half-deleted
// subvolume visible, leaked space or a failing `check`; a deletion resumes
// and completes after the remount.
// Method: a deterministic workload of committed writes, snapshots
// (writable and read-only), deletions and partial cleaner runs, cut at every
// flush point, each cut resolved by all four loss modes. After the remount
// the set of subvolumes and every one's contents must equal the model of
// the last acknowledged operation or of the one in flight; then the cleaner
// runs to completion and `check` (refcounts, leaks) must be clean. The loop
// is testing::CrashHarness (engine/testing/crash_harness.h).
// Replay: --seed=N.
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

using KV = std::map<std::string, std::string>;
using State = std::map<std::string, KV>;  // subvolume name -> contents

struct Outcome {
  std::vector<State> acked;  // acked[i]: state after the i-th acknowledged step
  bool in_flight = false;
};

constexpr int kSteps = 14;

Outcome RunWorkload(FaultDevice* dev, const testing::Cut& cut, std::vector<std::string>*) {
  const uint64_t seed = cut.test_seed;
  Outcome out;
  State state;
  state["default"] = {};
  out.acked.push_back(state);
  auto opened = Store::Open(dev, testing::TestOptions());
  if (!opened.ok()) return out;
  Store* store = opened->get();
  std::mt19937_64 rng(seed);
  int next = 0;
  for (int step = 0; step < kSteps; ++step) {
    std::vector<std::string> names;
    for (const auto& [n, kv] : state) names.push_back(n);
    const std::string target = names[rng() % names.size()];
    const int kind = step < 2 ? 0 : static_cast<int>(rng() % 4);
    State after = state;
    absl::Status s;
    out.in_flight = true;
    if (kind == 0 || kind == 3) {  // committed writes (read-only targets skipped)
      auto sv = store->OpenSubvolume(target);
      if (!sv.ok()) return out;
      auto info = store->ShowSubvolume(target);
      if (!info.ok()) return out;
      for (int i = 0; i < 400 && !info->read_only; ++i) {
        std::string k = absl::StrCat(std::string(24, 'k'), rng() % 2000);
        std::string v(rng() % 150, static_cast<char>('a' + step));
        if (!(*sv)->Put(k, v).ok()) return out;
        after[target][k] = v;
      }
      s = store->Commit();
      if (kind == 3 && s.ok()) s = store->DropDeletedSubvolumes(1 + rng() % 30);
    } else if (kind == 1) {
      std::string name = absl::StrCat("snap", next++);
      s = store->CreateSnapshot(target, name, rng() % 2).status();
      after[name] = state[target];
    } else {
      if (target == "default") {  // the default subvolume cannot be deleted: a no-op step
        out.in_flight = false;
        out.acked.push_back(state);
        continue;
      }
      s = store->DeleteSubvolume(target);
      after.erase(target);
    }
    if (!s.ok()) return out;
    out.in_flight = false;
    state = after;
    out.acked.push_back(state);
  }
  store->Close().IgnoreError();
  return out;
}

State ReadState(Store* store) {
  State st;
  for (const SubvolumeInfo& info : store->ListSubvolumes()) {
    auto sv = store->OpenSubvolume(info.name);
    EXPECT_OK(sv);
    if (!sv.ok()) continue;
    KV& kv = st[info.name];
    auto it = (*sv)->NewIterator();
    for (it->SeekToFirst(); it->Valid(); it->Next()) kv[std::string(it->key())] = std::string(it->value());
    EXPECT_OK(it->status());
  }
  return st;
}

// The mounted state must be the last acknowledged step or the one in
// flight; then any interrupted deletion resumes and completes, and nothing
// leaks (the harness's check).
void Verify(Store* store, const Outcome& o, const Outcome& uncut,
            std::vector<std::string>* problems) {
  const State got = ReadState(store);
  const size_t acked = o.acked.size() - 1;
  const bool ok = got == o.acked[acked] ||
                  (o.in_flight && acked + 1 < uncut.acked.size() && got == uncut.acked[acked + 1]);
  if (!ok) {
    problems->push_back(absl::StrCat("mounted state is neither step ", acked,
                                     " nor the one in flight (", got.size(), " subvolumes)"));
    return;
  }
  absl::Status dropped = store->DropDeletedSubvolumes();
  if (!dropped.ok()) problems->push_back(absl::StrCat("drop: ", dropped.ToString()));
  const uint64_t pending = store->Stats().deleted_subvolumes_pending;
  if (pending != 0) problems->push_back(absl::StrCat(pending, " deleted subvolumes pending"));
}

class SubvolCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(SubvolCrash, EveryFlushPoint) {
  const std::string image = testing::FormattedImage(128ull << 20);
  testing::CrashPlan plan = testing::PlanForMode(&image, GetParam(), 7);
  plan.seed_scale = 7919;
  testing::CrashHarness<Outcome> harness(std::move(plan), RunWorkload, Verify);
  const testing::CrashReport report = harness.Sweep();
  EXPECT_EQ(harness.uncut().acked.size(), kSteps + 1u);
  EXPECT_TRUE(report.ok()) << report.Failures();
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, SubvolCrash, testing::AllLossModes(), testing::LossModeName);

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
