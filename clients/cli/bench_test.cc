// Goal: the parts of `cowkv bench` that need no server are right: --load
// presets and the flags that override them (and the limits), the parse of
// the command line, the token bucket's arithmetic, the latency histogram's
// figures, the keys, the verdict and the report's shape.
// Method: call the pure functions of bench.h with chosen inputs; time is a
// number of nanoseconds the test advances itself, so nothing sleeps.
#include "clients/cli/bench.h"

#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "clients/cli/app.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace cli {
namespace {

BenchConfig Resolved(const BenchFlags& f) {
  absl::StatusOr<BenchConfig> c = ResolveBench(f);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *c : BenchConfig();
}

TEST(BenchFlags, PresetsAreEtcdctlCheckPerfs) {
  struct Want {
    const char* load;
    int clients;
    double rate;
    int channels;
  };
  for (const Want& w : {Want{"s", 50, 150, 1}, Want{"m", 200, 1000, 2}, Want{"l", 500, 8000, 5},
                        Want{"xl", 1000, 15000, 10}}) {
    BenchFlags f;
    f.load = w.load;
    const BenchConfig c = Resolved(f);
    EXPECT_EQ(c.load, w.load);
    EXPECT_EQ(c.clients, w.clients) << w.load;
    EXPECT_EQ(c.rate_wps, w.rate) << w.load;
    EXPECT_EQ(c.channels, w.channels) << w.load;
    EXPECT_EQ(c.burst, static_cast<int>(std::ceil(w.rate * kBenchBurstS))) << w.load;
  }
}

TEST(BenchFlags, DefaultsAreLoadSDurableSixtySeconds) {
  const BenchConfig c = Resolved(BenchFlags());
  EXPECT_EQ(c.load, "s");
  EXPECT_EQ(c.clients, 50);
  EXPECT_EQ(c.rate_wps, 150);
  EXPECT_EQ(c.duration_s, 60);
  EXPECT_EQ(c.durability_proto, v1::DURABILITY_DURABLE);
  EXPECT_EQ(c.prefix, "__cowkv_bench/");
  EXPECT_EQ(c.subvolume, "default");
  EXPECT_EQ(c.value_size, 256u);
  EXPECT_EQ(c.burst, 2);  // 1.5 tokens of 10 ms, rounded up
}

TEST(BenchFlags, ClientsAndRateOverrideThePreset) {
  BenchFlags f;
  f.load = "l";
  f.clients = 101;
  BenchConfig c = Resolved(f);
  EXPECT_EQ(c.load, "custom");
  EXPECT_EQ(c.clients, 101);
  EXPECT_EQ(c.rate_wps, 8000);  // the preset's
  EXPECT_EQ(c.channels, 2);
  f.clients = 0;
  f.rate_wps = 0.5;
  c = Resolved(f);
  EXPECT_EQ(c.clients, 500);
  EXPECT_EQ(c.rate_wps, 0.5);
  EXPECT_EQ(c.burst, 1);  // at least one token
  f.durability = "async";
  EXPECT_EQ(Resolved(f).durability_proto, v1::DURABILITY_ASYNC);
}

TEST(BenchFlags, OutOfLimitIsInvalidArgumentNamingTheFlag) {
  const auto bad = [](const char* flag, auto set) {
    BenchFlags f;
    set(f);
    absl::StatusOr<BenchConfig> c = ResolveBench(f);
    ASSERT_FALSE(c.ok()) << flag;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(c.status().message().substr(0, std::string(flag).size()), flag) << c.status();
  };
  bad("--load", [](BenchFlags& f) { f.load = "xxl"; });
  bad("--duration", [](BenchFlags& f) { f.duration_s = 0; });
  bad("--duration", [](BenchFlags& f) { f.duration_s = -1; });
  bad("--duration", [](BenchFlags& f) { f.duration_s = NAN; });
  bad("--duration", [](BenchFlags& f) { f.duration_s = kBenchMaxDurationS + 1; });
  bad("--prefix", [](BenchFlags& f) { f.prefix = ""; });
  bad("--prefix", [](BenchFlags& f) { f.prefix = std::string(kBenchMaxPrefixBytes + 1, 'p'); });
  bad("--value-size", [](BenchFlags& f) { f.value_size = kBenchMaxValueBytes + 1; });
  bad("--value-size", [](BenchFlags& f) {
    f.clients = kBenchMaxClients;
    f.value_size = kBenchMaxValueBytes;
  });
  bad("--durability", [](BenchFlags& f) { f.durability = "default"; });
  bad("--clients", [](BenchFlags& f) { f.clients = -3; });
  bad("--clients", [](BenchFlags& f) { f.clients = kBenchMaxClients + 1; });
  bad("--rate", [](BenchFlags& f) { f.rate_wps = -1; });
  bad("--rate", [](BenchFlags& f) { f.rate_wps = kBenchMaxRateWps * 2; });
  bad("--duration", [](BenchFlags& f) {
    f.rate_wps = kBenchMaxRateWps;
    f.duration_s = kBenchMaxDurationS;  // 8.6e10 writes: more than 32-bit ids
  });
}

int ParseRc(std::vector<std::string> args) {
  args.insert(args.begin(), "cowkv");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Cli cli;
  testing::internal::CaptureStderr();
  testing::internal::CaptureStdout();
  const int rc = cli.Parse(static_cast<int>(argv.size()), argv.data());
  testing::internal::GetCapturedStdout();
  testing::internal::GetCapturedStderr();
  return rc;
}

TEST(BenchParse, GoodAndUsageErrors) {
  EXPECT_EQ(ParseRc({"bench"}), -1);
  EXPECT_EQ(ParseRc({"bench", "--load", "xl", "--duration", "2", "--json"}), -1);
  EXPECT_EQ(ParseRc({"bench", "--clients", "10", "--rate", "20", "-s", "data", "--prefix", "p/",
                     "--durability", "async", "--value-size", "1K"}),
            -1);
  for (const std::vector<std::string>& bad : {std::vector<std::string>{"bench", "--load", "xxl"},
                                              {"bench", "--load"},
                                              {"bench", "--duration", "0"},
                                              {"bench", "--duration", "soon"},
                                              {"bench", "--durability", "default"},
                                              {"bench", "--clients", "0"},
                                              {"bench", "--rate", "-5"},
                                              {"bench", "extra"}}) {
    EXPECT_EQ(ParseRc(bad), kExitUsage) << bad[1];
  }
}

constexpr int64_t kMs = 1000000;

TEST(TokenBucket, StartsFullThenGrantsOnePerInterval) {
  TokenBucket b(100, 3);  // a token per 10 ms, 3 at most
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(b.TryTake(0)) << i;
  EXPECT_FALSE(b.TryTake(0));
  EXPECT_EQ(b.NextTokenNs(0), 10 * kMs);
  EXPECT_FALSE(b.TryTake(10 * kMs - 1));
  EXPECT_TRUE(b.TryTake(10 * kMs));
  EXPECT_FALSE(b.TryTake(10 * kMs));
  EXPECT_EQ(b.NextTokenNs(15 * kMs), 20 * kMs);
  EXPECT_EQ(b.NextTokenNs(25 * kMs), 25 * kMs);  // due already: now
}

TEST(TokenBucket, IdleTimeFillsUpToTheBurstOnly) {
  TokenBucket b(100, 3);
  EXPECT_TRUE(b.TryTake(0));
  int granted = 0;
  while (b.TryTake(10000 * kMs)) ++granted;  // 10 s idle
  EXPECT_EQ(granted, 3);
}

TEST(TokenBucket, RateHoldsWhatEverThePollingJitter) {
  // Goal: polled at uneven times (as a sleeping pacer is), the bucket
  // grants rate × T tokens over T, give or take the burst.
  for (const double rate : {150.0, 1000.0, 15000.0}) {
    const int burst = static_cast<int>(std::ceil(rate * kBenchBurstS));
    TokenBucket b(rate, burst);
    int64_t now = 0;
    uint64_t granted = 0;
    uint32_t x = 12345;
    while (now < 10000 * kMs) {
      while (b.TryTake(now)) ++granted;
      x = x * 1103515245u + 12345u;
      now += 50000 + (x >> 8) % 2000000;  // 50 µs .. 2 ms late
    }
    EXPECT_GE(granted, static_cast<uint64_t>(rate * 10 * 0.99)) << rate;
    EXPECT_LE(granted, static_cast<uint64_t>(rate * 10) + burst + 1) << rate;
  }
}

TEST(LatencyHistogram, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.count(), 0u);
  EXPECT_EQ(h.min_us(), 0u);
  EXPECT_EQ(h.max_us(), 0u);
  EXPECT_EQ(h.Percentile(0.5), 0u);
  EXPECT_EQ(h.stddev_us(), 0);
}

