// Goal: snapshots are exact, independent copies — with O(1) creation and
// lazy refcounting underneath — through any mix of writes to sources,
// writable snapshots and snapshots of snapshots; read-only snapshots refuse
// writes; every refcount always equals its back-references.
// Method: a seeded random mix of puts and deletes across subvolumes,
// snapshots (writable and read-only) of random subvolumes, new empty
// subvolumes and renames, against one std::map model per subvolume. After
// each commit: `check` (refcount == back-references == pointers seen,
// FULL_BACKREF rules) and a full comparison of every subvolume; the same
// after each reopen. 4 KiB nodes so trees are deep and sharing is real.
// Replay: --seed=N --ops=M.
#include <map>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::StatusIs;
using KV = std::map<std::string, std::string>;

struct ModelSubvol {
  KV kv;
  bool read_only = false;
};

class SubvolRun {
 public:
  explicit SubvolRun(uint64_t seed) : rng_(seed) {}

  std::string Pick(bool writable_only) {
    std::vector<std::string> names;
    for (const auto& [n, m] : model_) {
      if (!writable_only || !m.read_only) names.push_back(n);
    }
    return names[rng_() % names.size()];
  }

  void CompareAll(Store* store) {
    std::vector<SubvolumeInfo> list = store->ListSubvolumes();
    ASSERT_EQ(list.size(), model_.size());
    for (const auto& [name, m] : model_) {
      ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(name));
      ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->ShowSubvolume(name));
      ASSERT_EQ(info.read_only, m.read_only) << name;
      auto it = sv->NewIterator();
      auto e = m.kv.begin();
      for (it->SeekToFirst(); it->Valid(); it->Next(), ++e) {
        ASSERT_NE(e, m.kv.end()) << name << ": extra key " << it->key();
        ASSERT_EQ(it->key(), e->first) << name;
        ASSERT_EQ(it->value(), e->second) << name;
      }
      ASSERT_OK(it->status());
      ASSERT_EQ(e, m.kv.end()) << name << ": missing keys";
    }
  }

  void Step(Store* store, int op) {
    uint64_t r = rng_() % 1000;
    if (r < 550) {
      std::string name = Pick(true);
      // Long keys keep internal fanout low, so trees have three or more
      // levels and shared internal nodes get CoWed (their children's refs
      // are what lazy refcounting is about).
      std::string k = absl::StrCat(std::string(40, 'p'), "key", rng_() % 3000);
      // One value in 25 is too large to be inline: a data extent, shared
      // by snapshots through the leaves that point at it.
      std::string v(rng_() % 25 == 0 ? store->max_value_size() + 1 + rng_() % 9000 : rng_() % 200,
                    'a' + op % 26);
      ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(name));
      ASSERT_OK(sv->Put(k, v));
      model_[name].kv[k] = v;
    } else if (r < 800) {
      std::string name = Pick(true);
      KV& kv = model_[name].kv;
      if (kv.empty()) return;
      auto it = kv.lower_bound(absl::StrCat(std::string(40, 'p'), "key", rng_() % 3000));
      if (it == kv.end()) it = kv.begin();
      ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(name));
      ASSERT_OK(sv->Delete(it->first));
      kv.erase(it);
    } else if (r < 900) {
      std::string name = Pick(false);
      std::string k = absl::StrCat(std::string(40, 'p'), "key", rng_() % 3000);
      ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(name));
      auto got = sv->Get(k);
      auto m = model_[name].kv.find(k);
      if (m == model_[name].kv.end()) {
        ASSERT_THAT(got, StatusIs(absl::StatusCode::kNotFound));
      } else {
        ASSERT_OK(got);
        ASSERT_EQ(*got, m->second);
      }
    } else if (r < 906 && model_.size() < 24) {
      std::string src = Pick(false), name = absl::StrCat("snap", next_name_++);
      bool ro = rng_() % 2;
      ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSnapshot(src, name, ro));
      ASSERT_EQ(info.read_only, ro);
      model_[name] = ModelSubvol{model_[src].kv, ro};
    } else if (r < 908 && model_.size() < 24) {
      std::string name = absl::StrCat("sub", next_name_++);
      ASSERT_OK(store->CreateSubvolume(name));
      model_[name] = ModelSubvol{};
    } else if (r < 940) {
      std::string from = Pick(false), to = absl::StrCat("renamed", next_name_++);
      if (from == "default") return;
      ASSERT_OK(store->RenameSubvolume(from, to));
      auto node = model_.extract(from);
      node.key() = to;
      model_.insert(std::move(node));
    } else if (r < 944 && model_.size() > 2) {
      std::string name = Pick(false);
      if (name == "default") return;
      ASSERT_OK(store->DeleteSubvolume(name));
      model_.erase(name);
      ASSERT_THAT(store->OpenSubvolume(name), StatusIs(absl::StatusCode::kNotFound));
    } else if (r < 950) {
      // Step the cleaner part of the way; the rest continues later, across
      // commits and reopens.
      ASSERT_OK(store->DropDeletedSubvolumes(1 + rng_() % 40));
    } else if (r < 960) {
      for (const auto& [n, m] : model_) {
        if (!m.read_only) continue;
        ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(n));
        ASSERT_THAT(sv->Put("x", "y"), StatusIs(absl::StatusCode::kFailedPrecondition));
        break;
      }
    }
  }

  void Run(uint64_t ops) {
    MemDevice dev(512ull << 20);
    ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
    model_["default"] = ModelSubvol{};
    // A three-level tree to start from, so the first snapshots share
    // internal nodes, not just leaves.
    for (int i = 0; i < 3000; ++i) {
      std::string k = absl::StrCat(std::string(40, 'p'), "key", i), v(100, 'i');
      ASSERT_OK(store->Put(k, v));
      model_["default"].kv[k] = v;
    }
    for (uint64_t op = 0; op < ops; ++op) {
      SCOPED_TRACE(absl::StrCat("op ", op));
      ASSERT_NO_FATAL_FAILURE(Step(store.get(), static_cast<int>(op)));
      if (op % 700 == 699) {
        ASSERT_OK(store->Commit());
        ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&dev));
        ASSERT_NO_FATAL_FAILURE(CompareAll(store.get()));
      }
      if (op % 7000 == 6999) {
        ASSERT_OK(store->Close());
        ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
        ASSERT_NO_FATAL_FAILURE(CompareAll(store.get()));
      }
    }
    // Drop everything that was deleted; nothing may leak (check).
    ASSERT_OK(store->DropDeletedSubvolumes());
    EXPECT_EQ(store->Stats().deleted_subvolumes_pending, 0u);
    ASSERT_NO_FATAL_FAILURE(CompareAll(store.get()));
    ASSERT_OK(store->Close());
    ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&dev));
  }

 private:
  std::mt19937_64 rng_;
  std::map<std::string, ModelSubvol> model_;
  int next_name_ = 0;
};

