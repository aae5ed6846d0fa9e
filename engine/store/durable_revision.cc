#include "engine/store/durable_revision.h"

#include <algorithm>

namespace cowkv {

DurableRevision::DurableRevision(uint64_t revision, uint64_t durable_gen)
    : durable_gen_(durable_gen) {
  state_.revision = revision;
  state_.committed_revision = revision;  // the mounted state: nothing newer
  state_.epoch = 1;
}

void DurableRevision::AdvanceLocked(uint64_t revision) {
  if (revision <= state_.revision) return;
  state_.revision = revision;
  ++state_.epoch;
  cv_.SignalAll();
}

void DurableRevision::Synced(uint64_t base, uint64_t revision) {
  absl::MutexLock l(&mu_);
  if (base <= durable_gen_) {
    AdvanceLocked(revision);
    return;
  }
  uint64_t& r = pending_[base];
  r = std::max(r, revision);
}

void DurableRevision::Committed(uint64_t generation, uint64_t revision) {
  absl::MutexLock l(&mu_);
  durable_gen_ = std::max(durable_gen_, generation);
  if (revision > state_.committed_revision) {
    state_.committed_revision = revision;
    ++state_.epoch;
    cv_.SignalAll();
  }
  uint64_t best = revision;
  for (auto it = pending_.begin(); it != pending_.end() && it->first <= durable_gen_;) {
    best = std::max(best, it->second);
    it = pending_.erase(it);
  }
  AdvanceLocked(best);
}

void DurableRevision::Kick() {
  absl::MutexLock l(&mu_);
  ++state_.epoch;
  cv_.SignalAll();
}

void DurableRevision::Close() {
  absl::MutexLock l(&mu_);
  state_.closed = true;
  ++state_.epoch;
  cv_.SignalAll();
}

DurableState DurableRevision::state() const {
  absl::MutexLock l(&mu_);
  return state_;
}

DurableState DurableRevision::Wait(const DurableState& seen, absl::Duration timeout) const {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock l(&mu_);
  while (state_.epoch == seen.epoch && !state_.closed) {
    if (cv_.WaitWithDeadline(&mu_, deadline)) break;
  }
  return state_;
}

}  // namespace cowkv
