// DurabilityNotifier against a model of the store's WaitDurable: a wait
// makes every point up to its argument durable. Checks that every writer
// is answered exactly once, never before its point is durable, that a lone
// writer waits on its own thread, and that at most one caller's thread is
// ever held by a wait.
#include "engine/store/durability_notifier.h"

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

// The model store: Wait(point) makes everything up to `point` durable,
// optionally after a gate opens; it records who waited.
class ModelStore {
 public:
  absl::Status Wait(uint64_t point) {
    const bool on_caller = std::this_thread::get_id() != notifier_thread();
    {
      absl::MutexLock l(&mu_);
      if (on_caller) max_callers_in_wait_ = std::max(max_callers_in_wait_, ++callers_in_wait_);
      ++waits_in_progress_;
    }
    gate_.WaitForNotification();
    if (jitter_us_ > 0) {
      thread_local std::mt19937 rng(std::random_device{}());
      absl::SleepFor(absl::Microseconds(rng() % jitter_us_));
    }
    absl::MutexLock l(&mu_);
    durable_ = std::max(durable_, point);
    --waits_in_progress_;
    if (on_caller) --callers_in_wait_;
    return absl::OkStatus();
  }
  uint64_t durable() {
    absl::MutexLock l(&mu_);
    return durable_;
  }
  int waits_in_progress() {
    absl::MutexLock l(&mu_);
    return waits_in_progress_;
  }
  int max_callers_in_wait() {
    absl::MutexLock l(&mu_);
    return max_callers_in_wait_;
  }
  // Threads that called Add are "callers"; any other thread is the notifier's.
  void AddCaller(std::thread::id id) {
    absl::MutexLock l(&mu_);
    callers_.push_back(id);
  }
  std::thread::id notifier_thread() {
    absl::MutexLock l(&mu_);
    const std::thread::id me = std::this_thread::get_id();
    return std::find(callers_.begin(), callers_.end(), me) == callers_.end() ? me
                                                                             : std::thread::id();
  }
  absl::Notification& gate() { return gate_; }
  void set_jitter_us(int us) { jitter_us_ = us; }

 private:
  absl::Mutex mu_;
  uint64_t durable_ ABSL_GUARDED_BY(mu_) = 0;
  int waits_in_progress_ ABSL_GUARDED_BY(mu_) = 0;
  int callers_in_wait_ ABSL_GUARDED_BY(mu_) = 0;
  int max_callers_in_wait_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::thread::id> callers_ ABSL_GUARDED_BY(mu_);
  absl::Notification gate_;
  int jitter_us_ = 0;
};

DurabilityNotifier MakeNotifier(ModelStore* m) {
  return DurabilityNotifier([m](uint64_t point) { return m->Wait(point); },
                            absl::FailedPreconditionError("closed"));
}

TEST(DurabilityNotifierTest, LoneWriterIsAnsweredOnItsOwnThread) {
  ModelStore m;
  m.gate().Notify();
  m.AddCaller(std::this_thread::get_id());
  DurabilityNotifier n = MakeNotifier(&m);
  std::thread::id answered_on;
  n.Add(7, [&](const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_GE(m.durable(), 7u);
    answered_on = std::this_thread::get_id();
  });
  EXPECT_EQ(answered_on, std::this_thread::get_id()) << "a lone writer was handed to a thread";
  const DurabilityNotifier::Counters c = n.counters();
  EXPECT_EQ(c.caller_waits, 1u);
  EXPECT_EQ(c.answers, 1u);
}

TEST(DurabilityNotifierTest, WithoutLoneInlineEveryWaitIsTheThreads) {
  ModelStore m;
  m.gate().Notify();
  m.AddCaller(std::this_thread::get_id());
  DurabilityNotifier n([&m](uint64_t point) { return m.Wait(point); },
                       absl::FailedPreconditionError("closed"), /*lone_inline=*/false);
  absl::Notification answered;
  std::thread::id answered_on;
  n.Add(3, [&](const absl::Status& s) {
    EXPECT_TRUE(s.ok()) << s;
    answered_on = std::this_thread::get_id();
    answered.Notify();
  });
  answered.WaitForNotification();
  EXPECT_NE(answered_on, std::this_thread::get_id());
  n.Stop();
  EXPECT_EQ(n.counters().caller_waits, 0u);
  EXPECT_EQ(m.max_callers_in_wait(), 0);
}

