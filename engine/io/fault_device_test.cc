// Goal: FaultDevice produces exactly the outcomes its fault model lists, and
// replays them from a seed.
// Method: a FaultDevice over a MemDevice. For power loss, compare the image
// after PowerLoss with images computed independently: the last-flushed image
// (kDropAll), the live image (kKeepAll), one of the 2^k subset replays of the
// pending writes in order (kRandomSubset, including overlapping writes), and
// old-or-new per 512-byte sector (kTorn), sweeping seeds until each outcome
// class has been seen. For injected errors, count calls and check that a
// failed call left the media and the pending list alone.
#include "engine/io/fault_device.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "cowkv/device.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

constexpr uint64_t kDeviceBytes = 16 * 1024;

struct Write {
  uint64_t offset;
  std::string data;
};

void MustWrite(BlockDevice* dev, const Write& w) {
  ASSERT_TRUE(dev->WriteAt(w.offset, w.data.data(), w.data.size()).ok());
}

// Fills the base with a recognizable pattern and flushes it through `dev`.
void Prime(FaultDevice* dev) {
  std::string pattern(kDeviceBytes, '\0');
  for (uint64_t i = 0; i < kDeviceBytes; ++i) pattern[i] = 'a' + i % 26;
  MustWrite(dev, {0, pattern});
  ASSERT_TRUE(dev->Flush().ok());
  ASSERT_EQ(dev->pending_writes(), 0u);
}

// The image after applying `writes[i]` for every bit i set in `mask`, in order.
std::string Replay(std::string image, const std::vector<Write>& writes,
                   uint32_t mask) {
  for (size_t i = 0; i < writes.size(); ++i) {
    if (mask & (1u << i)) image.replace(writes[i].offset, writes[i].data.size(),
                                        writes[i].data);
  }
  return image;
}

// Three overlapping writes: the undo must run newest first to get back the
// flushed bytes, and the redo oldest first to keep "later wins".
std::vector<Write> OverlappingWrites() {
  return {{0, std::string(1024, 'A')},
          {512, std::string(1024, 'B')},
          {256, std::string(512, 'C')}};
}

TEST(FaultDevice, DropAllRestoresLastFlushedImage) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  std::string flushed = mem.Snapshot();
  for (const Write& w : OverlappingWrites()) MustWrite(&dev, w);
  EXPECT_EQ(dev.pending_writes(), 3u);
  char c;
  ASSERT_TRUE(dev.ReadAt(600, &c, 1).ok());
  EXPECT_EQ(c, 'C');  // Reads see pending writes, as a page cache would.
  dev.PowerLoss(FaultDevice::LossMode::kDropAll, 1);
  EXPECT_EQ(mem.Snapshot(), flushed);
  EXPECT_EQ(dev.pending_writes(), 0u);
}

TEST(FaultDevice, KeepAllKeepsEveryWrite) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  for (const Write& w : OverlappingWrites()) MustWrite(&dev, w);
  std::string live = mem.Snapshot();
  dev.PowerLoss(FaultDevice::LossMode::kKeepAll, 1);
  EXPECT_EQ(mem.Snapshot(), live);
  EXPECT_EQ(dev.pending_writes(), 0u);
}

TEST(FaultDevice, WritesBeforeACompletedFlushAreNeverLost) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  MustWrite(&dev, {100, "durable"});
  ASSERT_TRUE(dev.Flush().ok());
  EXPECT_EQ(dev.flushes(), 2u);
  MustWrite(&dev, {100, "LOST!!!"});
  dev.PowerLoss(FaultDevice::LossMode::kDropAll, 7);
  EXPECT_EQ(mem.Snapshot().substr(100, 7), "durable");
}

TEST(FaultDevice, RandomSubsetOfOverlappingWritesIsAnOrderedReplay) {
  std::vector<Write> writes = OverlappingWrites();
  std::set<uint32_t> seen_masks;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    MemDevice mem(kDeviceBytes);
    FaultDevice dev(&mem);
    Prime(&dev);
    std::string flushed = mem.Snapshot();
    for (const Write& w : writes) MustWrite(&dev, w);
    dev.PowerLoss(FaultDevice::LossMode::kRandomSubset, seed);
    std::string image = mem.Snapshot();
    bool matched = false;
    for (uint32_t mask = 0; mask < 8; ++mask) {
      if (image == Replay(flushed, writes, mask)) {
        seen_masks.insert(mask);
        matched = true;
        break;  // Distinct masks give distinct images for these writes.
      }
    }
    EXPECT_TRUE(matched) << "seed=" << seed << " is no ordered subset replay";
  }
  EXPECT_EQ(seen_masks.size(), 8u) << "64 seeds should reach every subset";
}

