// Goal: allocation never hands out a byte twice, pinned space is held back
// until unpinned, and ranges coalesce.
// Method: a randomized run against a byte-ownership model (a bitmap of 4 KiB
// units), plus direct cases.
#include <algorithm>
#include <random>
#include <vector>

#include "engine/alloc/free_space.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

TEST(FreeSpace, Basics) {
  FreeSpace fs;
  fs.AddFree(1 << 20, 1 << 20);
  EXPECT_EQ(fs.free_bytes(), 1u << 20);
  auto a = fs.Allocate(16384, 16384);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a % 16384, 0u);
  EXPECT_FALSE(fs.IsFree(*a, 16384));
  fs.Pin(*a, 16384);
  EXPECT_FALSE(fs.IsFree(*a, 16384));
  EXPECT_EQ(fs.pinned_bytes(), 16384u);
  fs.Unpin(fs.TakePinned());
  EXPECT_TRUE(fs.IsFree(*a, 16384));
  EXPECT_EQ(fs.free_bytes(), 1u << 20);
  EXPECT_EQ(fs.fragments(), 1u);
  EXPECT_EQ(fs.Allocate(2 << 20, 4096).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(FreeSpace, RandomizedAgainstBitmap) {
  const uint64_t unit = 4096, units = 512;
  FreeSpace fs;
  fs.AddFree(0, unit * units);
  std::vector<int> owner(units, 0);  // 0 free, 1 allocated, 2 pinned
  std::vector<std::pair<uint64_t, uint64_t>> live;
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    int op = rng() % 10;
    if (op < 5) {
      uint64_t n = 1 + rng() % 4;
      auto a = fs.Allocate(n * unit, unit * (1 + rng() % 2));
      if (!a.ok()) continue;
      for (uint64_t u = *a / unit; u < *a / unit + n; ++u) {
        ASSERT_EQ(owner[u], 0) << "unit " << u << " handed out twice";
        owner[u] = 1;
      }
      live.emplace_back(*a, n * unit);
    } else if (op < 9 && !live.empty()) {
      size_t k = rng() % live.size();
      auto [s, l] = live[k];
      live.erase(live.begin() + k);
      bool pin = rng() % 2;
      for (uint64_t u = s / unit; u < (s + l) / unit; ++u) owner[u] = pin ? 2 : 0;
      if (pin) fs.Pin(s, l); else fs.FreeNow(s, l);
    } else {
      fs.Unpin(fs.TakePinned());
      for (auto& o : owner) if (o == 2) o = 0;
    }
    uint64_t free_units = 0;
    for (int o : owner) free_units += o == 0;
    ASSERT_EQ(fs.free_bytes(), free_units * unit);
    // UsableFor and largest() against runs of free units in the model
    // (aligned to the unit, as every range here is).
    uint64_t run = 0, largest = 0, usable4 = 0;
    for (size_t u = 0; u <= owner.size(); ++u) {
      if (u < owner.size() && owner[u] == 0) {
        ++run;
        continue;
      }
      largest = std::max(largest, run * unit);
      usable4 += run / 4 * 4 * unit;
      run = 0;
    }
    ASSERT_EQ(fs.largest(), largest);
    ASSERT_EQ(fs.UsableFor(4 * unit, unit), usable4);
    ASSERT_EQ(fs.UsableFor(unit, unit), fs.free_bytes());
  }
}

// Goal: giving back space that is not allocated, or not on a sector
// boundary, crashes at the call (free_space.h invariants 2-4) instead of
// surfacing a commit later as an extent handed out twice.
// Method: one bad call per case on a store-shaped FreeSpace (4 KiB sectors).
class FreeSpaceDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fs_.AddFree(1 << 20, 1 << 20);
    auto a = fs_.Allocate(16384, 16384);
    ASSERT_TRUE(a.ok());
    a_ = *a;
  }
  FreeSpace fs_{4096};
  uint64_t a_ = 0;
};

TEST_F(FreeSpaceDeathTest, DoubleFree) {
  fs_.FreeNow(a_, 16384);
  EXPECT_DEATH(fs_.FreeNow(a_, 16384), "double free");
  // Pinning a range that is free: handed out again before the commit.
  EXPECT_DEATH(fs_.Pin(a_ + 4096, 4096), "double free");
}

TEST_F(FreeSpaceDeathTest, DoubleFreeThroughPinAndUnpin) {
  fs_.Pin(a_, 16384);
  fs_.Pin(a_, 16384);  // still allocated as far as free space knows
  EXPECT_DEATH(fs_.Unpin(fs_.TakePinned()), "double free");
}

TEST_F(FreeSpaceDeathTest, MisalignedFree) {
  EXPECT_DEATH(fs_.FreeNow(a_ + 512, 4096), "misaligned free \\(start\\)");
  EXPECT_DEATH(fs_.Pin(a_, 1000), "misaligned free \\(length\\)");
  EXPECT_DEATH(fs_.FreeNow(a_, 0), "len > 0");
}

TEST_F(FreeSpaceDeathTest, UnpinWithoutPin) {
  EXPECT_DEATH(fs_.Unpin({{a_, 16384}}), "unpin of a range that was not pinned");
}

TEST_F(FreeSpaceDeathTest, AlignmentIsAPowerOfTwo) {
  EXPECT_DEATH(fs_.Allocate(4096, 3000).IgnoreError(), "align & \\(align - 1\\)");
  EXPECT_DEATH(FreeSpace(1000), "sectorsize & \\(sectorsize - 1\\)");
}

}  // namespace
}  // namespace cowkv
