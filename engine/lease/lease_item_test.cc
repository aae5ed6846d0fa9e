// Lease items: encodings round-trip; every malformed key or value is
// DATA_LOSS naming the item.
#include "engine/lease/lease_item.h"

#include "cowkv/limits.h"
#include "engine/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace lease {
namespace {

using testing::StatusIs;

TEST(LeaseItem, RoundTrip) {
  ASSERT_OK_AND_ASSIGN(LeaseItem r, DecodeLeaseItem(RecordKey(7), EncodeRecord(30)));
  EXPECT_TRUE(r.record);
  EXPECT_EQ(r.id, 7u);
  EXPECT_EQ(r.ttl_seconds, 30);
  ASSERT_OK_AND_ASSIGN(LeaseItem a, DecodeLeaseItem(AttachmentKey(7, "key"), EncodeAttachment()));
  EXPECT_FALSE(a.record);
  EXPECT_EQ(a.id, 7u);
  EXPECT_EQ(a.user_key, "key");
  // The record sorts before its attachments, and ids in numeric order.
  EXPECT_LT(RecordKey(7), AttachmentKey(7, std::string(1, '\0')));
  EXPECT_LT(AttachmentKey(7, "\xff\xff"), RecordKey(8));
  EXPECT_LT(RecordKey(255), RecordKey(256));
}

TEST(LeaseItem, Malformed) {
  auto bad = [](const std::string& k, const std::string& v) {
    EXPECT_THAT(DecodeLeaseItem(k, v).status(), StatusIs(absl::StatusCode::kDataLoss))
        << "key size " << k.size() << " value size " << v.size();
  };
  bad("L", EncodeRecord(1));
  bad(RecordKey(0), EncodeRecord(1));
  bad(RecordKey(1ull << 63), EncodeRecord(1));
  bad(RecordKey(1), EncodeRecord(1).substr(0, 15));
  bad(RecordKey(1), EncodeAttachment());
  bad(AttachmentKey(1, "k"), EncodeRecord(1));
  bad(RecordKey(1), EncodeRecord(0));
  bad(RecordKey(1), EncodeRecord(kMaxLeaseTtlSeconds + 1));
  std::string padded = EncodeRecord(5);
  padded[3] = 1;
  bad(RecordKey(1), padded);
  std::string kind = EncodeAttachment();
  kind[0] = 1;
  bad(AttachmentKey(1, "k"), kind);
  bad(AttachmentKey(1, std::string(kMaxKeySize + 1, 'x')), EncodeAttachment());
  bad("k1234567890", EncodeRecord(1));
}

TEST(LeaseItem, Validate) {
  EXPECT_OK(ValidateTtl(1));
  EXPECT_OK(ValidateTtl(kMaxLeaseTtlSeconds));
  EXPECT_THAT(ValidateTtl(0), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTtl(-5), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateTtl(kMaxLeaseTtlSeconds + 1), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_OK(ValidateId(0));
  EXPECT_THAT(ValidateId(-1), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace lease
}  // namespace cowkv
