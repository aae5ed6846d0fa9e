#include "engine/store/durability_notifier.h"

#include <algorithm>

#include "engine/base/check.h"

namespace cowkv {

DurabilityNotifier::DurabilityNotifier(Wait wait, absl::Status closed_status, bool lone_inline)
    : wait_(std::move(wait)), closed_status_(std::move(closed_status)), lone_inline_(lone_inline) {
  COWKV_CHECK(!closed_status_.ok());
}

DurabilityNotifier::~DurabilityNotifier() { Stop(); }

void DurabilityNotifier::Add(uint64_t point, Done done) {
  bool lone = false;
  {
    absl::MutexLock l(&mu_);
    if (!stopped_ && lone_inline_ && queue_.empty() && !thread_waiting_ && !caller_waiting_) {
      lone = caller_waiting_ = true;
    } else if (!stopped_) {
      queue_.push_back({point, std::move(done)});
      if (!started_) {
        started_ = true;
        thread_ = std::thread([this] { Loop(); });
      }
      cv_.Signal();
      return;
    }
  }
  if (!lone) {
    done(closed_status_);
    return;
  }
  // The lone writer leads (or joins) the sync on its own thread. Writers
  // arriving meanwhile queue for the notifier's thread, whose wait shares
  // or follows this one as the store's group commit decides.
  const absl::Status s = wait_(point);
  done(s);
  absl::MutexLock l(&mu_);
  caller_waiting_ = false;
  ++counters_.waits;
  ++counters_.answers;
  ++counters_.caller_waits;
}

void DurabilityNotifier::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
    cv_.Signal();
    // A lone writer's wait runs on its caller's thread: the store must
    // outlive it.
    mu_.Await(absl::Condition(
        +[](bool* waiting) { return !*waiting; }, &caller_waiting_));
  }
  if (thread_.joinable()) thread_.join();
  // Nothing can be queued now: Add answers at once once stopped_ is set,
  // and the loop drained the queue before it ended.
  absl::MutexLock l(&mu_);
  COWKV_CHECK(queue_.empty());
}

DurabilityNotifier::Counters DurabilityNotifier::counters() const {
  absl::MutexLock l(&mu_);
  return counters_;
}

void DurabilityNotifier::Loop() {
  std::vector<Waiter> batch;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      while (queue_.empty() && !stopped_) cv_.Wait(&mu_);
      if (queue_.empty()) return;  // stopped and drained
      batch.swap(queue_);
      thread_waiting_ = true;
    }
    uint64_t point = 0;
    for (const Waiter& w : batch) point = std::max(point, w.point);
    const absl::Status s = wait_(point);
    for (Waiter& w : batch) w.done(s);
    {
      absl::MutexLock l(&mu_);
      thread_waiting_ = false;
      ++counters_.waits;
      counters_.answers += batch.size();
    }
    batch.clear();
  }
}

}  // namespace cowkv