TEST(LatencyHistogram, MeanAndPopulationStddev) {
  LatencyHistogram h;
  for (uint64_t us : {2, 4, 4, 4, 5, 5, 7, 9}) h.Record(us);
  EXPECT_DOUBLE_EQ(h.mean_us(), 5);
  EXPECT_DOUBLE_EQ(h.stddev_us(), 2);
  EXPECT_EQ(h.min_us(), 2u);
  EXPECT_EQ(h.max_us(), 9u);
  EXPECT_EQ(h.Percentile(0.5), 4u);  // nearest rank: the 4th of 8
  EXPECT_EQ(h.Percentile(1), 9u);
}

TEST(LatencyHistogram, BucketsTileTheRange) {
  for (int b = 0; b + 1 < LatencyHistogram::kBuckets; ++b) {
    const uint64_t high = LatencyHistogram::BucketHigh(b);
    ASSERT_EQ(LatencyHistogram::BucketOf(high), b);
    ASSERT_EQ(LatencyHistogram::BucketOf(high + 1), b + 1);
  }
  EXPECT_EQ(LatencyHistogram::BucketOf(LatencyHistogram::kMaxUs), LatencyHistogram::kBuckets - 1);
  EXPECT_EQ(LatencyHistogram::BucketHigh(LatencyHistogram::kBuckets - 1), LatencyHistogram::kMaxUs);
}

