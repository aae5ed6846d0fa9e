// Unit tests of the KV item codec and the conflict window.
#include <string>

#include "absl/strings/escaping.h"
#include "engine/format/items.h"
#include "engine/kv/conflict_window.h"
#include "engine/kv/kv_item.h"
#include "engine/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace kv {
namespace {

using ::cowkv::testing::IsOk;
using ::cowkv::testing::StatusIs;

TEST(KvItem, RoundTrip) {
  std::string raw = EncodeItem({3, 7, 2}, "hello");
  ASSERT_EQ(raw.size(), kKvHeaderSize + 5);
  ASSERT_OK_AND_ASSIGN(ItemView v, DecodeItem(TreeKey("a"), raw));
  EXPECT_EQ(v.meta.create_revision, 3u);
  EXPECT_EQ(v.meta.mod_revision, 7u);
  EXPECT_EQ(v.meta.version, 2u);
  EXPECT_EQ(v.value, "hello");
  EXPECT_EQ(TreeKey("a"), "ka");
  EXPECT_TRUE(IsKvTreeKey("ka"));
  EXPECT_FALSE(IsKvTreeKey("fa"));
}

TEST(KvItem, CorruptHeadersAreDataLoss) {
  std::string raw = EncodeItem({3, 7, 2}, "x");
  EXPECT_THAT(DecodeItem("ka", raw.substr(0, 31)), StatusIs(absl::StatusCode::kDataLoss));
  std::string kind = raw;
  kind[0] = 9;
  EXPECT_THAT(DecodeItem("ka", kind), StatusIs(absl::StatusCode::kDataLoss));
  std::string pad = raw;
  pad[5] = 1;
  EXPECT_THAT(DecodeItem("ka", pad), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeItem("ka", EncodeItem({8, 7, 1}, "")), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeItem("ka", EncodeItem({0, 0, 1}, "")), StatusIs(absl::StatusCode::kDataLoss));
  // Every truncation and every single-byte flip of the header: DATA_LOSS or
  // a decoded item, never a crash.
  for (size_t n = 0; n < raw.size(); ++n) (void)DecodeItem("ka", raw.substr(0, n));
  for (size_t i = 0; i < kKvHeaderSize; ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string f = raw;
      f[i] ^= static_cast<char>(1 << b);
      absl::StatusOr<ItemView> v = DecodeItem("ka", f);
      if (!v.ok()) {
        EXPECT_THAT(v, StatusIs(absl::StatusCode::kDataLoss));
      }
    }
  }
}

// InlineValue, the readers' hot path, accepts exactly the inline items
// DecodeItem accepts, with the same value: every truncation and bit flip of
// the header, extent items and bad revisions.
TEST(KvItem, InlineValueAgreesWithDecodeItem) {
  auto agree = [](const std::string& raw) {
    absl::StatusOr<ItemView> v = DecodeItem("ka", raw);
    absl::string_view fast;
    const bool ok = InlineValue(raw, &fast);
    EXPECT_EQ(ok, v.ok() && !v->in_extent) << absl::CHexEscape(raw);
    if (ok && v.ok()) {
      EXPECT_EQ(fast, v->value);
    }
  };
  const std::string raw = EncodeItem({3, 7, 2}, "value");
  agree(raw);
  agree(EncodeItem({1, 1, 1}, ""));
  agree(EncodeItem({8, 7, 1}, "x"));  // mod below create
  agree(EncodeItem({0, 0, 1}, "x"));
  agree(EncodeItem({1, 2, 0}, "x"));  // version 0
  agree(EncodeExtentItem({4, 9, 3}, ExtentRef{1 << 20, 8192, 5000, 1}));
  for (size_t n = 0; n < raw.size(); ++n) agree(raw.substr(0, n));
  for (size_t i = 0; i < kKvHeaderSize; ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string f = raw;
      f[i] ^= static_cast<char>(1 << b);
      agree(f);
    }
  }
  // EncodeItemTo reuses a buffer and gives EncodeItem's bytes.
  std::string buf(200, 'z');
  EncodeItemTo({3, 7, 2}, "value", &buf);
  EXPECT_EQ(buf, raw);
  TreeKeyTo("abc", &buf);
  EXPECT_EQ(buf, "kabc");
}

