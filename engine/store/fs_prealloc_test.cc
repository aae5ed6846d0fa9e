// fallocate through the Store facade: preallocated extents (EXTENT_DATA
// kind 2) read as zeros and show as UNWRITTEN in fiemap; a write converts
// the part it covers (the rest stays preallocated, sharing the data
// extent); KEEP_SIZE past EOF survives fsync and log replay; punch hole and
// zero range; the modes refused; ENOSPC changes nothing; clones and
// snapshots share preallocated extents. `check` after every test.
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + seed * 13 + i / 251) % 26);
  return s;
}

bool Unwritten(const FiemapExtent& e) { return (e.flags & kFiemapExtentUnwritten) != 0; }
bool Shared(const FiemapExtent& e) { return (e.flags & kFiemapExtentShared) != 0; }

class PreallocTest : public testing::StoreTest {
 protected:
  PreallocTest() : StoreTest(128ull << 20) {}
  void OnOpen() override {
    ASSERT_OK_AND_ASSIGN(auto sv, store_->DefaultSubvolume());
    files_ = std::make_unique<Files>(sv->files());
  }
  void OnClose() override { files_.reset(); }
  Files& f() { return *files_; }
  uint64_t Make(absl::string_view path) {
    absl::StatusOr<FileStat> st = f().Create(path);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? st->ino : 0;
  }
  FileStat StatOf(uint64_t ino) {
    absl::StatusOr<FileStat> st = f().StatInode(ino);
    EXPECT_TRUE(st.ok()) << st.status();
    return st.ok() ? *st : FileStat();
  }
  std::string Read(uint64_t ino, uint64_t off, uint64_t len) {
    absl::StatusOr<std::string> d = f().Read(ino, off, len);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : "";
  }
  std::vector<FiemapExtent> Map(uint64_t ino) {
    absl::StatusOr<std::vector<FiemapExtent>> m = f().Fiemap(ino);
    EXPECT_TRUE(m.ok()) << m.status();
    return m.ok() ? *m : std::vector<FiemapExtent>();
  }

  std::unique_ptr<Files> files_;
};

TEST_F(PreallocTest, AllocateLeavesDataAloneAndReadsZeros) {
  const uint64_t ino = Make("/f");
  ASSERT_OK(f().Write(ino, 0, Pattern(10000, 1)));
  const std::vector<FiemapExtent> before = Map(ino);
  ASSERT_EQ(before.size(), 1u);
  ASSERT_OK(f().Fallocate(ino, 0, 0, 300000));
  const FileStat st = StatOf(ino);
  EXPECT_EQ(st.size, 300000u);
  EXPECT_EQ(Read(ino, 0, 300000), Pattern(10000, 1) + std::string(290000, '\0'));
  const std::vector<FiemapExtent> m = Map(ino);
  // The data extent untouched, then 290,000 bytes in extents of at most 128 KiB.
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0].physical, before[0].physical);
  EXPECT_FALSE(Unwritten(m[0]));
  uint64_t at = 10000;
  for (size_t i = 1; i < m.size(); ++i) {
    EXPECT_TRUE(Unwritten(m[i])) << i;
    EXPECT_EQ(m[i].logical, at);
    EXPECT_LE(m[i].length, 128u << 10);
    at += m[i].length;
  }
  EXPECT_EQ(at, 300000u);
  EXPECT_TRUE(m.back().flags & kFiemapExtentLast);
  // Allocating again changes nothing: the range is allocated.
  const uint64_t used = store_->Stats().used_bytes;
  ASSERT_OK(f().Fallocate(ino, 0, 0, 300000));
  EXPECT_EQ(store_->Stats().used_bytes, used);
  ASSERT_EQ(Map(ino).size(), 4u);
  ASSERT_OK(store_->Commit());
}

TEST_F(PreallocTest, StaleDiskBytesAreNeverRead) {
  const uint64_t old = Make("/old");
  ASSERT_OK(f().Write(old, 0, Pattern(1 << 20, 2)));
  ASSERT_OK(store_->Commit());
  ASSERT_OK(f().Unlink("/old"));
  ASSERT_OK(store_->Commit());
  ASSERT_OK(store_->Commit());  // the freed extents are unpinned
  const uint64_t ino = Make("/new");
  ASSERT_OK(f().Fallocate(ino, 0, 0, 1 << 20));
  EXPECT_EQ(Read(ino, 0, 1 << 20), std::string(1 << 20, '\0'));
  ASSERT_OK(store_->Commit());
  EXPECT_EQ(Read(ino, 0, 1 << 20), std::string(1 << 20, '\0'));
}

