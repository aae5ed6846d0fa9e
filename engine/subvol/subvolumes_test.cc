// Subvolumes over a bare TxnManager: names survive a remount, ids are never
// reused, a deleted subvolume's tree is dropped step by step, and a root
// tree whose SUBVOL_INFO items do not match its trees refuses to load.
#include "engine/subvol/subvolumes.h"

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

#define ASSERT_OK(expr)                                  \
  do {                                                   \
    const absl::Status _s = (expr);                      \
    ASSERT_TRUE(_s.ok()) << #expr << ": " << _s;         \
  } while (0)

class SubvolumesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(TxnManager::Mkfs(&dev_, 4096, 4096, std::string(16, 'u'), &Subvolumes::NameDefault));
    Remount();
  }
  void Remount() {
    subvols_.reset();
    txn_.reset();
    auto m = TxnManager::Mount(&dev_, 16 << 20);
    ASSERT_TRUE(m.ok()) << m.status();
    txn_ = std::move(*m);
    subvols_ = std::make_unique<Subvolumes>(txn_.get());
    ASSERT_OK(subvols_->Load());
  }
  std::vector<std::string> Names() {
    std::vector<std::string> out;
    for (const SubvolInfo& s : subvols_->List()) out.push_back(s.name);
    return out;
  }

  MemDevice dev_{64 << 20};
  std::unique_ptr<TxnManager> txn_;
  std::unique_ptr<Subvolumes> subvols_;
};

TEST_F(SubvolumesTest, NamesSurviveARemount) {
  EXPECT_EQ(Names(), std::vector<std::string>{"default"});
  auto a = subvols_->Create("a");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_OK(txn_->Commit());
  auto snap = subvols_->Snapshot(*a, "a@1", /*read_only=*/true);
  ASSERT_TRUE(snap.ok()) << snap.status();
  ASSERT_OK(subvols_->Rename(*a, "b"));
  EXPECT_TRUE(absl::IsAlreadyExists(subvols_->Create("b").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(subvols_->Create("x/y").status()));
  ASSERT_OK(txn_->Commit());
  Remount();
  EXPECT_EQ(Names(), (std::vector<std::string>{"default", "b", "a@1"}));
  auto info = subvols_->Get(*snap);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->parent_id, *a);
  EXPECT_TRUE(info->flags & format::kRootFlagReadOnly);
  EXPECT_TRUE(subvols_->IsReadOnly(*snap));
  EXPECT_FALSE(subvols_->IsReadOnly(*a));
  EXPECT_EQ(*subvols_->Lookup("b"), *a);
  EXPECT_TRUE(absl::IsNotFound(subvols_->Lookup("a").status()));
}

TEST_F(SubvolumesTest, DeleteDropsTheTreeAndNeverReusesTheId) {
  auto a = subvols_->Create("a");
  ASSERT_TRUE(a.ok());
  Tree* t = txn_->fs_tree(*a);
  ASSERT_NE(t, nullptr);
  for (int i = 0; i < 2000; ++i) {
    ASSERT_OK(txn_->ReserveForWrite(t, TxnManager::WriteKind::kInsert));
    ASSERT_OK(t->Put(absl::StrCat("key", i), std::string(100, 'v')));
  }
  ASSERT_OK(txn_->Commit());
  EXPECT_TRUE(absl::IsFailedPrecondition(subvols_->Delete(format::kDefaultTreeId)));
  ASSERT_OK(subvols_->Delete(*a));
  EXPECT_TRUE(absl::IsNotFound(subvols_->Lookup("a").status()));
  EXPECT_EQ(txn_->fs_tree(*a), nullptr);
  EXPECT_EQ(subvols_->dead_roots(), 1u);
  ASSERT_OK(txn_->Commit());
  Remount();  // the drop resumes after a remount
  EXPECT_EQ(subvols_->dead_roots(), 1u);
  auto steps = subvols_->CleanDeadRoots(1);
  ASSERT_TRUE(steps.ok()) << steps.status();
  EXPECT_EQ(*steps, 1);
  ASSERT_OK(txn_->Commit());
  int total = 1;
  while (subvols_->HasDeadRoots()) {
    steps = subvols_->CleanDeadRoots(16);
    ASSERT_TRUE(steps.ok()) << steps.status();
    total += *steps;
    ASSERT_OK(txn_->Commit());
  }
  EXPECT_GT(total, 1);
  auto b = subvols_->Create("a");
  ASSERT_TRUE(b.ok());
  EXPECT_GT(*b, *a);
}

TEST_F(SubvolumesTest, InfoWithoutATreeIsDataLoss) {
  ASSERT_OK(txn_->ReserveRootTreeWrites(1));
  format::SubvolInfoItem si{0, 1, 1, "ghost"};
  ASSERT_OK(txn_->PutRootTreeItem(format::EncodeKey17({9999, format::kSubvolInfo, 0}),
                                  format::EncodeSubvolInfo(si)));
  ASSERT_OK(txn_->Commit());
  subvols_.reset();
  txn_.reset();
  auto m = TxnManager::Mount(&dev_, 16 << 20);
  ASSERT_TRUE(m.ok()) << m.status();
  Subvolumes s(m->get());
  absl::Status st = s.Load();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
}

// Ids are never reused, and CreateTree asserts it: mount must refuse a root
// tree listing a tree the superblock's next_tree_id has not reached, or the
// next Create would hand that id out again.
TEST_F(SubvolumesTest, ATreeIdAtOrAboveNextTreeIdIsDataLoss) {
  auto def = txn_->TreeRootItem(format::kDefaultTreeId);
  ASSERT_TRUE(def.ok()) << def.status();
  ASSERT_OK(txn_->ReserveRootTreeWrites(1));
  ASSERT_OK(txn_->PutRootTreeItem(RootItemKeyFor(9999), format::EncodeRootItem(*def)));
  ASSERT_OK(txn_->Commit());
  subvols_.reset();
  txn_.reset();
  auto m = TxnManager::Mount(&dev_, 16 << 20);
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::IsDataLoss(m.status())) << m.status();
  EXPECT_NE(m.status().message().find("next_tree_id"), absl::string_view::npos) << m.status();
}

TEST_F(SubvolumesTest, ATreeWithoutInfoGetsAName) {
  auto id = txn_->CreateTree();  // a tree the subvolume layer never named
  ASSERT_TRUE(id.ok());
  ASSERT_OK(txn_->Commit());
  Remount();
  EXPECT_EQ(Names(), (std::vector<std::string>{"default", absl::StrCat("subvol-", *id)}));
}

}  // namespace
}  // namespace cowkv
