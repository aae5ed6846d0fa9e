// DelayedRefs on its own (no tree): updates merge into one head per extent,
// opposite updates cancel, a fresh allocation freed in the same transaction
// disappears whole, TakeAll/TakeBatch hand heads over in bytenr order, and
// the counters the throttler reads (heads, updates, runs) add up. Every
// contract is tested across the four back-reference kinds and several
// extent counts rather than on one example.
#include "engine/refs/delayed_refs.h"

#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "engine/format/items.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

constexpr uint8_t kKinds[] = {format::kTreeBlockRef, format::kSharedBlockRef,
                              format::kExtentDataRef, format::kSharedDataRef};

uint64_t Bytenr(uint64_t i) { return (1ull << 20) + i * 16384; }

TEST(DelayedRefs, OppositeUpdatesOnOneBackrefCancel) {
  for (uint8_t kind : kKinds) {
    for (int pairs = 1; pairs <= 5; ++pairs) {
      for (bool drop_first : {false, true}) {
        DelayedRefs refs;
        const BackrefKey ref{kind, 256};
        for (int i = 0; i < pairs; ++i) {
          refs.Add(Bytenr(0), 4096, 0, ref, drop_first ? -1 : +1, false, 7);
          refs.Add(Bytenr(0), 4096, 0, ref, drop_first ? +1 : -1, false, 7);
        }
        const DelayedRefHead* h = refs.Find(Bytenr(0));
        ASSERT_NE(h, nullptr);
        EXPECT_EQ(h->ref_mod, 0) << int{kind} << " " << pairs;
        EXPECT_TRUE(h->refs.empty()) << int{kind} << " " << pairs;
        EXPECT_EQ(h->is_tree_block, !format::IsDataRef(kind));
        // The extent existed before: its head stays (a no-op for the extent tree).
        EXPECT_FALSE(refs.DropIfCancelled(Bytenr(0)));
        EXPECT_EQ(refs.num_heads(), 1u);
        EXPECT_EQ(refs.Stats().updates, 2u * pairs);
      }
    }
  }
}

TEST(DelayedRefs, UpdatesOnDifferentBackrefsDoNotCancel) {
  for (uint8_t a : kKinds) {
    for (uint8_t b : kKinds) {
      if (format::IsDataRef(a) != format::IsDataRef(b)) continue;  // one extent, one kind
      DelayedRefs refs;
      refs.Add(Bytenr(1), 4096, 1, {a, 256}, +1, false, 7);
      refs.Add(Bytenr(1), 4096, 1, {b, 257}, -1, false, 7);
      const DelayedRefHead* h = refs.Find(Bytenr(1));
      ASSERT_NE(h, nullptr);
      EXPECT_EQ(h->ref_mod, 0);
      EXPECT_EQ(h->refs.size(), 2u);
      EXPECT_EQ(h->refs.at(BackrefKey{a, 256}), +1);
      EXPECT_EQ(h->refs.at(BackrefKey{b, 257}), -1);
    }
  }
}

TEST(DelayedRefs, FreshAllocationFreedInItsTransactionDisappears) {
  for (uint8_t kind : kKinds) {
    for (int extra_pairs = 0; extra_pairs < 3; ++extra_pairs) {
      DelayedRefs refs;
      const uint64_t len = format::IsDataRef(kind) ? 8192 : 4096;
      refs.Add(Bytenr(2), len, 0, {kind, 300}, +1, /*new_alloc=*/true, 9);
      const DelayedRefHead* h = refs.Find(Bytenr(2));
      ASSERT_NE(h, nullptr);
      EXPECT_TRUE(h->must_insert);
      EXPECT_EQ(h->generation, 9u);
      EXPECT_EQ(h->num_bytes, len);
      // Not cancelled while a reference is outstanding.
      EXPECT_FALSE(refs.DropIfCancelled(Bytenr(2)));
      for (int i = 0; i < extra_pairs; ++i) {
        refs.Add(Bytenr(2), len, 0, {kind, 301}, +1, false, 9);
        refs.Add(Bytenr(2), len, 0, {kind, 301}, -1, false, 9);
      }
      refs.Add(Bytenr(2), len, 0, {kind, 300}, -1, false, 9);
      EXPECT_TRUE(refs.DropIfCancelled(Bytenr(2)));
      EXPECT_EQ(refs.Find(Bytenr(2)), nullptr);
      EXPECT_TRUE(refs.empty());
      EXPECT_FALSE(refs.DropIfCancelled(Bytenr(2)));  // nothing left to drop
    }
  }
}

TEST(DelayedRefs, FullBackrefKeepsACancelledAllocation) {
  DelayedRefs refs;
  refs.Add(Bytenr(3), 4096, 1, {format::kTreeBlockRef, 5}, +1, true, 2);
  refs.SetFullBackref(Bytenr(3), 4096, 1);
  refs.Add(Bytenr(3), 4096, 1, {format::kTreeBlockRef, 5}, -1, false, 2);
  EXPECT_FALSE(refs.DropIfCancelled(Bytenr(3)));
  ASSERT_NE(refs.Find(Bytenr(3)), nullptr);
  EXPECT_TRUE(refs.Find(Bytenr(3))->set_full_backref);
}

