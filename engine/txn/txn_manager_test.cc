// TxnManager over a MemDevice (through a FaultDevice), without the store.
//
// Goal: the engine transaction's contracts, each across a range of inputs —
// Mkfs then Mount for every geometry, a commit advances the generation by
// one (and a commit without changes writes nothing), what a commit wrote
// survives a remount and nothing uncommitted does, a commit that fails at
// any write or flush leaves the previous generation mountable (or, if its
// superblock reached the media, exactly the new one), free space is
// accounted to the byte across commits, a full device refuses a write but
// never the commit, and the superblock copies heal.
// Method: after every commit the device is checked from its bytes alone
// (testing/txn_check.h: refs == pointers == back-references, bytes_used),
// and a remount must see the model of the last commit.
#include "engine/txn/txn_manager.h"

#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/limits.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/format/superblock.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/txn_check.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using Model = std::map<std::string, std::string>;
using testing::StatusIs;
using WriteKind = TxnManager::WriteKind;

const std::string kFsid = "txn-manager-test";  // 16 bytes
// Big enough for the second superblock copy (at 64 MiB) to fit.
constexpr uint64_t kDeviceBytes = 72ull << 20;

// Keys never start with 'k' or 'f': those prefixes name KV and file items,
// whose values the refs layer reads as data-extent pointers.
std::string Key(uint64_t i) { return absl::StrCat("t", 1000000 + i); }
std::string Value(uint64_t i, size_t len) {
  return std::string(len, static_cast<char>('a' + i % 26));
}

class TxnManagerTest : public ::testing::Test {
 protected:
  void Format(uint32_t nodesize = 4096, uint32_t sectorsize = 4096) {
    txn_.reset();
    ASSERT_OK(TxnManager::Mkfs(&fault_, nodesize, sectorsize, kFsid));
    Mount();
  }
  void Mount() {
    txn_.reset();
    ASSERT_OK_AND_ASSIGN(txn_, TxnManager::Mount(&fault_, 16 << 20));
  }

  absl::Status Put(Tree* t, const std::string& key, const std::string& value) {
    COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(t, WriteKind::kInsert));
    return t->Put(key, value);
  }
  absl::Status Delete(Tree* t, const std::string& key) {
    COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(t, WriteKind::kDelete));
    return t->Delete(key);
  }
  // Applies `n` random puts and deletes to the default tree and the model.
  void RandomWrites(std::mt19937_64& rng, int n, Model* model) {
    Tree* t = txn_->fs_tree(format::kDefaultTreeId);
    for (int i = 0; i < n; ++i) {
      const uint64_t k = rng() % 2000;
      if (rng() % 4 == 0) {
        const absl::Status s = Delete(t, Key(k));
        ASSERT_EQ(s.ok(), model->erase(Key(k)) == 1) << s;
      } else {
        const std::string v = Value(k + i, 1 + rng() % 300);
        ASSERT_OK(Put(t, Key(k), v));
        (*model)[Key(k)] = v;
      }
    }
  }

  Model Contents(uint64_t tree_id) {
    Model out;
    Tree* t = txn_->fs_tree(tree_id);
    EXPECT_NE(t, nullptr) << tree_id;
    if (t == nullptr) return out;
    TreeIterator it(t);
    for (it.SeekToFirst(); it.Valid(); it.Next())
      out[std::string(it.key())] = std::string(it.value());
    EXPECT_OK(it.status());
    return out;
  }

  void ExpectDeviceChecks() {
    const std::vector<std::string> findings = testing::CheckTxnDevice(&mem_);
    EXPECT_TRUE(findings.empty()) << absl::StrJoin(findings, "\n");
  }

  MemDevice mem_{kDeviceBytes};
  FaultDevice fault_{&mem_};
  std::unique_ptr<TxnManager> txn_;
};

TEST_F(TxnManagerTest, MkfsThenMountForEveryGeometry) {
  for (uint32_t nodesize : {4096u, 16384u, 65536u}) {
    for (uint32_t sectorsize : {512u, 4096u}) {
      SCOPED_TRACE(absl::StrCat("nodesize ", nodesize, " sectorsize ", sectorsize));
      Format(nodesize, sectorsize);
      const format::Superblock& sb = txn_->superblock();
      EXPECT_EQ(sb.generation, 1u);
      EXPECT_EQ(txn_->generation(), 2u);
      EXPECT_EQ(sb.nodesize, nodesize);
      EXPECT_EQ(sb.sectorsize, sectorsize);
      EXPECT_EQ(sb.fsid, kFsid);
      EXPECT_EQ(sb.total_bytes, kDeviceBytes);
      EXPECT_EQ(sb.log_root, 0u);
      // Three trees of one leaf each: root, extent, default.
      EXPECT_EQ(sb.bytes_used, 3u * nodesize);
      EXPECT_EQ(txn_->TreeIds(false), std::vector<uint64_t>{format::kDefaultTreeId});
      EXPECT_TRUE(txn_->TreeIds(true).empty());
      EXPECT_TRUE(Contents(format::kDefaultTreeId).empty());
      EXPECT_FALSE(txn_->HasChanges());
      EXPECT_OK(txn_->fatal());
      ExpectDeviceChecks();
    }
  }
}

