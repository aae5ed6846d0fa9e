// The fs trees of a bare TxnManager (txn/tree_roots.cc): creation, O(1)
// snapshots with lazy refcounting, step-by-step drops, root-tree items.
//
// Goal: every tree reads back its own model through snapshots, writes to
// either side of a snapshot, remounts and drops; a snapshot costs no new
// nodes whatever the tree's size; dropping a tree frees exactly what no
// other tree shares; ids are never reused.
// Method: random writes to chains of snapshots, each commit followed by the
// device check (testing/txn_check.h: every extent's refs equals its pointers
// and its back-references) — the check that catches the trouble cases the
// header of tree_roots.cc describes. Replay: the seeds are fixed and named
// in the failure's trace.
#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/txn_check.h"
#include "engine/txn/txn_manager.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using Model = std::map<std::string, std::string>;
using testing::StatusIs;
using WriteKind = TxnManager::WriteKind;

std::string Key(uint64_t i) { return absl::StrCat("t", 1000000 + i); }

class TreeRootsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(TxnManager::Mkfs(&dev_, 4096, 4096, std::string(16, 'r')));
    Mount();
    baseline_used_ = txn_->Stats().used_bytes;
  }
  void Mount() {
    txn_.reset();
    ASSERT_OK_AND_ASSIGN(txn_, TxnManager::Mount(&dev_, 16 << 20));
  }
  // Commits, checks the device, and (every `remount_every` commits) remounts
  // and compares every tree with its model.
  void CommitAndCheck(const std::map<uint64_t, Model>& models) {
    ASSERT_OK(txn_->Commit());
    const std::vector<std::string> findings = testing::CheckTxnDevice(&dev_);
    ASSERT_TRUE(findings.empty()) << absl::StrJoin(findings, "\n");
    if (++commits_ % 3 == 0) Mount();
    for (const auto& [id, model] : models) ASSERT_EQ(Contents(id), model) << "tree " << id;
  }
  void RandomWrites(std::mt19937_64& rng, uint64_t id, int n, Model* model) {
    Tree* t = txn_->fs_tree(id);
    ASSERT_NE(t, nullptr) << id;
    for (int i = 0; i < n; ++i) {
      const std::string k = Key(rng() % 3000);
      if (rng() % 3 == 0) {
        ASSERT_OK(txn_->ReserveForWrite(t, WriteKind::kDelete));
        const absl::Status s = t->Delete(k);
        ASSERT_EQ(s.ok(), model->erase(k) == 1) << s;
      } else {
        const std::string v(1 + rng() % 200, static_cast<char>('a' + id % 26));
        ASSERT_OK(txn_->ReserveForWrite(t, WriteKind::kInsert));
        ASSERT_OK(t->Put(k, v));
        (*model)[k] = v;
      }
    }
  }
  Model Contents(uint64_t id) {
    Model out;
    Tree* t = txn_->fs_tree(id);
    if (t == nullptr) return {{"<no tree>", absl::StrCat(id)}};
    TreeIterator it(t);
    for (it.SeekToFirst(); it.Valid(); it.Next()) {
      out[std::string(it.key())] = std::string(it.value());
    }
    EXPECT_OK(it.status());
    return out;
  }
  // Drops tree `id` to the end, committing every `steps_per_commit` steps.
  void DropWhole(uint64_t id, int steps_per_commit, const std::map<uint64_t, Model>& live) {
    ASSERT_OK(txn_->MarkTreeDropping(id));
    EXPECT_EQ(txn_->fs_tree(id), nullptr);
    for (int step = 1;; ++step) {
      ASSERT_OK_AND_ASSIGN(bool more, txn_->DropTreeStep(id));
      if (!more) break;
      if (step % steps_per_commit == 0) CommitAndCheck(live);
      if (HasFatalFailure()) return;
      ASSERT_LT(step, 100000) << "the drop does not end";
    }
    CommitAndCheck(live);
    EXPECT_THAT(txn_->TreeRootItem(id), StatusIs(absl::StatusCode::kNotFound));
  }

  MemDevice dev_{64 << 20};
  std::unique_ptr<TxnManager> txn_;
  uint64_t baseline_used_ = 0;
  int commits_ = 0;
};

