// Goal: MemDevice is an exact byte array of fixed size with honest counters.
// Method: round-trip writes at edges and overlaps, probe every out-of-range
// shape (including offset + n overflow), and check Snapshot/Restore and the
// write/flush counters directly.
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "cowkv/device.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

TEST(MemDevice, StartsZeroedAndRoundTrips) {
  MemDevice dev(8192);
  EXPECT_EQ(dev.Size(), 8192u);
  std::string buf(8192, 'x');
  ASSERT_TRUE(dev.ReadAt(0, &buf[0], buf.size()).ok());
  EXPECT_EQ(buf, std::string(8192, '\0'));

  ASSERT_TRUE(dev.WriteAt(100, "hello", 5).ok());
  ASSERT_TRUE(dev.WriteAt(102, "LLO!", 4).ok());  // Overlaps the first write.
  ASSERT_TRUE(dev.WriteAt(8190, "zz", 2).ok());   // Ends exactly at Size().
  char out[7];
  ASSERT_TRUE(dev.ReadAt(99, out, 7).ok());
  EXPECT_EQ(std::string(out, 7), std::string("\0heLLO!", 7));
  ASSERT_TRUE(dev.ReadAt(8190, out, 2).ok());
  EXPECT_EQ(std::string(out, 2), "zz");
}

TEST(MemDevice, OutOfRange) {
  MemDevice dev(4096);
  char buf[16] = {};
  EXPECT_EQ(dev.ReadAt(4090, buf, 7).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev.ReadAt(4097, buf, 0).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev.WriteAt(4096, buf, 1).code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev.WriteAt(UINT64_MAX - 2, buf, 8).code(),
            absl::StatusCode::kOutOfRange);  // offset + n would overflow.
  EXPECT_TRUE(dev.ReadAt(4096, buf, 0).ok());
  EXPECT_EQ(dev.writes(), 0u);  // Refused writes are not counted.
}

TEST(MemDevice, CountersSnapshotRestore) {
  MemDevice dev(1024);
  ASSERT_TRUE(dev.WriteAt(0, "a", 1).ok());
  ASSERT_TRUE(dev.WriteAt(1, "b", 1).ok());
  ASSERT_TRUE(dev.Flush().ok());
  EXPECT_EQ(dev.writes(), 2u);
  EXPECT_EQ(dev.flushes(), 1u);

  std::string snap = dev.Snapshot();
  ASSERT_EQ(snap.size(), 1024u);
  EXPECT_EQ(snap.substr(0, 2), "ab");
  ASSERT_TRUE(dev.WriteAt(0, "XY", 2).ok());
  dev.Restore(snap);
  EXPECT_EQ(dev.Snapshot(), snap);
}

TEST(MemDevice, ConcurrentDisjointWrites) {
  MemDevice dev(64 * 1024);
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&dev, t] {
      std::string data(8 * 1024, static_cast<char>('a' + t));
      for (int i = 0; i < 50; ++i) {
        EXPECT_TRUE(dev.WriteAt(t * data.size(), data.data(), data.size()).ok());
      }
    });
  }
  for (std::thread& th : threads) th.join();
  std::string image = dev.Snapshot();
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(image.substr(t * 8192, 8192),
              std::string(8192, static_cast<char>('a' + t)));
  }
  EXPECT_EQ(dev.writes(), 400u);
}

}  // namespace
}  // namespace cowkv
