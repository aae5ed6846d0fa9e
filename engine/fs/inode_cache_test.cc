// InodeCache and its RadixArray against std::map: random inserts, lookups,
// erases and ordered walks over dense, sparse and 64-bit-wide indices; the
// capacity bound, CLOCK eviction, and that held inodes are never evicted.
#include "engine/fs/inode_cache.h"

#include <map>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace cowkv {
namespace fs {
namespace {

using internal::RadixArray;

// Values are the addresses of a vector's elements: stable, non-null.
void RandomOps(uint64_t seed, int ops, uint64_t (*pick)(std::mt19937_64&)) {
  std::mt19937_64 rng(seed);
  std::vector<int> storage(ops);
  RadixArray a;
  std::map<uint64_t, void*> model;
  for (int op = 0; op < ops; ++op) {
    const uint64_t i = pick(rng);
    const int r = static_cast<int>(rng() % 10);
    if (r < 5) {
      void* v = &storage[op];
      void* old = a.Set(i, v);
      auto it = model.find(i);
      ASSERT_EQ(old, it == model.end() ? nullptr : it->second) << "set " << i;
      model[i] = v;
    } else if (r < 8) {
      void* old = a.Erase(i);
      auto it = model.find(i);
      ASSERT_EQ(old, it == model.end() ? nullptr : it->second) << "erase " << i;
      if (it != model.end()) model.erase(it);
    } else {
      auto it = model.find(i);
      ASSERT_EQ(a.Get(i), it == model.end() ? nullptr : it->second) << "get " << i;
      uint64_t next;
      auto m = model.lower_bound(i);
      const bool found = a.Next(i, &next);
      ASSERT_EQ(found, m != model.end()) << "next " << i;
      if (found) {
        ASSERT_EQ(next, m->first);
      }
    }
    ASSERT_EQ(a.size(), model.size());
  }
  // A full ordered walk equals the model; erasing everything frees the tree.
  uint64_t i = 0;
  for (const auto& [k, v] : model) {
    uint64_t got;
    ASSERT_TRUE(a.Next(i, &got));
    ASSERT_EQ(got, k);
    i = k + 1;
    if (k == ~uint64_t{0}) break;
  }
  for (const auto& [k, v] : model) ASSERT_EQ(a.Erase(k), v);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.height(), 0);
}

TEST(RadixArray, MatchesMapDense) {
  RandomOps(1, 200000, [](std::mt19937_64& r) { return r() % 5000; });
}

TEST(RadixArray, MatchesMapSparse) {
  RandomOps(2, 100000, [](std::mt19937_64& r) { return r() % (uint64_t{1} << 40); });
}

TEST(RadixArray, MatchesMapFullWidth) {
  RandomOps(3, 50000, [](std::mt19937_64& r) {
    uint64_t v = r();
    return r() % 4 == 0 ? ~uint64_t{0} - v % 64 : v;
  });
}

TEST(RadixArray, SequentialInodesFillNodes) {
  RadixArray a;
  std::vector<int> v(100000);
  for (uint64_t i = 0; i < v.size(); ++i) a.Set(256 + i, &v[i]);
  EXPECT_EQ(a.height(), 3);  // 64^3 = 262,144 > 100,256
  for (uint64_t i = 0; i < v.size(); ++i) ASSERT_EQ(a.Get(256 + i), &v[i]);
  EXPECT_EQ(a.Get(255), nullptr);
  EXPECT_EQ(a.Get(~uint64_t{0}), nullptr);
}

TEST(InodeCache, BoundedWithClockEviction) {
  InodeCache<int> c(100);
  for (int i = 0; i < 1000; ++i) c.Insert(i, std::make_shared<int>(i));
  EXPECT_LE(c.size(), 100u);
  EXPECT_EQ(c.evictions(), 900u);
  // Recently inserted ones are there; lookups find the right inode.
  std::shared_ptr<int> v = c.Lookup(999);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(*v, 999);
  EXPECT_EQ(c.Lookup(0), nullptr);
}

TEST(InodeCache, HeldInodesAreNeverEvicted) {
  InodeCache<int> c(10);
  std::vector<std::shared_ptr<int>> held;
  for (int i = 0; i < 10; ++i) held.push_back(c.Insert(i, std::make_shared<int>(i)));
  for (int i = 10; i < 50; ++i) c.Insert(i, std::make_shared<int>(i));
  for (int i = 0; i < 10; ++i) {
    std::shared_ptr<int> v = c.Lookup(i);
    ASSERT_NE(v, nullptr) << i;
    EXPECT_EQ(v, held[i]);
  }
  EXPECT_GT(c.size(), 10u);  // everything held: grows past the bound
}

TEST(InodeCache, InsertKeepsTheCachedInode) {
  InodeCache<int> c(10);
  auto a = c.Insert(7, std::make_shared<int>(1));
  auto b = c.Insert(7, std::make_shared<int>(2));
  EXPECT_EQ(a, b);
  EXPECT_EQ(*c.Lookup(7), 1);
  EXPECT_TRUE(c.Erase(7));
  EXPECT_FALSE(c.Erase(7));
  EXPECT_EQ(c.Lookup(7), nullptr);
}

TEST(InodeCache, ConcurrentLookupsAndInserts) {
  InodeCache<uint64_t> c(1 << 20);
  std::vector<std::thread> t;
  for (int w = 0; w < 2; ++w) {
    t.emplace_back([&, w] {
      for (uint64_t i = w; i < 100000; i += 2) c.Insert(i, std::make_shared<uint64_t>(i));
    });
  }
  t.emplace_back([&] {
    for (int round = 0; round < 5; ++round) {
      for (uint64_t i = 0; i < 100000; i += 7) {
        auto v = c.Lookup(i);
        if (v != nullptr) {
          ASSERT_EQ(*v, i);
        }
      }
    }
  });
  for (auto& th : t) th.join();
  EXPECT_EQ(c.size(), 100000u);
}

TEST(StdMapInodeCache, SameInterface) {
  StdMapInodeCache<int> c;
  auto a = c.Insert(3, std::make_shared<int>(3));
  EXPECT_EQ(c.Insert(3, std::make_shared<int>(4)), a);
  EXPECT_EQ(c.Lookup(3), a);
  EXPECT_TRUE(c.Erase(3));
  EXPECT_EQ(c.size(), 0u);
}

}  // namespace
}  // namespace fs
}  // namespace cowkv