void RunSeeds(uint64_t default_seed, uint64_t default_ops) {
  uint64_t first = testing::Flags().seed ? testing::Flags().seed : default_seed;
  uint64_t seeds = testing::Flags().seeds ? testing::Flags().seeds : 1;
  uint64_t ops = testing::Flags().ops ? testing::Flags().ops : default_ops;
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    SCOPED_TRACE(absl::StrCat("replay: --seed=", seed, " --ops=", ops));
    SubvolRun(seed).Run(ops);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

TEST(SubvolModel, SeedA) { RunSeeds(1, 30000); }
TEST(SubvolModel, SeedB) { RunSeeds(2, 30000); }
// Regression: a normal node with one reference from a tree that does not own
// it was CoWed without moving its children's TREE(owner) references; the
// cleaner later dropped TREE(dying) from a child that lacked it.
TEST(SubvolModel, RegressionSeed13UnownedNormalNode) {
  if (testing::Flags().seed != 0) GTEST_SKIP() << "replaying another seed";
  RunSeeds(13, 40000);
}
// Regression: append splits in the extent tree and merges of the one-item
// node they leave fed each other's delayed refs, so the commit never
// converged.
TEST(SubvolModel, RegressionSeed149ExtentTreeSplitMergeCycle) {
  if (testing::Flags().seed != 0) GTEST_SKIP() << "replaying another seed";
  RunSeeds(149, 40000);
}

TEST(Subvolumes, DeletionFreesSpace) {
  // Goal: deleting snapshots gives back exactly the space they alone used,
  // in the background, and the source is untouched.
  MemDevice dev(256 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  Options o = testing::TestOptions();
  o.background_cleaner = true;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  for (int i = 0; i < 20000; ++i) {
    ASSERT_OK(store->Put(absl::StrCat("k", i), std::string(100, 'd')));
  }
  ASSERT_OK(store->Commit());
  const uint64_t base_used = store->Stats().used_bytes;
  for (int s = 0; s < 3; ++s) {
    std::string name = absl::StrCat("snap", s);
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSnapshot("default", name, false));
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(name));
    for (int i = 0; i < 20000; i += 3) ASSERT_OK(sv->Put(absl::StrCat("k", i), "changed"));
  }
  ASSERT_OK(store->Commit());
  EXPECT_GT(store->Stats().used_bytes, base_used + (1u << 20));
  for (int s = 0; s < 3; ++s) ASSERT_OK(store->DeleteSubvolume(absl::StrCat("snap", s)));
  EXPECT_EQ(store->ListSubvolumes().size(), 1u);
  for (int i = 0; i < 500 && store->Stats().deleted_subvolumes_pending > 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(store->Stats().deleted_subvolumes_pending, 0u);
  ASSERT_OK(store->Commit());
  ASSERT_OK(store->Commit());  // release what the last commit pinned
  // Only the default tree's own CoW of its root path may differ.
  EXPECT_LE(store->Stats().used_bytes, base_used + 16 * 4096);
  for (int i = 0; i < 20000; i += 997) {
    auto v = store->Get(absl::StrCat("k", i));
    ASSERT_OK(v);
    EXPECT_EQ(*v, std::string(100, 'd'));
  }
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

TEST(Subvolumes, NamesAndErrors) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  EXPECT_THAT(store->CreateSubvolume(""), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->CreateSubvolume("a/b"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->CreateSubvolume(std::string(256, 'n')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->CreateSubvolume(std::string("a\0b", 3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(store->CreateSubvolume("data@2026-11-22"));
  EXPECT_THAT(store->CreateSubvolume("data@2026-11-22"),
              StatusIs(absl::StatusCode::kAlreadyExists));
  EXPECT_THAT(store->CreateSnapshot("nope", "x", false), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(store->OpenSubvolume("nope"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo a, store->ShowSubvolume("data@2026-11-22"));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo s, store->CreateSnapshot("data@2026-11-22", "snap", true));
  EXPECT_EQ(s.parent_id, a.id);
  EXPECT_GT(s.id, a.id);
  EXPECT_TRUE(s.read_only);
  EXPECT_THAT(store->DeleteSubvolume("default"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(store->DeleteSubvolume("nope"), StatusIs(absl::StatusCode::kNotFound));
  // Issue 14.6: renaming "default" left every request without a subvolume
  // name pointing at nothing, and a new "default" silently took its place.
  EXPECT_THAT(store->RenameSubvolume("default", "old-default"),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK(store->RenameSubvolume("default", "default"));  // a no-op
  EXPECT_THAT(store->CreateSubvolume("default"), StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK(store->ShowSubvolume("default").status());
  EXPECT_THAT(store->RenameSubvolume("snap", "data@2026-11-22"),
              StatusIs(absl::StatusCode::kAlreadyExists));
  ASSERT_OK(store->RenameSubvolume("snap", "snap2"));
  EXPECT_EQ(store->ListSubvolumes().size(), 3u);
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo s2, store->ShowSubvolume("snap2"));
  EXPECT_EQ(s2.id, s.id);
  EXPECT_TRUE(s2.read_only);
  // Ids are never reused.
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo c, store->CreateSubvolume("c"));
  EXPECT_GT(c.id, s.id);
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