TEST_F(TxnManagerTest, MkfsRefusesBadGeometryWithoutTouchingTheDevice) {
  struct Bad {
    uint32_t nodesize, sectorsize;
    uint64_t device;
    std::string fsid;
  };
  const Bad kBad[] = {
      {2048, 512, kDeviceBytes, kFsid},
      {3000, 512, kDeviceBytes, kFsid},
      {131072, 4096, kDeviceBytes, kFsid},
      {4096, 256, kDeviceBytes, kFsid},
      {4096, 3072, kDeviceBytes, kFsid},
      {4096, 8192, kDeviceBytes, kFsid},
      {4096, 4096, kMinDeviceBytes - 4096, kFsid},
      {4096, 4096, kDeviceBytes, "short"},
  };
  for (const Bad& b : kBad) {
    SCOPED_TRACE(absl::StrCat(b.nodesize, "/", b.sectorsize, "/", b.device, "/", b.fsid));
    MemDevice dev(b.device);
    const uint64_t writes = dev.writes();
    EXPECT_THAT(TxnManager::Mkfs(&dev, b.nodesize, b.sectorsize, b.fsid),
                StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_EQ(dev.writes(), writes);
  }
}

TEST_F(TxnManagerTest, MountRefusesADeviceWithoutAValidSuperblock) {
  EXPECT_THAT(TxnManager::Mount(&fault_, 1 << 20), StatusIs(absl::StatusCode::kDataLoss));
  Format();
  // Every copy broken: the primary's magic, the mirror's checksum.
  for (uint64_t off : {format::kSuperblockOffsets[0], format::kSuperblockOffsets[1] + 100}) {
    const char junk = 0x5a;
    ASSERT_OK(mem_.WriteAt(off + 8, &junk, 1));
  }
  txn_.reset();
  EXPECT_THAT(TxnManager::Mount(&fault_, 1 << 20), StatusIs(absl::StatusCode::kDataLoss));
}

TEST_F(TxnManagerTest, CommitAdvancesTheGenerationByOne) {
  Format();
  std::mt19937_64 rng(7);
  Model model;
  for (uint64_t round = 0; round < 12; ++round) {
    const uint64_t gen = txn_->superblock().generation;
    const uint64_t commits = txn_->Stats().commits;
    RandomWrites(rng, 50, &model);
    EXPECT_TRUE(txn_->HasChanges());
    ASSERT_OK(txn_->Commit());
    EXPECT_EQ(txn_->superblock().generation, gen + 1);
    EXPECT_EQ(txn_->generation(), gen + 2);
    EXPECT_EQ(txn_->Stats().commits, commits + 1);
    // Nothing changed: no commit, no write, no flush.
    const uint64_t writes = mem_.writes(), flushes = mem_.flushes();
    ASSERT_OK(txn_->Commit());
    EXPECT_EQ(txn_->superblock().generation, gen + 1);
    EXPECT_EQ(mem_.writes(), writes);
    EXPECT_EQ(mem_.flushes(), flushes);
    if (round % 4 == 3) {
      Mount();
      EXPECT_EQ(txn_->superblock().generation, gen + 1);
      EXPECT_EQ(txn_->generation(), gen + 2);
    }
  }
}

TEST_F(TxnManagerTest, CommittedTreesSurviveARemountAndUncommittedWritesDoNot) {
  Format();
  std::map<uint64_t, Model> models{{format::kDefaultTreeId, {}}};
  std::mt19937_64 rng(11);
  for (int round = 0; round < 8; ++round) {
    SCOPED_TRACE(absl::StrCat("round ", round));
    if (round % 2 == 0) {
      ASSERT_OK_AND_ASSIGN(uint64_t id, txn_->CreateTree());
      models[id] = {};
    }
    for (auto& [id, model] : models) {
      Tree* t = txn_->fs_tree(id);
      ASSERT_NE(t, nullptr);
      for (int i = 0; i < 150; ++i) {
        const uint64_t k = rng() % 600;
        const std::string v = Value(id + k, 1 + rng() % 400);
        ASSERT_OK(Put(t, Key(k), v));
        model[Key(k)] = v;
      }
    }
    ASSERT_OK(txn_->Commit());
    ExpectDeviceChecks();
    // Written but never committed: gone after the remount.
    ASSERT_OK(Put(txn_->fs_tree(format::kDefaultTreeId), Key(999999), "lost"));
    ASSERT_OK_AND_ASSIGN(uint64_t lost_tree, txn_->CreateTree());
    Mount();
    EXPECT_EQ(txn_->fs_tree(lost_tree), nullptr);
    for (const auto& [id, model] : models) EXPECT_EQ(Contents(id), model) << "tree " << id;
  }
}

// One commit of `model_b` over the committed `model_a` fails at the n-th
// call of `op`; after a power loss the device must hold either generation.
struct FailPoint {
  FaultDevice::Op op;
  uint64_t n;
  FaultDevice::LossMode loss;
};

std::string Describe(const FailPoint& f) {
  const char* ops[] = {"read", "write", "flush"};
  return absl::StrCat("fail ", ops[static_cast<int>(f.op)], " #", f.n, ", loss mode ",
                      static_cast<int>(f.loss));
}

enum class Outcome { kCommitted, kOldGeneration, kNewGeneration };

class TxnManagerFailTest : public TxnManagerTest {
 protected:
  // kCommitted once the n-th call is past the commit (it succeeded);
  // otherwise which generation the device held after the power loss.
  Outcome FailOneCommit(const FailPoint& f) {
    Format();
    if (txn_ == nullptr) return Outcome::kCommitted;
    std::mt19937_64 rng(f.n);
    Model a, b;
    RandomWrites(rng, 300, &a);
    EXPECT_OK(txn_->Commit());
    const uint64_t gen_a = txn_->superblock().generation;
    b = a;
    RandomWrites(rng, 300, &b);
    fault_.FailAfter(f.op, f.n, absl::StatusCode::kInternal, /*persistent=*/false);
    const absl::Status s = txn_->Commit();
    fault_.ClearFaults();
    if (s.ok()) return Outcome::kCommitted;
    // Read-only from here on, but still serving what it holds in memory.
    EXPECT_THAT(txn_->fatal(), StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_EQ(ReasonOf(txn_->fatal()), ErrorReason::kEROFS);
    EXPECT_THAT(txn_->Commit(), StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_THAT(txn_->ReserveForWrite(txn_->fs_tree(format::kDefaultTreeId), WriteKind::kInsert),
                StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_EQ(Contents(format::kDefaultTreeId), b);
    fault_.PowerLoss(f.loss, f.n);
    Mount();
    if (txn_ == nullptr) return Outcome::kCommitted;
    const uint64_t gen = txn_->superblock().generation;
    if (f.loss == FaultDevice::LossMode::kDropAll) {
      EXPECT_EQ(gen, gen_a);
    }
    EXPECT_TRUE(gen == gen_a || gen == gen_a + 1) << gen;
    EXPECT_EQ(Contents(format::kDefaultTreeId), gen == gen_a ? a : b);
    ExpectDeviceChecks();
    return gen == gen_a ? Outcome::kOldGeneration : Outcome::kNewGeneration;
  }
};

TEST_F(TxnManagerFailTest, AFailedCommitLeavesThePreviousGenerationMountable) {
  for (FaultDevice::Op op : {FaultDevice::Op::kWrite, FaultDevice::Op::kFlush}) {
    for (FaultDevice::LossMode loss :
         {FaultDevice::LossMode::kDropAll, FaultDevice::LossMode::kKeepAll,
          FaultDevice::LossMode::kTorn}) {
      uint64_t n = 1;
      std::map<Outcome, int> outcomes;
      for (; n < 64; ++n) {
        const FailPoint f{op, n, loss};
        SCOPED_TRACE(Describe(f));
        const Outcome o = FailOneCommit(f);
        if (HasFatalFailure()) return;
        if (o == Outcome::kCommitted) break;
        ++outcomes[o];
      }
      EXPECT_GT(n, 1u) << "the first call always belongs to the commit";
      EXPECT_LT(n, 64u) << "the commit never got past its faults";
      // Losing everything unflushed never shows the new generation; keeping
      // it does once the primary superblock was written (the last flush).
      if (loss == FaultDevice::LossMode::kDropAll) {
        EXPECT_EQ(outcomes[Outcome::kNewGeneration], 0);
      }
      if (loss == FaultDevice::LossMode::kKeepAll) {
        EXPECT_GE(outcomes[Outcome::kNewGeneration], 1);
      }
      EXPECT_GE(outcomes[Outcome::kOldGeneration], 1);
    }
  }
}

TEST_F(TxnManagerTest, FreeSpaceIsAccountedAcrossCommits) {
  Format();
  const TxnStats fresh = txn_->Stats();
  const uint64_t usable = fresh.free_bytes + fresh.used_bytes;
  EXPECT_EQ(fresh.pinned_bytes, 0u);
  auto expect_accounted = [&](const char* when) {
    const TxnStats s = txn_->Stats();
    EXPECT_EQ(s.free_bytes + s.used_bytes + s.pinned_bytes, usable) << when;
  };
  Tree* t = txn_->fs_tree(format::kDefaultTreeId);
  for (int size : {10, 200, 900}) {
    SCOPED_TRACE(absl::StrCat("values of ", size, " bytes"));
    for (int i = 0; i < 1500; ++i) ASSERT_OK(Put(t, Key(i), Value(i, size)));
    expect_accounted("after the inserts");
    ASSERT_OK(txn_->Commit());
    expect_accounted("after the first commit");
    EXPECT_GT(txn_->Stats().used_bytes, fresh.used_bytes);
    for (int i = 0; i < 1500; ++i) ASSERT_OK(Delete(t, Key(i)));
    expect_accounted("after the deletes");
    // Running the queued drops frees the old nodes' extents, but only as
    // pinned space: the committed tree still points at them.
    const uint64_t free_before_run = txn_->Stats().free_bytes;
    ASSERT_OK(txn_->RunDelayedRefBatch(1 << 20).status());
    EXPECT_GT(txn_->Stats().pinned_bytes, 0u);
    EXPECT_LE(txn_->Stats().free_bytes, free_before_run);
    expect_accounted("after running the delayed refs");
    ASSERT_OK(txn_->Commit());
    expect_accounted("after the second commit");
    const TxnStats s = txn_->Stats();
    EXPECT_EQ(s.pinned_bytes, 0u);
    // Everything the keys took is free again: back to three empty trees.
    EXPECT_EQ(s.used_bytes, fresh.used_bytes);
    EXPECT_EQ(txn_->superblock().bytes_used, s.used_bytes);
    ExpectDeviceChecks();
    // Free space rebuilt from the extent tree equals what was tracked.
    Mount();
    EXPECT_EQ(txn_->Stats().free_bytes, s.free_bytes);
    EXPECT_EQ(txn_->Stats().used_bytes, s.used_bytes);
    t = txn_->fs_tree(format::kDefaultTreeId);
  }
}

TEST_F(TxnManagerTest, DataExtentRefsFollowTheirReferencesAndFreeAfterCommit) {
  Format();
  ASSERT_OK_AND_ASSIGN(uint64_t other, txn_->CreateTree());
  ASSERT_OK(txn_->Commit());
  const uint64_t free_before = txn_->Stats().free_bytes;
  for (uint64_t len : {1ull, 4095ull, 4096ull, 10000ull, 1ull << 20}) {
    SCOPED_TRACE(absl::StrCat("extent of ", len, " bytes"));
    ASSERT_OK_AND_ASSIGN(format::DataRef d, txn_->AllocDataExtent(len));
    EXPECT_EQ(d.len, (len + 4095) / 4096 * 4096);
    EXPECT_EQ(d.bytenr % 4096, 0u);
    txn_->AddDataRef(format::kDefaultTreeId, d, +1, /*new_alloc=*/true);
    EXPECT_EQ(*txn_->DataExtentRefs(d.bytenr, d.len), 1u);  // queued, not yet run
    EXPECT_FALSE(*txn_->DataExtentCommitted(d));
    txn_->AddDataRef(other, d, +1, false);
    ASSERT_OK(txn_->Commit());
    EXPECT_TRUE(*txn_->DataExtentCommitted(d));
    EXPECT_EQ(*txn_->DataExtentRefs(d.bytenr, d.len), 2u);
    txn_->AddDataRef(format::kDefaultTreeId, d, -1, false);
    ASSERT_OK(txn_->Commit());
    EXPECT_EQ(*txn_->DataExtentRefs(d.bytenr, d.len), 1u);
    txn_->AddDataRef(other, d, -1, false);
    EXPECT_EQ(*txn_->DataExtentRefs(d.bytenr, d.len), 0u);
    // The commit runs the drop to zero: the extent is pinned while the
    // commit is written and free once it is durable.
    ASSERT_OK(txn_->Commit());
    EXPECT_FALSE(*txn_->DataExtentCommitted(d));
    EXPECT_EQ(txn_->Stats().pinned_bytes, 0u);
    EXPECT_EQ(txn_->Stats().free_bytes, free_before);
  }
  // Allocated, never referenced, released: free at once.
  ASSERT_OK_AND_ASSIGN(format::DataRef d, txn_->AllocDataExtent(1 << 20));
  EXPECT_EQ(txn_->Stats().free_bytes, free_before - (1 << 20));
  txn_->ReleaseUnusedData(d);
  EXPECT_EQ(txn_->Stats().free_bytes, free_before);
  // Bigger than the device: ENOSPC, nothing taken.
  absl::StatusOr<format::DataRef> huge = txn_->AllocDataExtent(kDeviceBytes);
  EXPECT_THAT(huge, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(ReasonOf(huge.status()), ErrorReason::kENOSPC);
  EXPECT_EQ(txn_->Stats().free_bytes, free_before);
}

TEST(TxnManagerSpace, AFullDeviceRefusesWritesButNeverTheCommit) {
  for (size_t value_len : {64u, 400u, 900u}) {
    SCOPED_TRACE(absl::StrCat("values of ", value_len, " bytes"));
    MemDevice dev(kMinDeviceBytes);
    ASSERT_OK(TxnManager::Mkfs(&dev, 4096, 4096, kFsid));
    ASSERT_OK_AND_ASSIGN(std::unique_ptr<TxnManager> txn, TxnManager::Mount(&dev, 16 << 20));
    Tree* t = txn->fs_tree(format::kDefaultTreeId);
    uint64_t written = 0;
    absl::Status s;
    for (;; ++written) {
      s = txn->ReserveForWrite(t, WriteKind::kInsert);
      if (!s.ok()) break;
      ASSERT_OK(t->Put(Key(written), Value(written, value_len)));
      if (written % 500 == 499) {
        ASSERT_OK(txn->Commit());
      }
    }
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
    EXPECT_EQ(ReasonOf(s), ErrorReason::kENOSPC);
    EXPECT_GT(written, 100u);
    EXPECT_GE(txn->Stats().enospc_errors, 1u);
    ASSERT_OK(txn->Commit());  // what was reserved fits
    // A full store can always shrink.
    for (uint64_t i = 0; i < 100; ++i) {
      ASSERT_OK(txn->ReserveForWrite(t, WriteKind::kDelete));
      ASSERT_OK(t->Delete(Key(i)));
    }
    ASSERT_OK(txn->Commit());
    const std::vector<std::string> findings = testing::CheckTxnDevice(&dev);
    EXPECT_TRUE(findings.empty()) << absl::StrJoin(findings, "\n");
  }
}

TEST_F(TxnManagerTest, EachBrokenSuperblockCopyIsRewrittenByTheNextCommit) {
  for (uint64_t off : {format::kSuperblockOffsets[0], format::kSuperblockOffsets[1]}) {
    SCOPED_TRACE(absl::StrCat("copy at ", off));
    Format();
    const uint64_t gen = txn_->superblock().generation;
    txn_.reset();
    const char junk = 0x5a;
    ASSERT_OK(mem_.WriteAt(off + 200, &junk, 1));  // a checksum mismatch
    std::string notes;
    ASSERT_OK(ReadBestSuperblock(&mem_, &notes).status());
    EXPECT_NE(notes.find(absl::StrCat("superblock at ", off)), std::string::npos) << notes;
    Mount();
    EXPECT_EQ(txn_->superblock().generation, gen);
    EXPECT_TRUE(txn_->HasChanges());
    ASSERT_OK(txn_->Commit());
    notes.clear();
    ASSERT_OK(ReadBestSuperblock(&mem_, &notes).status());
    EXPECT_EQ(notes, "");
  }
}

TEST_F(TxnManagerTest, ACommitRefusesADeviceSomethingElseFormatted) {
  Format();
  ASSERT_OK(Put(txn_->fs_tree(format::kDefaultTreeId), Key(1), "v"));
  // Another mkfs while this manager holds the device.
  ASSERT_OK(TxnManager::Mkfs(&mem_, 4096, 4096, "another-fsid-16b"));
  const absl::Status s = txn_->Commit();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(ReasonOf(s), ErrorReason::kDeviceChanged);
  EXPECT_NE(s.message().find("another filesystem"), std::string::npos) << s;
}

}  // namespace
}  // namespace cowkv
