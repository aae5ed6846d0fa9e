// Goal (beside delayed_refs_test): delayed refs merge per extent and per back-reference, a fresh
// allocation whose refs cancel out is dropped whole, and the queue's
// preconditions (asserted in Add) crash on misuse rather than reach the
// extent tree.
// Method: direct calls on a DelayedRefs; one bad call per death test.
#include "engine/format/items.h"
#include "engine/refs/delayed_refs.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

constexpr uint64_t kNode = 1 << 20;
constexpr BackrefKey kTree5{format::kTreeBlockRef, 5};
constexpr BackrefKey kTree256{format::kTreeBlockRef, 256};

TEST(DelayedRefs, MergePerExtentAndBackref) {
  DelayedRefs refs;
  refs.Add(kNode, 4096, 0, kTree5, +1, /*new_alloc=*/true, 7);
  refs.Add(kNode, 4096, 0, kTree256, +1, false, 7);
  const DelayedRefHead& h = refs.Add(kNode, 4096, 0, kTree256, -1, false, 7);
  EXPECT_TRUE(h.must_insert);
  EXPECT_EQ(h.ref_mod, 1);
  ASSERT_EQ(h.refs.size(), 1u);  // the +1/-1 on TREE(256) cancelled
  EXPECT_EQ(h.refs.begin()->second, 1);
  EXPECT_EQ(refs.num_heads(), 1u);
  EXPECT_FALSE(refs.DropIfCancelled(kNode));
  refs.Add(kNode, 4096, 0, kTree5, -1, false, 7);
  EXPECT_TRUE(refs.DropIfCancelled(kNode));  // allocated and freed in one transaction
  EXPECT_TRUE(refs.empty());
}

TEST(DelayedRefs, TakeBatchTakesLowestBytenrsFirst) {
  DelayedRefs refs;
  for (uint64_t i = 4; i > 0; --i) refs.Add(kNode * i, 4096, 0, kTree5, -1, false, 7);
  std::vector<DelayedRefHead> batch = refs.TakeBatch(3);
  ASSERT_EQ(batch.size(), 3u);
  EXPECT_EQ(batch[0].bytenr, kNode);
  EXPECT_EQ(batch[2].bytenr, 3 * kNode);
  EXPECT_EQ(refs.TakeAll().size(), 1u);
  EXPECT_TRUE(refs.empty());
}

TEST(DelayedRefsDeathTest, FreshAllocationStartsWithOneReference) {
  DelayedRefs refs;
  EXPECT_DEATH(refs.Add(kNode, 4096, 0, kTree5, -1, /*new_alloc=*/true, 7), "delta == 1");
}

TEST(DelayedRefsDeathTest, FreshAllocationOfAnExtentWithPendingRefs) {
  DelayedRefs refs;
  refs.Add(kNode, 4096, 0, kTree5, -1, false, 7);
  EXPECT_DEATH(refs.Add(kNode, 4096, 0, kTree5, +1, /*new_alloc=*/true, 7),
               "fresh allocation of an extent with pending refs");
}

TEST(DelayedRefsDeathTest, ZeroDeltaOrNotABackref) {
  DelayedRefs refs;
  EXPECT_DEATH(refs.Add(kNode, 4096, 0, kTree5, 0, false, 7), "delta != 0");
  EXPECT_DEATH(refs.Add(kNode, 4096, 0, {format::kExtentItem, 5}, +1, false, 7), "IsBackref");
  EXPECT_DEATH(refs.Add(kNode, 0, 0, kTree5, +1, false, 7), "num_bytes > 0");
}

}  // namespace
}  // namespace cowkv
