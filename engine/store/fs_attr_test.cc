// setattr through the Store facade: each field, ctime, the set-ID rules of
// chown, sizes through truncate, errors, read-only snapshots, and the
// change surviving a power cut after an fsync (a log sync, no commit).
// `check` after every test (StoreTest).
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;

class FsAttrTest : public testing::StoreTest {
 protected:
  FsAttrTest() : StoreTest(64ull << 20) {}
  void OnOpen() override {
    ASSERT_OK_AND_ASSIGN(auto sv, store_->DefaultSubvolume());
    files_ = std::make_unique<Files>(sv->files());
  }
  void OnClose() override { files_.reset(); }
  Files& f() { return *files_; }
  uint64_t Ino(absl::string_view path) {
    absl::StatusOr<uint64_t> i = f().Lookup(path);
    EXPECT_TRUE(i.ok()) << path << ": " << i.status();
    return i.ok() ? *i : 0;
  }
  std::unique_ptr<Files> files_;
};

TEST_F(FsAttrTest, EachFieldAndCtime) {
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/f", 0644));
  SetAttrSpec none;
  ASSERT_OK_AND_ASSIGN(FileStat same, f().SetAttr(made.ino, none));
  EXPECT_EQ(same.ctime_ns, made.ctime_ns) << "an empty spec changes nothing";

  SetAttrSpec chmod;
  chmod.mode = 0600;
  ASSERT_OK_AND_ASSIGN(FileStat a, f().SetAttr(made.ino, chmod));
  EXPECT_EQ(a.mode, 0600u);
  EXPECT_EQ(a.kind, FileKind::kRegular);
  EXPECT_GE(a.ctime_ns, made.ctime_ns);
  EXPECT_EQ(a.mtime_ns, made.mtime_ns) << "chmod leaves mtime";

  SetAttrSpec chown;
  chown.uid = 1000;
  chown.gid = 100;
  ASSERT_OK_AND_ASSIGN(FileStat b, f().SetAttr(made.ino, chown));
  EXPECT_EQ(b.uid, 1000u);
  EXPECT_EQ(b.gid, 100u);
  EXPECT_EQ(b.mode, 0600u);
  EXPECT_GE(b.ctime_ns, a.ctime_ns);

  SetAttrSpec times;
  times.atime = AttrTime::At(1'000'000'007);
  times.mtime = AttrTime::At(-5);  // before the epoch: allowed, as utimensat
  ASSERT_OK_AND_ASSIGN(FileStat c, f().SetAttr(made.ino, times));
  EXPECT_EQ(c.atime_ns, 1'000'000'007);
  EXPECT_EQ(c.mtime_ns, -5);
  EXPECT_GE(c.ctime_ns, b.ctime_ns);

  SetAttrSpec now;
  now.mtime = AttrTime::Now();
  ASSERT_OK_AND_ASSIGN(FileStat d, f().SetAttr(made.ino, now));
  EXPECT_GE(d.mtime_ns, c.ctime_ns);
  EXPECT_EQ(d.atime_ns, 1'000'000'007) << "atime not named: kept";

  // Stat agrees with what SetAttr returned, also after a commit and reopen.
  ASSERT_OK(store_->Commit());
  Reopen();
  ASSERT_OK_AND_ASSIGN(FileStat e, f().Stat("/f"));
  EXPECT_EQ(e.mode, 0600u);
  EXPECT_EQ(e.uid, 1000u);
  EXPECT_EQ(e.gid, 100u);
  EXPECT_EQ(e.atime_ns, 1'000'000'007);
  EXPECT_EQ(e.mtime_ns, d.mtime_ns);
  EXPECT_EQ(e.ctime_ns, d.ctime_ns);
}

TEST_F(FsAttrTest, DirectoriesSymlinksAndTheRoot) {
  ASSERT_OK(f().Mkdir("/d").status());
  ASSERT_OK(f().Symlink("target", "/l").status());
  SetAttrSpec s;
  s.mode = 0700;
  s.uid = 7;
  ASSERT_OK_AND_ASSIGN(FileStat d, f().SetAttr(Ino("/d"), s));
  EXPECT_EQ(d.kind, FileKind::kDirectory);
  EXPECT_EQ(d.mode, 0700u);
  ASSERT_OK_AND_ASSIGN(FileStat root, f().SetAttr(kRootInode, s));
  EXPECT_EQ(root.mode, 0700u);
  EXPECT_EQ(root.uid, 7u);
  SetAttrSpec own;
  own.uid = 3;
  ASSERT_OK_AND_ASSIGN(FileStat l, f().SetAttr(Ino("/l"), own));
  EXPECT_EQ(l.kind, FileKind::kSymlink);
  EXPECT_EQ(l.uid, 3u);
  EXPECT_EQ(*f().ReadLink("/l"), "target");
}

TEST_F(FsAttrTest, ChownClearsSetIdBitsOfFilesUnlessTheModeIsSet) {
  ASSERT_OK_AND_ASSIGN(FileStat x, f().Create("/x", 06755));
  ASSERT_OK_AND_ASSIGN(FileStat y, f().Create("/y", 06745));  // setgid without group exec
  ASSERT_OK(f().Mkdir("/d", 02755).status());
  SetAttrSpec chown;
  chown.gid = 5;
  EXPECT_EQ(f().SetAttr(x.ino, chown)->mode, 0755u);
  EXPECT_EQ(f().SetAttr(y.ino, chown)->mode, 02745u) << "setgid without group exec stays";
  EXPECT_EQ(f().SetAttr(Ino("/d"), chown)->mode, 02755u) << "directories keep setgid";
  SetAttrSpec both;
  both.uid = 9;
  both.mode = 04711;
  EXPECT_EQ(f().SetAttr(x.ino, both)->mode, 04711u) << "an explicit mode wins";
}

TEST_F(FsAttrTest, SizeGoesThroughTruncate) {
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/f"));
  ASSERT_OK(f().Write(made.ino, 0, std::string(10000, 'x')));
  SetAttrSpec s;
  s.size = 100;
  s.mode = 0640;
  ASSERT_OK_AND_ASSIGN(FileStat a, f().SetAttr(made.ino, s));
  EXPECT_EQ(a.size, 100u);
  EXPECT_EQ(a.mode, 0640u);
  EXPECT_EQ(*f().Read(made.ino, 0, 1 << 20), std::string(100, 'x'));
  SetAttrSpec grow;
  grow.size = 5000;
  ASSERT_OK_AND_ASSIGN(FileStat b, f().SetAttr(made.ino, grow));
  EXPECT_EQ(b.size, 5000u);
  EXPECT_EQ(*f().Read(made.ino, 100, 10), std::string(10, '\0'));
  // Not a regular file: as truncate.
  ASSERT_OK(f().Mkdir("/d").status());
  SetAttrSpec dsize;
  dsize.size = 0;
  EXPECT_TRUE(absl::StartsWith(f().SetAttr(Ino("/d"), dsize).status().message(), "EISDIR"));
  SetAttrSpec huge;
  huge.size = 1ull << 62;
  absl::Status efbig = f().SetAttr(made.ino, huge).status();
  EXPECT_EQ(efbig.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(efbig.message(), "EFBIG")) << efbig;
}

TEST_F(FsAttrTest, Errors) {
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/f"));
  SetAttrSpec bad;
  bad.mode = 010644;
  absl::Status s = f().SetAttr(made.ino, bad).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  EXPECT_EQ(f().StatInode(made.ino)->mode, 0644u) << "a refused call changes nothing";
  SetAttrSpec ok;
  ok.mode = 0600;
  absl::Status gone = f().SetAttr(999999, ok).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(gone.message(), "ENOENT")) << gone;
}

TEST_F(FsAttrTest, ReadOnlySnapshotIsEROFS) {
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/f"));
  ASSERT_OK(store_->CreateSnapshot("default", "snap", true).status());
  ASSERT_OK_AND_ASSIGN(auto snap, store_->OpenSubvolume("snap"));
  SetAttrSpec s;
  s.mode = 0600;
  absl::Status rofs = snap->files().SetAttr(made.ino, s).status();
  EXPECT_EQ(rofs.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StartsWith(rofs.message(), "EROFS")) << rofs;
  EXPECT_EQ(snap->files().StatInode(made.ino)->mode, 0644u);
}

// chmod/chown/utimes after a file's fsync, then fsync again: one log sync
// (no commit), and the attributes survive a power cut.
TEST_F(FsAttrTest, FsyncLogsTheChange) {
  ASSERT_OK(f().Create("/warm").status());
  ASSERT_OK(f().Create("/f").status());
  ASSERT_OK(store_->Commit());
  CloseStore();
  FaultDevice fd(&dev_);
  Reopen(testing::TestOptions(), &fd);
  const uint64_t ino = Ino("/f");
  ASSERT_OK(f().Fsync(Ino("/warm")));
  ASSERT_OK(f().Write(ino, 0, "data"));
  ASSERT_OK(f().Fsync(ino));
  SetAttrSpec s;
  s.mode = 0604;
  s.uid = 42;
  s.gid = 43;
  s.mtime = AttrTime::At(123456789);
  ASSERT_OK(f().SetAttr(ino, s).status());
  const uint64_t commits = store_->Stats().commits;
  const uint64_t flushes = fd.flushes();
  ASSERT_OK(f().Fsync(ino));
  EXPECT_EQ(fd.flushes() - flushes, 1u) << "one log sync";
  EXPECT_EQ(store_->Stats().commits, commits);
  fd.CrashAtFlush(1);
  (void)store_->Close();
  store_.reset();
  fd.PowerLoss(FaultDevice::LossMode::kDropAll, 1);
  Reopen(testing::TestOptions(), &fd);
  ASSERT_OK_AND_ASSIGN(FileStat st, f().Stat("/f"));
  EXPECT_EQ(st.mode, 0604u);
  EXPECT_EQ(st.uid, 42u);
  EXPECT_EQ(st.gid, 43u);
  EXPECT_EQ(st.mtime_ns, 123456789);
  EXPECT_EQ(*f().Read(ino, 0, 10), "data");
  ASSERT_OK(store_->Close());
  store_.reset();
  ExpectCheckClean(&fd);
  Reopen();
}

// ---- Extended attributes -------------------------------------------------------

TEST_F(FsAttrTest, XattrCreateAndReplaceFlags) {
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/x"));
  const uint64_t ino = made.ino;
  absl::Status s = f().SetXattr(ino, "user.a", "1", kXattrReplace);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(s.message(), "ENODATA")) << s;
  ASSERT_OK(f().SetXattr(ino, "user.a", "1", kXattrCreate));
  s = f().SetXattr(ino, "user.a", "2", kXattrCreate);
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(absl::StartsWith(s.message(), "EEXIST")) << s;
  EXPECT_EQ(*f().GetXattr(ino, "user.a"), "1") << "a refused create changes nothing";
  ASSERT_OK(f().SetXattr(ino, "user.a", "3", kXattrReplace));
  EXPECT_EQ(*f().GetXattr(ino, "user.a"), "3");
  s = f().SetXattr(ino, "user.a", "4", kXattrCreate | kXattrReplace);
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  s = f().SetXattr(ino, "user.a", "4", 4);
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  s = f().RemoveXattr(ino, "user.none");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(absl::StartsWith(s.message(), "ENODATA")) << s;
}

TEST_F(FsAttrTest, XattrLimits) {
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/x"));
  const uint64_t ino = made.ino;
  ASSERT_OK(f().SetXattr(ino, std::string(255, 'n'), "v"));
  absl::Status s = f().SetXattr(ino, std::string(256, 'n'), "v");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "ENAMETOOLONG")) << s;
  s = f().SetXattr(ino, "", "v");
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  s = f().SetXattr(ino, std::string("a\0b", 3), "v");
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  s = f().SetXattr(ino, "user.big", std::string(kMaxXattrValue + 1, 'v'));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "ERANGE")) << s;
  // This fixture's nodes are 4 KiB: the largest value is what fits an item
  // there (~1 KiB), less than kMaxXattrValue; past it ERANGE too.
  s = f().SetXattr(ino, "user.big", std::string(kMaxXattrValue, 'v'));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "ERANGE")) << s;
  size_t lo = 0, hi = kMaxXattrValue;  // the largest value that fits
  while (lo + 1 < hi) {
    const size_t mid = (lo + hi) / 2;
    (f().SetXattr(ino, "user.big", std::string(mid, 'v')).ok() ? lo : hi) = mid;
  }
  EXPECT_GT(lo, 800u);  // ~960 bytes less the name and the item's header
  EXPECT_LT(lo, kMaxXattrValue);
  ASSERT_OK(f().SetXattr(ino, "user.big", std::string(lo, 'w')));
  EXPECT_EQ(f().GetXattr(ino, "user.big")->size(), lo);
}