TEST(KvItem, Limits) {
  EXPECT_THAT(ValidateKey(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateKey(std::string(1025, 'k')), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ValidateKey(std::string(1024, 'k')), IsOk());
  EXPECT_THAT(ValidateValue(std::string(kMaxValueSize, 'v')), IsOk());
  EXPECT_THAT(ValidateValue(std::string(kMaxValueSize + 1, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(KvItem, ExtentItems) {
  ExtentRef ref{1 << 20, 8192, 5000, 0xabcd};
  std::string raw = EncodeExtentItem({4, 9, 3}, ref);
  ASSERT_EQ(raw.size(), 64u);
  ASSERT_OK_AND_ASSIGN(ItemView v, DecodeItem("kx", raw));
  EXPECT_TRUE(v.in_extent);
  EXPECT_EQ(v.extent.bytenr, ref.bytenr);
  EXPECT_EQ(v.extent.disk_len, ref.disk_len);
  EXPECT_EQ(v.extent.value_len, ref.value_len);
  EXPECT_EQ(v.extent.crc, ref.crc);
  EXPECT_EQ(v.meta.mod_revision, 9u);
  format::DataRef d;
  ASSERT_TRUE(format::LeafDataRef("kx", raw, &d));
  EXPECT_EQ(d.bytenr, ref.bytenr);
  EXPECT_EQ(d.len, ref.disk_len);
  EXPECT_FALSE(format::LeafDataRef("fx", raw, &d));
  EXPECT_FALSE(format::LeafDataRef("kx", EncodeItem({1, 1, 1}, std::string(32, 'v')), &d));
  // Lengths that do not fit the extent, truncations, flips: DATA_LOSS or an item.
  ExtentRef bad = ref;
  bad.value_len = 9000;
  EXPECT_THAT(DecodeItem("kx", EncodeExtentItem({4, 9, 3}, bad)),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeItem("kx", raw.substr(0, 63)), StatusIs(absl::StatusCode::kDataLoss));
  for (size_t i = 0; i < raw.size(); ++i) {
    std::string f = raw;
    f[i] ^= 0x40;
    absl::StatusOr<ItemView> r = DecodeItem("kx", f);
    if (!r.ok()) {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kDataLoss));
    }
  }
}

TEST(ConflictWindow, PointConflict) {
  ConflictWindow w(100);
  w.OpenTxn(10);
  ReadSet rs;
  rs.keys.push_back({5, "a"});
  EXPECT_THAT(w.Validate(10, rs), IsOk());
  w.RecordWrite(5, "b", 11);
  EXPECT_THAT(w.Validate(10, rs), IsOk());
  w.RecordWrite(6, "a", 12);  // other subvolume
  EXPECT_THAT(w.Validate(10, rs), IsOk());
  w.RecordWrite(5, "a", 13);
  EXPECT_THAT(w.Validate(10, rs), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(w.Validate(13, rs), IsOk());
}

TEST(ConflictWindow, RangeConflictCatchesPhantoms) {
  ConflictWindow w(100);
  w.OpenTxn(1);
  ReadSet rs;
  rs.ranges.push_back({5, "b", "d"});
  w.RecordWrite(5, "a", 2);
  w.RecordWrite(5, "d", 3);  // end is exclusive
  EXPECT_THAT(w.Validate(1, rs), IsOk());
  w.RecordWrite(5, "c\x01", 4);  // a new key inside the range
  EXPECT_THAT(w.Validate(1, rs), StatusIs(absl::StatusCode::kAborted));
  ReadSet open;
  open.ranges.push_back({5, "e", ""});
  EXPECT_THAT(w.Validate(1, open), IsOk());
  w.RecordWrite(5, "zzz", 5);
  EXPECT_THAT(w.Validate(1, open), StatusIs(absl::StatusCode::kAborted));
}

TEST(ConflictWindow, TooOldIsDistinct) {
  ConflictWindow w(4);
  w.OpenTxn(1);
  ReadSet rs;
  rs.keys.push_back({5, "x"});
  for (uint64_t r = 2; r < 10; ++r) w.RecordWrite(5, "k" + std::to_string(r), r);
  EXPECT_LE(w.size(), 4u);
  EXPECT_THAT(w.Validate(1, rs), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_THAT(w.Validate(w.floor(), rs), IsOk());
  // Read-only with nothing read never fails.
  EXPECT_THAT(w.Validate(0, ReadSet{}), IsOk());
  w.CloseTxn();
  EXPECT_EQ(w.size(), 0u);
}

}  // namespace
}  // namespace kv
}  // namespace cowkv
