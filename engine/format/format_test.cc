// Goal: every decoder accepts exactly what its encoder writes and refuses
// anything else with DATA_LOSS, never a crash.
// Method: round trips; then single-byte flips and truncations of encoded
// superblocks and nodes (a brief, deterministic mutation loop; the mutation
// fuzz tests of every decoder are in engine/fuzz, and
// //engine/fuzz:decoders_fuzz_test_long runs the long version under asan).
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/format/node_codec.h"
#include "engine/format/sector.h"
#include "engine/format/superblock.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace format {
namespace {

const std::string kFsid(16, 'F');

Superblock SampleSuper() {
  Superblock sb;
  sb.fsid = kFsid;
  sb.bytenr = kSuperblockOffsets[0];
  sb.generation = 7;
  sb.root = 2 << 20;
  sb.root_generation = 7;
  sb.root_level = 1;
  sb.total_bytes = 1ull << 30;
  sb.bytes_used = 3 * 16384;
  sb.nodesize = 16384;
  sb.sectorsize = 4096;
  sb.next_tree_id = 256;
  return sb;
}

TEST(Superblock, RoundTripAndFlips) {
  Superblock sb = SampleSuper();
  std::string enc = EncodeSuperblock(sb);
  ASSERT_EQ(enc.size(), kSuperblockSize);
  auto dec = DecodeSuperblock(enc, sb.bytenr);
  ASSERT_TRUE(dec.ok()) << dec.status();
  EXPECT_EQ(dec->generation, 7u);
  EXPECT_EQ(dec->root, sb.root);
  EXPECT_EQ(dec->nodesize, 16384u);
  EXPECT_EQ(DecodeSuperblock(enc, kSuperblockOffsets[1]).status().code(),
            absl::StatusCode::kDataLoss);
  std::mt19937_64 rng(1);
  for (int i = 0; i < 2000; ++i) {
    std::string bad = enc;
    size_t pos = rng() % (kSbUsedSize + 64);
    bad[pos] ^= static_cast<char>(1 + rng() % 255);
    EXPECT_EQ(DecodeSuperblock(bad, sb.bytenr).status().code(),
              absl::StatusCode::kDataLoss)
        << "flip at " << pos;
  }
  EXPECT_FALSE(DecodeSuperblock(enc.substr(0, 100), sb.bytenr).ok());
}

// The superblock's bytes for fixed inputs, every field set, as the encoder
// wrote them before the sector codec (sector.h) was factored out: the
// on-disk format must not move. The bytes after kSbUsedSize are zero.
TEST(Superblock, GoldenBytes) {
  Superblock sb = SampleSuper();
  sb.flags = 0x0102;
  sb.log_root = 3 << 20;
  sb.log_nonce = 0x1122334455667788ull;
  sb.next_tree_id = 261;
  sb.revision = 99;
  const std::string enc = EncodeSuperblock(sb);
  ASSERT_EQ(enc.size(), kSuperblockSize);
  const std::string golden =
      "afef8ece010000005f434f574b565f4d"
      "46464646464646464646464646464646"
      "00000100000000000201000000000000"
      "07000000000000000000200000000000"
      "07000000000000000100000000000000"
      "000000400000000000c0000000000000"
      "00400000001000000000300000000000"
      "88776655443322110000000000000000"
      "05010000000000000100000000000000"
      "6300000000000000";
  EXPECT_EQ(absl::BytesToHexString(enc.substr(0, kSbUsedSize)), golden);
  EXPECT_EQ(enc.substr(kSbUsedSize), std::string(kSuperblockSize - kSbUsedSize, '\0'));
}

// The shared header: a sealed sector opens; each of the three checks fails
// with its reason, as DATA_LOSS, counted unless the site says otherwise.
TEST(Sector, SealThenOpen) {
  constexpr SectorKind kKind{0x1234, 64, 64};
  std::string sector(64, '\0');
  sector[20] = 'x';
  SealSector(kKind, &sector);
  EXPECT_EQ(DecodeLE64(sector.data() + kSectorMagicOff), 0x1234u);
  EXPECT_EQ(DecodeLE32(sector.data() + kSectorCsumOff), Crc32c(sector.data() + 4, 60));
  CorruptionSite site;
  site.what = "test sector";
  ASSERT_TRUE(OpenSector(kKind, sector, site).ok());
  auto reason = [&](const std::string& bytes) {
    absl::Status s = OpenSector(kKind, bytes, site);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    return std::string(s.message());
  };
  EXPECT_TRUE(absl::StrContains(reason(sector.substr(0, 63)), "short test sector"));
  EXPECT_TRUE(absl::StrContains(reason(sector + "z"), "long test sector"));
  std::string other = sector;
  other[kSectorMagicOff] ^= 1;
  EXPECT_TRUE(absl::StrContains(reason(other), "bad magic"));
  std::string torn = sector;
  torn[20] = 'y';
  const uint64_t before = CorruptionsDetected();
  EXPECT_TRUE(absl::StrContains(reason(torn), "checksum mismatch"));
  EXPECT_EQ(CorruptionsDetected(), before + 1);
  site.counted = false;
  EXPECT_FALSE(OpenSector(kKind, torn, site).ok());
  EXPECT_EQ(CorruptionsDetected(), before + 1);
}

std::vector<Item> SampleLeaf() {
  std::vector<Item> items;
  for (int i = 0; i < 40; ++i) {
    items.push_back(Item{"key" + std::to_string(1000 + i), std::string(i * 3, 'v')});
  }
  return items;
}

TEST(NodeCodec, RoundTripLeafAndInternal) {
  const uint32_t ns = 4096;
  std::string buf(ns, '\0');
  NodeHeader h{1 << 20, 9, 5, 0};
  std::vector<Item> items = SampleLeaf();
  items.resize(20);
  EncodeNode(h, items, kFsid, ns, buf.data());
  NodeHeader h2;
  std::vector<Item> out;
  NodeExpect ex{h.bytenr, 9, 5, 0};
  ASSERT_TRUE(DecodeNode(buf, kFsid, ns, 4096, ex, &h2, &out).ok());
  ASSERT_EQ(out.size(), items.size());
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].key, items[i].key);
    EXPECT_EQ(out[i].value, items[i].value);
  }
  std::vector<Item> internal = {{"", EncodeChildPtr({2 << 20, 8})},
                                {"m", EncodeChildPtr({3 << 20, 9})}};
  NodeHeader hi{4 << 20, 9, 5, 1};
  EncodeNode(hi, internal, kFsid, ns, buf.data());
  ASSERT_TRUE(DecodeNode(buf, kFsid, ns, 4096, {4 << 20, 9, 5, 1}, &h2, &out).ok());
  EXPECT_EQ(DecodeChildPtr(out[1].value).bytenr, 3u << 20);
}

