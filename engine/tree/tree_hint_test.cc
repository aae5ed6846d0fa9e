// Tree::Get with a LeafHint (seed 002's extent-tree lookups) answers exactly
// like the plain Get, in any key order and across changes to the tree, and
// reuses the leaf for lookups in key order. Also the fs layer's other
// shortcuts (seed 004): Lookup (absence as nullopt) and DeletePresent (no
// probe descent) against the same kind of model.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "cowkv/device.h"
#include "engine/testing/in_memory_hooks.h"
#include "engine/tree/node_cache.h"
#include "engine/tree/tree.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {


// One tree on an in-memory device.
class InMemoryTree : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tree::CreateEmpty(5, &cache_, &hooks_);
    ASSERT_TRUE(t.ok()) << t.status();
    tree_ = *std::move(t);
  }

  MemDevice dev_{64 << 20};
  NodeCache cache_{&dev_, std::string(16, 'f'), 4096, 4096, 64 << 20};
  testing::InMemoryHooks hooks_{7, 1 << 20};
  std::unique_ptr<Tree> tree_;
};
class TreeLeafHint : public InMemoryTree {};
class TreeShortcuts : public InMemoryTree {};

std::string Key(uint64_t i) { return absl::StrFormat("k%010d", i); }

void ExpectSame(Tree* tree, const std::map<std::string, std::string>& model,
                const std::string& key, Tree::LeafHint* hint) {
  absl::StatusOr<absl::string_view> got = tree->Get(key, hint);
  auto it = model.find(key);
  if (it == model.end()) {
    EXPECT_TRUE(absl::IsNotFound(got.status())) << key;
  } else {
    ASSERT_TRUE(got.ok()) << key << ": " << got.status();
    EXPECT_EQ(*got, it->second) << key;
  }
}

TEST_F(TreeLeafHint, MatchesTheModelInAnyOrderAndAcrossChanges) {
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(42);
  for (uint64_t i = 0; i < 20000; i += 2) {  // odd keys stay absent
    std::string v(1 + rng() % 200, static_cast<char>('a' + i % 26));
    ASSERT_TRUE(tree_->Put(Key(i), v).ok());
    model[Key(i)] = v;
  }
  ASSERT_GE(tree_->height(), 3);

  // In key order: one descent per leaf, every other lookup from the hint.
  Tree::LeafHint hint;
  for (uint64_t i = 0; i < 20000; ++i) ExpectSame(tree_.get(), model, Key(i), &hint);
  EXPECT_GT(hint.hits, 19000u);
  // Keys outside every stored one: below the first and above the last.
  ExpectSame(tree_.get(), model, "a", &hint);
  ExpectSame(tree_.get(), model, "z", &hint);

  // Random order, interleaved with changes that move items between leaves.
  for (int round = 0; round < 20000; ++round) {
    const uint64_t i = rng() % 22000;
    if (rng() % 4 == 0) {
      if (rng() % 2 == 0) {
        std::string v(1 + rng() % 300, 'x');
        ASSERT_TRUE(tree_->Put(Key(i), v).ok());
        model[Key(i)] = v;
      } else if (model.erase(Key(i)) == 1) {
        ASSERT_TRUE(tree_->Delete(Key(i)).ok());
      }
    }
    ExpectSame(tree_.get(), model, Key(i), &hint);
    if (HasFatalFailure()) return;
  }
}

TEST_F(TreeShortcuts, LookupAndDeletePresentMatchTheModel) {
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(7);
  for (int round = 0; round < 40000; ++round) {
    const std::string k = Key(rng() % 6000);
    const int op = static_cast<int>(rng() % 3);
    if (op == 0) {
      std::string v(1 + rng() % 300, static_cast<char>('a' + round % 26));
      ASSERT_TRUE(tree_->Put(k, v).ok());
      model[k] = v;
    } else if (op == 1) {
      // Present or not: DeletePresent's answer must match the model, and a
      // miss must change nothing readable.
      absl::Status st = tree_->DeletePresent(k);
      if (model.erase(k) == 1) {
        ASSERT_TRUE(st.ok()) << k << ": " << st;
      } else {
        ASSERT_TRUE(absl::IsNotFound(st)) << k << ": " << st;
      }
    }
    absl::StatusOr<std::optional<std::string>> got = tree_->Lookup(k);
    ASSERT_TRUE(got.ok()) << got.status();
    auto it = model.find(k);
    if (it == model.end()) {
      EXPECT_FALSE(got->has_value()) << k;
    } else {
      ASSERT_TRUE(got->has_value()) << k;
      EXPECT_EQ(**got, it->second) << k;
    }
  }
  // Every key, in order, after the churn (merges and splits included).
  for (uint64_t i = 0; i < 6000; ++i) {
    absl::StatusOr<std::optional<std::string>> got = tree_->Lookup(Key(i));
    ASSERT_TRUE(got.ok());
    auto it = model.find(Key(i));
    ASSERT_EQ(got->has_value(), it != model.end()) << Key(i);
    if (it != model.end()) {
      EXPECT_EQ(**got, it->second);
    }
  }
  EXPECT_GE(tree_->height(), 2);
}

