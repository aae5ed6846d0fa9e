// The file items' codecs: round trips, name rules, key order, and every
// truncation and bit flip of each encoding decoding to DATA_LOSS or to a
// well-formed item (never a crash or an over-read; ASan in CI).
#include "engine/fs/fs_items.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/format/items.h"
#include "engine/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace fs {
namespace {

using ::cowkv::testing::IsOk;
using ::cowkv::testing::StatusIs;

// Feeds every prefix and every single-bit flip of `enc` to `decode`.
void Mangle(const std::string& enc, const std::function<absl::Status(absl::string_view)>& decode) {
  for (size_t n = 0; n < enc.size(); ++n) {
    absl::Status s = decode(absl::string_view(enc).substr(0, n));
    if (!s.ok()) {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss)) << "prefix " << n;
    }
  }
  for (size_t i = 0; i < enc.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      std::string f = enc;
      f[i] ^= static_cast<char>(1 << b);
      absl::Status s = decode(f);
      if (!s.ok()) {
        EXPECT_THAT(s, StatusIs(absl::StatusCode::kDataLoss)) << "flip " << i << "/" << b;
      }
    }
  }
}

TEST(FsItems, KeysSortByInodeTypeOffset) {
  std::string a = EncodeFsKey({256, kInodeItem, 0});
  std::string b = EncodeFsKey({256, kDirIndex, 2});
  std::string c = EncodeFsKey({256, kDirIndex, 10});
  std::string d = EncodeFsKey({257, kInodeItem, 0});
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_LT(c, d);
  EXPECT_EQ(a.size(), kFsKeySize);
  FsKey k;
  ASSERT_TRUE(DecodeFsKey(c, &k));
  EXPECT_EQ(k.objectid, 256u);
  EXPECT_EQ(k.type, kDirIndex);
  EXPECT_EQ(k.offset, 10u);
  EXPECT_FALSE(DecodeFsKey("k" + c.substr(1), &k));
  EXPECT_FALSE(DecodeFsKey(c.substr(0, 17), &k));
}

