// Goal: FileDevice moves exactly the requested bytes to and from a real file,
// with and without O_DIRECT, and maps every refusal to the documented code.
// Method: files under $TEST_TMPDIR; each result is compared with a std::string
// model of the file. O_DIRECT runs a seeded random mix of unaligned offsets,
// lengths and buffer addresses (some crossing a bounce-chunk boundary), then
// reopens buffered and compares the whole file; concurrent read-modify-writes
// of disjoint bytes in shared blocks must not undo each other.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cowkv/device.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

std::string TestPath(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  ::unlink(path.c_str());
  return path;
}

std::unique_ptr<FileDevice> MustOpen(const std::string& path,
                                     const FileDeviceOptions& options) {
  absl::StatusOr<std::unique_ptr<FileDevice>> dev =
      FileDevice::Open(path, options);
  EXPECT_TRUE(dev.ok()) << dev.status();
  return dev.ok() ? std::move(*dev) : nullptr;
}

// Opens `path` with O_DIRECT, or returns nullptr when the filesystem refuses
// O_DIRECT (the caller then skips).
std::unique_ptr<FileDevice> OpenDirect(const std::string& path, uint64_t size) {
  FileDeviceOptions options;
  options.direct_io = true;
  options.create_size = size;
  absl::StatusOr<std::unique_ptr<FileDevice>> dev =
      FileDevice::Open(path, options);
  if (dev.status().code() == absl::StatusCode::kInvalidArgument) return nullptr;
  EXPECT_TRUE(dev.ok()) << dev.status();
  return dev.ok() ? std::move(*dev) : nullptr;
}

std::string ReadAll(FileDevice* dev) {
  std::string out(dev->Size(), '?');
  EXPECT_TRUE(dev->ReadAt(0, &out[0], out.size()).ok());
  return out;
}

TEST(FileDevice, MissingPathWithoutCreateSizeIsNotFound) {
  std::string path = TestPath("missing");
  EXPECT_EQ(FileDevice::Open(path).status().code(), absl::StatusCode::kNotFound);
  FileDeviceOptions read_only;
  read_only.read_only = true;
  read_only.create_size = 4096;  // A read-only open never creates.
  EXPECT_EQ(FileDevice::Open(path, read_only).status().code(),
            absl::StatusCode::kNotFound);
  struct stat st;
  EXPECT_NE(::stat(path.c_str(), &st), 0);
}

TEST(FileDevice, CreatesSparseFileOfCreateSize) {
  std::string path = TestPath("sparse");
  FileDeviceOptions options;
  options.create_size = 64 << 20;
  std::unique_ptr<FileDevice> dev = MustOpen(path, options);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->Size(), uint64_t{64} << 20);
  EXPECT_FALSE(dev->is_block_device());
  EXPECT_EQ(dev->path(), path);
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), uint64_t{64} << 20);
  EXPECT_LT(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{1} << 20)
      << "file is not sparse";
  std::string head(4096, 'x');
  ASSERT_TRUE(dev->ReadAt(10 << 20, &head[0], head.size()).ok());
  EXPECT_EQ(head, std::string(4096, '\0'));

  // An existing file keeps its size; create_size only applies when absent.
  dev.reset();
  options.create_size = 4096;
  dev = MustOpen(path, options);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->Size(), uint64_t{64} << 20);
}

TEST(FileDevice, RoundTripSurvivesReopen) {
  std::string path = TestPath("roundtrip");
  FileDeviceOptions options;
  options.create_size = 10000;  // Not a multiple of any block size.
  std::unique_ptr<FileDevice> dev = MustOpen(path, options);
  ASSERT_NE(dev, nullptr);
  std::string model(10000, '\0');
  auto write = [&](uint64_t offset, const std::string& data) {
    ASSERT_TRUE(dev->WriteAt(offset, data.data(), data.size()).ok());
    model.replace(offset, data.size(), data);
  };
  write(0, "superblock");
  write(4093, std::string(300, 'q'));
  write(4095, "overlap");
  write(9990, "0123456789");  // Ends exactly at Size().
  ASSERT_TRUE(dev->WriteAt(50, "", 0).ok());
  ASSERT_TRUE(dev->Flush().ok());
  EXPECT_EQ(ReadAll(dev.get()), model);

  dev.reset();  // releases the lock before the reopen
  dev = MustOpen(path, {});
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->Size(), 10000u);
  EXPECT_EQ(ReadAll(dev.get()), model);
}

TEST(FileDevice, OutOfRange) {
  std::string path = TestPath("range");
  FileDeviceOptions options;
  options.create_size = 8192;
  std::unique_ptr<FileDevice> dev = MustOpen(path, options);
  ASSERT_NE(dev, nullptr);
  char buf[16] = {};
  EXPECT_EQ(dev->ReadAt(8190, buf, 3).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev->ReadAt(8193, buf, 0).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev->WriteAt(8192, buf, 1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev->WriteAt(UINT64_MAX - 1, buf, 4).code(),
            absl::StatusCode::kOutOfRange);
  // A refused write never grows the file.
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 8192);
}