TEST(LatencyHistogram, PercentilesWithinOneSixtyFourth) {
  LatencyHistogram h;
  for (uint64_t us = 1; us <= 100000; ++us) h.Record(us);
  for (const double q : {0.01, 0.5, 0.9, 0.99, 0.999}) {
    const double exact = q * 100000;
    const double got = static_cast<double>(h.Percentile(q));
    EXPECT_GE(got, exact) << q;  // the bucket's highest value
    EXPECT_LE(got, exact * (1 + 1.0 / 64)) << q;
  }
  EXPECT_EQ(h.Percentile(1), 100000u);
  EXPECT_EQ(h.Percentile(0.0001), 10u);  // exact below 128 µs
  h.Record(uint64_t{1} << 50);           // clamped
  EXPECT_EQ(h.max_us(), LatencyHistogram::kMaxUs);
}

TEST(BenchKey, DistinctUnderThePrefixSixteenToSixtyFourBytes) {
  std::set<std::string> seen;
  std::set<size_t> lengths;
  for (uint32_t seq = 0; seq < 200000; ++seq) {
    const std::string k = BenchKey(kBenchDefaultPrefix, seq);
    ASSERT_EQ(k.compare(0, 14, kBenchDefaultPrefix), 0) << k;
    ASSERT_GE(k.size(), 22u) << k;  // the prefix and the 8-digit id
    ASSERT_LE(k.size(), 64u) << k;
    lengths.insert(k.size());
    ASSERT_TRUE(seen.insert(k).second) << "duplicate key " << k << " at seq " << seq;
  }
  EXPECT_EQ(lengths.size(), 64u - 22u + 1);  // every length that fits occurs
  EXPECT_NE(BenchKey("p/", 0), BenchKey("p/", 1));
  EXPECT_GE(BenchKey("p/", 7).size(), 16u);
  const std::string long_prefix(100, 'x');
  EXPECT_EQ(BenchKey(long_prefix, 7).size(), 108u);
  EXPECT_EQ(BenchValue(256).size(), 256u);
  EXPECT_EQ(BenchValue(0), "");
}

BenchOutcome Outcome(double elapsed_s, int writes, uint64_t latency_us) {
  BenchOutcome o;
  o.elapsed_s = elapsed_s;
  for (int i = 0; i < writes; ++i) o.latency.Record(latency_us);
  return o;
}

TEST(BenchVerdict, AllFourMustPass) {
  const BenchConfig c = Resolved(BenchFlags());  // 150 writes/s
  BenchOutcome o = Outcome(2, 300, 2000);
  BenchVerdict v = JudgeBench(c, o);
  EXPECT_TRUE(v.pass);
  EXPECT_DOUBLE_EQ(v.throughput.value, 150);
  EXPECT_DOUBLE_EQ(v.throughput.limit, 135);
  EXPECT_DOUBLE_EQ(v.slowest.value, 2);
  EXPECT_DOUBLE_EQ(v.stddev.value, 0);

  EXPECT_TRUE(JudgeBench(c, Outcome(2, 270, 2000)).throughput.pass);  // exactly 90%
  v = JudgeBench(c, Outcome(2, 269, 2000));
  EXPECT_FALSE(v.throughput.pass);
  EXPECT_FALSE(v.pass);

  o = Outcome(2, 300, 2000);
  o.latency.Record(500000);  // exactly 500 ms: too slow
  v = JudgeBench(c, o);
  EXPECT_FALSE(v.slowest.pass);
  EXPECT_TRUE(v.throughput.pass);
  EXPECT_FALSE(v.pass);

  // Half the writes at 1 ms, half at 1 ms + 2 × stddev.
  const auto two_speeds = [](uint64_t stddev_us) {
    BenchOutcome two = Outcome(2, 150, 1000);
    for (int i = 0; i < 150; ++i) two.latency.Record(1000 + 2 * stddev_us);
    return two;
  };
  v = JudgeBench(c, two_speeds(100500));
  EXPECT_NEAR(v.stddev.value, 100.5, 1e-9);
  EXPECT_FALSE(v.stddev.pass);
  EXPECT_TRUE(v.slowest.pass);
  EXPECT_TRUE(JudgeBench(c, two_speeds(99500)).stddev.pass);

  o = Outcome(2, 300, 2000);
  o.AddError("UNAVAILABLE", "connection refused");
  o.AddError("UNAVAILABLE", "again");
  v = JudgeBench(c, o);
  EXPECT_FALSE(v.errors.pass);
  EXPECT_EQ(v.errors.value, 2);
  EXPECT_EQ(o.errors_by_code["UNAVAILABLE"].count, 2u);
  EXPECT_EQ(o.errors_by_code["UNAVAILABLE"].example, "connection refused");
  EXPECT_FALSE(v.pass);
  EXPECT_EQ(BenchFailReason(c, o, v), "FAIL: 2 failed writes, UNAVAILABLE x2 (connection refused)");

  EXPECT_FALSE(JudgeBench(c, Outcome(2, 0, 0)).pass);  // nothing written
}

