// The file namespace through the Store facade: every operation and its
// POSIX errors, data (inline, extents, holes, overwrite, truncate, clone),
// xattrs, fiemap flags with reflinks and snapshots, fsync through the log
// with power loss, the seed switches. `check` after every test.
#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;
using testing::IsOk;
using testing::StatusIs;

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed * 13 + i / 251) % 26);
  return s;
}

class FsTest : public testing::StoreTest {
 protected:
  FsTest() : StoreTest(128ull << 20) {}
  void OnOpen() override {
    ASSERT_OK_AND_ASSIGN(auto sv, store_->DefaultSubvolume());
    sv_id_ = sv->id();
    files_ = std::make_unique<Files>(sv->files());
  }
  void OnClose() override { files_.reset(); }
  // The fs tests reopen on another device as often as with other options.
  void Reopen(BlockDevice* dev = nullptr, Options o = testing::TestOptions()) {
    StoreTest::Reopen(o, dev);
  }
  Files& f() { return *files_; }
  uint64_t Ino(absl::string_view path) {
    absl::StatusOr<uint64_t> i = f().Lookup(path);
    EXPECT_TRUE(i.ok()) << path << ": " << i.status();
    return i.ok() ? *i : 0;
  }
  std::vector<std::string> Names(absl::string_view dir) {
    std::vector<std::string> out;
    absl::StatusOr<ReadDirResult> r = f().ReadDir(dir);
    EXPECT_TRUE(r.ok()) << r.status();
    if (r.ok()) {
      for (const DirEntryInfo& e : r->entries) out.push_back(e.name);
    }
    return out;
  }
  std::string ReadAll(absl::string_view path) {
    const uint64_t ino = Ino(path);
    absl::StatusOr<FileStat> st = f().StatInode(ino);
    EXPECT_TRUE(st.ok());
    absl::StatusOr<std::string> d = f().Read(ino, 0, st->size);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : "";
  }

  std::unique_ptr<Files> files_;
  uint64_t sv_id_ = 0;
};

using ::testing::ElementsAre;

TEST_F(FsTest, EmptyRootAndBasicNamespace) {
  ASSERT_OK_AND_ASSIGN(FileStat root, f().Stat("/"));
  EXPECT_EQ(root.ino, kRootInode);
  EXPECT_EQ(root.kind, FileKind::kDirectory);
  EXPECT_TRUE(Names("/").empty());
  ASSERT_OK(f().Mkdir("/a").status());
  ASSERT_OK(f().Mkdir("/a/b").status());
  ASSERT_OK_AND_ASSIGN(FileStat file, f().Create("/a/b/file"));
  EXPECT_EQ(file.kind, FileKind::kRegular);
  EXPECT_EQ(file.nlink, 1u);
  EXPECT_EQ(file.mode, 0644u);
  ASSERT_OK(f().Create("a/x").status());  // relative paths start at the root
  EXPECT_THAT(Names("/a"), ElementsAre("b", "x"));
  EXPECT_EQ(Ino("//a///b/file"), file.ino);
  ASSERT_OK_AND_ASSIGN(uint64_t b, f().LookupAt(Ino("/a"), "b"));
  EXPECT_EQ(b, Ino("/a/b"));
  ASSERT_OK(store_->Commit());
  Reopen();
  EXPECT_THAT(Names("/a/b"), ElementsAre("file"));
}