TEST_F(TreeRootsTest, ASnapshotCostsNoNodesWhateverTheTreeSize) {
  for (int keys : {10, 1000, 8000}) {
    SCOPED_TRACE(absl::StrCat(keys, " keys"));
    ASSERT_OK_AND_ASSIGN(uint64_t src, txn_->CreateTree());
    std::map<uint64_t, Model> models{{src, {}}};
    Tree* t = txn_->fs_tree(src);
    for (int i = 0; i < keys; ++i) {
      ASSERT_OK(txn_->ReserveForWrite(t, WriteKind::kInsert));
      ASSERT_OK(t->Put(Key(i), std::string(100, 'v')));
      models[src][Key(i)] = std::string(100, 'v');
    }
    CommitAndCheck(models);
    const uint64_t used = txn_->Stats().used_bytes;
    ASSERT_OK_AND_ASSIGN(format::RootItem src_root, txn_->TreeRootItem(src));
    ASSERT_OK_AND_ASSIGN(uint64_t snap, txn_->CloneTree(src, /*read_only=*/true));
    models[snap] = models[src];
    ASSERT_OK_AND_ASSIGN(format::RootItem snap_root, txn_->TreeRootItem(snap));
    EXPECT_EQ(snap_root.bytenr, src_root.bytenr);  // the same root node
    EXPECT_TRUE(txn_->IsReadOnly(snap));
    EXPECT_FALSE(txn_->IsReadOnly(src));
    CommitAndCheck(models);
    // Only the root and extent trees' own CoW: a few nodes, not the tree.
    EXPECT_LE(txn_->Stats().used_bytes, used + 8 * 4096);
    ASSERT_OK_AND_ASSIGN(bool shared,
                         txn_->TreeBlockShared(src, src_root.bytenr, src_root.generation));
    EXPECT_TRUE(shared);
    Mount();
    EXPECT_TRUE(txn_->IsReadOnly(snap));
    ASSERT_OK_AND_ASSIGN(format::RootItem again, txn_->TreeRootItem(snap));
    EXPECT_EQ(again.last_snapshot, snap_root.last_snapshot);
  }
}

TEST_F(TreeRootsTest, ChainsOfSnapshotsKeepTheirOwnContentsThroughWrites) {
  for (uint64_t seed : {1, 2, 3, 4}) {
    SCOPED_TRACE(absl::StrCat("seed ", seed));
    std::mt19937_64 rng(seed);
    std::map<uint64_t, Model> models{{format::kDefaultTreeId, Contents(format::kDefaultTreeId)}};
    for (int round = 0; round < 10; ++round) {
      SCOPED_TRACE(absl::StrCat("round ", round));
      // Snapshot a random live tree (always right after a commit), then
      // write to a few random trees, source and snapshots alike.
      auto it = models.begin();
      std::advance(it, rng() % models.size());
      ASSERT_OK_AND_ASSIGN(uint64_t snap, txn_->CloneTree(it->first, false));
      models[snap] = it->second;
      for (int w = 0; w < 3; ++w) {
        auto target = models.begin();
        std::advance(target, rng() % models.size());
        RandomWrites(rng, target->first, 200, &target->second);
        if (HasFatalFailure()) return;
      }
      CommitAndCheck(models);
      if (HasFatalFailure()) return;
    }
    // Drop all but the default tree, in random order; the rest stay intact.
    while (models.size() > 1) {
      auto it = std::next(models.begin(), 1 + rng() % (models.size() - 1));
      const uint64_t id = it->first;
      models.erase(it);
      DropWhole(id, 1 + rng() % 20, models);
      if (HasFatalFailure()) return;
    }
  }
}

TEST_F(TreeRootsTest, DroppingEveryTreeFreesEverythingItTook) {
  for (int steps_per_commit : {1, 7, 1000000}) {
    SCOPED_TRACE(absl::StrCat(steps_per_commit, " steps per commit"));
    std::mt19937_64 rng(steps_per_commit);
    ASSERT_OK_AND_ASSIGN(uint64_t a, txn_->CreateTree());
    std::map<uint64_t, Model> models{{a, {}}};
    RandomWrites(rng, a, 3000, &models[a]);
    CommitAndCheck(models);
    ASSERT_OK_AND_ASSIGN(uint64_t b, txn_->CloneTree(a, false));
    models[b] = models[a];
    RandomWrites(rng, b, 500, &models[b]);
    CommitAndCheck(models);
    const Model b_model = models[b];
    models.erase(a);
    DropWhole(a, steps_per_commit, models);  // b shares most of a's nodes
    ASSERT_EQ(Contents(b), b_model);
    models.clear();
    DropWhole(b, steps_per_commit, models);
    EXPECT_EQ(txn_->TreeIds(false), std::vector<uint64_t>{format::kDefaultTreeId});
    EXPECT_TRUE(txn_->TreeIds(true).empty());
    EXPECT_EQ(txn_->Stats().used_bytes, baseline_used_);
    EXPECT_EQ(txn_->superblock().bytes_used, baseline_used_);
  }
}