TEST(FsItems, Names) {
  EXPECT_THAT(ValidateName("a"), IsOk());
  EXPECT_THAT(ValidateName(std::string(255, 'n')), IsOk());
  EXPECT_THAT(ValidateName("data@2026-11-22"), IsOk());
  absl::Status long_name = ValidateName(std::string(256, 'n'));
  EXPECT_THAT(long_name, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(long_name.message().find("ENAMETOOLONG"), absl::string_view::npos);
  for (const char* bad : {"", ".", "..", "a/b", "/"}) {
    EXPECT_THAT(ValidateName(bad), StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_THAT(ValidateName(std::string("a\0b", 3)), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(NameHash("abc"), NameHash("abc"));
  EXPECT_NE(NameHash("abc"), NameHash("abd"));
}

TEST(FsItems, InodeItem) {
  InodeItem it;
  it.generation = 3;
  it.transid = 9;
  it.size = 12345;
  it.nbytes = 16384;
  it.nlink = 2;
  it.uid = 1000;
  it.gid = 100;
  it.mode = 0100644;
  it.mtime_ns = -5;  // before 1970 is fine
  std::string enc = EncodeInodeItem(it);
  ASSERT_EQ(enc.size(), kInodeItemSize);
  ASSERT_OK_AND_ASSIGN(InodeItem got, DecodeInodeItem(enc, 257));
  EXPECT_EQ(got.size, 12345u);
  EXPECT_EQ(got.nlink, 2u);
  EXPECT_EQ(got.mode, 0100644u);
  EXPECT_EQ(got.mtime_ns, -5);
  // A block device: not something cowkv stores (nor encodes: see the death
  // test), so the mode is patched in.
  std::string bdev = enc;
  EncodeLE32(bdev.data() + 44, 0060644);
  EXPECT_THAT(DecodeInodeItem(bdev, 257), StatusIs(absl::StatusCode::kDataLoss));
  Mangle(enc, [](absl::string_view v) { return DecodeInodeItem(v, 257).status(); });
}

// Names of one length whose NameHash collide collide in ExtrefHash under
// every parent (crc32c is affine: equal-length inputs differing only in
// the name differ by the same linear term), so the tests' colliding names
// put several entries in one extended ref item too.
TEST(FsItems, EqualLengthNameCollisionsCollideAsExtrefs) {
  absl::flat_hash_map<uint64_t, std::string> seen;
  std::string a, b;
  for (uint64_t i = 100000; a.empty(); ++i) {
    std::string n = absl::StrCat("x", i);
    auto [it, fresh] = seen.emplace(NameHash(n), n);
    if (!fresh) a = it->second, b = n;
  }
  ASSERT_EQ(a.size(), b.size());
  for (uint64_t parent : {256ull, 257ull, 1ull << 40, ~0ull - 300}) {
    EXPECT_EQ(ExtrefHash(parent, a), ExtrefHash(parent, b)) << parent;
  }
}

TEST(FsItems, InodeRefsAndDirEntries) {
  std::vector<InodeRef> refs = {{2, "a"}, {7, std::string(255, 'z')}};
  std::string enc = EncodeInodeRefs(refs);
  ASSERT_OK_AND_ASSIGN(std::vector<InodeRef> got, DecodeInodeRefs(enc, 300));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[1].index, 7u);
  EXPECT_EQ(got[1].name, refs[1].name);
  Mangle(enc, [](absl::string_view v) { return DecodeInodeRefs(v, 300).status(); });

  // Extended refs: each entry names its directory; all hash to the key.
  const uint64_t h = ExtrefHash(256, "x");
  EXPECT_NE(h, ExtrefHash(257, "x"));
  EXPECT_NE(h, ExtrefHash(256, "y"));
  std::string xenc = EncodeInodeExtrefs({{256, 9, "x"}});
  ASSERT_OK_AND_ASSIGN(std::vector<InodeExtref> xgot, DecodeInodeExtrefs(xenc, 300, h));
  ASSERT_EQ(xgot.size(), 1u);
  EXPECT_EQ(xgot[0].parent, 256u);
  EXPECT_EQ(xgot[0].index, 9u);
  EXPECT_EQ(xgot[0].name, "x");
  EXPECT_THAT(DecodeInodeExtrefs(xenc, 300, h + 1), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ValidateItem(FsKey{300, kInodeExtref, h + 1}, xenc),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_OK(ValidateItem(FsKey{300, kInodeExtref, h}, xenc));
  Mangle(xenc, [h](absl::string_view v) { return DecodeInodeExtrefs(v, 300, h).status(); });

  std::vector<DirEntry> ents = {{300, FileType::kRegular, 4, "same-hash-1"},
                                {301, FileType::kDirectory, 5, "same-hash-2"}};
  std::string de = EncodeDirEntries(ents);
  ASSERT_OK_AND_ASSIGN(std::vector<DirEntry> dgot, DecodeDirEntries(de, 256));
  ASSERT_EQ(dgot.size(), 2u);
  EXPECT_EQ(dgot[1].type, FileType::kDirectory);
  EXPECT_EQ(dgot[1].name, "same-hash-2");
  Mangle(de, [](absl::string_view v) { return DecodeDirEntries(v, 256).status(); });
  // DIR_INDEX holds exactly one entry.
  EXPECT_THAT(DecodeDirIndex(de, 256), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_OK_AND_ASSIGN(DirEntry one, DecodeDirIndex(EncodeDirEntries({ents[0]}), 256));
  EXPECT_EQ(one.child, 300u);
  EXPECT_THAT(DecodeDirEntries("", 256), StatusIs(absl::StatusCode::kDataLoss));
}

// FindDirEntry (the lookup that copies only the match) accepts exactly what
// DecodeDirEntries accepts and finds what a search of its result finds, on
// the encoding and on every prefix and bit flip of it.
TEST(FsItems, FindDirEntryAgreesWithDecodeDirEntries) {
  // Extended refs: each entry names its directory; all hash to the key.
  const uint64_t h = ExtrefHash(256, "x");
  EXPECT_NE(h, ExtrefHash(257, "x"));
  EXPECT_NE(h, ExtrefHash(256, "y"));
  std::string xenc = EncodeInodeExtrefs({{256, 9, "x"}});
  ASSERT_OK_AND_ASSIGN(std::vector<InodeExtref> xgot, DecodeInodeExtrefs(xenc, 300, h));
  ASSERT_EQ(xgot.size(), 1u);
  EXPECT_EQ(xgot[0].parent, 256u);
  EXPECT_EQ(xgot[0].index, 9u);
  EXPECT_EQ(xgot[0].name, "x");
  EXPECT_THAT(DecodeInodeExtrefs(xenc, 300, h + 1), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ValidateItem(FsKey{300, kInodeExtref, h + 1}, xenc),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_OK(ValidateItem(FsKey{300, kInodeExtref, h}, xenc));
  Mangle(xenc, [h](absl::string_view v) { return DecodeInodeExtrefs(v, 300, h).status(); });

  std::vector<DirEntry> ents = {{300, FileType::kRegular, 4, "same-hash-1"},
                                {301, FileType::kDirectory, 5, "same-hash-2"},
                                {302, FileType::kSymlink, 6, "same-hash-1"}};
  const std::string de = EncodeDirEntries(ents);
  auto agree = [](absl::string_view v) -> absl::Status {
    absl::StatusOr<std::vector<DirEntry>> all = DecodeDirEntries(v, 256);
    for (absl::string_view name : {"same-hash-1", "same-hash-2", "other"}) {
      absl::StatusOr<std::optional<DirEntry>> one = FindDirEntry(v, 256, name);
      EXPECT_EQ(one.ok(), all.ok()) << name;
      if (!one.ok() || !all.ok()) continue;
      auto it = std::find_if(all->begin(), all->end(),
                             [&](const DirEntry& e) { return e.name == name; });
      EXPECT_EQ(one->has_value(), it != all->end()) << name;
      if (it == all->end() || !one->has_value()) continue;
      EXPECT_EQ((*one)->child, it->child);
      EXPECT_EQ((*one)->type, it->type);
      EXPECT_EQ((*one)->transid, it->transid);
      EXPECT_EQ((*one)->name, it->name);
    }
    return all.status();
  };
  EXPECT_THAT(agree(de), IsOk());
  ASSERT_OK_AND_ASSIGN(std::optional<DirEntry> first, FindDirEntry(de, 256, "same-hash-1"));
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->child, 300u);  // the first of two equal names
  Mangle(de, agree);
  EXPECT_THAT(FindDirEntry("", 256, "a").status(), StatusIs(absl::StatusCode::kDataLoss));
}

TEST(FsItems, ItemKeyIsTheEncodedKey) {
  for (const FsKey& k : {FsKey{256, kInodeItem, 0}, FsKey{~0ull, kExtentData, ~0ull},
                         FsKey{1ull << 40, kDirItem, 0x1234567890abcdefull}}) {
    const ItemKey ik(k);
    EXPECT_EQ(ik.view(), EncodeFsKey(k));
    EXPECT_EQ(ItemKey(ik.view()).str(), EncodeFsKey(k));
    FsKey back;
    ASSERT_TRUE(DecodeFsKey(ik, &back));
    EXPECT_EQ(back.objectid, k.objectid);
    EXPECT_EQ(back.type, k.type);
    EXPECT_EQ(back.offset, k.offset);
  }
  // ItemKeyLess orders exactly as the encoded bytes do (every byte position
  // deciding, high bytes included), and falls back for other lengths.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 20000; ++i) {
    std::string a = EncodeFsKey({rng() % 4 == 0 ? rng() : 256 + rng() % 3,
                                 static_cast<uint8_t>(rng()), rng() % 2 ? rng() : rng() % 4});
    std::string b = a;
    b[rng() % kFsKeySize] = static_cast<char>(rng());
    EXPECT_EQ(ItemKeyLess()(a, b), a < b) << absl::CHexEscape(a) << " " << absl::CHexEscape(b);
    EXPECT_EQ(ItemKeyLess()(b, a), b < a);
  }
  EXPECT_TRUE(ItemKeyLess()("f", ItemKey(FsKey{0, 0, 0})));
  EXPECT_FALSE(ItemKeyLess()(ItemKey(FsKey{0, 0, 0}), "f"));
}

TEST(FsItems, FileExtents) {
  FileExtent in;
  in.generation = 5;
  in.inline_data = "hello";
  std::string enc = EncodeFileExtent(in);
  ASSERT_OK_AND_ASSIGN(FileExtent got, DecodeFileExtent(enc, 257, 0));
  EXPECT_EQ(got.kind, kExtentInline);
  EXPECT_EQ(got.inline_data, "hello");
  EXPECT_EQ(got.length(), 5u);
  Mangle(enc, [](absl::string_view v) { return DecodeFileExtent(v, 257, 0).status(); });

  FileExtent reg;
  reg.generation = 6;
  reg.kind = kExtentRegular;
  reg.disk_bytenr = 1 << 20;
  reg.disk_len = 65536;
  reg.offset = 4096;
  reg.num_bytes = 8192;
  reg.crc = 0xfeed;
  std::string renc = EncodeFileExtent(reg);
  ASSERT_EQ(renc.size(), kFileExtentRegularSize);
  ASSERT_OK_AND_ASSIGN(FileExtent rgot, DecodeFileExtent(renc, 257, 4096));
  EXPECT_EQ(rgot.disk_bytenr, reg.disk_bytenr);
  EXPECT_EQ(rgot.length(), 8192u);
  Mangle(renc, [](absl::string_view v) { return DecodeFileExtent(v, 257, 4096).status(); });
  // Past the end of the disk extent (patched in: the encoder refuses it).
  std::string past = renc;
  EncodeLE64(past.data() + 40, 65536);
  EXPECT_THAT(DecodeFileExtent(past, 257, 0), StatusIs(absl::StatusCode::kDataLoss));

  // Preallocated (fallocate): the regular layout, kind 2, crc 0.
  FileExtent pre = reg;
  pre.kind = kExtentPrealloc;
  pre.crc = 0;
  std::string penc = EncodeFileExtent(pre);
  ASSERT_EQ(penc.size(), kFileExtentRegularSize);
  EXPECT_EQ(static_cast<uint8_t>(penc[8]), 2);
  ASSERT_OK_AND_ASSIGN(FileExtent pgot, DecodeFileExtent(penc, 257, 4096));
  EXPECT_EQ(pgot.kind, kExtentPrealloc);
  EXPECT_TRUE(pgot.on_disk());
  EXPECT_EQ(pgot.offset, 4096u);
  EXPECT_EQ(pgot.length(), 8192u);
  Mangle(penc, [](absl::string_view v) { return DecodeFileExtent(v, 257, 4096).status(); });
  // A checksum on data never written, a short item, an unknown kind.
  std::string summed = penc;
  summed[48] = 1;
  EXPECT_THAT(DecodeFileExtent(summed, 257, 0), StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(DecodeFileExtent(penc.substr(0, 40), 257, 0), StatusIs(absl::StatusCode::kDataLoss));
  std::string kind3 = penc;
  kind3[8] = 3;
  EXPECT_THAT(DecodeFileExtent(kind3, 257, 0), StatusIs(absl::StatusCode::kDataLoss));
  // The refs layer sees a reference with nothing to verify.
  format::DataRef d;
  ASSERT_TRUE(format::LeafDataRef(EncodeFsKey({257, kExtentData, 4096}), penc, &d));
  EXPECT_EQ(d.bytenr, pre.disk_bytenr);
  EXPECT_EQ(d.len, pre.disk_len);
  EXPECT_EQ(d.value_len, 0u);
  EXPECT_EQ(d.crc, 0u);
  EXPECT_FALSE(format::LeafDataRef(EncodeFsKey({257, kExtentData, 4096}), kind3, &d));
}

TEST(FsItems, Xattrs) {
  std::vector<Xattr> xs = {{"user.a", "1"}, {"user.b", ""}};
  std::string enc = EncodeXattrs(xs);
  ASSERT_OK_AND_ASSIGN(std::vector<Xattr> got, DecodeXattrs(enc, 257));
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].value, "1");
  EXPECT_EQ(got[1].value, "");
  Mangle(enc, [](absl::string_view v) { return DecodeXattrs(v, 257).status(); });
}

// Goal: each encoder refuses (crashes on) what its decoder would report as
// DATA_LOSS, so an fs operation's bug stops before the item reaches a tree.
// Method: one bad field per case.
TEST(FsItemsDeathTest, InodeOfAnUnknownType) {
  InodeItem it;
  it.mode = 0060644;
  EXPECT_DEATH(EncodeInodeItem(it), "fmt == 0100000");
}

TEST(FsItemsDeathTest, EmptyListsAreDeletedNotEncoded) {
  EXPECT_DEATH(EncodeInodeRefs({}), "!refs.empty\\(\\)");
  EXPECT_DEATH(EncodeDirEntries({}), "!entries.empty\\(\\)");
  EXPECT_DEATH(EncodeXattrs({}), "!xs.empty\\(\\)");
}

TEST(FsItemsDeathTest, NamesAsTheDecodersWantThem) {
  EXPECT_DEATH(EncodeInodeRefs({{2, std::string(kMaxNameLen + 1, 'n')}}), "kMaxNameLen");
  EXPECT_DEATH(EncodeDirEntries({{300, FileType::kRegular, 4, ""}}), "!e.name.empty\\(\\)");
  EXPECT_DEATH(EncodeDirEntries({{300, static_cast<FileType>(1), 4, "a"}}), "KnownType");
  if (COWKV_DCHECK_IS_ON) {
    EXPECT_DEATH(EncodeInodeRefs({{2, "a/b"}}), "SaneName");
  }
}

TEST(FsItemsDeathTest, FileExtentOutsideItsDataExtent) {
  FileExtent e;
  EXPECT_DEATH(EncodeFileExtent(e), "!e.inline_data.empty\\(\\)");
  e.kind = kExtentRegular;
  e.disk_bytenr = 1 << 20;
  e.disk_len = 65536;
  e.offset = 4096;
  e.num_bytes = 65536;
  EXPECT_DEATH(EncodeFileExtent(e), "e.num_bytes <= e.disk_len - e.offset");
  e.offset = 65536;
  EXPECT_DEATH(EncodeFileExtent(e), "e.offset < e.disk_len");
}

}  // namespace
}  // namespace fs
}  // namespace cowkv
