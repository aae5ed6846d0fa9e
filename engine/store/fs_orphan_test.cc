// Open handles, orphans and O_TMPFILE (engine/fs/fs_open.cc): an inode
// whose last name goes while a handle is open lives on with nlink 0 and an
// ORPHAN_ITEM, reachable by inode for data and fsync, until its last Close
// deletes it (space freed); a store closed (or crashed) with it open leaves
// the item, and the next mount deletes the inode. The crash side is in
// engine/crash_test (fs_crash_test's Orphan* scenarios, fs_gen_test's
// orphan workloads).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::StatusIs;

class FsOrphanTest : public testing::StoreTest {
 protected:
  FsOrphanTest() : StoreTest(64ull << 20) {}
  void OnOpen() override {
    ASSERT_OK_AND_ASSIGN(auto sv, store_->DefaultSubvolume());
    files_ = std::make_unique<Files>(sv->files());
  }
  void OnClose() override { files_.reset(); }
  Files& f() { return *files_; }
  // Space in use once freed extents are unpinned.
  uint64_t UsedAfterCommit() {
    EXPECT_OK(store_->Commit());
    return store_->Stats().used_bytes;
  }
  bool Gone(uint64_t ino) {
    return f().StatInode(ino).status().code() == absl::StatusCode::kNotFound;
  }
  std::vector<uint64_t> Orphans() {
    absl::StatusOr<std::vector<uint64_t>> o = f().Orphans();
    EXPECT_OK(o.status());
    return o.ok() ? *o : std::vector<uint64_t>{};
  }
  std::unique_ptr<Files> files_;
};

TEST_F(FsOrphanTest, UnlinkWhileOpenKeepsTheInodeUntilLastClose) {
  const uint64_t before = UsedAfterCommit();
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Create("/f"));
  const std::string data(300000, 'q');
  ASSERT_OK(f().Write(st.ino, 0, data));
  ASSERT_OK_AND_ASSIGN(OpenFile h1, f().OpenPath("/f"));
  ASSERT_OK_AND_ASSIGN(OpenFile h2, f().Open(st.ino));
  EXPECT_EQ(h1.ino, st.ino);
  EXPECT_NE(h1.handle, h2.handle);
  ASSERT_OK(f().Unlink("/f"));
  EXPECT_THAT(f().Lookup("/f").status(), StatusIs(absl::StatusCode::kNotFound));
  // Every data call keeps working by inode.
  ASSERT_OK_AND_ASSIGN(FileStat o, f().StatInode(st.ino));
  EXPECT_EQ(o.nlink, 0u);
  EXPECT_EQ(o.size, data.size());
  ASSERT_OK(f().Write(st.ino, 10, "hello"));
  ASSERT_OK_AND_ASSIGN(std::string got, f().Read(st.ino, 8, 9));
  EXPECT_EQ(got, "qqhelloqq");
  ASSERT_OK(f().Truncate(st.ino, 200000));
  ASSERT_OK(f().Fsync(st.ino));
  ASSERT_OK(f().Fsync(st.ino, /*datasync=*/true));
  ASSERT_OK_AND_ASSIGN(std::vector<FiemapExtent> ext, f().Fiemap(st.ino));
  EXPECT_FALSE(ext.empty());
  ASSERT_OK(f().SetXattr(st.ino, "user.k", "v"));
  EXPECT_EQ(Orphans(), std::vector<uint64_t>{st.ino});
  // Committed as an orphan: check accepts nlink 0 with its item.
  ASSERT_OK(store_->Commit());
  ASSERT_OK_AND_ASSIGN(uint64_t handle_ino, f().HandleInode(h2.handle));
  EXPECT_EQ(handle_ino, st.ino);
  ASSERT_OK(f().Close(h1.handle));
  EXPECT_FALSE(Gone(st.ino)) << "another handle is open";
  ASSERT_OK(f().Close(h2.handle));
  EXPECT_TRUE(Gone(st.ino));
  EXPECT_TRUE(Orphans().empty());
  EXPECT_EQ(UsedAfterCommit(), before) << "the orphan's extents were not freed";
  EXPECT_THAT(f().Close(h2.handle), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(absl::StartsWith(f().Close(h2.handle).message(), "EBADF"));
}

TEST_F(FsOrphanTest, CloseOfANamedFileDeletesNothing) {
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Create("/f"));
  ASSERT_OK_AND_ASSIGN(OpenFile h, f().Open(st.ino));
  ASSERT_OK(f().Link("/f", "/g"));
  ASSERT_OK(f().Unlink("/f"));  // a name is left: no orphan
  EXPECT_TRUE(Orphans().empty());
  ASSERT_OK(f().Close(h.handle));
  ASSERT_OK_AND_ASSIGN(FileStat g, f().Stat("/g"));
  EXPECT_EQ(g.nlink, 1u);
  // A closed file unlinked later is deleted at once.
  ASSERT_OK(f().Unlink("/g"));
  EXPECT_TRUE(Gone(st.ino));
}

TEST_F(FsOrphanTest, RenameOverAnOpenFileOrphansIt) {
  ASSERT_OK_AND_ASSIGN(FileStat a, f().Create("/a"));
  ASSERT_OK_AND_ASSIGN(FileStat b, f().Create("/b"));
  ASSERT_OK(f().Write(b.ino, 0, "victim"));
  ASSERT_OK_AND_ASSIGN(OpenFile h, f().Open(b.ino));
  ASSERT_OK(f().Rename("/a", "/b"));
  EXPECT_EQ(Orphans(), std::vector<uint64_t>{b.ino});
  ASSERT_OK_AND_ASSIGN(std::string got, f().Read(b.ino, 0, 100));
  EXPECT_EQ(got, "victim");
  ASSERT_OK_AND_ASSIGN(uint64_t now, f().Lookup("/b"));
  EXPECT_EQ(now, a.ino);
  ASSERT_OK(f().Close(h.handle));
  EXPECT_TRUE(Gone(b.ino));
}

