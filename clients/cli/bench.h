// `cowkv bench`: can this cowkvd, and the disk under it, carry a load? The
// analogue of `etcdctl check perf` (docs/cli.md, "bench"): `clients` writers,
// each with at most one Put in flight, paced together to a target rate for a
// duration, then PASS or FAIL on four criteria (throughput at least 90% of
// the target, slowest request under 500 ms, latency stddev under 100 ms, no
// errors).
//
// This header holds the parts that need no server, which cli_unit_test.cc
// drives directly:
//   - ResolveBench: the --load presets and the flags that override them;
//   - BenchKey: the key of the n-th write;
//   - TokenBucket: the pacing arithmetic;
//   - LatencyHistogram: percentiles, mean and stddev in bounded memory;
//   - JudgeBench, BenchJson, BenchText: the verdict and the report.
// bench.cc runs the load with gRPC's callback API and cleans up.
//
// Invariants (bench.cc keeps them; the limits below bound them):
//  1. At most `clients` Puts are in flight: each client owns one call and is
//     either idle (in the driver's idle queue) or in flight, never both.
//  2. Every call has a deadline, so the drain after the load ends.
//  3. The bench writes only under its prefix, only when the prefix held no
//     key before it started, and deletes every key under the prefix at the
//     end, after a failure or an interrupt too (when the server answers).
//  4. Memory is bounded whatever the duration: clients × (key + value) for
//     the requests, and a fixed-size histogram for the latencies.
//
// Thread safety: the functions are pure. A TokenBucket or a LatencyHistogram
// is not safe to share; the driver guards both with its mutex.
#ifndef COWKV_CLIENTS_CLI_BENCH_H_
#define COWKV_CLIENTS_CLI_BENCH_H_

#include <array>
#include <cstdint>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "clients/cli/output.h"
#include "cowkv/v1/kv.pb.h"

namespace cowkv {
namespace cli {

// A --load preset: the clients and target write rate of etcdctl check perf's
// loads of the same names.
struct BenchLoad {
  const char* name;
  int clients;
  double rate_wps;
};
inline constexpr BenchLoad kBenchLoads[] = {
    {"s", 50, 150}, {"m", 200, 1000}, {"l", 500, 8000}, {"xl", 1000, 15000}};

inline constexpr char kBenchDefaultPrefix[] = "__cowkv_bench/";

// Limits (STYLE.md point 10), each checked by ResolveBench.
inline constexpr int kBenchMaxClients = 10000;
inline constexpr double kBenchMaxRateWps = 1e6;
inline constexpr double kBenchMaxDurationS = 24 * 3600;
inline constexpr uint64_t kBenchMaxValueBytes = 1u << 20;
// clients × value size: the request bytes the bench holds at once.
inline constexpr uint64_t kBenchMaxRequestBytes = 256u << 20;
// Room for the prefix plus the 8-character id, under the 1 KiB key limit.
inline constexpr size_t kBenchMaxPrefixBytes = 512;
// Writes one run may issue: the ids of BenchKey are 32-bit.
inline constexpr double kBenchMaxWrites = 4294967296.0;
// One gRPC channel (one TCP connection) per this many clients.
inline constexpr int kBenchClientsPerChannel = 100;
// The token bucket holds this much of the target rate (at least one token):
// it absorbs the pacer's wake-up jitter, and no more, so a stalled server
// cannot be "caught up" with a burst that flatters the throughput.
inline constexpr double kBenchBurstS = 0.010;
// Each write's deadline when --timeout is not given.
inline constexpr double kBenchDefaultCallTimeoutS = 5;
// Keys per Range + DeleteRange round of the cleanup: half of the server's
// DeleteRange bound (10,000), so keys another client adds within a page's
// span meanwhile cannot push one call past it.
inline constexpr uint64_t kBenchDeletePageKeys = 5000;

// The criteria, as etcdctl check perf's.
inline constexpr double kBenchMinThroughputRatio = 0.9;
inline constexpr double kBenchMaxSlowestMs = 500;
inline constexpr double kBenchMaxStddevMs = 100;

// The command line as parsed. 0 for clients or rate = the preset's.
struct BenchFlags {
  std::string load;  // "" = "s"
  int clients = 0;
  double rate_wps = 0;
  double duration_s = 60;
  std::string subvolume = "default";
  std::string prefix = kBenchDefaultPrefix;
  std::string durability = "durable";
  uint64_t value_size = 256;
};

// What one run does, every default resolved.
struct BenchConfig {
  std::string load;  // a preset's name, or "custom" when --clients or --rate changed it
  int clients = 0;
  double rate_wps = 0;
  double duration_s = 0;
  std::string subvolume;
  std::string prefix;
  std::string durability;  // "durable" or "async"
  v1::Durability durability_proto = v1::DURABILITY_DURABLE;
  uint64_t value_size = 0;
  int channels = 0;  // ceil(clients / kBenchClientsPerChannel)
  int burst = 0;     // tokens the limiter holds at most
};

// Applies the preset and the overrides; INVALID_ARGUMENT naming the flag for
// an unknown load, a value out of its limit or an empty prefix.
absl::StatusOr<BenchConfig> ResolveBench(const BenchFlags& flags);

// The key of write number `seq`: the prefix, 8 hex digits of a bijective
// scramble of `seq` (so keys are distinct and land all over the tree, as
// etcdctl's random keys do), then filler letters up to a length drawn from
// 16..64 bytes; never shorter than the prefix and the id.
std::string BenchKey(absl::string_view prefix, uint32_t seq);

// The value every write carries: `size` pseudo-random letters (the same
// for every write, printable should one outlive a failed cleanup).
std::string BenchValue(uint64_t size);

// A token bucket in GCRA form (the theoretical arrival time of the next
// token), on a clock of nanoseconds that starts at 0 with a full bucket.
// Over any interval of length T it grants at most rate × T + burst tokens;
// idle time fills it up to `burst`, no further.
class TokenBucket {
 public:
  TokenBucket(double rate_per_s, int burst);