// Changes, replacements and removals of xattrs after the file's first
// fsync, then fsync again: one log sync, and a power cut shows exactly the
// second fsync's xattrs.
TEST_F(FsAttrTest, FsyncLogsXattrChangesAndRemovals) {
  ASSERT_OK(f().Create("/warm").status());
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/f"));
  const uint64_t ino = made.ino;
  ASSERT_OK(f().SetXattr(ino, "user.keep", "k"));
  ASSERT_OK(f().SetXattr(ino, "user.gone", "g"));
  ASSERT_OK(f().SetXattr(ino, "user.swap", "old"));
  ASSERT_OK(store_->Commit());
  CloseStore();
  FaultDevice fd(&dev_);
  Reopen(testing::TestOptions(), &fd);
  ASSERT_OK(f().Fsync(Ino("/warm")));
  ASSERT_OK(f().SetXattr(ino, "user.new", "n", kXattrCreate));
  ASSERT_OK(f().Fsync(ino));
  ASSERT_OK(f().RemoveXattr(ino, "user.gone"));
  ASSERT_OK(f().RemoveXattr(ino, "user.new"));
  ASSERT_OK(f().SetXattr(ino, "user.swap", "new", kXattrReplace));
  const uint64_t commits = store_->Stats().commits;
  ASSERT_OK(f().Fsync(ino));
  EXPECT_EQ(store_->Stats().commits, commits) << "a log sync";
  ASSERT_OK(f().SetXattr(ino, "user.late", "never synced"));
  fd.CrashAtFlush(1);
  (void)store_->Close();
  store_.reset();
  fd.PowerLoss(FaultDevice::LossMode::kDropAll, 1);
  Reopen(testing::TestOptions(), &fd);
  ASSERT_OK_AND_ASSIGN(std::vector<std::string> names, f().ListXattrs(ino));
  EXPECT_EQ(names, (std::vector<std::string>{"user.keep", "user.swap"}));
  EXPECT_EQ(*f().GetXattr(ino, "user.swap"), "new");
  ASSERT_OK(store_->Close());
  store_.reset();
  ExpectCheckClean(&fd);
  Reopen();
}

