// Goal: the byte-level helpers every decoder relies on are exact, and the
// latency recorder puts each duration in the right bucket.
// Method: known-answer crc32c, round trips of LE/BE coding, Reader's
// refusal to read past the end of a buffer; durations on and either side
// of every bucket bound.
#include <chrono>
#include <string>

#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/latency_histogram.h"
#include "engine/base/status.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

TEST(Crc32c, KnownAnswer) {
  EXPECT_EQ(Crc32c("123456789", 9), 0xE3069283u);
  EXPECT_EQ(Crc32c("", 0), 0u);
}

TEST(Coding, RoundTrip) {
  char b[8];
  EncodeLE64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 0x08);
  EXPECT_EQ(DecodeLE64(b), 0x0102030405060708ull);
  EncodeBE64(b, 0x0102030405060708ull);
  EXPECT_EQ(b[0], 0x01);
  EXPECT_EQ(DecodeBE64(b), 0x0102030405060708ull);
  EncodeLE32(b, 0xdeadbeef);
  EXPECT_EQ(DecodeLE32(b), 0xdeadbeefu);
  EncodeLE16(b, 0xbeef);
  EXPECT_EQ(DecodeLE16(b), 0xbeef);
}

TEST(Reader, StopsAtEnd) {
  std::string s;
  PutLE32(&s, 7);
  Reader r(s);
  EXPECT_EQ(r.LE32(), 7u);
  EXPECT_TRUE(r.ok());
  EXPECT_EQ(r.LE64(), 0u);
  EXPECT_FALSE(r.ok());
  EXPECT_EQ(r.U8(), 0u);
}

TEST(Status, CorruptionShape) {
  uint64_t before = CorruptionsDetected();
  CorruptionSite site;
  site.bytenr = 4096;
  site.level = 0;
  absl::Status s = COWKV_CORRUPTION(site, "bad csum", "1", "2");
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("corrupt node: bytenr=4096 level=0, bad csum, have=1 want=2"),
            std::string::npos)
      << s.message();
  EXPECT_EQ(CorruptionsDetected(), before + 1);
}

TEST(LatencyRecorder, BucketsAreExponentialAndInclusive) {
  EXPECT_EQ(LatencyRecorder::BucketOf(0), 0);
  for (int i = 0; i < LatencyRecorder::kBuckets; ++i) {
    const uint64_t bound = LatencyRecorder::UpperBoundNs(i);
    EXPECT_EQ(bound, 8000ull << i);
    EXPECT_EQ(LatencyRecorder::BucketOf(bound), i) << bound;
    EXPECT_EQ(LatencyRecorder::BucketOf(bound + 1), i + 1) << bound;
    if (i > 0) {
      EXPECT_EQ(LatencyRecorder::BucketOf(bound - 1), i) << bound;
    }
  }
  EXPECT_EQ(LatencyRecorder::BucketOf(~0ull), LatencyRecorder::kBuckets);

  LatencyRecorder r;
  r.Record(std::chrono::microseconds(5));    // bucket 0
  r.Record(std::chrono::microseconds(8));    // bucket 0 (bounds are inclusive)
  r.Record(std::chrono::microseconds(100));  // 64 < 100 <= 128 µs: bucket 4
  r.Record(std::chrono::seconds(20));        // past 16.8 s: the +Inf bucket
  r.Record(std::chrono::nanoseconds(-1));    // a clock step back counts as 0
  const LatencyRecorder::Reading got = r.Read();
  EXPECT_EQ(got.count, 5u);
  EXPECT_EQ(got.buckets[0], 3u);
  EXPECT_EQ(got.buckets[4], 1u);
  EXPECT_EQ(got.buckets[LatencyRecorder::kBuckets], 1u);
  EXPECT_EQ(got.sum_ns, 5000u + 8000u + 100000u + 20000000000u);
}

}  // namespace
}  // namespace cowkv
