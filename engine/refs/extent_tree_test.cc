// RunDelayedRefs over an extent tree in memory (a Tree on a MemDevice, no
// transaction manager: refs sits below txn).
//
// Goal: running merged heads keeps the extent tree equal to a model of
// reference counts — fresh extents are inserted with their refs, updates
// move refs and back-references together, an extent reaching zero loses
// every item and is handed to on_free exactly once — and a head that
// contradicts the tree is DATA_LOSS through CorruptionError, never a crash.
// Method: random rounds of allocations, new references and drops over both
// extent kinds, each round run as a commit runs it (TakeAll, then
// RunDelayedRefs), then the model compared and the tree checked: every
// EXTENT_ITEM's refs equals its back-references (format/items.h). Replay: the
// seeds are fixed; a failure names the round.
#include "engine/refs/extent_tree.h"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/refs/delayed_refs.h"
#include "engine/testing/status_matchers.h"
#include "engine/tree/node_cache.h"
#include "engine/tree/tree.h"
#include "engine/testing/in_memory_hooks.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using format::ExtentItem;
using format::Key17;


struct Freed {
  uint64_t bytenr;
  uint64_t num_bytes;
  bool operator<(const Freed& o) const { return bytenr < o.bytenr; }
};

class ExtentTreeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto t = Tree::CreateEmpty(format::kExtentTreeId, &cache_, &hooks_);
    ASSERT_TRUE(t.ok()) << t.status();
    tree_ = *std::move(t);
  }

  // Runs every queued head, as a commit does.
  absl::Status Run() {
    return RunDelayedRefs(tree_.get(), refs_.TakeAll(), [this](uint64_t b, uint64_t n) {
      freed_.push_back({b, n});
    });
  }

  absl::StatusOr<ExtentItem> Item(uint64_t bytenr, uint64_t len) {
    COWKV_ASSIGN_OR_RETURN(
        std::string v, tree_->Get(format::EncodeKey17(Key17{bytenr, format::kExtentItem, len})));
    return format::DecodeExtentItem(v, bytenr);
  }

  // Every item of the extent at `bytenr` (the item and its back-references).
  std::vector<Key17> ItemsOf(uint64_t bytenr) {
    std::vector<Key17> out;
    TreeIterator it(tree_.get());
    for (it.Seek(format::EncodeKey17(Key17{bytenr, 0, 0})); it.Valid(); it.Next()) {
      Key17 k;
      EXPECT_TRUE(format::DecodeKey17(it.key(), &k));
      if (k.objectid != bytenr) break;
      out.push_back(k);
    }
    EXPECT_OK(it.status());
    return out;
  }

  // The extent tree's own invariant: refs == back-reference items (data
  // back-references count their value).
  void ExpectRefsMatchBackrefs() {
    std::map<uint64_t, int64_t> balance;
    TreeIterator it(tree_.get());
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      Key17 k;
      ASSERT_TRUE(format::DecodeKey17(it.key(), &k));
      if (k.type == format::kExtentItem) {
        absl::StatusOr<ExtentItem> e = format::DecodeExtentItem(it.value(), k.objectid);
        ASSERT_OK(e);
        balance[k.objectid] += static_cast<int64_t>(e->refs);
      } else if (format::IsDataRef(k.type)) {
        absl::StatusOr<uint32_t> c = format::DecodeDataRefCount(it.value(), k.objectid);
        ASSERT_OK(c);
        balance[k.objectid] -= *c;
      } else {
        ASSERT_TRUE(format::IsBackref(k.type)) << int{k.type};
        balance[k.objectid] -= 1;
      }
    }
    ASSERT_OK(it.status());
    for (const auto& [b, d] : balance) EXPECT_EQ(d, 0) << "extent " << b;
  }

  MemDevice dev_{64 << 20};
  NodeCache cache_{&dev_, std::string(16, 'e'), 4096, 4096, 64 << 20};
  testing::InMemoryHooks hooks_{3, 1ull << 30};
  std::unique_ptr<Tree> tree_;
  DelayedRefs refs_;
  std::vector<Freed> freed_;
};

uint64_t Bytenr(uint64_t i) { return (4ull << 20) + i * 65536; }