// ---- Range writeback -------------------------------------------------------------

TEST_F(FsAttrTest, FsyncRangeValidatesAndPersistsTheRange) {
  ASSERT_OK(f().Create("/warm").status());
  ASSERT_OK_AND_ASSIGN(FileStat made, f().Create("/f"));
  const uint64_t ino = made.ino;
  absl::Status s = f().FsyncRange(ino, 1ull << 63, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  s = f().FsyncRange(ino, 10, (1ull << 63) - 5);
  EXPECT_TRUE(absl::StartsWith(s.message(), "EINVAL")) << s;
  s = f().FsyncRange(999999, 0, 10);
  EXPECT_TRUE(absl::StartsWith(s.message(), "ENOENT")) << s;
  ASSERT_OK(store_->Commit());
  CloseStore();
  FaultDevice fd(&dev_);
  Reopen(testing::TestOptions(), &fd);
  ASSERT_OK(f().Fsync(Ino("/warm")));
  const std::string data(20000, 'r');
  ASSERT_OK(f().Write(ino, 0, data));
  const uint64_t commits = store_->Stats().commits;
  const uint64_t flushes = fd.flushes();
  ASSERT_OK(f().FsyncRange(ino, 4096, 4096, /*datasync=*/true));
  EXPECT_EQ(fd.flushes() - flushes, 1u) << "one log sync";
  EXPECT_EQ(store_->Stats().commits, commits);
  fd.CrashAtFlush(1);
  (void)store_->Close();
  store_.reset();
  fd.PowerLoss(FaultDevice::LossMode::kDropAll, 1);
  Reopen(testing::TestOptions(), &fd);
  // At least [4096, 8192); today the whole file (docs/api.md).
  ASSERT_OK_AND_ASSIGN(std::string got, f().Read(ino, 4096, 4096));
  EXPECT_EQ(got, data.substr(4096, 4096));
  EXPECT_EQ(f().StatInode(ino)->size, data.size());
  ASSERT_OK(store_->Close());
  store_.reset();
  ExpectCheckClean(&fd);
  Reopen();
}

}  // namespace
}  // namespace cowkv