TEST(FileDevice, ReadOnlyRefusesWrites) {
  std::string path = TestPath("readonly");
  FileDeviceOptions options;
  options.create_size = 4096;
  {
    std::unique_ptr<FileDevice> dev = MustOpen(path, options);
    ASSERT_NE(dev, nullptr);
    ASSERT_TRUE(dev->WriteAt(0, "data", 4).ok());
    ASSERT_TRUE(dev->Flush().ok());
  }
  options.read_only = true;
  std::unique_ptr<FileDevice> dev = MustOpen(path, options);
  ASSERT_NE(dev, nullptr);
  EXPECT_EQ(dev->WriteAt(0, "XXXX", 4).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(dev->Flush().ok());
  char buf[4];
  ASSERT_TRUE(dev->ReadAt(0, buf, 4).ok());
  EXPECT_EQ(std::string(buf, 4), "data");
}

TEST(FileDevice, RefusesWhatIsNotAFileOrBlockDevice) {
  const char* dir = std::getenv("TEST_TMPDIR");
  ASSERT_NE(dir, nullptr);
  EXPECT_EQ(FileDevice::Open(dir).status().code(),
            absl::StatusCode::kInvalidArgument);
  FileDeviceOptions read_only;
  read_only.read_only = true;
  EXPECT_EQ(FileDevice::Open("/dev/null", read_only).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FileDevice, DirectIoNeedsAlignedSize) {
  std::string path = TestPath("direct_ragged");
  FileDeviceOptions options;
  options.create_size = 4096 + 512;
  ASSERT_NE(MustOpen(path, options), nullptr);  // Creates it, buffered.
  options.direct_io = true;
  EXPECT_EQ(FileDevice::Open(path, options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FileDevice, DirectIoUnalignedRequests) {
  const uint64_t kSize = 3 << 20;  // Room for requests over the 1 MiB chunk.
  std::string path = TestPath("direct");
  std::unique_ptr<FileDevice> dev = OpenDirect(path, kSize);
  if (dev == nullptr) GTEST_SKIP() << "filesystem refuses O_DIRECT (EINVAL)";
  std::string model(kSize, '\0');
  std::mt19937_64 rng(42);
  // `storage` gives buffers at any address offset from an aligned base.
  std::vector<char> storage((2 << 20) + 8192);
  for (int i = 0; i < 300; ++i) {
    uint64_t n = i % 50 == 0 ? (1 << 20) + 1 + rng() % 4096 : 1 + rng() % 20000;
    uint64_t offset = i % 7 == 0 ? (rng() % (kSize / 4096)) * 4096
                                 : rng() % (kSize - n + 1);
    n = std::min(n, kSize - offset);
    char* buf = storage.data() + rng() % 4096;
    for (uint64_t j = 0; j < n; ++j) buf[j] = static_cast<char>(rng());
    ASSERT_TRUE(dev->WriteAt(offset, buf, n).ok()) << "offset=" << offset;
    model.replace(offset, n, buf, n);

    uint64_t r_off = rng() % kSize;
    uint64_t r_n = std::min<uint64_t>(1 + rng() % 30000, kSize - r_off);
    char* out = storage.data() + rng() % 4096;
    ASSERT_TRUE(dev->ReadAt(r_off, out, r_n).ok());
    ASSERT_EQ(std::string(out, r_n), model.substr(r_off, r_n)) << "i=" << i;
  }
  ASSERT_TRUE(dev->Flush().ok());
  dev.reset();
  dev = MustOpen(path, {});  // Reopen buffered: the file itself is right.
  ASSERT_NE(dev, nullptr);
  EXPECT_TRUE(ReadAll(dev.get()) == model);
}

TEST(FileDevice, DirectIoConcurrentReadModifyWrites) {
  const uint64_t kSize = 64 * 1024;
  std::string path = TestPath("direct_concurrent");
  std::unique_ptr<FileDevice> dev = OpenDirect(path, kSize);
  if (dev == nullptr) GTEST_SKIP() << "filesystem refuses O_DIRECT (EINVAL)";
  // Thread t owns bytes with index % kThreads == t, in runs of 100 bytes, so
  // every 4096-byte block is shared by all threads.
  const int kThreads = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&dev, t] {
      std::string run(100, static_cast<char>('A' + t));
      for (uint64_t off = t * 100; off + 100 <= kSize; off += kThreads * 100) {
        EXPECT_TRUE(dev->WriteAt(off, run.data(), run.size()).ok());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::string image = ReadAll(dev.get());
  for (uint64_t i = 0; i + 100 <= kSize - kSize % (kThreads * 100); ++i) {
    ASSERT_EQ(image[i], static_cast<char>('A' + (i / 100) % kThreads))
        << "byte " << i;
  }
}

// Every open takes the device's lock: exclusive for writers, shared for
// readers; a second opener is refused with FAILED_PRECONDITION, never
// blocked, and the lock goes with the object (flock locks an open file, so
// two opens in one process conflict exactly as two processes do).
TEST(FileDevice, OpensLockTheDevice) {
  const std::string path = TestPath("locked");
  FileDeviceOptions create;
  create.create_size = 1 << 20;
  std::unique_ptr<FileDevice> writer = MustOpen(path, create);
  ASSERT_NE(writer, nullptr);
  FileDeviceOptions read_only;
  read_only.read_only = true;
  absl::Status second = FileDevice::Open(path).status();
  EXPECT_EQ(second.code(), absl::StatusCode::kFailedPrecondition) << second;
  EXPECT_NE(second.message().find("in use"), absl::string_view::npos) << second;
  EXPECT_EQ(FileDevice::Open(path, read_only).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // Without the lock (a caller that holds it on another descriptor).
  FileDeviceOptions unlocked;
  unlocked.lock = false;
  EXPECT_TRUE(FileDevice::Open(path, unlocked).ok());
  writer.reset();
  // Readers share; a writer waits for none of them but is refused.
  std::unique_ptr<FileDevice> r1 = MustOpen(path, read_only);
  std::unique_ptr<FileDevice> r2 = MustOpen(path, read_only);
  EXPECT_EQ(FileDevice::Open(path).status().code(), absl::StatusCode::kFailedPrecondition);
  r1.reset();
  r2.reset();
  EXPECT_TRUE(FileDevice::Open(path).ok());
}

}  // namespace
}  // namespace cowkv