TEST_F(TreeRootsTest, TreeIdsGrowAndAreNeverReused) {
  std::vector<uint64_t> seen;
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 3; ++i) {
      ASSERT_OK_AND_ASSIGN(uint64_t id, txn_->CreateTree());
      EXPECT_GE(id, format::kFirstFreeTreeId);
      if (!seen.empty()) {
        EXPECT_GT(id, seen.back());
      }
      seen.push_back(id);
    }
    ASSERT_OK(txn_->Commit());
    // Drop the newest, remount: the next id is still beyond it.
    DropWhole(seen.back(), 1, {});
    Mount();
  }
  std::vector<uint64_t> live(seen.begin(), seen.end());
  live.erase(std::remove_if(live.begin(), live.end(),
                            [&](uint64_t id) { return txn_->fs_tree(id) == nullptr; }),
             live.end());
  EXPECT_EQ(live.size(), 8u);
  live.insert(live.begin(), format::kDefaultTreeId);
  EXPECT_EQ(txn_->TreeIds(false), live);
}

TEST_F(TreeRootsTest, BadTreeOperationsAreRefusedWithoutChanges) {
  ASSERT_OK_AND_ASSIGN(uint64_t a, txn_->CreateTree());
  ASSERT_OK(txn_->Commit());
  EXPECT_THAT(txn_->MarkTreeDropping(format::kDefaultTreeId),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  for (uint64_t unknown : {uint64_t{0}, uint64_t{3}, a + 1, ~uint64_t{0}}) {
    EXPECT_THAT(txn_->CloneTree(unknown, false), StatusIs(absl::StatusCode::kNotFound));
    EXPECT_THAT(txn_->MarkTreeDropping(unknown), StatusIs(absl::StatusCode::kNotFound));
    EXPECT_THAT(txn_->DropTreeStep(unknown), StatusIs(absl::StatusCode::kNotFound));
    EXPECT_THAT(txn_->TreeRootItem(unknown), StatusIs(absl::StatusCode::kNotFound));
    EXPECT_EQ(txn_->fs_tree(unknown), nullptr);
  }
  EXPECT_FALSE(txn_->HasChanges());
  EXPECT_THAT(txn_->DropTreeStep(a), StatusIs(absl::StatusCode::kNotFound));  // not dying
  ASSERT_OK(txn_->MarkTreeDropping(a));
  EXPECT_THAT(txn_->MarkTreeDropping(a), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(txn_->CloneTree(a, false), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(txn_->TreeIds(true), std::vector<uint64_t>{a});
  ASSERT_OK(txn_->Commit());
  Mount();  // a deletion in progress survives a remount
  EXPECT_EQ(txn_->TreeIds(true), std::vector<uint64_t>{a});
  EXPECT_EQ(txn_->fs_tree(a), nullptr);
}

TEST_F(TreeRootsTest, RootTreeItemsAreScannedByTypeAndSurviveARemount) {
  constexpr uint8_t kType = format::kSubvolInfo;
  std::map<uint64_t, std::string> want;
  for (uint64_t id = 256; id < 356; ++id) {
    ASSERT_OK(txn_->ReserveRootTreeWrites(1));
    const std::string v(1 + id % 50, 'i');
    ASSERT_OK(txn_->PutRootTreeItem(format::EncodeKey17({id, kType, 0}), v));
    want[id] = v;
  }
  for (uint64_t id = 256; id < 356; id += 3) {
    ASSERT_OK(txn_->DeleteRootTreeItem(format::EncodeKey17({id, kType, 0})));
    want.erase(id);
  }
  ASSERT_OK(txn_->DeleteRootTreeItem(format::EncodeKey17({9999, kType, 0})));  // absent: OK
  ASSERT_OK(txn_->Commit());
  Mount();
  std::map<uint64_t, std::string> got;
  ASSERT_OK(txn_->ScanRootTree(kType, [&](uint64_t id, absl::string_view v) {
    got[id] = std::string(v);
    return absl::OkStatus();
  }));
  EXPECT_EQ(got, want);
  // The scan stops at the first error and returns it.
  int calls = 0;
  EXPECT_THAT(txn_->ScanRootTree(kType,
                                 [&](uint64_t, absl::string_view) {
                                   ++calls;
                                   return absl::CancelledError("enough");
                                 }),
              StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(calls, 1);
}

}  // namespace
}  // namespace cowkv
