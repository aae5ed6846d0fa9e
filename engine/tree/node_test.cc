// Goal: the node's search index (shared prefix + 64-bit words) gives exactly
// the answers of a plain binary search over the keys, through every kind of
// change, for leaves and internal nodes.
// Method: random inserts, erases, key and value changes, tail moves and
// compaction on keys built to defeat the index (long shared prefixes, ties
// in the first 8 bytes after the prefix, zero bytes, prefixes of each
// other); after each change every probe is compared with std::lower_bound /
// std::upper_bound over a std::vector<std::string> model.
#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "engine/tree/node.h"
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
      node.InsertItem(pos - keys.begin(), k, std::string(rng() % 20, 'v'));
      keys.insert(pos, k);
    } else if (op < 7) {
      int slot = rng() % keys.size();
      node.EraseItem(slot);
      keys.erase(keys.begin() + slot);
    } else if (op < 8) {
      int slot = rng() % keys.size();
      node.SetValue(slot, std::string(rng() % 40, 'w'));
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

}  // namespace
}  // namespace cowkv