TEST_F(ExtentTreeTest, FreshExtentsAreInsertedWithTheirRefsAndBackrefs) {
  uint64_t i = 0;
  for (bool data : {false, true}) {
    for (int nrefs = 1; nrefs <= 4; ++nrefs) {
      for (bool full : {false, true}) {
        if (data && full) continue;  // FULL_BACKREF is a tree-block flag
        const uint64_t b = Bytenr(i++), len = data ? 4096 * nrefs : 4096;
        const uint8_t level = data ? 0 : static_cast<uint8_t>(nrefs % 3);
        const uint8_t kind = data ? format::kExtentDataRef : format::kTreeBlockRef;
        refs_.Add(b, len, level, {kind, 256}, +1, /*new_alloc=*/true, 40 + i);
        for (int r = 1; r < nrefs; ++r) {
          // Data: more items of one tree (a count); tree blocks: other trees.
          refs_.Add(b, len, level, {kind, data ? 256u : 256u + r}, +1, false, 40 + i);
        }
        if (full) refs_.SetFullBackref(b, len, level);
        ASSERT_OK(Run());
        absl::StatusOr<ExtentItem> e = Item(b, len);
        ASSERT_OK(e);
        EXPECT_EQ(e->refs, static_cast<uint64_t>(nrefs));
        EXPECT_EQ(e->generation, 40 + i);
        EXPECT_EQ(e->level, level);
        EXPECT_EQ((e->flags & format::kExtentFlagData) != 0, data);
        EXPECT_EQ((e->flags & format::kExtentFlagTreeBlock) != 0, !data);
        EXPECT_EQ((e->flags & format::kExtentFlagFullBackref) != 0, full);
        EXPECT_EQ(ItemsOf(b).size(), data ? 2u : 1u + nrefs);
      }
    }
  }
  EXPECT_TRUE(freed_.empty());
  ExpectRefsMatchBackrefs();
}

// A model extent: its length, kind and back-references with their counts.
struct ModelExtent {
  uint64_t len = 0;
  bool data = false;
  std::map<BackrefKey, int64_t> refs;
  int64_t total() const {
    int64_t n = 0;
    for (const auto& [ref, c] : refs) n += c;
    return n;
  }
};

// One random update the model allows: a new extent, a new reference, a drop.
// An extent whose last reference goes moves to `emptied` (bytenr -> length).
void RandomUpdate(std::mt19937_64& rng, uint64_t* next_extent,
                  std::map<uint64_t, ModelExtent>* model, std::map<uint64_t, uint64_t>* emptied,
                  DelayedRefs* refs) {
  const uint64_t op = rng() % 3;
  if (op == 0 || model->empty()) {
    ModelExtent m;
    m.data = rng() % 2;
    m.len = m.data ? 4096 * (1 + rng() % 16) : 4096;
    const BackrefKey ref{m.data ? format::kExtentDataRef : format::kTreeBlockRef, 256};
    const uint64_t b = Bytenr((*next_extent)++);
    refs->Add(b, m.len, 0, ref, +1, /*new_alloc=*/true, 1);
    m.refs[ref] = 1;
    (*model)[b] = m;
    return;
  }
  auto it = model->begin();
  std::advance(it, rng() % model->size());
  ModelExtent& m = it->second;
  const uint8_t kind = m.data ? (rng() % 2 ? format::kExtentDataRef : format::kSharedDataRef)
                              : (rng() % 2 ? format::kTreeBlockRef : format::kSharedBlockRef);
  if (op == 1) {
    const BackrefKey ref{kind, 256 + rng() % 4};
    if (!m.data && m.refs.count(ref)) return;  // tree-block backrefs are single
    refs->Add(it->first, m.len, 0, ref, +1, false, 1);
    ++m.refs[ref];
    return;
  }
  auto r = m.refs.begin();
  std::advance(r, rng() % m.refs.size());
  refs->Add(it->first, m.len, 0, r->first, -1, false, 1);
  if (--r->second == 0) m.refs.erase(r);
  if (m.refs.empty()) {
    // Allocated and freed before a run: gone without reaching the tree
    // (TxnManager::FreeTreeBlock does the same).
    refs->DropIfCancelled(it->first);
    (*emptied)[it->first] = m.len;
    model->erase(it);
  }
}

TEST_F(ExtentTreeTest, RefcountsFollowAModelAcrossRuns) {
  for (uint64_t seed : {1, 2, 3}) {
    SetUp();  // a fresh tree per seed
    refs_ = DelayedRefs();
    freed_.clear();
    std::mt19937_64 rng(seed);
    std::map<uint64_t, ModelExtent> model;  // extents with refs
    std::set<uint64_t> in_tree;             // extents some run inserted
    uint64_t next_extent = 0;
    uint64_t total_freed = 0;
    for (int round = 0; round < 60; ++round) {
      SCOPED_TRACE(absl::StrCat("seed ", seed, " round ", round));
      std::map<uint64_t, uint64_t> emptied;
      for (int i = 0; i < 40; ++i) RandomUpdate(rng, &next_extent, &model, &emptied, &refs_);
      freed_.clear();
      ASSERT_OK(Run());
      std::set<Freed> want_freed;
      for (const auto& [b, len] : emptied) {
        if (in_tree.erase(b) > 0) want_freed.insert({b, len});
      }
      for (const auto& [b, m] : model) in_tree.insert(b);
      std::set<Freed> got_freed(freed_.begin(), freed_.end());
      ASSERT_EQ(got_freed.size(), freed_.size()) << "an extent was freed twice";
      ASSERT_EQ(got_freed.size(), want_freed.size());
      total_freed += got_freed.size();
      for (auto g = got_freed.begin(), w = want_freed.begin(); g != got_freed.end(); ++g, ++w) {
        EXPECT_EQ(g->bytenr, w->bytenr);
        EXPECT_EQ(g->num_bytes, w->num_bytes);
        EXPECT_TRUE(ItemsOf(g->bytenr).empty()) << "items of a freed extent remain";
      }
      for (const auto& [b, m] : model) {
        absl::StatusOr<ExtentItem> e = Item(b, m.len);
        ASSERT_OK(e);
        EXPECT_EQ(e->refs, static_cast<uint64_t>(m.total())) << b;
      }
      ExpectRefsMatchBackrefs();
    }
    // The rounds exercised every path: extents live, and extents freed.
    EXPECT_GT(total_freed, 20u);
    EXPECT_GT(model.size(), 20u);
  }
}