TEST(BenchReport, TextLikeEtcdctlAndJsonWithEveryFigure) {
  const BenchConfig c = Resolved(BenchFlags());
  BenchOutcome o = Outcome(2, 300, 1500);
  o.deleted = 301;
  o.peak_in_flight = 3;
  const BenchVerdict v = JudgeBench(c, o);
  const std::string text = BenchText(c, o, v);
  EXPECT_NE(text.find("writes: 300 in 2.000 s, 0 errors, at most 3 in flight; 301 bench keys "
                      "deleted\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("PASS: Throughput is 150.0 writes/s (target 150, at least 135)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("PASS: Slowest request took 0.001500s (limit 0.5s)\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("PASS: Stddev is 0.000000s (limit 0.1s)\nPASS: No errors\nPASS\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(BenchHeaderText(c, "h:1"),
            "cowkv bench: load s: 50 clients on 1 connection, target 150 writes/s for 60 s; "
            "256-byte values, durable; keys under \"__cowkv_bench/\" in subvolume default at "
            "h:1\n");

  const Json j = BenchJson(c, o, v, "h:1");
  EXPECT_EQ(j.begin().key(), "__header");
  for (const char* key : {"server",          "subvolume",
                          "prefix",          "load",
                          "clients",         "channels",
                          "target_rate_wps", "duration_s",
                          "durability",      "value_size",
                          "writes",          "errors",
                          "error_codes",     "elapsed_s",
                          "throughput_wps",  "latency_p50_ms",
                          "latency_p90_ms",  "latency_p99_ms",
                          "latency_mean_ms", "latency_stddev_ms",
                          "slowest_ms",      "fastest_ms",
                          "peak_in_flight",  "deleted",
                          "checks",          "pass"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["writes"], 300);
  EXPECT_EQ(j["latency_p50_ms"], 1.5);
  EXPECT_EQ(j["checks"]["throughput"]["limit"], 135);
  EXPECT_EQ(j["checks"]["slowest"]["limit"], 500);
  EXPECT_EQ(j["checks"]["errors"]["pass"], true);
  EXPECT_EQ(j["pass"], true);

  BenchOutcome bad = Outcome(2, 100, 600000);
  bad.AddError("DEADLINE_EXCEEDED", "Deadline Exceeded");
  const BenchVerdict fail = JudgeBench(c, bad);
  const std::string fail_text = BenchText(c, bad, fail);
  EXPECT_NE(fail_text.find("FAIL: Throughput too low: 50.0 writes/s"), std::string::npos);
  EXPECT_NE(fail_text.find("FAIL: Slowest request took too long: 0.600000s"), std::string::npos);
  EXPECT_NE(fail_text.find("FAIL: 1 error\nFAIL: ERROR(DEADLINE_EXCEEDED) -> 1 (first: Deadline "
                           "Exceeded)\nFAIL\n"),
            std::string::npos)
      << fail_text;
  EXPECT_EQ(BenchJson(c, bad, fail, "h:1")["error_codes"]["DEADLINE_EXCEEDED"]["count"], 1);
  EXPECT_EQ(BenchFailReason(c, bad, fail),
            "FAIL: throughput 50.0 writes/s is under 135 (90% of 150); slowest request "
            "600.000 ms (limit 500 ms); 1 failed write, DEADLINE_EXCEEDED x1 (Deadline "
            "Exceeded)");
}

}  // namespace
}  // namespace cli
}  // namespace cowkv
