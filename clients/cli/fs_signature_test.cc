// Goal: DetectFsSignature recognises cowkv and the foreign filesystems mkfs
// must not overwrite, finds nothing on blank or small devices, and reports a
// failed read instead of calling the device blank.
// Method: magic bytes planted in an in-memory device; cowkv via Store::Mkfs.
#include "clients/cli/fs_signature.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/store.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace cli {
namespace {

// A BlockDevice over a std::string; reads can be made to fail.
class StringDevice : public BlockDevice {
 public:
  explicit StringDevice(uint64_t size) : bytes_(size, '\0') {}
  absl::Status ReadAt(uint64_t offset, void* buf, size_t n) override {
    if (fail_reads_) return absl::InternalError("injected read error");
    if (offset + n > bytes_.size()) return absl::OutOfRangeError("past end");
    std::memcpy(buf, bytes_.data() + offset, n);
    return absl::OkStatus();
  }
  absl::Status WriteAt(uint64_t offset, const void* buf, size_t n) override {
    if (offset + n > bytes_.size()) return absl::OutOfRangeError("past end");
    std::memcpy(bytes_.data() + offset, buf, n);
    return absl::OkStatus();
  }
  absl::Status Flush() override { return absl::OkStatus(); }
  uint64_t Size() const override { return bytes_.size(); }

  void Plant(uint64_t offset, absl::string_view b) {
    bytes_.replace(offset, b.size(), b.data(), b.size());
  }
  void set_fail_reads(bool f) { fail_reads_ = f; }

 private:
  std::string bytes_;
  bool fail_reads_ = false;
};

constexpr uint64_t kMiB = 1 << 20;

std::string Detect(BlockDevice* dev) {
  absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(dev);
  EXPECT_TRUE(sig.ok()) << sig.status();
  if (!sig.ok() || !sig->has_value()) return "";
  return (*sig)->type;
}

TEST(FsSignature, BlankAndTinyDevicesHaveNone) {
  StringDevice blank(4 * kMiB);
  EXPECT_EQ(Detect(&blank), "");
  StringDevice tiny(100);  // every probe lies past the end
  EXPECT_EQ(Detect(&tiny), "");
}

TEST(FsSignature, Cowkv) {
  StringDevice dev(32 * kMiB);
  ASSERT_TRUE(Store::Mkfs(&dev, MkfsOptions()).ok());
  absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(&dev);
  ASSERT_TRUE(sig.ok());
  ASSERT_TRUE(sig->has_value());
  EXPECT_EQ((*sig)->type, "cowkv");
}

TEST(FsSignature, ExtFlavoursFromFeatureFlags) {
  StringDevice dev(4 * kMiB);
  dev.Plant(1080, "\x53\xEF");
  absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(&dev);
  ASSERT_TRUE(sig.ok() && sig->has_value());
  EXPECT_EQ((*sig)->type, "ext2");
  EXPECT_EQ((*sig)->offset, 1080u);
  dev.Plant(1024 + 0x5C, std::string("\x04\0\0\0", 4));  // has_journal
  EXPECT_EQ(Detect(&dev), "ext3");
  dev.Plant(1024 + 0x60, std::string("\x42\0\0\0", 4));  // filetype|extents
  EXPECT_EQ(Detect(&dev), "ext4");
}

TEST(FsSignature, ByteSwappedExtMagicIsNotExt) {
  StringDevice dev(4 * kMiB);
  dev.Plant(1080, "\xEF\x53");
  EXPECT_EQ(Detect(&dev), "");
}

struct Planted {
  uint64_t offset;
  std::string magic;
  std::string type;
};

TEST(FsSignature, ForeignMagics) {
  const Planted cases[] = {
      {65536 + 64, "_BHRfS_M", "btrfs"},
      {0, "XFSB", "xfs"},
      {4086, "SWAPSPACE2", "swap"},
      {65526, "SWAPSPACE2", "swap"},
      {0, "LUKS\xba\xbe", "crypto_LUKS"},
      {3, "NTFS    ", "ntfs"},
      {32769, "CD001", "iso9660"},
      {512, "EFI PART", "gpt partition table"},
      {510, "\x55\xAA", "dos partition table"},
  };
  for (const Planted& p : cases) {
    StringDevice dev(4 * kMiB);
    dev.Plant(p.offset, p.magic);
    absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(&dev);
    ASSERT_TRUE(sig.ok()) << p.type;
    ASSERT_TRUE(sig->has_value()) << p.type;
    EXPECT_EQ((*sig)->type, p.type);
    EXPECT_EQ((*sig)->offset, p.offset) << p.type;
  }
}

TEST(FsSignature, FatBootSector) {
  StringDevice dev(4 * kMiB);
  dev.Plant(510, "\x55\xAA");
  dev.Plant(82, "FAT32   ");
  EXPECT_EQ(Detect(&dev), "vfat");
}

TEST(FsSignature, MagicPastTheEndIsIgnored) {
  StringDevice dev(65536 + 64 + 4);  // btrfs magic would straddle the end
  dev.Plant(65536 + 64, "_BHR");
  EXPECT_EQ(Detect(&dev), "");
}

TEST(FsSignature, ReadErrorIsAnErrorNotBlank) {
  StringDevice dev(4 * kMiB);
  dev.set_fail_reads(true);
  absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(&dev);
  EXPECT_FALSE(sig.ok());
}

}  // namespace
}  // namespace cli
}  // namespace cowkv