  // Takes a token if one is available at `now_ns`.
  bool TryTake(int64_t now_ns);
  // The first time, not before `now_ns`, at which TryTake will succeed.
  int64_t NextTokenNs(int64_t now_ns) const;

 private:
  double interval_ns_;   // 1e9 / rate
  double tolerance_ns_;  // (burst - 1) × interval
  double tat_ns_ = 0;
};

// Latencies in microseconds: exact count, min, max, mean and (population)
// stddev; percentiles from log-linear buckets, exact below 128 µs and within
// 1/64 above (64 buckets per power of two). Values past 2^40 µs count as
// 2^40 µs.
class LatencyHistogram {
 public:
  void Record(uint64_t us);

  uint64_t count() const { return count_; }
  uint64_t min_us() const { return count_ == 0 ? 0 : min_; }
  uint64_t max_us() const { return max_; }
  double mean_us() const { return mean_; }
  double stddev_us() const;
  // The nearest-rank q-quantile (0 < q <= 1): the highest value of the
  // bucket holding it, clamped to [min, max]. 0 when empty.
  uint64_t Percentile(double q) const;

  static constexpr int kSubBuckets = 64;
  static constexpr int kBuckets = 2 * kSubBuckets + 33 * kSubBuckets;
  static constexpr uint64_t kMaxUs = (uint64_t{1} << 40) - 1;
  // The bucket of a value, and the highest value it holds.
  static int BucketOf(uint64_t us);
  static uint64_t BucketHigh(int bucket);

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t min_ = 0;
  uint64_t max_ = 0;
  double mean_ = 0;  // Welford's running mean and sum of squared deviations
  double m2_ = 0;
};

// The failed writes of one status code.
struct BenchErrorCount {
  uint64_t count = 0;
  std::string example;  // the first one's message
};

// What a run measured.
struct BenchOutcome {
  LatencyHistogram latency;  // successful writes only
  uint64_t errors = 0;
  std::map<std::string, BenchErrorCount> errors_by_code;  // "UNAVAILABLE" -> ...
  double elapsed_s = 0;  // start of the load to its end or the last answer, if later
  int peak_in_flight = 0;
  uint64_t deleted = 0;  // keys the cleanup deleted (the probes' included)

  void AddError(absl::string_view code, absl::string_view message);
};

// One criterion: value against limit. Units: throughput writes/s, slowest
// and stddev ms, errors a count.
struct BenchCheck {
  bool pass = false;
  double value = 0;
  double limit = 0;
};

struct BenchVerdict {
  BenchCheck throughput;  // value >= limit = 90% of the target rate
  BenchCheck slowest;     // value < 500 ms
  BenchCheck stddev;      // value < 100 ms
  BenchCheck errors;      // value == 0
  bool pass = false;      // all four
};

BenchVerdict JudgeBench(const BenchConfig& c, const BenchOutcome& o);

// The line printed before the load starts (text output only).
std::string BenchHeaderText(const BenchConfig& c, absl::string_view server);

// The report after the load, as etcdctl check perf's: figures, then one
// PASS/FAIL line per criterion, then PASS or FAIL.
std::string BenchText(const BenchConfig& c, const BenchOutcome& o, const BenchVerdict& v);

// The whole run as one JSON object (docs/cli.md, "bench").
Json BenchJson(const BenchConfig& c, const BenchOutcome& o, const BenchVerdict& v,
               absl::string_view server);

// The failed criteria on one line, for the stderr line of a FAIL.
std::string BenchFailReason(const BenchConfig& c, const BenchOutcome& o, const BenchVerdict& v);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_BENCH_H_