TEST(NodeCodec, ExpectationsEnforced) {
  const uint32_t ns = 4096;
  std::string buf(ns, '\0');
  NodeHeader h{1 << 20, 9, 5, 0};
  EncodeNode(h, SampleLeaf(), kFsid, ns, buf.data());
  NodeHeader h2;
  std::vector<Item> out;
  auto code = [&](NodeExpect ex, absl::string_view fsid) {
    return DecodeNode(buf, fsid, ns, 4096, ex, &h2, &out).code();
  };
  EXPECT_EQ(code({2 << 20, 9, 5, 0}, kFsid), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code({1 << 20, 8, 5, 0}, kFsid), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code({1 << 20, 9, 6, 0}, kFsid), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code({1 << 20, 9, 5, 1}, kFsid), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code({1 << 20, 9, 5, 0}, std::string(16, 'G')), absl::StatusCode::kDataLoss);
  EXPECT_EQ(code({1 << 20, 9, 5, 0}, kFsid), absl::StatusCode::kOk);
}

TEST(NodeCodec, FlippedBytesAreDataLoss) {
  const uint32_t ns = 4096;
  std::string buf(ns, '\0');
  EncodeNode({1 << 20, 9, 5, 0}, SampleLeaf(), kFsid, ns, buf.data());
  std::mt19937_64 rng(2);
  NodeHeader h2;
  std::vector<Item> out;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = buf;
    size_t pos = rng() % ns;
    bad[pos] ^= static_cast<char>(1 + rng() % 255);
    EXPECT_EQ(DecodeNode(bad, kFsid, ns, 4096, {1 << 20, 9, 5, 0}, &h2, &out).code(),
              absl::StatusCode::kDataLoss)
        << "flip at " << pos;
  }
}

TEST(NodeCodec, CorruptionWithValidChecksumIsDataLoss) {
  // A buggy writer could produce a well-checksummed but malformed node; the
  // decoder must still refuse it. Re-stamp the csum after each mutation.
  const uint32_t ns = 4096;
  std::string buf(ns, '\0');
  EncodeNode({1 << 20, 9, 5, 0}, SampleLeaf(), kFsid, ns, buf.data());
  std::mt19937_64 rng(3);
  NodeHeader h2;
  std::vector<Item> out;
  int refused = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = buf;
    size_t pos = 48 + rng() % (64 + 40 * 8 - 48);  // nritems, level, slots
    bad[pos] ^= static_cast<char>(1 + rng() % 255);
    uint32_t c = Crc32c(bad.data() + 4, ns - 4);
    EncodeLE32(bad.data(), c);
    absl::Status s = DecodeNode(bad, kFsid, ns, 4096, {1 << 20, 9, 5, -1}, &h2, &out);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
      ++refused;
    }
  }
  EXPECT_GT(refused, 2900);
}

