#include "engine/testing/crash_harness.h"

#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/check.h"
#include "engine/testing/loss_modes.h"

namespace cowkv {
namespace testing {

std::string Cut::Describe() const {
  std::string s = absl::StrCat("--seed=", test_seed, ": ");
  if (at == 0) {
    absl::StrAppend(&s, "no cut (power fails after the workload)");
  } else {
    absl::StrAppend(&s, "power cut at flush ", at, " of ", of);
  }
  absl::StrAppend(&s, ", ", DescribeLossMode(mode), " (power-loss seed ", power_seed, ")");
  if (replay_cut > 0) absl::StrAppend(&s, ", replay cut at flush ", replay_cut);
  return s;
}

std::string CrashReport::Failures() const { return absl::StrJoin(failures, "\n"); }

void ExpectCleanSweep(const CrashReport& report, uint64_t min_cuts) {
  EXPECT_TRUE(report.ok()) << report.Failures();
  EXPECT_GT(report.cuts, min_cuts);
  std::printf("%llu flush points, %llu cuts\n",
              static_cast<unsigned long long>(report.flush_points),
              static_cast<unsigned long long>(report.cuts));
}

void ExpectPlantedBugCaught(const CrashReport& report, absl::string_view what) {
  EXPECT_FALSE(report.ok()) << what;
  std::printf("planted bug: %zu of %llu cuts caught\n", report.failures.size(),
              static_cast<unsigned long long>(report.cuts));
}

std::string FormattedImage(uint64_t bytes) {
  MemDevice mem(bytes);
  absl::Status made = Store::Mkfs(&mem, TestMkfs(4096));
  COWKV_CHECK_MSG(made.ok(), "mkfs of a MemDevice failed");
  return mem.Snapshot();
}

CrashPlan PlanForMode(const std::string* image, FaultDevice::LossMode mode, uint64_t default_seed) {
  CrashPlan plan;
  plan.image = image;
  plan.modes = {mode};
  plan.seed = Flags().seed ? Flags().seed : default_seed;
  return plan;
}

WorkloadSample::WorkloadSample(uint64_t total, uint64_t max_ops, uint64_t default_samples,
                               bool whole)
    : seed_(Flags().seed ? Flags().seed : 1), rng_(seed_) {
  TouchShardFile();
  std::printf("space: %llu workloads of up to %llu ops\n", static_cast<unsigned long long>(total),
              static_cast<unsigned long long>(max_ops));
  const uint64_t samples = Flags().samples ? Flags().samples : default_samples;
  keep_ = whole ? 1.0 : std::min(1.0, double(samples) / double(total));
}

bool WorkloadSample::Runs(int shard, absl::FunctionRef<std::string()> describe) {
  // Drawn for every workload: the same sample on every shard.
  const bool chosen = std::uniform_real_distribution<double>(0, 1)(rng_) < keep_;
  if (!chosen || shard != ShardIndex()) return false;
  return Flags().only.empty() || describe() == Flags().only;
}

namespace crash_internal {

int FailedAssertions() {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  if (test == nullptr) return 0;
  const ::testing::TestResult* result = test->result();
  int failed = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    failed += result->GetTestPartResult(i).failed() ? 1 : 0;
  }
  return failed;
}

void PowerCut(FaultDevice* dev, const Cut& cut, const Options& mount) {
  dev->PowerLoss(cut.mode, cut.power_seed);
  dev->ClearFaults();
  if (cut.replay_cut == 0) return;
  dev->CrashAtFlush(cut.replay_cut);
  absl::StatusOr<std::unique_ptr<Store>> broken = Store::Open(dev, mount);
  // The close fails once the device is dead; that is the point.
  if (broken.ok()) (*broken)->Close().IgnoreError();
  if (dev->dead()) dev->PowerLoss(cut.mode, cut.power_seed + 1);
  dev->ClearFaults();
}

std::vector<std::string> JudgeImage(
    FaultDevice* dev, const Options& mount,
    const std::function<void(Store*, std::vector<std::string>*)>& verify) {
  std::vector<std::string> problems;
  {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dev, mount);
    if (!store.ok()) return {absl::StrCat("mount: ", store.status().ToString())};
    verify(store->get(), &problems);
    absl::Status closed = (*store)->Close();
    if (!closed.ok()) problems.push_back(absl::StrCat("close: ", closed.ToString()));
  }
  for (std::string& p : CheckProblems(dev)) problems.push_back(std::move(p));
  return problems;
}

}  // namespace crash_internal
}  // namespace testing
}  // namespace cowkv