TEST_F(PreallocTest, WriteConvertsOnlyWhatItCovers) {
  const uint64_t ino = Make("/f");
  ASSERT_OK(f().Fallocate(ino, 0, 0, 100000));
  const std::vector<FiemapExtent> pre = Map(ino);
  ASSERT_EQ(pre.size(), 1u);
  ASSERT_OK(f().Write(ino, 40000, "middle"));
  std::vector<FiemapExtent> m = Map(ino);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(Unwritten(m[0]));
  EXPECT_EQ(m[0].physical, pre[0].physical);
  EXPECT_EQ(m[0].length, 40000u);
  EXPECT_FALSE(Unwritten(m[1]));
  EXPECT_EQ(m[1].logical, 40000u);
  EXPECT_EQ(m[1].length, 6u);
  EXPECT_TRUE(Unwritten(m[2]));
  EXPECT_EQ(m[2].logical, 40006u);
  EXPECT_EQ(m[2].physical, pre[0].physical + 40006);
  // The pieces of one extent in one file are one reference: not shared.
  for (const FiemapExtent& e : m) EXPECT_FALSE(Shared(e)) << e.logical;
  std::string want(100000, '\0');
  want.replace(40000, 6, "middle");
  EXPECT_EQ(Read(ino, 0, 100000), want);
  EXPECT_EQ(StatOf(ino).bytes, 100000u);
  // Overwriting every piece frees the preallocated extent.
  ASSERT_OK(store_->Commit());
  const uint64_t used = store_->Stats().used_bytes;
  ASSERT_OK(f().Write(ino, 0, Pattern(100000, 3)));
  ASSERT_OK(store_->Commit());
  m = Map(ino);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_FALSE(Unwritten(m[0]));
  EXPECT_LE(store_->Stats().used_bytes, used + 4096) << "the old extent and its pieces are gone";
  EXPECT_EQ(Read(ino, 0, 100000), Pattern(100000, 3));
}

TEST_F(PreallocTest, KeepSizePastEofSurvivesFsyncAndReplay) {
  store_.reset();
  FaultDevice fd(&dev_);
  uint64_t ino = 0;
  {
    Reopen(testing::TestOptions(), &fd);
    ino = Make("/f");
    ASSERT_OK(f().Write(ino, 0, Pattern(1000, 4)));  // inline
    ASSERT_OK(store_->Commit());
    ASSERT_OK(f().Fsync(ino));  // starts the log chain
    ASSERT_OK(f().Fallocate(ino, kFallocKeepSize, 0, 64 << 10));
    EXPECT_EQ(StatOf(ino).size, 1000u);
    EXPECT_EQ(StatOf(ino).bytes, 64u << 10);
    EXPECT_EQ(Read(ino, 0, 64 << 10), Pattern(1000, 4));
    const std::vector<FiemapExtent> m = Map(ino);
    ASSERT_EQ(m.size(), 2u);
    EXPECT_FALSE(Unwritten(m[0]));  // the inline bytes, moved to an extent
    EXPECT_TRUE(Unwritten(m[1]));
    EXPECT_EQ(m[1].logical + m[1].length, 64u << 10);
    const uint64_t commits = store_->Stats().commits;
    ASSERT_OK(f().Fsync(ino));
    EXPECT_EQ(store_->Stats().commits, commits) << "a log sync";
    fd.CrashAtFlush(1);
    (void)store_->Close();
    store_.reset();
  }
  fd.PowerLoss(FaultDevice::LossMode::kDropAll, 3);
  Reopen(testing::TestOptions(), &fd);
  EXPECT_EQ(StatOf(ino).size, 1000u);
  EXPECT_EQ(StatOf(ino).bytes, 64u << 10);
  EXPECT_EQ(Read(ino, 0, 64 << 10), Pattern(1000, 4));
  const std::vector<FiemapExtent> m = Map(ino);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_TRUE(Unwritten(m[1]));
  // A write past EOF into the preallocated range converts it and grows the file.
  ASSERT_OK(f().Write(ino, 5000, "x"));
  EXPECT_EQ(StatOf(ino).size, 5001u);
  ASSERT_OK(store_->Close());
  store_.reset();
  ExpectCheckClean(&fd);
  Reopen();
}