TEST(Items, RoundTrip) {
  Key17 k{42, kExtentItem, 16384};
  Key17 k2;
  ASSERT_TRUE(DecodeKey17(EncodeKey17(k), &k2));
  EXPECT_EQ(k2.objectid, 42u);
  EXPECT_EQ(k2.offset, 16384u);
  EXPECT_LT(EncodeKey17({1, 200, 0}), EncodeKey17({256, 1, 0}));
  ExtentItem e{3, 7, kExtentFlagTreeBlock, 2};
  auto e2 = DecodeExtentItem(EncodeExtentItem(e), 1);
  ASSERT_TRUE(e2.ok());
  EXPECT_EQ(e2->refs, 3u);
  EXPECT_EQ(e2->level, 2);
  // A zero refcount (the encoder refuses to write one: see the death test).
  std::string zero = EncodeExtentItem(e);
  EncodeLE64(zero.data(), 0);
  EXPECT_FALSE(DecodeExtentItem(zero, 1).ok());
  RootItem r;
  r.bytenr = 2 << 20;
  r.generation = 4;
  r.level = 1;
  r.drop_progress = "abc";
  auto r2 = DecodeRootItem(EncodeRootItem(r), 5);
  ASSERT_TRUE(r2.ok());
  EXPECT_EQ(r2->drop_progress, "abc");
  EXPECT_FALSE(DecodeRootItem("short", 5).ok());
}

// Goal: the encoders refuse (crash on) what their decoders would refuse, so a
// writer's bug stops before it reaches the device (STYLE.md point 5, paired
// assertions). Method: one bad field per case against a valid sample.

std::vector<Item> Leaf(std::vector<std::string> keys) {
  std::vector<Item> items;
  for (std::string& k : keys) items.push_back({std::move(k), "v"});
  return items;
}

TEST(NodeEncoderDeathTest, LevelAtOrAboveMaxLevel) {
  std::string buf(4096, '\0');
  const NodeHeader h{1 << 20, 9, 5, static_cast<uint8_t>(kMaxLevel)};
  EXPECT_DEATH(EncodeNode(h, {}, kFsid, 4096, buf.data()), "header.level < kMaxLevel");
}

TEST(NodeEncoderDeathTest, BytenrInReservedHead) {
  std::string buf(4096, '\0');
  EXPECT_DEATH(EncodeNode({4096, 9, 5, 0}, {}, kFsid, 4096, buf.data()),
               "header.bytenr >= kReservedHead");
}

TEST(NodeEncoderDeathTest, KeyLongerThanTheTreeLimit) {
  std::string buf(16384, '\0');
  EXPECT_DEATH(EncodeNode({1 << 20, 9, 5, 0}, Leaf({std::string(kMaxTreeKeySize + 1, 'k')}), kFsid,
                          16384, buf.data()),
               "key.size\\(\\) <= kMaxTreeKeySize");
}

TEST(NodeEncoderDeathTest, KeysOutOfOrder) {
  if (!COWKV_DCHECK_IS_ON) GTEST_SKIP() << "COWKV_DCHECK is compiled out";
  std::string buf(4096, '\0');
  EXPECT_DEATH(EncodeNode({1 << 20, 9, 5, 0}, Leaf({"a", "c", "b"}), kFsid, 4096, buf.data()),
               "prev < key");
  EXPECT_DEATH(EncodeNode({1 << 20, 9, 5, 0}, Leaf({"a", "a"}), kFsid, 4096, buf.data()),
               "prev < key");
}

TEST(NodeEncoderDeathTest, EmptyKeyOnlyAsInternalSlotZero) {
  if (!COWKV_DCHECK_IS_ON) GTEST_SKIP() << "COWKV_DCHECK is compiled out";
  std::string buf(4096, '\0');
  EXPECT_DEATH(EncodeNode({1 << 20, 9, 5, 0}, Leaf({""}), kFsid, 4096, buf.data()), "klen > 0");
}

