// LatencyRecorder: a fixed-bucket latency histogram the engine records into
// on its hot paths (every engine commit, every log sync) without a lock.
//
// Buckets are fixed and exponential: bucket i (0 <= i < kBuckets) holds
// durations d with UpperBoundNs(i - 1) < d <= UpperBoundNs(i), where
// UpperBoundNs(i) = 8 µs × 2^i (8 µs .. ~16.8 s); bucket kBuckets holds
// everything longer (the +Inf bucket of a Prometheus histogram).
//
// Invariants:
//   1. Record() is two relaxed fetch_adds: one bucket, the sum. It never
//      allocates, locks or loops.
//   2. Read() derives the count from the buckets, so a reading's
//      cumulative counts are non-decreasing and the last equals its count,
//      even while Record() runs concurrently. Only `sum_ns` may be off by
//      the observations in flight.
//
// Thread-safe: Record() and Read() from any threads. The store converts a
// Reading to the public LatencyHistogramSnapshot (engine/include/cowkv/store.h); see
// docs/design.md "Commit and log-sync latency".
#ifndef COWKV_ENGINE_BASE_LATENCY_HISTOGRAM_H_
#define COWKV_ENGINE_BASE_LATENCY_HISTOGRAM_H_

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace cowkv {

class LatencyRecorder {
 public:
  static constexpr int kBuckets = 22;
  static constexpr uint64_t kFirstBoundNs = 8000;  // 8 µs

  static constexpr uint64_t UpperBoundNs(int i) { return kFirstBoundNs << i; }
  // The bucket `ns` falls in: the smallest i with ns <= UpperBoundNs(i), or
  // kBuckets past the last bound.
  static int BucketOf(uint64_t ns);

  LatencyRecorder() = default;
  LatencyRecorder(const LatencyRecorder&) = delete;
  LatencyRecorder& operator=(const LatencyRecorder&) = delete;

  void Record(std::chrono::nanoseconds d);

  struct Reading {
    std::array<uint64_t, kBuckets + 1> buckets{};  // per bucket, not cumulative
    uint64_t count = 0;                             // sum of `buckets`
    uint64_t sum_ns = 0;
  };
  Reading Read() const;

 private:
  // Relaxed: independent statistics; nothing is published through them.
  std::array<std::atomic<uint64_t>, kBuckets + 1> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

static_assert(LatencyRecorder::UpperBoundNs(LatencyRecorder::kBuckets - 1) < (1ull << 63),
              "the last bound fits");

}  // namespace cowkv

#endif  // COWKV_ENGINE_BASE_LATENCY_HISTOGRAM_H_