TEST_F(PreallocTest, PunchHole) {
  const uint64_t ino = Make("/f");
  const std::string data = Pattern(300000, 5);
  ASSERT_OK(f().Write(ino, 0, data));
  ASSERT_OK(f().Fallocate(ino, kFallocKeepSize, 300000, 50000));
  ASSERT_OK(f().Fallocate(ino, kFallocPunchHole | kFallocKeepSize, 5000, 195000));
  std::string want = data;
  want.replace(5000, 195000, std::string(195000, '\0'));
  EXPECT_EQ(StatOf(ino).size, 300000u);
  EXPECT_EQ(StatOf(ino).bytes, 300000u - 195000u + 50000u);
  EXPECT_EQ(Read(ino, 0, 400000), want);
  for (const FiemapExtent& e : Map(ino)) {
    EXPECT_FALSE(e.logical < 200000 && e.logical + e.length > 5000) << "mapped in the hole";
  }
  // Past EOF: the preallocated extents go too, the size stays.
  ASSERT_OK(f().Fallocate(ino, kFallocPunchHole | kFallocKeepSize, 250000, 1 << 20));
  EXPECT_EQ(StatOf(ino).size, 300000u);
  EXPECT_EQ(StatOf(ino).bytes, 300000u - 195000u - 50000u);
  want.replace(250000, 50000, std::string(50000, '\0'));
  EXPECT_EQ(Read(ino, 0, 400000), want);
  // An inline file: its bytes move to an extent, the hole is exact.
  const uint64_t small = Make("/small");
  ASSERT_OK(f().Write(small, 0, Pattern(100, 6)));
  ASSERT_OK(f().Fallocate(small, kFallocPunchHole | kFallocKeepSize, 10, 20));
  std::string sw = Pattern(100, 6);
  sw.replace(10, 20, std::string(20, '\0'));
  EXPECT_EQ(Read(small, 0, 100), sw);
  EXPECT_EQ(StatOf(small).size, 100u);
  ASSERT_OK(store_->Commit());
}

TEST_F(PreallocTest, ZeroRange) {
  const uint64_t ino = Make("/f");
  const std::string data = Pattern(100000, 7);
  ASSERT_OK(f().Write(ino, 0, data));
  ASSERT_OK(f().Fallocate(ino, kFallocZeroRange, 1000, 50000));
  std::string want = data;
  want.replace(1000, 50000, std::string(50000, '\0'));
  EXPECT_EQ(Read(ino, 0, 100000), want);
  std::vector<FiemapExtent> m = Map(ino);
  ASSERT_EQ(m.size(), 3u);
  EXPECT_TRUE(Unwritten(m[1]));
  EXPECT_EQ(m[1].logical, 1000u);
  EXPECT_EQ(m[1].length, 50000u);
  EXPECT_EQ(StatOf(ino).bytes, 100000u);
  // Past EOF: without KEEP_SIZE the file grows, with it it does not.
  ASSERT_OK(f().Fallocate(ino, kFallocZeroRange | kFallocKeepSize, 90000, 20000));
  EXPECT_EQ(StatOf(ino).size, 100000u);
  want.replace(90000, 10000, std::string(10000, '\0'));
  EXPECT_EQ(Read(ino, 0, 200000), want);
  ASSERT_OK(f().Fallocate(ino, kFallocZeroRange, 95000, 20000));
  EXPECT_EQ(StatOf(ino).size, 115000u);
  EXPECT_EQ(Read(ino, 0, 200000), want + std::string(15000, '\0'));
  EXPECT_EQ(StatOf(ino).bytes, 115000u);
  ASSERT_OK(store_->Commit());
}

TEST_F(PreallocTest, ModesAndErrors) {
  const uint64_t ino = Make("/f");
  ASSERT_OK(f().Mkdir("/d").status());
  for (uint32_t mode : {0x04u, 0x08u, 0x20u, 0x40u, 0x02u}) {
    absl::Status s = f().Fallocate(ino, mode, 0, 4096);
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << mode << " " << s;
    EXPECT_TRUE(absl::StartsWith(s.message(), "EOPNOTSUPP: ")) << s;
    EXPECT_EQ(ReasonOf(s), ErrorReason::kEOPNOTSUPP);
  }
  absl::Status both =
      f().Fallocate(ino, kFallocPunchHole | kFallocZeroRange | kFallocKeepSize, 0, 1);
  EXPECT_EQ(both.code(), absl::StatusCode::kInvalidArgument) << both;
  EXPECT_TRUE(absl::StartsWith(both.message(), "EINVAL: ")) << both;
  EXPECT_EQ(f().Fallocate(ino, 0, 0, 0).code(), absl::StatusCode::kInvalidArgument);
  absl::Status big = f().Fallocate(ino, 0, kMaxFileSize, 1);
  EXPECT_TRUE(absl::StartsWith(big.message(), "EFBIG: ")) << big;
  absl::Status dir = f().Fallocate(*f().Lookup("/d"), 0, 0, 10);
  EXPECT_TRUE(absl::StartsWith(dir.message(), "EISDIR: ")) << dir;
  absl::Status absent = f().Fallocate(9999, 0, 0, 10);
  EXPECT_EQ(absent.code(), absl::StatusCode::kNotFound) << absent;
  EXPECT_EQ(StatOf(ino).size, 0u);
  EXPECT_EQ(StatOf(ino).bytes, 0u);
}