// Upsert (the KV put's one descent) hands `make` exactly the current value
// (null when absent) and stores what it returns; a failing `make` changes no
// item and reports `changed` false. Find views what Lookup copies.
TEST_F(TreeShortcuts, UpsertAndFindMatchTheModel) {
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(11);
  std::string next;
  for (int round = 0; round < 30000; ++round) {
    const std::string k = Key(rng() % 5000);
    auto it = model.find(k);
    const bool fail = rng() % 8 == 0;
    next = std::string(1 + rng() % 300, static_cast<char>('a' + round % 26));
    bool saw_old = false, changed = true;
    absl::Status st = tree_->Upsert(
        k,
        [&](const absl::string_view* old) -> absl::StatusOr<absl::string_view> {
          saw_old = true;
          if (it == model.end()) {
            EXPECT_EQ(old, nullptr) << k;
          } else {
            EXPECT_NE(old, nullptr) << k;
            if (old != nullptr) {
              EXPECT_EQ(*old, it->second) << k;
            }
          }
          if (fail) return absl::DataLossError("planted");
          return absl::string_view(next);
        },
        &changed);
    ASSERT_TRUE(saw_old);
    if (fail) {
      ASSERT_TRUE(absl::IsDataLoss(st)) << st;
      EXPECT_FALSE(changed);
    } else {
      ASSERT_TRUE(st.ok()) << st;
      model[k] = next;
    }
    NodeRef leaf;
    absl::string_view view;
    absl::StatusOr<bool> found = tree_->Find(k, &leaf, &view);
    ASSERT_TRUE(found.ok()) << found.status();
    it = model.find(k);
    ASSERT_EQ(*found, it != model.end()) << k;
    if (*found) {
      EXPECT_EQ(view, it->second) << k;
    }
  }
  EXPECT_GE(tree_->height(), 2);
  for (uint64_t i = 0; i < 5000; ++i) {
    absl::StatusOr<std::optional<std::string>> got = tree_->Lookup(Key(i));
    ASSERT_TRUE(got.ok());
    auto it = model.find(Key(i));
    ASSERT_EQ(got->has_value(), it != model.end()) << Key(i);
    if (it != model.end()) {
      EXPECT_EQ(**got, it->second);
    }
  }
}

// DeleteRun (the KV history's compaction) removes exactly the range's keys
// in `from`'s leaf, at most `max`, calls `on_item` with each in order, and
// a failing `on_item` removes nothing; interleaved with puts and deletes so
// runs meet splits, merges and borrowing, and repeated until whole ranges
// go (as compaction drains the oldest entries).
TEST_F(TreeShortcuts, DeleteRunMatchesTheModel) {
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(13);
  auto put = [&](const std::string& k) {
    std::string v(1 + rng() % 300, static_cast<char>('a' + rng() % 26));
    ASSERT_TRUE(tree_->Put(k, v).ok());
    model[k] = v;
  };
  for (int i = 0; i < 8000; ++i) put(Key(rng() % 12000));
  size_t runs = 0, emptied = 0;
  for (int round = 0; round < 4000; ++round) {
    if (rng() % 3 == 0) {
      for (int i = 0; i < 20; ++i) put(Key(rng() % 12000));
      if (HasFatalFailure()) return;
    }
    if (model.empty()) break;
    // From an existing key (as the caller: it has just seen it) to a bound
    // past it, at most `max` items.
    auto first = model.lower_bound(Key(rng() % 12000));
    if (first == model.end()) first = model.begin();
    const std::string from = first->first;
    const std::string to = rng() % 4 == 0 ? "z" : Key(std::stoul(from.substr(1)) + 1 + rng() % 400);
    const size_t max = rng() % 5 == 0 ? 3 : 1000;
    const bool fail = rng() % 10 == 0;
    std::vector<std::string> seen;
    absl::StatusOr<size_t> n =
        tree_->DeleteRun(from, to, max, [&](absl::string_view k, absl::string_view v) {
          EXPECT_EQ(model.at(std::string(k)), v) << k;
          seen.emplace_back(k);
          return fail && seen.size() == 2 ? absl::DataLossError("planted") : absl::OkStatus();
        });
    if (fail && seen.size() >= 2) {
      ASSERT_TRUE(absl::IsDataLoss(n.status())) << n.status();
      seen.clear();
    } else {
      ASSERT_TRUE(n.ok()) << n.status();
      ASSERT_EQ(*n, seen.size());
      ASSERT_GE(*n, 1u) << "the run starts at a key the tree holds";
    }
    // The keys it saw are the model's next keys from `from`, all below `to`.
    auto it = model.find(from);
    for (const std::string& k : seen) {
      ASSERT_TRUE(it != model.end());
      ASSERT_EQ(it->first, k);
      ASSERT_LT(k, to);
      it = model.erase(it);
    }
    ++runs;
    emptied += it == model.end() || it->first >= to ? 1 : 0;
    if (round % 256 == 0 || model.size() < 50) {
      TreeIterator ti(tree_.get());
      auto m = model.begin();
      for (ti.SeekToFirst(); ti.Valid(); ti.Next(), ++m) {
        ASSERT_TRUE(m != model.end());
        ASSERT_EQ(ti.key(), m->first);
        ASSERT_EQ(ti.value(), m->second);
      }
      ASSERT_TRUE(ti.status().ok()) << ti.status();
      ASSERT_TRUE(m == model.end());
    }
  }
  EXPECT_GT(runs, 1000u);
  EXPECT_GT(emptied, 100u);  // runs that reached `to` (not only a leaf's end)
  // Drain everything, leaf by leaf, as compaction does.
  while (!model.empty()) {
    absl::StatusOr<size_t> n = tree_->DeleteRun(
        model.begin()->first, "z", 1 << 20, [](absl::string_view, absl::string_view) {
          return absl::OkStatus();
        });
    ASSERT_TRUE(n.ok()) << n.status();
    ASSERT_GE(*n, 1u);
    for (size_t i = 0; i < *n; ++i) model.erase(model.begin());
  }
  TreeIterator ti(tree_.get());
  ti.SeekToFirst();
  EXPECT_FALSE(ti.Valid());
  EXPECT_EQ(tree_->height(), 1);
}

