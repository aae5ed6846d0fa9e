// Goal: the node's search index (shared prefix + 64-bit words) gives exactly
// the answers of a plain binary search over the keys, through every kind of
// change, for leaves and internal nodes.
// Method: random inserts, erases, key and value changes, tail moves and
// compaction on keys built to defeat the index (long shared prefixes, ties
// in the first 8 bytes after the prefix, zero bytes, prefixes of each
// other); after each change every probe is compared with std::lower_bound /
// std::upper_bound over a std::vector<std::string> model.
#include "engine/tree/node.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/base/check.h"
#include "engine/format/layout.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

std::string RandomKey(std::mt19937_64& rng) {
  static const char* kPrefixes[] = {"", "user:", "user:000000", "user:0000000000000000:", "\0\0"};
  const size_t p = rng() % 5;
  std::string k(kPrefixes[p], p == 4 ? 2 : std::strlen(kPrefixes[p]));
  int n = rng() % 12;
  for (int i = 0; i < n; ++i) k.push_back(static_cast<char>(rng() % 3 == 0 ? 0 : '0' + rng() % 4));
  if (k.empty()) k = "x";
  return k;
}

void ExpectSameAnswers(const Node& node, const std::vector<std::string>& keys,
                       std::mt19937_64& rng) {
  ASSERT_EQ(node.nritems(), static_cast<int>(keys.size()));
  for (size_t i = 0; i < keys.size(); ++i) ASSERT_EQ(node.key(i), keys[i]);
  for (int probe = 0; probe < 60; ++probe) {
    std::string k = probe % 3 == 0 && !keys.empty() ? keys[rng() % keys.size()] : RandomKey(rng);
    if (node.leaf()) {
      int want = std::lower_bound(keys.begin(), keys.end(), k) - keys.begin();
      ASSERT_EQ(node.LowerBound(k), want) << "probe " << k;
    } else if (!keys.empty()) {
      int ub = std::upper_bound(keys.begin() + 1, keys.end(), k) - keys.begin();
      ASSERT_EQ(node.ChildSlot(k), std::max(ub - 1, 0)) << "probe " << k;
    }
  }
}

// Internal nodes hold child pointers (Node asserts their size); the random
// length is drawn either way, so both levels see the same random sequence.
std::string Value(uint8_t level, size_t len, char c) {
  return std::string(level ? format::kChildPtrSize : len, c);
}

void RunIndexCase(uint8_t level, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Node node({1 << 20, 1, 5, level}, {});
  Node other({2 << 20, 1, 5, level}, {});
  std::vector<std::string> keys;
  for (int step = 0; step < 3000; ++step) {
    int op = rng() % 10;
    if (op < 5 || keys.size() < 2) {
      std::string k = RandomKey(rng);
      if (!level && std::binary_search(keys.begin(), keys.end(), k)) continue;
      if (level && keys.empty()) k = "";
      auto pos = std::lower_bound(keys.begin() + (level && !keys.empty() ? 1 : 0), keys.end(), k);
      if (pos != keys.end() && *pos == k) continue;
      if (level && !keys.empty() && pos == keys.begin()) continue;
      // An internal node's slot 0 (its fence) sorts first too, also once
      // erasing slot 0 made a former separator the fence (Node asserts it).
      if (level && !keys.empty() && !(keys[0] < k)) continue;
      node.InsertItem(pos - keys.begin(), k, Value(level, rng() % 20, 'v'));
      keys.insert(pos, k);
    } else if (op < 7) {
      int slot = rng() % keys.size();
      node.EraseItem(slot);
      keys.erase(keys.begin() + slot);
    } else if (op < 8) {
      int slot = rng() % keys.size();
      node.SetValue(slot, Value(level, rng() % 40, 'w'));
    } else if (op < 9 && keys.size() > 4) {
      int from = 1 + rng() % (keys.size() - 1);
      node.MoveTailTo(from, &other);
      keys.resize(from);
      other.MoveTailTo(0, &node);  // and back again: the tail returns in order
      other.Compact();
      ASSERT_EQ(other.nritems(), 0);
      keys.clear();
      for (int i = 0; i < node.nritems(); ++i) keys.emplace_back(node.key(i));
    } else {
      node.Compact();
    }
    ASSERT_NO_FATAL_FAILURE(ExpectSameAnswers(node, keys, rng)) << "step " << step;
  }
}

TEST(NodeIndex, LeafMatchesBinarySearch) { RunIndexCase(0, 1); }
TEST(NodeIndex, InternalMatchesBinarySearch) { RunIndexCase(1, 2); }

// Goal: a change that would break a node's invariants (strict key order,
// child pointers one level down, arguments that do not alias the node's
// own arena) crashes at the change, in debug builds.
// Method: one bad change per case on a small dirty node.
class NodeDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!COWKV_DCHECK_IS_ON) GTEST_SKIP() << "COWKV_DCHECK is compiled out";
    leaf_.InsertItem(0, "b", "1");
    leaf_.InsertItem(1, "d", "2");
  }
  Node leaf_{{1 << 20, 1, 5, 0}, {}};
};

TEST_F(NodeDeathTest, InsertOutOfOrder) {
  EXPECT_DEATH(leaf_.InsertItem(0, "c", "x"), "k < key\\(next\\)");
  EXPECT_DEATH(leaf_.InsertItem(2, "a", "x"), "key\\(slot - 1\\) < k");
  EXPECT_DEATH(leaf_.InsertItem(1, "b", "x"), "key\\(slot - 1\\) < k");  // a duplicate
  EXPECT_DEATH(leaf_.SetKey(0, "e"), "k < key\\(next\\)");
  EXPECT_DEATH(leaf_.InsertItem(0, "", "x"), "!k.empty\\(\\)");
}

TEST_F(NodeDeathTest, ArgumentsMustNotViewTheNode) {
  // Appending to the arena may move it under the view.
  EXPECT_DEATH(leaf_.InsertItem(2, "e", leaf_.value(0)), "!ViewsArena\\(v\\)");
  EXPECT_DEATH(leaf_.SetKey(1, leaf_.key(1)), "!ViewsArena\\(k\\)");
}

TEST_F(NodeDeathTest, ChildrenAreOneLevelDown) {
  auto parent =
      std::make_shared<Node>(format::NodeHeader{2 << 20, 1, 5, 2}, std::vector<format::ItemView>{});
  parent->dirty = true;
  parent->InsertItem(0, "", std::string(format::kChildPtrSize, '\0'));
  auto leaf =
      std::make_shared<Node>(format::NodeHeader{3 << 20, 1, 5, 0}, std::vector<format::ItemView>{});
  EXPECT_DEATH(parent->SetChild(0, leaf), "child->level \\+ 1 == level");
  EXPECT_DEATH(parent->SetValue(0, "short"), "v.size\\(\\) == format::kChildPtrSize");
  Node other({4 << 20, 1, 5, 1}, {});
  EXPECT_DEATH(parent->MoveTailTo(0, &other), "dst->level == level");
}

}  // namespace
}  // namespace cowkv
