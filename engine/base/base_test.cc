// Goal: the byte-level helpers every decoder relies on are exact, the
// corruption constructor builds one message shape, and the latency
// recorder puts each duration in the right bucket.
// Method: known-answer crc32c, round trips of LE/BE coding, Reader's
// refusal to read past the end of a buffer; durations on and either side
// of every bucket bound.
#include <chrono>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
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

// Every combination of site fields and have/want: one shape, no stray
// separators, the reason attached.
TEST(Status, CorruptionShapeWithoutSomeParts) {
  struct Case {
    CorruptionSite site;
    const char* have;
    const char* want;
    const char* message;
  };
  CorruptionSite superblock;
  superblock.what = "superblock";
  CorruptionSite inode;
  inode.what = "inode item";
  inode.inode = 257;
  CorruptionSite all;
  all.bytenr = 1;
  all.owner = 2;
  all.inode = 3;
  all.level = 4;
  all.slot = 5;
  const Case kCases[] = {
      {superblock, "", "", "corrupt superblock: why ["},
      {superblock, "", "7", "corrupt superblock: why, want=7 ["},
      {superblock, "6", "", "corrupt superblock: why, have=6 ["},
      {inode, "6", "7", "corrupt inode item: inode=257, why, have=6 want=7 ["},
      {all, "", "", "corrupt node: bytenr=1 owner=2 inode=3 level=4 slot=5, why ["},
  };
  for (const Case& c : kCases) {
    const int line = __LINE__ + 1;
    const absl::Status s = COWKV_CORRUPTION(c.site, "why", c.have, c.want);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
    EXPECT_EQ(ReasonOf(s), ErrorReason::kCorruption);
    EXPECT_TRUE(absl::StartsWith(s.message(), c.message)) << s.message();
    EXPECT_TRUE(absl::EndsWith(s.message(), absl::StrCat("base_test.cc:", line, "]")))
        << s.message();
  }
}

TEST(Status, WithContextKeepsCodeAndReasonAndCountsNothing) {
  EXPECT_TRUE(WithContext(absl::OkStatus(), "context").ok());
  CorruptionSite site;
  const absl::Status inner = COWKV_CORRUPTION(site, "bad", "", "");
  const uint64_t before = CorruptionsDetected();
  const absl::Status outer = WithContext(inner, "key \"k\"");
  EXPECT_EQ(CorruptionsDetected(), before);
  EXPECT_EQ(outer.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(ReasonOf(outer), ErrorReason::kCorruption);
  EXPECT_EQ(outer.message(), absl::StrCat("key \"k\": ", inner.message()));
  const absl::Status plain = WithContext(absl::NotFoundError("gone"), "ctx");
  EXPECT_EQ(plain, absl::NotFoundError("ctx: gone"));
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