// The *At calls name a place by its directory's inode; they check the
// directory and the name as the path calls check a path.
TEST_F(FsTest, CallsByDirectoryInode) {
  ASSERT_OK_AND_ASSIGN(FileStat d, f().Mkdir("/d"));
  ASSERT_OK_AND_ASSIGN(FileStat file, f().CreateAt(d.ino, "f", 0600));
  EXPECT_EQ(file.mode, 0600u);
  EXPECT_EQ(Ino("/d/f"), file.ino);
  ASSERT_OK_AND_ASSIGN(FileStat sub, f().MkdirAt(d.ino, "sub"));
  ASSERT_OK(f().SymlinkAt("f", sub.ino, "ln").status());
  ASSERT_OK_AND_ASSIGN(std::string target, f().ReadLink("/d/sub/ln"));
  EXPECT_EQ(target, "f");
  ASSERT_OK_AND_ASSIGN(uint64_t ln, f().LookupAt(sub.ino, "ln"));
  ASSERT_OK_AND_ASSIGN(target, f().ReadLinkInode(ln));
  EXPECT_EQ(target, "f");
  EXPECT_THAT(f().ReadLinkInode(file.ino).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(FileStat linked, f().LinkAt(file.ino, kRootInode, "g"));
  EXPECT_EQ(linked.nlink, 2u);
  ASSERT_OK(f().RenameAt(kRootInode, "g", sub.ino, "h"));
  EXPECT_THAT(Names("/d/sub"), ElementsAre("ln", "h"));
  EXPECT_THAT(f().RenameAt(sub.ino, "h", d.ino, "f", kRenameNoReplace),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK(f().RenameAt(sub.ino, "h", d.ino, "f", kRenameExchange));
  ASSERT_OK(f().UnlinkAt(sub.ino, "h"));
  ASSERT_OK(f().UnlinkAt(sub.ino, "ln"));
  ASSERT_OK(f().RmdirAt(d.ino, "sub"));
  EXPECT_THAT(Names("/d"), ElementsAre("f"));
  // The directory must exist and be one; the name must be a valid name.
  absl::Status notdir = f().CreateAt(file.ino, "x").status();
  EXPECT_TRUE(absl::StartsWith(notdir.message(), "ENOTDIR")) << notdir;
  EXPECT_THAT(f().CreateAt(999999, "x").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(f().CreateAt(d.ino, "..").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(f().CreateAt(d.ino, "a/b").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(f().CreateAt(d.ino, "").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  absl::Status longname = f().MkdirAt(d.ino, std::string(256, 'n')).status();
  EXPECT_TRUE(absl::StartsWith(longname.message(), "ENAMETOOLONG")) << longname;
  EXPECT_THAT(f().UnlinkAt(d.ino, "nope"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(f().LinkAt(d.ino, kRootInode, "dirlink"),
              StatusIs(absl::StatusCode::kFailedPrecondition));  // EPERM
  ASSERT_OK(store_->Commit());
  Reopen();
  EXPECT_THAT(Names("/d"), ElementsAre("f"));
}

TEST_F(FsTest, PosixErrors) {
  ASSERT_OK(f().Mkdir("/d").status());
  ASSERT_OK(f().Create("/d/f").status());
  auto code = [](const absl::Status& s) { return s.code(); };
  EXPECT_THAT(f().Create("/d/f").status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(f().Mkdir("/d").status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(f().Stat("/nope").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(f().Create("/nope/x").status(), StatusIs(absl::StatusCode::kNotFound));
  absl::Status notdir = f().Create("/d/f/x").status();
  EXPECT_EQ(code(notdir), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(notdir.message(), "ENOTDIR")) << notdir;
  absl::Status isdir = f().Unlink("/d");
  EXPECT_TRUE(absl::StartsWith(isdir.message(), "EISDIR")) << isdir;
  absl::Status notempty = f().Rmdir("/d");
  EXPECT_TRUE(absl::StartsWith(notempty.message(), "ENOTEMPTY")) << notempty;
  EXPECT_TRUE(absl::StartsWith(f().Rmdir("/d/f").message(), "ENOTDIR"));
  absl::Status longname = f().Create(absl::StrCat("/", std::string(256, 'n'))).status();
  EXPECT_EQ(code(longname), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(longname.message(), "ENAMETOOLONG")) << longname;
  EXPECT_OK(f().Create(absl::StrCat("/", std::string(255, 'n'))).status());
  EXPECT_THAT(f().Create("/d/../x").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(f().Create("/d/./x").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(f().Create(std::string("/a\0b", 4)).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(f().Rmdir("/").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f().Rename("/", "/z").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f().Link("/d", "/dl").status().code(), absl::StatusCode::kFailedPrecondition);
  const uint64_t fi = Ino("/d/f");
  EXPECT_TRUE(absl::StartsWith(f().Write(Ino("/d"), 0, "x").message(), "EISDIR"));
  EXPECT_TRUE(absl::StartsWith(f().Write(fi, 1ull << 50, "x").message(), "EFBIG"));
  EXPECT_THAT(f().Read(12345, 0, 1).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(f().Symlink("", "/s").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  // Nothing changed by any of that.
  EXPECT_THAT(Names("/"), ElementsAre("d", std::string(255, 'n')));
  EXPECT_THAT(Names("/d"), ElementsAre("f"));
}

TEST_F(FsTest, RenameVariants) {
  ASSERT_OK(f().Mkdir("/a").status());
  ASSERT_OK(f().Mkdir("/b").status());
  ASSERT_OK(f().Create("/a/f").status());
  ASSERT_OK(f().Create("/b/g").status());
  const uint64_t fi = Ino("/a/f"), gi = Ino("/b/g");
  // Plain move across directories.
  ASSERT_OK(f().Rename("/a/f", "/b/f2"));
  EXPECT_TRUE(Names("/a").empty());
  EXPECT_EQ(Ino("/b/f2"), fi);
  // No-replace refuses; overwrite replaces (g's inode goes).
  EXPECT_THAT(f().Rename("/b/f2", "/b/g", kRenameNoReplace),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK(f().Rename("/b/f2", "/b/g"));
  EXPECT_EQ(Ino("/b/g"), fi);
  EXPECT_THAT(f().StatInode(gi).status(), StatusIs(absl::StatusCode::kNotFound));
  // Exchange.
  ASSERT_OK(f().Mkdir("/a/sub").status());
  const uint64_t sub = Ino("/a/sub");
  ASSERT_OK(f().Rename("/b/g", "/a/sub", kRenameExchange));
  EXPECT_EQ(Ino("/a/sub"), fi);
  EXPECT_EQ(Ino("/b/g"), sub);
  EXPECT_THAT(f().Rename("/b/g", "/a/none", kRenameExchange),
              StatusIs(absl::StatusCode::kNotFound));
  // Directories: under itself refused; over a non-empty dir refused; over
  // an empty one allowed.
  ASSERT_OK(f().Mkdir("/b/g/deep").status());
  EXPECT_THAT(f().Rename("/b", "/b/g/deep/b").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(f().Rename("/b/g", "/b/g").code(), absl::StatusCode::kOk);
  ASSERT_OK(f().Mkdir("/empty").status());
  ASSERT_OK(f().Rename("/b", "/empty"));
  EXPECT_THAT(Names("/empty"), ElementsAre("g"));
  EXPECT_TRUE(absl::StartsWith(f().Rename("/a", "/empty").message(), "ENOTEMPTY"));
  EXPECT_TRUE(absl::StartsWith(f().Rename("/a/sub", "/empty").message(), "EISDIR"));
  EXPECT_TRUE(absl::StartsWith(f().Rename("/empty", "/a/sub").message(), "ENOTDIR"));
  EXPECT_THAT(f().Rename("/a/sub", "/a/sub", kRenameNoReplace | kRenameExchange).code(),
              absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store_->Commit());
}

TEST_F(FsTest, HardLinksAndUnlink) {
  ASSERT_OK(f().Mkdir("/d").status());
  ASSERT_OK(f().Create("/f").status());
  const uint64_t fi = Ino("/f");
  ASSERT_OK(f().Write(fi, 0, Pattern(10000, 1)));
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Link("/f", "/d/l1"));
  EXPECT_EQ(st.nlink, 2u);
  ASSERT_OK(f().Link("/f", "/d/l2").status());
  EXPECT_THAT(f().Link("/f", "/d/l2").status(), StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_EQ(f().StatInode(fi)->nlink, 3u);
  ASSERT_OK(f().Unlink("/f"));
  EXPECT_EQ(f().StatInode(fi)->nlink, 2u);
  EXPECT_EQ(ReadAll("/d/l2"), Pattern(10000, 1));
  ASSERT_OK(f().Unlink("/d/l1"));
  ASSERT_OK(f().Unlink("/d/l2"));
  EXPECT_THAT(f().StatInode(fi).status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(store_->Commit());
  EXPECT_EQ(store_->Stats().used_bytes, store_->Stats().used_bytes);
}

// An inode's names in one directory: one INODE_REF item while it holds
// them (4 KiB nodes here), extended refs past it, up to kMaxLinks names in
// one directory (btrfs with extended_iref). Names from both kinds of item
// unlink, rename and survive a remount; `check` counts both.
TEST_F(FsTest, AllLinksInOneDirectory) {
  ASSERT_OK(f().Mkdir("/d").status());
  ASSERT_OK(f().Mkdir("/e").status());
  ASSERT_OK(f().Create("/d/f").status());
  const uint64_t fi = Ino("/d/f");
  for (uint32_t i = 1; i < kMaxLinks; ++i) {
    ASSERT_OK(f().Link("/d/f", absl::StrFormat("/d/link-%05d", i)).status()) << i;
  }
  EXPECT_EQ(f().StatInode(fi)->nlink, kMaxLinks);
  absl::Status over = f().Link("/d/f", "/e/over").status();
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(absl::StartsWith(over.message(), "EMLINK")) << over;
  ASSERT_OK(store_->Commit());
  Reopen();
  EXPECT_EQ(f().StatInode(fi)->nlink, kMaxLinks);
  EXPECT_EQ(Names("/d").size(), kMaxLinks);
  // The first names are in the INODE_REF item, the last in extended refs.
  for (const char* name : {"/d/link-00001", "/d/link-65534"}) EXPECT_EQ(Ino(name), fi) << name;
  ASSERT_OK(f().Rename("/d/link-00002", "/d/LINK-00002"));
  ASSERT_OK(f().Rename("/d/link-65534", "/e/moved"));
  for (uint32_t i = 3; i < kMaxLinks; i += 2) {
    ASSERT_OK(f().Unlink(absl::StrFormat("/d/link-%05d", i))) << i;
  }
  ASSERT_OK(f().Link("/d/f", "/d/again").status());
  EXPECT_EQ(Ino("/d/LINK-00002"), fi);
  EXPECT_EQ(Ino("/e/moved"), fi);
  EXPECT_THAT(f().Lookup("/d/link-00003").status(), StatusIs(absl::StatusCode::kNotFound));
  const uint32_t left = kMaxLinks - (kMaxLinks - 3 + 1) / 2 + 1;
  EXPECT_EQ(f().StatInode(fi)->nlink, left);
  ASSERT_OK(store_->Commit());
  Reopen();
  EXPECT_EQ(f().StatInode(fi)->nlink, left);
  EXPECT_EQ(Names("/d").size() + Names("/e").size(), left);
}

// A file has at most kMaxLinks (65,535) names, wherever they are.
TEST_F(FsTest, AFileHasAtMost65535Links) {
  ASSERT_OK(f().Create("/f").status());
  constexpr int kPerDir = 50;  // well inside one INODE_REF item at 4 KiB nodes
  for (int i = 1; i < 65535; ++i) {
    const std::string dir = absl::StrFormat("/d%04d", i / kPerDir);
    if (i % kPerDir == 0 || i == 1) {
      ASSERT_OK(f().Mkdir(dir).status());
    }
    ASSERT_OK(f().Link("/f", absl::StrFormat("%s/%05d", dir, i)).status()) << i;
  }
  EXPECT_EQ(f().StatInode(Ino("/f"))->nlink, 65535u);
  absl::Status over = f().Link("/f", "/over").status();
  EXPECT_THAT(over, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_TRUE(absl::StartsWith(over.message(), "EMLINK")) << over;
  EXPECT_THAT(f().Lookup("/over").status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(f().Unlink("/d0000/00001"));
  ASSERT_OK(f().Link("/f", "/over").status());
  ASSERT_OK(store_->Commit());
}

TEST_F(FsTest, DataInlineExtentsHolesTruncate) {
  ASSERT_OK(f().Create("/f").status());
  const uint64_t ino = Ino("/f");
  ASSERT_OK(f().Write(ino, 0, "hello"));
  ASSERT_OK(f().Write(ino, 10, "world"));  // a small hole, still inline
  EXPECT_EQ(*f().Read(ino, 0, 100), std::string("hello\0\0\0\0\0world", 15));
  ASSERT_OK_AND_ASSIGN(auto fm, f().Fiemap(ino));
  ASSERT_EQ(fm.size(), 1u);
  EXPECT_EQ(fm[0].flags & kFiemapExtentInline, kFiemapExtentInline);
  // Growing past the inline limit moves the bytes into extents.
  std::string model(15, '\0');
  model.replace(0, 5, "hello");
  model.replace(10, 5, "world");
  const std::string big = Pattern(300000, 2);
  ASSERT_OK(f().Write(ino, 5000, big));
  model.resize(5000 + big.size(), '\0');
  model.replace(5000, big.size(), big);
  EXPECT_EQ(ReadAll("/f"), model);
  // Overwrite in the middle of an extent, across extents, unaligned.
  const std::string mid = Pattern(70001, 3);
  ASSERT_OK(f().Write(ino, 100003, mid));
  model.replace(100003, mid.size(), mid);
  EXPECT_EQ(ReadAll("/f"), model);
  EXPECT_EQ(*f().Read(ino, 99990, 30), model.substr(99990, 30));
  // Truncate down into an extent, then up: the tail reads as zeros.
  ASSERT_OK(f().Truncate(ino, 150000));
  model.resize(150000);
  EXPECT_EQ(ReadAll("/f"), model);
  ASSERT_OK(f().Truncate(ino, 400000));
  model.resize(400000, '\0');
  EXPECT_EQ(ReadAll("/f"), model);
  EXPECT_EQ(f().StatInode(ino)->size, 400000u);
  ASSERT_OK(store_->Commit());
  Reopen();
  EXPECT_EQ(ReadAll("/f"), model);
  ASSERT_OK(f().Truncate(ino, 0));
  EXPECT_EQ(f().StatInode(ino)->bytes, 0u);
  EXPECT_TRUE(f().Fiemap(ino)->empty());
}

TEST_F(FsTest, SymlinksAndXattrs) {
  ASSERT_OK(f().Symlink("/some/where", "/ln").status());
  EXPECT_EQ(*f().ReadLink("/ln"), "/some/where");
  EXPECT_EQ(f().Stat("/ln")->kind, FileKind::kSymlink);
  EXPECT_THAT(f().ReadLink("/").status(), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(f().Create("/f").status());
  const uint64_t ino = Ino("/f");
  ASSERT_OK(f().SetXattr(ino, "user.a", "1"));
  absl::Status xs = f().SetXattr(ino, "user.b", std::string(500, 'b'));
  ASSERT_OK(xs) << xs;
  // Bigger than a 4 KiB node holds: refused, and nothing else changes.
  EXPECT_THAT(f().SetXattr(ino, "user.c", std::string(4096, 'c')).code(),
              absl::StatusCode::kInvalidArgument);
  ASSERT_OK(f().SetXattr(ino, "user.a", "2"));
  EXPECT_EQ(*f().GetXattr(ino, "user.a"), "2");
  EXPECT_THAT(*f().ListXattrs(ino), ElementsAre("user.a", "user.b"));
  ASSERT_OK(f().RemoveXattr(ino, "user.a"));
  EXPECT_THAT(f().GetXattr(ino, "user.a").status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(f().Unlink("/f"));  // its xattrs go with it
}

TEST_F(FsTest, ReadDirPagesStably) {
  ASSERT_OK(f().Mkdir("/d").status());
  for (int i = 0; i < 100; ++i) ASSERT_OK(f().Create(absl::StrCat("/d/f", i)).status());
  std::vector<std::string> seen;
  uint64_t cookie = 0;
  for (int round = 0;; ++round) {
    ASSERT_OK_AND_ASSIGN(ReadDirResult r, f().ReadDir("/d", cookie, 7));
    for (const DirEntryInfo& e : r.entries) seen.push_back(e.name);
    // Concurrent changes between pages: removing a seen entry and adding a
    // new one never repeats or loses an entry that stayed.
    if (round == 2) {
      ASSERT_OK(f().Unlink("/d/f0"));
      ASSERT_OK(f().Create("/d/new").status());
    }
    if (!r.more) break;
    cookie = r.next_cookie;
  }
  ASSERT_EQ(seen.size(), 101u);
  EXPECT_EQ(seen.front(), "f0");
  EXPECT_EQ(seen.back(), "new");
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(std::unique(seen.begin(), seen.end()), seen.end());
}

TEST_F(FsTest, CloneSharesExtentsAndFiemapFlagsThem) {
  ASSERT_OK(f().Create("/src").status());
  ASSERT_OK(f().Create("/dst").status());
  const uint64_t src = Ino("/src"), dst = Ino("/dst");
  const std::string data = Pattern(256 << 10, 4);
  ASSERT_OK(f().Write(src, 0, data));
  ASSERT_OK_AND_ASSIGN(auto before, f().Fiemap(src));
  ASSERT_EQ(before.size(), 2u);  // two 128 KiB extents
  for (const FiemapExtent& e : before) EXPECT_EQ(e.flags & kFiemapExtentShared, 0u);
  EXPECT_EQ(before.back().flags & kFiemapExtentLast, kFiemapExtentLast);
  const uint64_t used = store_->Stats().used_bytes;
  ASSERT_OK(f().Clone(src, 4096, dst, 0, 200000));
  EXPECT_LT(store_->Stats().used_bytes - used, 16384u) << "a clone copies no data";
  EXPECT_EQ(ReadAll("/dst"), data.substr(4096, 200000));
  ASSERT_OK_AND_ASSIGN(auto after, f().Fiemap(src));
  for (const FiemapExtent& e : after) {
    EXPECT_EQ(e.flags & kFiemapExtentShared, kFiemapExtentShared) << e.logical;
  }
  ASSERT_OK_AND_ASSIGN(auto d, f().Fiemap(dst));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].physical, before[0].physical + 4096);
  // Overwriting the clone unshares; deleting the source unshares the rest.
  ASSERT_OK(f().Write(dst, 0, Pattern(200000, 5)));
  ASSERT_OK(store_->Commit());
  const auto fm1 = f().Fiemap(src);
  for (const FiemapExtent& e : *fm1) EXPECT_EQ(e.flags & kFiemapExtentShared, 0u);
  // Clone within one file; overlapping ranges refused.
  EXPECT_THAT(f().Clone(src, 0, src, 4096, 8192).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(f().Clone(src, 0, src, 256 << 10, 65536));
  std::string model = data + data.substr(0, 65536);
  EXPECT_EQ(ReadAll("/src"), model);
  // Two (root, inode, offset) references in one file: both SHARED.
  ASSERT_OK_AND_ASSIGN(auto within, f().Fiemap(src));
  ASSERT_GE(within.size(), 2u);
  EXPECT_EQ(within.front().flags & kFiemapExtentShared, kFiemapExtentShared);
  EXPECT_EQ(within.back().flags & kFiemapExtentShared, kFiemapExtentShared);
  // The pieces a write in an extent's middle leaves are one reference.
  ASSERT_OK(f().Create("/pieces").status());
  const uint64_t pieces = Ino("/pieces");
  ASSERT_OK(f().Write(pieces, 0, Pattern(100000, 6)));
  ASSERT_OK(f().Write(pieces, 40000, "middle"));
  ASSERT_OK_AND_ASSIGN(auto pm, f().Fiemap(pieces));
  ASSERT_EQ(pm.size(), 3u);
  for (const FiemapExtent& e : pm) EXPECT_EQ(e.flags & kFiemapExtentShared, 0u) << e.logical;
  EXPECT_THAT(f().Clone(src, 1 << 20, dst, 0, 10).code(), absl::StatusCode::kInvalidArgument);
  ASSERT_OK(store_->Commit());
}

TEST_F(FsTest, FiemapSharedAfterSnapshotAndClearAfterItsDeletion) {
  ASSERT_OK(f().Create("/f").status());
  const uint64_t ino = Ino("/f");
  for (int i = 0; i < 64; ++i) ASSERT_OK(f().Write(ino, i * 8192, Pattern(4096, i)));
  ASSERT_OK(store_->Commit());
  const auto fm2 = f().Fiemap(ino);
  for (const FiemapExtent& e : *fm2) EXPECT_EQ(e.flags & kFiemapExtentShared, 0u);
  ASSERT_OK(store_->CreateSnapshot("default", "snap", true).status());
  ASSERT_OK_AND_ASSIGN(auto shared, f().Fiemap(ino));
  ASSERT_EQ(shared.size(), 64u);
  for (const FiemapExtent& e : shared)
    EXPECT_EQ(e.flags & kFiemapExtentShared, kFiemapExtentShared);
  // The snapshot reads the same; writes to it are refused.
  ASSERT_OK_AND_ASSIGN(auto snap, store_->OpenSubvolume("snap"));
  Files sf = snap->files();
  EXPECT_EQ(*sf.Read(ino, 8192, 4096), Pattern(4096, 1));
  absl::Status rofs = sf.Create("/x").status();
  EXPECT_TRUE(absl::StartsWith(rofs.message(), "EROFS")) << rofs;
  ASSERT_OK(store_->DeleteSubvolume("snap"));
  ASSERT_OK(store_->DropDeletedSubvolumes());
  const auto fm3 = f().Fiemap(ino);
  for (const FiemapExtent& e : *fm3) EXPECT_EQ(e.flags & kFiemapExtentShared, 0u);
}

TEST_F(FsTest, FsyncSurvivesPowerLossWithoutCommit) {
  store_.reset();
  for (auto mode : {FaultDevice::LossMode::kDropAll, FaultDevice::LossMode::kTorn}) {
    FaultDevice fd(&dev_);
    {
      Reopen(&fd);
      // The first sync after mkfs commits (there is no log chain yet).
      if (!f().Lookup("/warm").ok()) {
        ASSERT_OK(f().Create("/warm").status());
      }
      ASSERT_OK(f().Fsync(Ino("/warm")));
      if (f().Lookup("/d").ok()) {
        ASSERT_OK(f().Rename("/d", "/old"));
        ASSERT_OK(store_->Commit());
      }
      const uint64_t commits = store_->Stats().commits;
      ASSERT_OK(f().Mkdir("/d").status());
      ASSERT_OK(f().Create("/d/kept").status());
      ASSERT_OK(f().Write(Ino("/d/kept"), 0, Pattern(50000, 7)));
      ASSERT_OK(f().Create("/d/lost").status());  // never fsynced
      const uint64_t flushes = fd.flushes();
      ASSERT_OK(f().Fsync(Ino("/d/kept")));
      EXPECT_EQ(fd.flushes() - flushes, 1u) << "fsync is one log sync";
      EXPECT_EQ(store_->Stats().commits, commits);
      fd.CrashAtFlush(1);
      (void)store_->Close();
      store_.reset();
    }
    fd.PowerLoss(mode, 3);
    Reopen(&fd);
    EXPECT_THAT(Names("/d"), ElementsAre("kept"));
    EXPECT_EQ(ReadAll("/d/kept"), Pattern(50000, 7));
    ASSERT_OK(store_->Close());
    store_.reset();
    ExpectCheckClean(&fd);
  }
  Reopen();
}

// An fsync whose picture needs a removed or moved name is an engine commit
// (trigger "fsync"); one that only adds names and data is one log sync.
TEST_F(FsTest, FsyncFallsBackToACommitOnlyAfterANameWentAway) {
  ASSERT_OK(f().Mkdir("/a").status());
  ASSERT_OK(f().Mkdir("/b").status());
  ASSERT_OK(f().Create("/a/x").status());
  ASSERT_OK(f().Create("/b/y").status());
  ASSERT_OK(store_->Commit());
  ASSERT_OK(f().Fsync(Ino("/a/x")));  // starts this transaction's log
  struct Case {
    const char* what;
    std::function<absl::Status()> change;
    const char* fsync;
    bool commits;
  };
  const std::vector<Case> cases = {
      {"a new file", [&] { return f().Create("/a/n1").status(); }, "/a/n1", false},
      {"a new link in another directory", [&] { return f().Link("/a/x", "/b/x2").status(); },
       "/a/x", false},
      {"an unrelated directory lost an entry", [&] { return f().Unlink("/b/x2"); }, "/a/n1", false},
      {"the file was renamed", [&] { return f().Rename("/a/n1", "/a/n2"); }, "/a/n2", true},
      {"its directory lost an entry", [&] { return f().Unlink("/a/n2"); }, "/a/x", true},
      {"an ancestor moved", [&] { return f().Rename("/b", "/a/b"); }, "/a/b/y", true},
      {"the directory itself lost an entry", [&] { return f().Unlink("/a/b/y"); }, "/a/b", true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ASSERT_OK(c.change());
    const StoreStats before = store_->Stats();
    ASSERT_OK(f().Fsync(Ino(c.fsync)));
    const StoreStats after = store_->Stats();
    EXPECT_EQ(after.commits_by_fsync - before.commits_by_fsync, c.commits ? 1u : 0u);
    EXPECT_EQ(after.commits - before.commits, c.commits ? 1u : 0u);
    EXPECT_EQ(after.log_syncs - before.log_syncs, c.commits ? 0u : 1u);
  }
}

TEST(FsFullTest, FullDeviceRefusesCleanlyAndStillUnlinks) {
  MemDevice dev(24ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
    Files f = sv->files();
    std::vector<std::string> written;
    absl::Status full;
    for (int i = 0; i < 1000 && full.ok(); ++i) {
      const std::string path = absl::StrCat("/f", i);
      absl::StatusOr<FileStat> st = f.Create(path);
      full = st.status();
      if (full.ok()) full = f.Write(st->ino, 0, Pattern(256 << 10, i));
      if (full.ok()) written.push_back(path);
    }
    ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
    EXPECT_TRUE(absl::StartsWith(full.message(), "ENOSPC")) << full;
    ASSERT_GT(written.size(), 10u);
    // Everything written before is intact; deleting frees space to write again.
    EXPECT_EQ(*f.Read(*f.Lookup(written[3]), 0, 256 << 10), Pattern(256 << 10, 3));
    for (size_t i = 0; i < written.size() / 2; ++i) ASSERT_OK(f.Unlink(written[i]));
    ASSERT_OK(store->Commit());
    ASSERT_OK_AND_ASSIGN(FileStat again, f.Create("/again"));
    ASSERT_OK(f.Write(again.ino, 0, Pattern(256 << 10, 99)));
    ASSERT_OK(store->Close());
  }
  ExpectCheckClean(&dev);
}

TEST_F(FsTest, OptionsSwitchSeedsOff) {
  Options o = testing::TestOptions();
  o.fs_dir_index_offset = false;
  o.fs_precise_logged_check = false;
  o.fiemap_path_cache = false;
  Reopen(nullptr, o);
  ASSERT_OK(f().Mkdir("/d").status());
  for (int i = 0; i < 10; ++i) ASSERT_OK(f().Create(absl::StrCat("/d/f", i)).status());
  ASSERT_OK(f().Fsync(Ino("/d")));
  ASSERT_OK(f().Create("/d/more").status());
  ASSERT_OK(f().Fsync(Ino("/d")));
  ASSERT_OK(f().Rename("/d/f1", "/d/g1"));
  EXPECT_EQ(Names("/d").size(), 11u);
}

}  // namespace
}  // namespace cowkv
