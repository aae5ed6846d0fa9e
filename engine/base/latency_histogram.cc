// LatencyRecorder; see latency_histogram.h.
#include "engine/base/latency_histogram.h"

#include "engine/base/check.h"

namespace cowkv {

int LatencyRecorder::BucketOf(uint64_t ns) {
  // ns <= kFirstBoundNs << i  <=>  (ns - 1) / kFirstBoundNs < 2^i, so i is
  // the bit width of (ns - 1) / kFirstBoundNs.
  const uint64_t q = ns == 0 ? 0 : (ns - 1) / kFirstBoundNs;
  const int width = q == 0 ? 0 : 64 - __builtin_clzll(q);
  const int i = width < kBuckets ? width : kBuckets;
  COWKV_DCHECK(i == kBuckets || ns <= UpperBoundNs(i));
  COWKV_DCHECK(i == 0 || ns > UpperBoundNs(i - 1));
  return i;
}

void LatencyRecorder::Record(std::chrono::nanoseconds d) {
  const uint64_t ns = d.count() < 0 ? 0 : static_cast<uint64_t>(d.count());
  buckets_[BucketOf(ns)].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

LatencyRecorder::Reading LatencyRecorder::Read() const {
  Reading r;
  for (int i = 0; i <= kBuckets; ++i) {
    r.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    r.count += r.buckets[i];
  }
  r.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  return r;
}

}  // namespace cowkv