TEST(NodeEncoderDeathTest, ChildNewerThanItsParent) {
  if (!COWKV_DCHECK_IS_ON) GTEST_SKIP() << "COWKV_DCHECK is compiled out";
  std::string buf(4096, '\0');
  std::vector<Item> internal = {{"", EncodeChildPtr({2 << 20, 8})},
                                {"m", EncodeChildPtr({3 << 20, 10})}};
  EXPECT_DEATH(EncodeNode({4 << 20, 9, 5, 1}, internal, kFsid, 4096, buf.data()),
               "c.generation <= header.generation");
  internal[1].value = "short";
  EXPECT_DEATH(EncodeNode({4 << 20, 9, 5, 1}, internal, kFsid, 4096, buf.data()),
               "vlen == kChildPtrSize");
}

TEST(NodeEncoderDeathTest, SurgeryMayPlantMisorderedKeys) {
  // engine/testing/node_surgery writes what `check` must find; the decoder
  // still refuses it.
  std::string buf(4096, '\0');
  NodeEncoder enc(buf.data(), 4096);
  enc.TEST_SkipItemChecks();
  enc.Add("b", "1");
  enc.Add("a", "2");
  enc.Finish({1 << 20, 9, 5, 0}, kFsid);
  NodeHeader h;
  std::vector<Item> out;
  EXPECT_EQ(DecodeNode(buf, kFsid, 4096, 4096, {1 << 20, 9, 5, 0}, &h, &out).code(),
            absl::StatusCode::kDataLoss);
}

TEST(ItemsDeathTest, ZeroRefcountsAreNeverWritten) {
  EXPECT_DEATH(EncodeExtentItem({0, 7, kExtentFlagData, 0}), "e.refs > 0");
  EXPECT_DEATH(EncodeDataRefCount(0), "count > 0");
}

TEST(ItemsDeathTest, RootAndSubvolItemsAsTheirDecoders) {
  RootItem r;
  r.bytenr = 2 << 20;
  r.level = kMaxLevel;
  EXPECT_DEATH(EncodeRootItem(r), "r.level < kMaxLevel");
  r.level = 0;
  r.bytenr = 4096;
  EXPECT_DEATH(EncodeRootItem(r), "r.bytenr >= kReservedHead");
  EXPECT_DEATH(EncodeSubvolInfo({5, 0, 1, ""}), "!s.name.empty\\(\\)");
  EXPECT_DEATH(EncodeSubvolInfo({5, 0, 1, std::string(kMaxSubvolNameSize + 1, 'n')}),
               "kMaxSubvolNameSize");
}

// The creation generation is a trailer after the name (NUL, u64): items
// written before it (the name last) still decode, with ogen 0, and are
// rewritten in that form; a trailer of the wrong size, a zero one, or a
// NUL inside the name is DATA_LOSS.
TEST(Items, SubvolInfoWithAndWithoutTheCreationGeneration) {
  const std::string with = EncodeSubvolInfo({5, 77, 9, "snap"});
  EXPECT_EQ(with.size(), 16u + 4 + 1 + 8);
  absl::StatusOr<SubvolInfoItem> a = DecodeSubvolInfo(with, 257);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->ogen, 9u);
  EXPECT_EQ(a->name, "snap");
  std::string legacy;
  PutLE64(&legacy, 5);
  PutLE64(&legacy, 77);
  legacy += "a-name-longer-than-8-bytes";
  absl::StatusOr<SubvolInfoItem> b = DecodeSubvolInfo(legacy, 257);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ogen, 0u);
  EXPECT_EQ(b->name, "a-name-longer-than-8-bytes");
  EXPECT_EQ(b->parent_id, 5u);
  EXPECT_EQ(EncodeSubvolInfo(*b), legacy);
  for (const std::string& bad : {with.substr(0, with.size() - 1), with + "x",
                                 legacy.substr(0, 16) + std::string("ab\0cd", 5),
                                 legacy.substr(0, 16) + std::string("x\0\0\0\0\0\0\0\0", 10),
                                 legacy.substr(0, 16) + std::string(1, '\0') + "12345678"}) {
    EXPECT_EQ(DecodeSubvolInfo(bad, 257).status().code(), absl::StatusCode::kDataLoss)
        << bad.size();
  }
}

TEST(SuperblockDeathTest, FieldsTheDecoderRefuses) {
  Superblock sb = SampleSuper();
  sb.root_generation = sb.generation + 1;
  EXPECT_DEATH(EncodeSuperblock(sb), "sb.root_generation <= sb.generation");
  sb = SampleSuper();
  sb.nodesize = 6000;
  EXPECT_DEATH(EncodeSuperblock(sb), "ValidNodesize");
  sb = SampleSuper();
  sb.root = 4096;
  EXPECT_DEATH(EncodeSuperblock(sb), "sb.root >= kReservedHead");
}

}  // namespace
}  // namespace format
}  // namespace cowkv