TEST_F(ExtentTreeTest, FullBackrefFlagIsSetOnAnExistingExtentWithoutChangingRefs) {
  for (int nrefs = 1; nrefs <= 3; ++nrefs) {
    const uint64_t b = Bytenr(nrefs);
    for (int r = 0; r < nrefs; ++r) {
      refs_.Add(b, 4096, 1, {format::kTreeBlockRef, 256u + r}, +1, r == 0, 5);
    }
    ASSERT_OK(Run());
    refs_.SetFullBackref(b, 4096, 1);
    ASSERT_OK(Run());
    absl::StatusOr<ExtentItem> e = Item(b, 4096);
    ASSERT_OK(e);
    EXPECT_EQ(e->refs, static_cast<uint64_t>(nrefs));
    EXPECT_TRUE(e->flags & format::kExtentFlagFullBackref);
  }
}

// Heads that contradict the tree, each on an extent the tree holds with
// refs = 1 and one TREE_BLOCK_REF(256) (or EXTENT_DATA_REF(256) = 1).
struct BadHead {
  const char* name;
  bool data;
  // Queues the contradiction (or breaks the tree) for the extent at `b`.
  void (*apply)(uint64_t b, uint64_t len, DelayedRefs* refs, Tree* tree);
};

const BadHead kBadHeads[] = {
    {"update of an unknown extent", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b + 4096, len, 0, {format::kTreeBlockRef, 256}, +1, false, 1);
     }},
    {"drop of an unknown data extent", true,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b + len, len, 0, {format::kExtentDataRef, 256}, -1, false, 1);
     }},
    {"drop of a missing backref", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b, len, 0, {format::kTreeBlockRef, 257}, -1, false, 1);
     }},
    {"duplicate tree-block backref", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b, len, 0, {format::kTreeBlockRef, 256}, +1, false, 1);
     }},
    {"delta of two on a single backref", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b, len, 0, {format::kSharedBlockRef, 9 << 20}, +1, false, 1);
       refs->Add(b, len, 0, {format::kSharedBlockRef, 9 << 20}, +1, false, 1);
     }},
    {"data count below zero", true,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b, len, 0, {format::kExtentDataRef, 256}, -1, false, 1);
       refs->Add(b, len, 0, {format::kExtentDataRef, 256}, -1, false, 1);
     }},
    {"refcount below zero (item says 1, two backrefs)", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree* tree) {
       ASSERT_OK(tree->Put(format::EncodeKey17(Key17{b, format::kTreeBlockRef, 257}), ""));
       refs->Add(b, len, 0, {format::kTreeBlockRef, 256}, -1, false, 1);
       refs->Add(b, len, 0, {format::kTreeBlockRef, 257}, -1, false, 1);
     }},
    {"fresh extent whose refs cancelled but was not dropped", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree*) {
       refs->Add(b + 4096, len, 0, {format::kTreeBlockRef, 256}, +1, true, 1);
       refs->Add(b + 4096, len, 0, {format::kTreeBlockRef, 256}, -1, false, 1);
     }},
    {"extent item of the wrong size", false,
     [](uint64_t b, uint64_t len, DelayedRefs* refs, Tree* tree) {
       ASSERT_OK(
           tree->Put(format::EncodeKey17(Key17{b, format::kExtentItem, len}), std::string(7, 1)));
       refs->Add(b, len, 0, {format::kTreeBlockRef, 257}, +1, false, 1);
     }},
};

TEST_F(ExtentTreeTest, AHeadThatContradictsTheTreeIsCorruption) {
  uint64_t i = 0;
  for (const BadHead& bad : kBadHeads) {
    SCOPED_TRACE(bad.name);
    const uint64_t b = Bytenr(i++ * 4), len = bad.data ? 8192 : 4096;
    const BackrefKey ref{bad.data ? format::kExtentDataRef : format::kTreeBlockRef, 256};
    refs_.Add(b, len, 0, ref, +1, /*new_alloc=*/true, 1);
    ASSERT_OK(Run());
    bad.apply(b, len, &refs_, tree_.get());
    freed_.clear();
    const uint64_t before = CorruptionsDetected();
    const absl::Status s = Run();
    EXPECT_THAT(s, testing::StatusIs(absl::StatusCode::kDataLoss));
    EXPECT_EQ(ReasonOf(s), ErrorReason::kCorruption) << s;
    EXPECT_EQ(CorruptionsDetected(), before + 1) << s;
    EXPECT_NE(s.message().find("bytenr="), std::string::npos) << s;
    EXPECT_TRUE(freed_.empty()) << "nothing is freed by a contradicting head";
  }
}

}  // namespace
}  // namespace cowkv