TEST(FaultDevice, TornWritesAreOldOrNewPerSector) {
  // One write over sectors 0..9 that starts and ends mid-sector.
  const Write w{300, std::string(4500, 'N')};
  bool saw_torn = false;
  bool saw_whole = false;
  bool saw_dropped = false;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    MemDevice mem(kDeviceBytes);
    FaultDevice dev(&mem);
    Prime(&dev);
    std::string old_image = mem.Snapshot();
    MustWrite(&dev, w);
    std::string new_image = mem.Snapshot();
    dev.PowerLoss(FaultDevice::LossMode::kTorn, seed);
    std::string image = mem.Snapshot();
    int new_sectors = 0;
    int sectors = 0;
    for (uint64_t s = 0; s < kDeviceBytes; s += 512, ++sectors) {
      std::string got = image.substr(s, 512);
      bool is_new = got == new_image.substr(s, 512);
      ASSERT_TRUE(is_new || got == old_image.substr(s, 512))
          << "seed=" << seed << " sector=" << s / 512 << " is mixed";
      if (is_new && got != old_image.substr(s, 512)) ++new_sectors;
    }
    const int kWriteSectors = 10;  // Sectors 0..9 differ between the images.
    if (new_sectors == 0) saw_dropped = true;
    if (new_sectors == kWriteSectors) saw_whole = true;
    if (new_sectors > 0 && new_sectors < kWriteSectors) saw_torn = true;
  }
  EXPECT_TRUE(saw_torn) << "no seed in 0..63 tore the write";
  EXPECT_TRUE(saw_whole);
  EXPECT_TRUE(saw_dropped);
}

// Runs a fixed workload of many pending writes and returns the image after
// PowerLoss(mode, seed).
std::string CrashImage(FaultDevice::LossMode mode, uint64_t seed) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  for (int i = 0; i < 20; ++i) {
    MustWrite(&dev, {static_cast<uint64_t>(i) * 700 % (kDeviceBytes - 2000),
                     std::string(1500, static_cast<char>('0' + i))});
  }
  dev.PowerLoss(mode, seed);
  return mem.Snapshot();
}

TEST(FaultDevice, SameSeedSameOutcome) {
  for (auto mode : {FaultDevice::LossMode::kRandomSubset,
                    FaultDevice::LossMode::kTorn}) {
    std::set<std::string> outcomes;
    for (uint64_t seed = 0; seed < 8; ++seed) {
      std::string image = CrashImage(mode, seed);
      EXPECT_EQ(image, CrashImage(mode, seed)) << "seed=" << seed;
      outcomes.insert(image);
    }
    EXPECT_GT(outcomes.size(), 1u) << "the seed does not matter";
  }
}

TEST(FaultDevice, TransientFailAfterFailsOnceWithoutTouchingMedia) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  std::string flushed = mem.Snapshot();
  dev.FailAfter(FaultDevice::Op::kWrite, 2, absl::StatusCode::kInternal, false);
  MustWrite(&dev, {0, "one"});
  absl::Status s = dev.WriteAt(10, "two", 3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(mem.Snapshot().substr(10, 3), flushed.substr(10, 3));
  EXPECT_EQ(dev.pending_writes(), 1u);
  MustWrite(&dev, {10, "two"});  // Transient: the next call succeeds.

  dev.FailAfter(FaultDevice::Op::kRead, 1, absl::StatusCode::kInternal, false);
  char buf[3];
  EXPECT_EQ(dev.ReadAt(0, buf, 3).code(), absl::StatusCode::kInternal);
  ASSERT_TRUE(dev.ReadAt(0, buf, 3).ok());
  EXPECT_EQ(std::string(buf, 3), "one");

  dev.FailAfter(FaultDevice::Op::kFlush, 1, absl::StatusCode::kInternal, false);
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(dev.pending_writes(), 2u);  // A failed flush made nothing durable.
  EXPECT_EQ(dev.flushes(), 1u);
  EXPECT_EQ(mem.flushes(), 1u);
  ASSERT_TRUE(dev.Flush().ok());
  EXPECT_EQ(dev.pending_writes(), 0u);
  EXPECT_EQ(dev.flushes(), 2u);
}

