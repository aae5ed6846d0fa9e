// CrashHarness: power loss at every flush point of a workload, judged in one
// loop that every crash test shares (SQLite's crash tests, CrashMonkey).
//
// A test gives an image, a workload and a verifier; the harness owns the
// rest. For each test seed s in [plan.seed, plan.seed + plan.seeds):
//  1. The run without a cut (k = 0): the workload runs to its end on a fresh
//     FaultDevice over the image, and the harness counts its flushes, N
//     (from the device's first: the workload's own mount counts too).
//     With plan.judge_uncut the image is judged as a cut: power fails in
//     modes[0] (whatever the workload left unflushed is pending), and once
//     more from a second run if plan.replay_cut(s, 0, 0) names a replay cut.
//  2. For k = 1..N, for each loss mode m = modes[i]: the workload runs again
//     from the image with the device dying at its k-th flush; power fails in
//     m with PRNG seed s * seed_scale + k * k_scale + i; if
//     plan.replay_cut(s, k, i) = r > 0, the first remount dies at its own
//     r-th flush (power fails again in m, seed + 1), so log replay runs
//     twice; then the image is judged.
// Judging an image: mount with plan.mount, the verifier compares the store
// with what the workload saw, close, then `check` (CheckProblems). A run
// that ends without reaching flush k fails, or with plan.skip_unreached (a
// workload whose flush count varies, e.g. threads) is skipped.
//
// Failures. The workload reports the engine misbehaving on a live device in
// `errors`; the verifier reports what is wrong in `problems`; gtest
// assertions inside either count too, and carry the cut through
// SCOPED_TRACE. Every failure names its cut (Cut::Describe: test seed, k of
// N, loss mode, power-loss seed, replay cut), enough to replay it with
// --seed. plan.stop_at_first_failure ends the sweep at the first bad cut; a
// failure of the run without a cut always does (nothing to compare with).
//
// Flags: the caller fills the plan from test_flags.h (--seed, --seeds) and
// loss_modes.h. Not thread-safe: one harness per test, on the test's thread.
// docs/testing.md "Replaying a failure" lists the tests that use it.
#ifndef COWKV_ENGINE_TESTING_CRASH_HARNESS_H_
#define COWKV_ENGINE_TESTING_CRASH_HARNESS_H_

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/io/fault_device.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace testing {

// One power cut, as the harness runs it and reports it.
struct Cut {
  uint64_t test_seed = 0;  // s: the test's --seed for this sweep
  uint64_t at = 0;         // the flush that fails; 0: none, the workload completes
  uint64_t of = 0;         // flushes of the run without a cut (N)
  FaultDevice::LossMode mode = FaultDevice::LossMode::kDropAll;
  uint64_t power_seed = 0;  // FaultDevice::PowerLoss's seed
  uint64_t replay_cut = 0;  // a flush of the first remount that fails too (0: none)

  // "--seed=7: power cut at flush 3 of 12, Torn (power-loss seed 7003), replay cut at flush 2"
  std::string Describe() const;
};

struct CrashPlan {
  // Borrowed, must outlive the sweep: the MemDevice snapshot every run
  // starts from (its size is the device's).
  const std::string* image = nullptr;
  Options mount = TestOptions();  // the remount that is judged (and the replay cut's)
  std::vector<FaultDevice::LossMode> modes = {FaultDevice::LossMode::kDropAll};
  uint64_t seed = 1;           // the first test seed
  uint64_t seeds = 1;          // consecutive test seeds
  uint64_t seed_scale = 1000;  // power-loss seed = s * seed_scale + k * k_scale + mode index
  uint64_t k_scale = 1;
  // (s, k, mode index) -> the replay cut of that cut (0: none). Default: none.
  std::function<uint64_t(uint64_t s, uint64_t k, size_t mode_index)> replay_cut;
  bool judge_uncut = false;
  bool skip_unreached = false;
  bool stop_at_first_failure = true;
};

// What a sweep did.
struct CrashReport {
  uint64_t flush_points = 0;          // N of the last seed's run without a cut
  uint64_t cuts = 0;                  // runs that died at their flush
  uint64_t skipped = 0;               // runs that ended before it (skip_unreached)
  uint64_t images = 0;                // images mounted and judged
  std::vector<std::string> failures;  // "<cut>:\n    <problem>\n    ..." per bad cut
  bool ok() const { return failures.empty(); }
  std::string Failures() const;  // every failure, one block each
};

// A freshly formatted device image (TestMkfs(4096)) of `bytes` bytes.
std::string FormattedImage(uint64_t bytes);

// The plan of a test parameterized by loss mode: every flush point of a
// workload on `image` in `mode`, test seed --seed or `default_seed`.
CrashPlan PlanForMode(const std::string* image, FaultDevice::LossMode mode, uint64_t default_seed);

// Which workloads of a generated space (kv_gen_test, fs_gen_test) run: with
// `whole` all of them, else a seeded sample of about --samples=N (default
// `default_samples`) of the `total`, drawn for every workload in order so
// that every shard draws the same sample (seed --seed, default 1); then only
// this shard's, and with --only='<workload>' only that one. For a
// self-sharded binary (test_flags.h): the constructor tells Bazel so, and
// prints the space's size.
class WorkloadSample {
 public:
  WorkloadSample(uint64_t total, uint64_t max_ops, uint64_t default_samples, bool whole);
  // Call for every workload of the space, in order; `describe` is called
  // only for --only.
  bool Runs(int shard, absl::FunctionRef<std::string()> describe);
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_;
  double keep_;
  std::mt19937_64 rng_;
};

namespace crash_internal {

// Failed assertions so far in the running gtest test (0 outside one).
int FailedAssertions();

// Resolves the pending writes of `dev` as `cut` says and reboots it; then,
// for a replay cut, mounts with `mount` until the remount dies at
// cut.replay_cut and loses power again (seed + 1).
void PowerCut(FaultDevice* dev, const Cut& cut, const Options& mount);

// Mounts `dev`, runs `verify` on the store, closes it and runs check;
// returns what went wrong.
std::vector<std::string> JudgeImage(
    FaultDevice* dev, const Options& mount,
    const std::function<void(Store*, std::vector<std::string>*)>& verify);

}  // namespace crash_internal

template <typename Outcome>
class CrashHarness {
 public:
  // Runs the workload once on `dev`, which holds plan.image and dies at its
  // cut.at-th flush (0: never). Returns what the verifier needs; appends to
  // `errors` where the engine misbehaved on a live device.
  using Workload =
      std::function<Outcome(FaultDevice* dev, const Cut& cut, std::vector<std::string>* errors)>;
  // Judges the remounted `store` against `run`, the outcome of the cut run
  // (`uncut`: of the run without a cut); appends to `problems`.
  using Verifier = std::function<void(Store* store, const Outcome& run, const Outcome& uncut,
                                      std::vector<std::string>* problems)>;

  CrashHarness(CrashPlan plan, Workload workload, Verifier verify)
      : plan_(std::move(plan)), workload_(std::move(workload)), verify_(std::move(verify)) {}

  // Every cut of the plan (see the header comment).
  CrashReport Sweep() {
    COWKV_CHECK(plan_.image != nullptr);
    CrashReport report;
    MemDevice mem(plan_.image->size());
    for (uint64_t s = plan_.seed; s < plan_.seed + plan_.seeds; ++s) {
      if (!SweepSeed(s, &mem, &report)) break;
    }
    return report;
  }

  // The last run without a cut.
  const Outcome& uncut() const { return uncut_; }

 private:
  enum class Result { kClean, kSkipped, kBadRun, kBadImage };

  Cut CutAt(uint64_t s, uint64_t k, size_t i, uint64_t n) const {
    Cut c;
    c.test_seed = s;
    c.at = k;
    c.of = n;
    c.mode = plan_.modes[i];
    c.power_seed = s * plan_.seed_scale + k * plan_.k_scale + i;
    c.replay_cut = plan_.replay_cut ? plan_.replay_cut(s, k, i) : 0;
    return c;
  }

  // One seed: the run without a cut, then every flush point in every mode.
  // False when the sweep must stop.
  bool SweepSeed(uint64_t s, MemDevice* mem, CrashReport* report) {
    Cut uncut = CutAt(s, 0, 0, 0);
    const uint64_t replay = uncut.replay_cut;
    uncut.replay_cut = 0;
    Result r = RunCut(mem, uncut, plan_.judge_uncut, &uncut_, report);
    if (r == Result::kBadRun) return false;
    if (r == Result::kBadImage && plan_.stop_at_first_failure) return false;
    const uint64_t n = report->flush_points;
    if (plan_.judge_uncut && replay > 0) {
      Outcome again;
      uncut.of = n;
      uncut.replay_cut = replay;
      r = RunCut(mem, uncut, true, &again, report);
      if (r != Result::kClean && plan_.stop_at_first_failure) return false;
    }
    for (uint64_t k = 1; k <= n; ++k) {
      for (size_t i = 0; i < plan_.modes.size(); ++i) {
        Outcome run;
        r = RunCut(mem, CutAt(s, k, i, n), true, &run, report);
        if (r != Result::kClean && r != Result::kSkipped && plan_.stop_at_first_failure) {
          return false;
        }
      }
    }
    return true;
  }

  // Runs the workload with `cut` (the run without a cut sets
  // report->flush_points) and, with `judge`, judges the image.
  Result RunCut(MemDevice* mem, const Cut& cut, bool judge, Outcome* out, CrashReport* report) {
    SCOPED_TRACE(cut.Describe());
    const int failed = crash_internal::FailedAssertions();
    mem->Restore(*plan_.image);
    FaultDevice dev(mem);
    if (cut.at > 0) dev.CrashAtFlush(cut.at);
    std::vector<std::string> problems;
    *out = workload_(&dev, cut, &problems);
    if (cut.at == 0) report->flush_points = dev.flushes();
    if (cut.at > 0 && !dev.dead() && problems.empty()) {
      if (plan_.skip_unreached) {
        ++report->skipped;
        return Result::kSkipped;
      }
      problems.push_back(absl::StrCat("the run never reached flush ", cut.at));
    }
    if (cut.at > 0 && dev.dead()) ++report->cuts;
    const bool ran = problems.empty() && crash_internal::FailedAssertions() == failed;
    if (ran && judge) {
      ++report->images;
      crash_internal::PowerCut(&dev, cut, plan_.mount);
      problems = crash_internal::JudgeImage(
          &dev, plan_.mount,
          [&](Store* store, std::vector<std::string>* p) { verify_(store, *out, uncut_, p); });
    }
    if (crash_internal::FailedAssertions() != failed) {
      problems.push_back("failed assertions (above)");
    }
    if (problems.empty()) return Result::kClean;
    report->failures.push_back(
        absl::StrCat(cut.Describe(), ":\n    ", absl::StrJoin(problems, "\n    ")));
    return ran ? Result::kBadImage : Result::kBadRun;
  }

  const CrashPlan plan_;
  const Workload workload_;
  const Verifier verify_;
  Outcome uncut_{};
};

// The sweep of a workload crash test (history, watch, file watch): every
// flush point of `mode` on a fresh 64 MiB image, test seed --seed or
// `default_seed`; the remount uses `mount` (no planted bug), and every
// fourth cut also cuts its replay once. `run(dev, test_seed)` is the
// workload (with whatever bug it plants), `verify` judges the remounted
// store against the cut run's outcome.
template <typename Outcome>
CrashReport SweepEveryFlush(
    FaultDevice::LossMode mode, uint64_t default_seed, Options mount, bool stop_at_first,
    std::function<Outcome(FaultDevice* dev, uint64_t test_seed)> run,
    std::function<void(Store* store, const Outcome& run, std::vector<std::string>* problems)>
        verify) {
  static const std::string image = FormattedImage(64ull << 20);
  CrashPlan plan = PlanForMode(&image, mode, default_seed);
  plan.mount = std::move(mount);
  plan.replay_cut = [](uint64_t, uint64_t k, size_t) { return k % 4 == 0 ? 1 : 0; };
  plan.stop_at_first_failure = stop_at_first;
  CrashHarness<Outcome> harness(
      std::move(plan),
      [run = std::move(run)](FaultDevice* dev, const Cut& cut, std::vector<std::string>*) {
        return run(dev, cut.test_seed);
      },
      [verify = std::move(verify)](Store* store, const Outcome& got, const Outcome&,
                                   std::vector<std::string>* problems) {
        verify(store, got, problems);
      });
  return harness.Sweep();
}

// A sweep without a planted bug: clean, with at least `min_cuts` cuts
// (printed, as every crash test prints its counts).
void ExpectCleanSweep(const CrashReport& report, uint64_t min_cuts);
// A sweep with a planted bug: some cut caught it; `what` says what no cut
// saw otherwise.
void ExpectPlantedBugCaught(const CrashReport& report, absl::string_view what);

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_CRASH_HARNESS_H_
