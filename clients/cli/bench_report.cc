// `cowkv bench`, what a run measured and what it says: the latency
// histogram, the verdict and the report in text and JSON (bench.h).
#include <algorithm>
#include <cmath>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/bench.h"
#include "clients/cli/commands.h"

namespace cowkv {
namespace cli {

// Log-linear buckets: values below 2 × kSubBuckets have one bucket each;
// above, each power of two [2^w, 2^(w+1)) is cut into kSubBuckets equal
// buckets, so a bucket is never wider than 1/kSubBuckets of its values.
namespace {
constexpr int kSubBits = 6;
static_assert(LatencyHistogram::kSubBuckets == 1 << kSubBits, "kSubBits");
static_assert(LatencyHistogram::kMaxUs >> (40 - kSubBits - 1) < 2 * LatencyHistogram::kSubBuckets,
              "the largest value's top bits index a sub-bucket");
}  // namespace

int LatencyHistogram::BucketOf(uint64_t us) {
  if (us < 2 * kSubBuckets) return static_cast<int>(us);
  const int width = 64 - __builtin_clzll(us);  // us < 2^width
  const int shift = width - (kSubBits + 1);    // us >> shift is in [64, 128)
  return 2 * kSubBuckets + (shift - 1) * kSubBuckets +
         static_cast<int>((us >> shift) - kSubBuckets);
}

uint64_t LatencyHistogram::BucketHigh(int bucket) {
  if (bucket < 2 * kSubBuckets) return static_cast<uint64_t>(bucket);
  const int k = bucket - 2 * kSubBuckets;
  const int shift = k / kSubBuckets + 1;
  const uint64_t low = static_cast<uint64_t>(k % kSubBuckets + kSubBuckets) << shift;
  return low + (uint64_t{1} << shift) - 1;
}

void LatencyHistogram::Record(uint64_t us) {
  us = std::min(us, kMaxUs);
  ++counts_[BucketOf(us)];
  min_ = count_ == 0 ? us : std::min(min_, us);
  max_ = std::max(max_, us);
  ++count_;
  const double x = static_cast<double>(us);
  const double delta = x - mean_;
  mean_ += delta / static_cast<double>(count_);
  m2_ += delta * (x - mean_);
}

double LatencyHistogram::stddev_us() const {
  return count_ == 0 ? 0 : std::sqrt(m2_ / static_cast<double>(count_));
}

uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  const double want = std::ceil(q * static_cast<double>(count_));
  const uint64_t rank = std::clamp<uint64_t>(want < 1 ? 1 : static_cast<uint64_t>(want), 1, count_);
  uint64_t seen = 0;
  for (int b = 0; b < kBuckets; ++b) {
    seen += counts_[b];
    if (seen >= rank) return std::clamp(BucketHigh(b), min_, max_);
  }
  return max_;
}

void BenchOutcome::AddError(absl::string_view code, absl::string_view message) {
  ++errors;
  BenchErrorCount& e = errors_by_code[std::string(code)];
  if (e.count++ == 0) e.example = std::string(message);
}

BenchVerdict JudgeBench(const BenchConfig& c, const BenchOutcome& o) {
  BenchVerdict v;
  const double writes = static_cast<double>(o.latency.count());
  v.throughput.value = o.elapsed_s > 0 ? writes / o.elapsed_s : 0;
  v.throughput.limit = kBenchMinThroughputRatio * c.rate_wps;
  v.throughput.pass = v.throughput.value >= v.throughput.limit;
  v.slowest.value = static_cast<double>(o.latency.max_us()) / 1000;
  v.slowest.limit = kBenchMaxSlowestMs;
  v.slowest.pass = v.slowest.value < v.slowest.limit;
  v.stddev.value = o.latency.stddev_us() / 1000;
  v.stddev.limit = kBenchMaxStddevMs;
  v.stddev.pass = v.stddev.value < v.stddev.limit;
  v.errors.value = static_cast<double>(o.errors);
  v.errors.limit = 0;
  v.errors.pass = o.errors == 0;
  v.pass = v.throughput.pass && v.slowest.pass && v.stddev.pass && v.errors.pass;
  return v;
}

namespace {

double Ms(uint64_t us) { return static_cast<double>(us) / 1000; }

// x rounded to `decimals` places, for JSON that a person may read too.
double Round(double x, int decimals) {
  const double scale = std::pow(10.0, decimals);
  return std::round(x * scale) / scale;
}

const char* Mark(bool pass) { return pass ? "PASS" : "FAIL"; }

std::string ErrorLines(const BenchOutcome& o) {
  if (o.errors == 0) return "PASS: No errors\n";
  std::string out = absl::StrCat("FAIL: ", o.errors, o.errors == 1 ? " error\n" : " errors\n");
  for (const auto& [code, e] : o.errors_by_code) {
    absl::StrAppend(&out, "FAIL: ERROR(", code, ") -> ", e.count, " (first: ", OneLine(e.example),
                    ")\n");
  }
  return out;
}

}  // namespace

std::string BenchHeaderText(const BenchConfig& c, absl::string_view server) {
  return absl::StrCat("cowkv bench: load ", c.load, ": ", c.clients,
                      c.clients == 1 ? " client on " : " clients on ", c.channels,
                      c.channels == 1 ? " connection, " : " connections, ", "target ",
                      absl::StrFormat("%g", c.rate_wps), " writes/s for ",
                      absl::StrFormat("%g", c.duration_s), " s; ", c.value_size, "-byte values, ",
                      c.durability, "; keys under \"", EscapeBytes(c.prefix), "\" in subvolume ",
                      c.subvolume, " at ", server, "\n");
}

std::string BenchText(const BenchConfig& c, const BenchOutcome& o, const BenchVerdict& v) {
  const LatencyHistogram& l = o.latency;
  std::string out = absl::StrFormat(
      "writes: %d in %.3f s, %d errors, at most %d in flight; %d bench keys deleted\n", l.count(),
      o.elapsed_s, o.errors, o.peak_in_flight, o.deleted);
  absl::StrAppend(
      &out, absl::StrFormat("latency: p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, mean %.3f ms, "
                            "stddev %.3f ms, slowest %.3f ms\n",
                            Ms(l.Percentile(0.5)), Ms(l.Percentile(0.9)), Ms(l.Percentile(0.99)),
                            l.mean_us() / 1000, l.stddev_us() / 1000, Ms(l.max_us())));
  absl::StrAppend(&out,
                  absl::StrFormat("%s: Throughput %s %.1f writes/s (target %g, at least %g)\n",
                                  Mark(v.throughput.pass), v.throughput.pass ? "is" : "too low:",
                                  v.throughput.value, c.rate_wps, v.throughput.limit),
                  absl::StrFormat("%s: Slowest request took %s%.6fs (limit %gs)\n",
                                  Mark(v.slowest.pass), v.slowest.pass ? "" : "too long: ",
                                  v.slowest.value / 1000, v.slowest.limit / 1000),
                  absl::StrFormat("%s: Stddev %s %.6fs (limit %gs)\n", Mark(v.stddev.pass),
                                  v.stddev.pass ? "is" : "too high:", v.stddev.value / 1000,
                                  v.stddev.limit / 1000),
                  ErrorLines(o), Mark(v.pass), "\n");
  return out;
}

Json BenchJson(const BenchConfig& c, const BenchOutcome& o, const BenchVerdict& v,
               absl::string_view server) {
  const LatencyHistogram& l = o.latency;
  Json j = JsonObject();
  j["server"] = std::string(server);
  j["subvolume"] = c.subvolume;
  j["prefix"] = BytesJson(c.prefix);
  j["load"] = c.load;
  j["clients"] = c.clients;
  j["channels"] = c.channels;
  j["target_rate_wps"] = c.rate_wps;
  j["duration_s"] = c.duration_s;
  j["durability"] = c.durability;
  j["value_size"] = c.value_size;
  j["writes"] = l.count();
  j["errors"] = o.errors;
  Json codes = Json::object();
  for (const auto& [code, e] : o.errors_by_code) {
    codes[code] = {{"count", e.count}, {"example", e.example}};
  }
  j["error_codes"] = codes;
  j["elapsed_s"] = Round(o.elapsed_s, 3);
  j["throughput_wps"] = Round(v.throughput.value, 1);
  j["latency_p50_ms"] = Ms(l.Percentile(0.5));
  j["latency_p90_ms"] = Ms(l.Percentile(0.9));
  j["latency_p99_ms"] = Ms(l.Percentile(0.99));
  j["latency_mean_ms"] = Round(l.mean_us() / 1000, 3);
  j["latency_stddev_ms"] = Round(l.stddev_us() / 1000, 3);
  j["slowest_ms"] = Ms(l.max_us());
  j["fastest_ms"] = Ms(l.min_us());
  j["peak_in_flight"] = o.peak_in_flight;
  j["deleted"] = o.deleted;
  Json checks = Json::object();
  for (const auto& [name, check] :
       {std::make_pair("throughput", &v.throughput), std::make_pair("slowest", &v.slowest),
        std::make_pair("stddev", &v.stddev), std::make_pair("errors", &v.errors)}) {
    checks[name] = {{"pass", check->pass},
                    {"value", Round(check->value, 3)},
                    {"limit", Round(check->limit, 3)}};
  }
  j["checks"] = checks;
  j["pass"] = v.pass;
  return j;
}

std::string BenchFailReason(const BenchConfig& c, const BenchOutcome& o, const BenchVerdict& v) {
  std::string out = "FAIL";
  const char* sep = ": ";
  if (!v.throughput.pass) {
    absl::StrAppend(&out, sep,
                    absl::StrFormat("throughput %.1f writes/s is under %g (90%% of %g)",
                                    v.throughput.value, v.throughput.limit, c.rate_wps));
    sep = "; ";
  }
  if (!v.slowest.pass) {
    absl::StrAppend(
        &out, sep,
        absl::StrFormat("slowest request %.3f ms (limit %g ms)", v.slowest.value, v.slowest.limit));
    sep = "; ";
  }
  if (!v.stddev.pass) {
    absl::StrAppend(
        &out, sep,
        absl::StrFormat("latency stddev %.3f ms (limit %g ms)", v.stddev.value, v.stddev.limit));
    sep = "; ";
  }
  if (!v.errors.pass) {
    absl::StrAppend(&out, sep, o.errors, o.errors == 1 ? " failed write" : " failed writes");
    for (const auto& [code, e] : o.errors_by_code) {
      absl::StrAppend(&out, ", ", code, " x", e.count, " (", OneLine(e.example), ")");
    }
  }
  return out;
}

}  // namespace cli
}  // namespace cowkv