TEST_F(FsOrphanTest, DirectoriesAreNotOrphaned) {
  ASSERT_OK_AND_ASSIGN(FileStat d, f().Mkdir("/d"));
  ASSERT_OK_AND_ASSIGN(OpenFile h, f().Open(d.ino));
  ASSERT_OK(f().Rmdir("/d"));  // rmdir of an open directory: out of scope, deleted
  EXPECT_TRUE(Gone(d.ino));
  EXPECT_TRUE(Orphans().empty());
  ASSERT_OK(f().Close(h.handle));
}

TEST_F(FsOrphanTest, StoreClosedWithAnOpenOrphanDeletesItAtMount) {
  const uint64_t before = UsedAfterCommit();
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Create("/f"));
  ASSERT_OK(f().Write(st.ino, 0, std::string(100000, 'z')));
  ASSERT_OK_AND_ASSIGN(OpenFile h, f().Open(st.ino));
  ASSERT_OK(f().Unlink("/f"));
  (void)h;
  Reopen();  // the close commits the orphan; the mount deletes it
  EXPECT_TRUE(Gone(st.ino));
  EXPECT_TRUE(Orphans().empty());
  EXPECT_EQ(UsedAfterCommit(), before);
}

TEST_F(FsOrphanTest, TmpfileLinkedLater) {
  ASSERT_OK_AND_ASSIGN(FileStat d, f().Mkdir("/d"));
  ASSERT_OK_AND_ASSIGN(OpenFile t, f().CreateTmpfile(d.ino, 0600));
  ASSERT_OK_AND_ASSIGN(FileStat st, f().StatInode(t.ino));
  EXPECT_EQ(st.nlink, 0u);
  EXPECT_EQ(st.kind, FileKind::kRegular);
  EXPECT_EQ(st.mode, 0600u);
  EXPECT_EQ(Orphans(), std::vector<uint64_t>{t.ino});
  ASSERT_OK(f().Write(t.ino, 0, "tmp data"));
  ASSERT_OK(f().Fsync(t.ino));
  ASSERT_OK_AND_ASSIGN(FileStat linked, f().LinkAt(t.ino, d.ino, "named"));
  EXPECT_EQ(linked.nlink, 1u);
  EXPECT_TRUE(Orphans().empty());
  ASSERT_OK(f().Close(t.handle));
  ASSERT_OK_AND_ASSIGN(uint64_t ino, f().Lookup("/d/named"));
  EXPECT_EQ(ino, t.ino);
  ASSERT_OK_AND_ASSIGN(std::string got, f().Read(ino, 0, 100));
  EXPECT_EQ(got, "tmp data");
  Reopen();
  ASSERT_OK_AND_ASSIGN(std::string again, f().Read(t.ino, 0, 100));
  EXPECT_EQ(again, "tmp data");
}

TEST_F(FsOrphanTest, TmpfileNeverLinkedGoesAtClose) {
  const uint64_t before = UsedAfterCommit();
  ASSERT_OK_AND_ASSIGN(OpenFile t, f().CreateTmpfile(kRootInode));
  ASSERT_OK(f().Write(t.ino, 0, std::string(70000, 't')));
  ASSERT_OK(store_->Commit());
  ASSERT_OK(f().Close(t.handle));
  EXPECT_TRUE(Gone(t.ino));
  EXPECT_EQ(UsedAfterCommit(), before);
}

TEST_F(FsOrphanTest, LinkOfAnUnlinkedNonTmpfileIsENOENT) {
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Create("/f"));
  ASSERT_OK_AND_ASSIGN(OpenFile h, f().Open(st.ino));
  ASSERT_OK(f().Unlink("/f"));
  absl::Status s = f().LinkAt(st.ino, kRootInode, "back").status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_TRUE(absl::StartsWith(s.message(), "ENOENT")) << s;
  ASSERT_OK(f().Close(h.handle));
  // A tmpfile linked once and unlinked again is no longer linkable either.
  ASSERT_OK_AND_ASSIGN(OpenFile t, f().CreateTmpfile(kRootInode));
  ASSERT_OK(f().LinkAt(t.ino, kRootInode, "t").status());
  ASSERT_OK(f().Unlink("/t"));
  EXPECT_THAT(f().LinkAt(t.ino, kRootInode, "t2").status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(f().Close(t.handle));
  EXPECT_TRUE(Gone(t.ino));
}

TEST_F(FsOrphanTest, TmpfileErrors) {
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Create("/f"));
  EXPECT_THAT(f().CreateTmpfile(st.ino).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));  // ENOTDIR
  EXPECT_THAT(f().CreateTmpfile(99999).status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(f().Open(99999).status(), StatusIs(absl::StatusCode::kNotFound));
}

// New inode numbers keep growing past orphans: the orphan items' reserved
// objectid is not an inode number.
TEST_F(FsOrphanTest, InodeNumbersIgnoreOrphanItems) {
  ASSERT_OK_AND_ASSIGN(OpenFile t, f().CreateTmpfile(kRootInode));
  ASSERT_OK(store_->Commit());
  ASSERT_OK_AND_ASSIGN(OpenFile t2, f().CreateTmpfile(kRootInode));
  Reopen();  // both committed as orphans, then deleted by the mount
  ASSERT_OK_AND_ASSIGN(FileStat n, f().Create("/n"));
  EXPECT_GT(n.ino, t.ino);
  EXPECT_LT(n.ino, 1u << 20);
  (void)t2;
}

}  // namespace
}  // namespace cowkv
