// Goal: the send stream's building blocks are right on their own — SHA-256
// against the FIPS 180-4 vectors, every record type round-trips through
// its encoder and decoder, and the receiver's framing checks refuse a
// damaged, reordered, truncated or newer-version stream with the error
// class each deserves; resume tokens round-trip, and every damaged token
// (each bit flipped, each truncation, random text) is INVALID_ARGUMENT /
// RESUME_TOKEN, never a crash; a SHA-256 state saved mid-stream and
// restored hashes on to the same digest. Method: hand-built streams without
// any store (the store-level round trips are in engine/store/send_test.cc).
#include "engine/send/stream_format.h"

#include <string>

#include "cowkv/errors.h"
#include "engine/base/coding.h"
#include "engine/send/receiver.h"
#include "engine/send/resume_token.h"
#include "engine/send/sha256.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace send {
namespace {

TEST(Sha256Test, FipsVectors) {
  EXPECT_EQ(DigestHex(Sha256::Of("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(DigestHex(Sha256::Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(DigestHex(Sha256::Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 h;  // a million 'a's, fed unevenly
  std::string chunk(997, 'a');
  size_t left = 1000000;
  while (left > 0) {
    const size_t n = std::min(left, chunk.size());
    h.Update(absl::string_view(chunk).substr(0, n));
    left -= n;
  }
  EXPECT_EQ(DigestHex(h.Final()),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

StreamHeader TestHeader() {
  StreamHeader h;
  h.nodesize = 4096;
  h.sectorsize = 512;
  h.uuid[0] = 7;
  h.stransid = 9;
  h.ctime_ms = 1234;
  h.name = "snap";
  return h;
}

// A complete stream of two puts and a delete.
std::string SmallStream() {
  std::string s = EncodePreamble();
  AppendHeader(TestHeader(), &s);
  AppendPut("f\x01", "v1", &s);
  AppendDelete("f\x02", &s);
  AppendPut("kkey", std::string(40, 'x'), &s);
  AppendEnd(4, Sha256::Of(s), &s);
  return s;
}

absl::Status ReceiveAll(absl::string_view bytes, size_t piece = 7) {
  Receiver r;
  for (size_t i = 0; i < bytes.size(); i += piece) {
    absl::Status f = r.Feed(bytes.substr(i, piece));
    if (!f.ok()) return f;
    for (;;) {
      absl::StatusOr<Receiver::Event> e = r.Step();
      if (!e.ok()) return e.status();
      if (*e == Receiver::Event::kNeedMore || *e == Receiver::Event::kEnd) break;
    }
  }
  return r.Finish();
}

TEST(StreamFormatTest, RecordsRoundTrip) {
  std::string s;
  AppendHeader(TestHeader(), &s);
  absl::StatusOr<Record> r = DecodeRecord(s, 0);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->header.name, "snap");
  EXPECT_EQ(r->header.stransid, 9u);
  EXPECT_FALSE(r->header.incremental());
  s.clear();
  AppendClone("fk", "val", CloneSource::kStream, "fj", &s);
  r = DecodeRecord(s, 1);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->key, "fk");
  EXPECT_EQ(r->value, "val");
  EXPECT_EQ(r->source, CloneSource::kStream);
  EXPECT_EQ(r->source_key, "fj");
  s.clear();
  AppendExtent("fe", "item", 4096, &s);
  r = DecodeRecord(s, 2);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->data_len, 4096u);
}

TEST(StreamFormatTest, ReceiverAcceptsWholeStreamInAnyPieces) {
  const std::string s = SmallStream();
  for (size_t piece : {1, 5, 12, 1000}) EXPECT_TRUE(ReceiveAll(s, piece).ok()) << piece;
}

TEST(StreamFormatTest, EveryBitFlipIsRefused) {
  const std::string s = SmallStream();
  for (size_t i = 0; i < s.size(); ++i) {
    std::string bad = s;
    bad[i] ^= 0x10;
    absl::Status st = ReceiveAll(bad);
    EXPECT_FALSE(st.ok()) << "flip at " << i;
    if (i >= kPreambleSize) {
      EXPECT_EQ(ReasonOf(st), ErrorReason::kStreamCorrupt) << i << st;
    }
  }
}

TEST(StreamFormatTest, EveryTruncationIsRefused) {
  const std::string s = SmallStream();
  for (size_t n = 0; n < s.size(); ++n) {
    absl::Status st = ReceiveAll(absl::string_view(s).substr(0, n));
    EXPECT_TRUE(absl::IsDataLoss(st) || absl::IsInvalidArgument(st)) << n << st;
    EXPECT_EQ(ReasonOf(st), ErrorReason::kStreamCorrupt) << n;
  }
  EXPECT_EQ(ReasonOf(ReceiveAll(s + "x")), ErrorReason::kStreamCorrupt);
}

TEST(StreamFormatTest, NewerVersionAndForeignBytesAreRefused) {
  std::string s = SmallStream();
  EncodeLE32(s.data() + 8, kStreamVersion + 1);
  absl::Status st = ReceiveAll(s);
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_EQ(ReasonOf(st), ErrorReason::kStreamVersion);
  st = ReceiveAll(std::string(100, 'z'));
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
}

TEST(StreamFormatTest, OrderIsChecked) {
  // Keys out of order, with valid crcs and a valid end digest.
  std::string s = EncodePreamble();
  AppendHeader(TestHeader(), &s);
  AppendPut("f\x02", "v", &s);
  AppendPut("f\x01", "v", &s);
  AppendEnd(3, Sha256::Of(s), &s);
  EXPECT_EQ(ReasonOf(ReceiveAll(s)), ErrorReason::kStreamCorrupt);
  // Data without an extent.
  s = EncodePreamble();
  AppendHeader(TestHeader(), &s);
  AppendData("abc", &s);
  EXPECT_EQ(ReasonOf(ReceiveAll(s)), ErrorReason::kStreamCorrupt);
  // History keys are never part of a stream.
  s = EncodePreamble();
  AppendHeader(TestHeader(), &s);
  AppendPut("h1234567", "v", &s);
  EXPECT_EQ(ReasonOf(ReceiveAll(s)), ErrorReason::kStreamCorrupt);
}

TEST(ResumeTokenTest, RoundTripsAndDamageIsRefused) {
  Sha256 h;
  h.Update(std::string(1000, 'x'));  // 1000 % 64 = 40 bytes pending
  ResumePoint p;
  p.uuid[3] = 7;
  p.stransid = 42;
  p.parent_uuid[0] = 9;
  p.parent_stransid = 41;
  p.records = 17;
  p.offset = 1000;
  p.last_key = std::string("k\0key", 5);
  p.sha_state = h.State();
  p.name = "snap@follow-1";
  const std::string text = ResumeTokenText(p);
  absl::StatusOr<ResumePoint> back = ParseResumeToken(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == p);
  const std::string bin = EncodeResumePoint(p);
  for (size_t i = 0; i < bin.size() * 8; ++i) {
    std::string bad = bin;
    bad[i / 8] ^= static_cast<char>(1 << (i % 8));
    absl::StatusOr<ResumePoint> r = DecodeResumePoint(bad);
    ASSERT_FALSE(r.ok()) << "bit " << i;
    EXPECT_EQ(ReasonOf(r.status()), ErrorReason::kResumeToken);
    EXPECT_TRUE(absl::IsInvalidArgument(r.status()));
  }
  for (size_t n = 0; n < bin.size(); ++n) {
    EXPECT_EQ(ReasonOf(DecodeResumePoint(bin.substr(0, n)).status()), ErrorReason::kResumeToken);
  }
  for (const char* junk : {"", "!!!", "AAAA", "not a token at all"}) {
    EXPECT_EQ(ReasonOf(ParseResumeToken(junk).status()), ErrorReason::kResumeToken) << junk;
  }
  // A state saved mid-stream hashes on as the original does.
  Sha256 restored;
  ASSERT_TRUE(Sha256::FromState(h.State(), &restored));
  h.Update("tail");
  restored.Update("tail");
  EXPECT_EQ(h.Final(), restored.Final());
  EXPECT_FALSE(Sha256::FromState(std::string(39, '\0'), &restored));
}

}  // namespace
}  // namespace send
}  // namespace cowkv
