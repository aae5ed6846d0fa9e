#include "engine/store/durability_notifier.h"

#include <algorithm>

#include "engine/base/check.h"

namespace cowkv {

DurabilityNotifier::DurabilityNotifier(Wait wait, absl::Status closed_status)
    : wait_(std::move(wait)), closed_status_(std::move(closed_status)) {
  COWKV_CHECK(!closed_status_.ok());
}

DurabilityNotifier::~DurabilityNotifier() { Stop(); }

void DurabilityNotifier::Add(uint64_t point, Done done) {
  {
    absl::MutexLock l(&mu_);
    if (!stopped_) {
      queue_.push_back({point, std::move(done)});
      if (!started_) {
        started_ = true;
        thread_ = std::thread([this] { Loop(); });
      }
      cv_.Signal();
      return;
    }
  }
  done(closed_status_);
}

void DurabilityNotifier::Stop() {
  {
    absl::MutexLock l(&mu_);
    if (stopped_) return;
    stopped_ = true;
    cv_.Signal();
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
    }
    uint64_t point = 0;
    for (const Waiter& w : batch) point = std::max(point, w.point);
    const absl::Status s = wait_(point);
    for (Waiter& w : batch) w.done(s);
    {
      absl::MutexLock l(&mu_);
      ++counters_.waits;
      counters_.answers += batch.size();
    }
    batch.clear();
  }
}

}  // namespace cowkv