// Random updates over many extents against a model of net deltas.
TEST(DelayedRefs, HeadsMergeToTheNetDeltaPerExtentAndBackref) {
  for (int extents : {1, 7, 64, 500}) {
    std::mt19937_64 rng(extents);
    DelayedRefs refs;
    std::map<uint64_t, std::map<BackrefKey, int64_t>> model;
    const int updates = extents * 8;
    for (int i = 0; i < updates; ++i) {
      const uint64_t b = Bytenr(rng() % extents);
      const BackrefKey ref{format::kTreeBlockRef, 256 + rng() % 3};
      const int64_t delta = rng() % 2 ? +1 : -1;
      const DelayedRefHead& h = refs.Add(b, 4096, 0, ref, delta, false, 1);
      EXPECT_EQ(h.bytenr, b);
      model[b][ref] += delta;
    }
    EXPECT_EQ(refs.num_heads(), model.size());
    EXPECT_EQ(refs.Stats().heads, model.size());
    EXPECT_EQ(refs.Stats().updates, static_cast<uint64_t>(updates));
    EXPECT_EQ(refs.updates_since_commit(), static_cast<uint64_t>(updates));
    for (const auto& [b, per_ref] : model) {
      const DelayedRefHead* h = refs.Find(b);
      ASSERT_NE(h, nullptr) << b;
      int64_t sum = 0;
      for (const auto& [ref, d] : per_ref) {
        sum += d;
        auto it = h->refs.find(ref);
        EXPECT_EQ(it == h->refs.end() ? 0 : it->second, d) << b;
      }
      EXPECT_EQ(h->ref_mod, sum) << b;
      for (const auto& [ref, d] : h->refs) EXPECT_NE(d, 0) << "zero deltas are erased";
    }
    EXPECT_EQ(refs.Find(Bytenr(extents)), nullptr);
  }
}

TEST(DelayedRefs, TakeAllHandsOverEveryHeadInBytenrOrder) {
  for (int extents : {0, 1, 13, 200}) {
    DelayedRefs refs;
    for (int i = extents - 1; i >= 0; --i) {  // queued in descending order
      refs.Add(Bytenr(i), 4096, 0, {format::kTreeBlockRef, 5}, +1, false, 1);
    }
    const std::vector<DelayedRefHead> heads = refs.TakeAll();
    ASSERT_EQ(heads.size(), static_cast<size_t>(extents));
    for (int i = 0; i < extents; ++i) EXPECT_EQ(heads[i].bytenr, Bytenr(i));
    EXPECT_TRUE(refs.empty());
    const DelayedRefStats s = refs.Stats();
    EXPECT_EQ(s.heads, 0u);
    EXPECT_EQ(s.updates, 0u);
    EXPECT_EQ(s.runs, 1u);
    EXPECT_EQ(s.heads_run, static_cast<uint64_t>(extents));
    EXPECT_EQ(refs.updates_since_commit(), 0u);
  }
}

TEST(DelayedRefs, TakeBatchTakesTheLowestHeadsAndKeepsTheCommitsCount) {
  for (size_t batch : {1u, 3u, 10u, 100u}) {
    DelayedRefs refs;
    constexpr int kExtents = 25;
    for (int i = 0; i < kExtents; ++i) {
      refs.Add(Bytenr(i), 4096, 0, {format::kTreeBlockRef, 5}, +1, false, 1);
    }
    size_t taken = 0;
    uint64_t runs = 0;
    while (!refs.empty()) {
      const std::vector<DelayedRefHead> heads = refs.TakeBatch(batch);
      ASSERT_EQ(heads.size(), std::min(batch, kExtents - taken));
      for (size_t i = 0; i < heads.size(); ++i) EXPECT_EQ(heads[i].bytenr, Bytenr(taken + i));
      taken += heads.size();
      ++runs;
      EXPECT_EQ(refs.num_heads(), kExtents - taken);
      // A writer's batch is not a commit: the transaction's work still counts.
      EXPECT_EQ(refs.updates_since_commit(), static_cast<uint64_t>(kExtents));
    }
    EXPECT_EQ(refs.Stats().runs, runs);
    EXPECT_EQ(refs.Stats().heads_run, static_cast<uint64_t>(kExtents));
  }
}

TEST(DelayedRefsDeathTest, ContradictoryUpdatesCrash) {
  DelayedRefs refs;
  refs.Add(Bytenr(4), 4096, 0, {format::kTreeBlockRef, 5}, +1, false, 1);
  // The same extent with another length, or allocated again while queued.
  EXPECT_DEATH(refs.Add(Bytenr(4), 8192, 0, {format::kTreeBlockRef, 5}, +1, false, 1), "num_bytes");
  EXPECT_DEATH(refs.Add(Bytenr(4), 4096, 0, {format::kTreeBlockRef, 6}, +1, true, 1),
               "fresh allocation");
}

}  // namespace
}  // namespace cowkv