TEST(DurabilityNotifierTest, WritersArrivingDuringALoneWaitQueueAndShareOneWait) {
  constexpr int kQueued = 10;
  ModelStore m;
  DurabilityNotifier n = MakeNotifier(&m);
  std::atomic<int> answers{0};
  std::atomic<bool> early{false};
  std::thread lone([&] {
    m.AddCaller(std::this_thread::get_id());
    n.Add(1, [&](const absl::Status& s) {
      EXPECT_TRUE(s.ok());
      ++answers;
    });
  });
  while (m.waits_in_progress() == 0) absl::SleepFor(absl::Microseconds(50));
  absl::Notification queued;
  std::thread queuer([&] {
    m.AddCaller(std::this_thread::get_id());
    for (int i = 0; i < kQueued; ++i) {
      const uint64_t point = 2 + i;
      // Queued, not waited on here: Add returns while the lone wait is held.
      n.Add(point, [&, point](const absl::Status& s) {
        EXPECT_TRUE(s.ok());
        if (m.durable() < point) early = true;
        ++answers;
      });
    }
    queued.Notify();
  });
  EXPECT_TRUE(queued.WaitForNotificationWithTimeout(absl::Seconds(5)))
      << "a writer arriving during a lone writer's wait waited on its own thread too";
  EXPECT_EQ(answers.load(), 0) << "answered before any wait finished";
  m.gate().Notify();
  lone.join();
  queuer.join();
  n.Stop();
  EXPECT_EQ(answers.load(), kQueued + 1);
  EXPECT_FALSE(early.load()) << "a writer was answered before its point was durable";
  const DurabilityNotifier::Counters c = n.counters();
  EXPECT_EQ(c.caller_waits, 1u);
  EXPECT_LE(c.waits, 3u) << "writers queued together did not share a wait";
}

TEST(DurabilityNotifierTest, ManyWritersEachAnsweredOnceNeverEarlyOneCallerHeld) {
  constexpr int kThreads = 8, kPerThread = 300;
  ModelStore m;
  m.set_jitter_us(200);
  m.gate().Notify();
  DurabilityNotifier n = MakeNotifier(&m);
  std::atomic<uint64_t> next_point{1};
  std::vector<std::atomic<int>> answered(kThreads * kPerThread + 1);
  std::atomic<int> early{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      m.AddCaller(std::this_thread::get_id());
      for (int i = 0; i < kPerThread; ++i) {
        const uint64_t point = next_point.fetch_add(1);
        n.Add(point, [&, point](const absl::Status& s) {
          if (!s.ok()) ++errors;
          if (m.durable() < point) ++early;
          ++answered[point];
        });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  n.Stop();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(early.load(), 0) << "writers answered before their point was durable";
  for (uint64_t p = 1; p < answered.size(); ++p) EXPECT_EQ(answered[p].load(), 1) << p;
  EXPECT_LE(m.max_callers_in_wait(), 1) << "more than one caller's thread held by a wait";
  const DurabilityNotifier::Counters c = n.counters();
  EXPECT_EQ(c.answers, uint64_t{kThreads * kPerThread});
  EXPECT_GT(c.caller_waits, 0u);
  EXPECT_LT(c.waits, c.answers) << "no wait was shared";
}

TEST(DurabilityNotifierTest, StopWaitsForALoneWriterAndThenAnswersAtOnce) {
  ModelStore m;
  DurabilityNotifier n = MakeNotifier(&m);
  std::atomic<bool> lone_answered{false};
  std::thread lone([&] {
    m.AddCaller(std::this_thread::get_id());
    n.Add(1, [&](const absl::Status&) { lone_answered = true; });
  });
  while (m.waits_in_progress() == 0) absl::SleepFor(absl::Microseconds(50));
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    n.Stop();
    stopped = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(stopped.load()) << "Stop returned while a lone writer's wait was running";
  m.gate().Notify();
  stopper.join();
  lone.join();
  EXPECT_TRUE(lone_answered.load());
  absl::Status after;
  n.Add(2, [&](const absl::Status& s) { after = s; });
  EXPECT_TRUE(absl::IsFailedPrecondition(after)) << after;
}

}  // namespace
}  // namespace cowkv