TEST(FaultDevice, PersistentFailAfterFailsUntilClearFaults) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  dev.FailAfter(FaultDevice::Op::kWrite, 2, absl::StatusCode::kResourceExhausted,
                true);
  dev.FailAfter(FaultDevice::Op::kRead, 1, absl::StatusCode::kInternal, true);
  dev.FailAfter(FaultDevice::Op::kFlush, 3, absl::StatusCode::kInternal, true);
  MustWrite(&dev, {0, "ok"});
  char buf[2];
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(dev.WriteAt(0, "no", 2).code(),
              absl::StatusCode::kResourceExhausted);
    EXPECT_EQ(dev.ReadAt(0, buf, 2).code(), absl::StatusCode::kInternal);
  }
  EXPECT_TRUE(dev.Flush().ok());
  EXPECT_TRUE(dev.Flush().ok());
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(mem.Snapshot().substr(0, 2), "ok");  // Failed writes did nothing.

  // Persistent faults survive a power loss; only ClearFaults ends them.
  dev.PowerLoss(FaultDevice::LossMode::kKeepAll, 0);
  EXPECT_EQ(dev.ReadAt(0, buf, 2).code(), absl::StatusCode::kInternal);
  dev.ClearFaults();
  MustWrite(&dev, {0, "ye"});
  ASSERT_TRUE(dev.ReadAt(0, buf, 2).ok());
  EXPECT_EQ(std::string(buf, 2), "ye");
  EXPECT_TRUE(dev.Flush().ok());
}

TEST(FaultDevice, CrashAtFlushKillsTheDeviceUntilPowerLoss) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  dev.CrashAtFlush(2);
  MustWrite(&dev, {0, "first"});
  ASSERT_TRUE(dev.Flush().ok());  // Flush 1 of 2 happens.
  std::string durable = mem.Snapshot();
  MustWrite(&dev, {0, "second"});
  EXPECT_FALSE(dev.dead());
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kUnavailable);  // Flush 2.
  EXPECT_TRUE(dev.dead());
  EXPECT_EQ(dev.flushes(), 2u);  // Prime's flush and flush 1.
  EXPECT_EQ(mem.flushes(), 2u);  // The crashed flush never reached the base.
  EXPECT_EQ(dev.pending_writes(), 1u);

  char buf[6];
  EXPECT_EQ(dev.ReadAt(0, buf, 6).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dev.WriteAt(0, "third!", 6).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kUnavailable);
  dev.ClearFaults();  // Does not revive a dead device.
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(dev.pending_writes(), 1u);  // The refused write is not pending.

  dev.PowerLoss(FaultDevice::LossMode::kDropAll, 3);
  EXPECT_FALSE(dev.dead());
  EXPECT_EQ(mem.Snapshot(), durable);
  ASSERT_TRUE(dev.ReadAt(0, buf, 5).ok());
  EXPECT_EQ(std::string(buf, 5), "first");
  MustWrite(&dev, {0, "after!"});
  EXPECT_TRUE(dev.Flush().ok());
}

TEST(FaultDevice, CrashAtFlushWithKeepAllKeepsThePendingWrites) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  Prime(&dev);
  dev.CrashAtFlush(1);
  MustWrite(&dev, {0, "kept"});
  EXPECT_EQ(dev.Flush().code(), absl::StatusCode::kUnavailable);
  dev.PowerLoss(FaultDevice::LossMode::kKeepAll, 0);
  char buf[4];
  ASSERT_TRUE(dev.ReadAt(0, buf, 4).ok());
  EXPECT_EQ(std::string(buf, 4), "kept");
  // The crash was used up: later flushes happen.
  EXPECT_TRUE(dev.Flush().ok());
}

TEST(FaultDevice, OutOfRangeWriteIsRefusedAndNotPending) {
  MemDevice mem(kDeviceBytes);
  FaultDevice dev(&mem);
  EXPECT_EQ(dev.Size(), kDeviceBytes);
  EXPECT_EQ(dev.WriteAt(kDeviceBytes - 1, "xy", 2).code(),
            absl::StatusCode::kOutOfRange);
  EXPECT_EQ(dev.pending_writes(), 0u);
}

}  // namespace
}  // namespace cowkv