TEST(PreallocFullTest, EnospcChangesNothing) {
  MemDevice dev(24ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
    Files f = sv->files();
    ASSERT_OK_AND_ASSIGN(FileStat st, f.Create("/f"));
    ASSERT_OK(f.Write(st.ino, 0, Pattern(5000, 8)));
    // ENOSPC commits once and retries (space freed in this generation is
    // pinned until it commits): start from a committed state.
    ASSERT_OK(store->Commit());
    const uint64_t used = store->Stats().used_bytes;
    absl::Status full = f.Fallocate(st.ino, 0, 0, 64ull << 20);
    ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
    EXPECT_TRUE(absl::StartsWith(full.message(), "ENOSPC")) << full;
    EXPECT_EQ(store->Stats().used_bytes, used);
    ASSERT_OK_AND_ASSIGN(FileStat after, f.StatInode(st.ino));
    EXPECT_EQ(after.size, 5000u);
    EXPECT_EQ(after.bytes, 5000u);
    EXPECT_EQ(*f.Read(st.ino, 0, 5000), Pattern(5000, 8));
    // A range far past the free space is refused at once, before any
    // extent is allocated (not 8 million allocations of 128 KiB).
    absl::Status huge = f.Fallocate(st.ino, kFallocKeepSize, 0, 1ull << 40);
    ASSERT_EQ(huge.code(), absl::StatusCode::kResourceExhausted) << huge;
    EXPECT_TRUE(absl::StartsWith(huge.message(), "ENOSPC: fallocate needs")) << huge;
    EXPECT_EQ(store->Stats().used_bytes, used);
    // What fits still goes.
    ASSERT_OK(f.Fallocate(st.ino, kFallocKeepSize, 0, 1 << 20));
    ASSERT_OK(store->Close());
  }
  ExpectCheckClean(&dev);
}

TEST_F(PreallocTest, ClonesAndSnapshotsSharePreallocatedExtents) {
  const uint64_t a = Make("/a"), b = Make("/b");
  ASSERT_OK(f().Fallocate(a, 0, 0, 200000));
  const uint64_t used = store_->Stats().used_bytes;
  ASSERT_OK(f().Clone(a, 0, b, 0, 200000));
  EXPECT_LT(store_->Stats().used_bytes - used, 16384u) << "a clone allocates no data";
  const std::vector<FiemapExtent> mb = Map(b);
  ASSERT_EQ(mb.size(), 2u);
  for (const FiemapExtent& e : mb) {
    EXPECT_TRUE(Unwritten(e)) << e.logical;
    EXPECT_TRUE(Shared(e)) << e.logical;
  }
  // A write into the source converts its part only; the clone stays
  // preallocated and reads zeros.
  ASSERT_OK(f().Write(a, 1000, Pattern(5000, 9)));
  EXPECT_EQ(Read(b, 0, 200000), std::string(200000, '\0'));
  for (const FiemapExtent& e : Map(b)) EXPECT_TRUE(Unwritten(e)) << e.logical;
  ASSERT_OK(store_->Commit());
  // A snapshot shares them too; the live tree's write leaves the snapshot's.
  ASSERT_OK(store_->CreateSnapshot("default", "snap", true).status());
  for (const FiemapExtent& e : Map(b)) EXPECT_TRUE(Shared(e)) << e.logical;
  ASSERT_OK(f().Write(b, 150000, "live"));
  ASSERT_OK_AND_ASSIGN(auto snap, store_->OpenSubvolume("snap"));
  Files sf = snap->files();
  EXPECT_EQ(*sf.Read(b, 0, 200000), std::string(200000, '\0'));
  ASSERT_OK_AND_ASSIGN(auto sm, sf.Fiemap(b));
  for (const FiemapExtent& e : sm) EXPECT_TRUE(Unwritten(e)) << e.logical;
  absl::Status rofs = sf.Fallocate(b, 0, 0, 300000);
  EXPECT_TRUE(absl::StartsWith(rofs.message(), "EROFS")) << rofs;
  // Dropping everything frees every piece (check verifies the refcounts).
  ASSERT_OK(f().Unlink("/a"));
  ASSERT_OK(store_->DeleteSubvolume("snap"));
  ASSERT_OK(store_->DropDeletedSubvolumes());
  ASSERT_OK(store_->Commit());
}

}  // namespace
}  // namespace cowkv