// Writes that reuse a hinted path (Tree::WriteHint): appends to one key
// class ('h', as the KV history) interleaved with random puts and deletes
// of another ('k'), runs deleted from the front of 'h' (compaction), and
// commits (nodes sealed, written, then CoWed again). The tree equals the
// model throughout; debug builds also check every hinted path against a
// fresh descent (Tree::DCheckHintedPath). A hint that outlived a split
// (shape_ not bumped) fails here.
TEST_F(TreeShortcuts, WriteHintsMatchTheModel) {
  std::map<std::string, std::string> model;
  std::mt19937_64 rng(77);
  uint64_t next_h = 0;
  auto hkey = [](uint64_t i) { return absl::StrFormat("h%010d", i); };
  auto check = [&] {
    TreeIterator ti(tree_.get());
    auto m = model.begin();
    for (ti.SeekToFirst(); ti.Valid(); ti.Next(), ++m) {
      ASSERT_TRUE(m != model.end());
      ASSERT_EQ(ti.key(), m->first);
      ASSERT_EQ(ti.value(), m->second);
    }
    ASSERT_TRUE(ti.status().ok()) << ti.status();
    ASSERT_TRUE(m == model.end());
  };
  for (int op = 1; op <= 40000; ++op) {
    const int r = static_cast<int>(rng() % 100);
    std::string v(1 + rng() % 200, static_cast<char>('a' + rng() % 26));
    if (r < 45) {
      const std::string k = hkey(next_h++);
      ASSERT_TRUE(tree_->Put(k, v).ok());
      model[k] = v;
    } else if (r < 80) {
      const std::string k = Key(rng() % 20000);
      ASSERT_TRUE(tree_->Put(k, v).ok());
      model[k] = v;
    } else if (r < 95) {
      auto it = model.lower_bound(Key(rng() % 20000));
      if (it != model.end()) {
        ASSERT_TRUE(tree_->Delete(it->first).ok());
        model.erase(it);
      }
    } else if (model.begin() != model.end() && model.begin()->first[0] == 'h') {
      const size_t max = 1 + rng() % 60;
      absl::StatusOr<size_t> n =
          tree_->DeleteRun(model.begin()->first, "i", max,
                           [](absl::string_view, absl::string_view) { return absl::OkStatus(); });
      ASSERT_TRUE(n.ok()) << n.status();
      for (size_t i = 0; i < *n; ++i) model.erase(model.begin());
    }
    if (op % 3000 == 0) {  // a commit: the tree's nodes sealed and written
      std::vector<NodeRef> nodes = cache_.SealDirty();
      std::sort(nodes.begin(), nodes.end(),
                [](const NodeRef& a, const NodeRef& b) { return a->bytenr < b->bytenr; });
      ASSERT_TRUE(WriteNodes(&dev_, nodes, cache_.fsid(), cache_.nodesize(), nullptr).ok());
      cache_.MarkWritten(nodes);
    }
    if (op % 5000 == 0) {
      check();
      if (HasFatalFailure()) return;
    }
  }
  check();
  EXPECT_GT(tree_->write_hint_hits(), 10000u);
}

}  // namespace
}  // namespace cowkv
