// LogManager over a bare TxnManager on a FaultDevice, driven the way the
// store drives it (engine/store.cc: SealLogLocked, RunLogSync, Init).
//
// Goal: what a log sync wrote and flushed is recovered after a crash, in
// chain order, and nothing else is — not unsynced changes, not a sync whose
// flush failed or was cut (all of it or none of it, never part), not a
// chain a commit retired; a chain that cannot grow (too many pending keys,
// no space for the next block, more subvolumes than a block lists) says it
// needs a full commit, and the commit starts a fresh chain; a damaged link
// that a later link proves was flushed is DATA_LOSS, while the normal end
// of a chain counts no corruption.
// Method: loops over sync sizes (inline entries or log trees), syncs per
// chain, subvolume counts and power-loss modes, each against a model of
// what was synced. Replay: the seeds are fixed and named in the trace.
#include "engine/log/log_manager.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cowkv/device.h"
#include "cowkv/limits.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/txn/txn_manager.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace log {
namespace {

using testing::StatusIs;
// subvolume -> key -> value ("" = deleted)
using Model = std::map<uint64_t, std::map<std::string, std::string>>;

class LogManagerTest : public ::testing::Test {
 protected:
  void Format(uint64_t max_pending = 100000, uint32_t sectorsize = 4096) {
    max_pending_ = max_pending;
    log_.reset();
    txn_.reset();
    // A new fsid each time: a node an earlier format left where a write
    // was dropped must not pass for this one's.
    ASSERT_OK(
        TxnManager::Mkfs(&fault_, 4096, sectorsize, absl::StrFormat("log-test-%07d", ++formats_)));
    Open();
    ASSERT_EQ(recovered_.root_blocks, 0u);
  }
  // Mount as the store does: recover the chain, then continue it or adopt it.
  void Open() {
    log_.reset();
    txn_.reset();
    ASSERT_OK_AND_ASSIGN(txn_, TxnManager::Mount(&fault_, 16 << 20));
    ASSERT_OK_AND_ASSIGN(recovered_, LogManager::Recover(&fault_, txn_->superblock()));
    log_ = std::make_unique<LogManager>(txn_.get(), max_pending_);
    if (recovered_.root_blocks == 0) {
      ASSERT_OK(log_->ContinueChain(txn_->superblock()));
    } else {
      ASSERT_OK(txn_->ClaimLogBlocks(recovered_.blocks));
      log_->Adopt(recovered_.blocks);
    }
  }
  // A crash: unflushed writes resolved by `mode`, then a mount.
  void CrashAndOpen(FaultDevice::LossMode mode, uint64_t seed) {
    log_.reset();
    txn_.reset();
    fault_.ClearFaults();
    fault_.PowerLoss(mode, seed);
    Open();
  }
  // An engine commit, which seals the running chain and starts the next
  // (only a commit that changes something does: it is what names the chain).
  void Commit() {
    ASSERT_TRUE(txn_->HasChanges());
    std::vector<uint64_t> retired;
    const LogAnchor a = log_->StartChain(txn_->generation(), &retired);
    txn_->SetLogAnchor(a.log_root, a.nonce);
    ASSERT_OK(txn_->Commit());
    txn_->FreeLogBlocks(retired);
  }
  absl::Status Write(uint64_t subvol, const std::string& key, const std::string& value) {
    Tree* t = txn_->fs_tree(subvol);
    if (value.empty()) {
      COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(t, TxnManager::WriteKind::kDelete));
      COWKV_RETURN_IF_ERROR(t->Delete(key));
    } else {
      COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(t, TxnManager::WriteKind::kInsert));
      COWKV_RETURN_IF_ERROR(t->Put(key, value));
    }
    log_->NoteChange(subvol, key);
    return absl::OkStatus();
  }
  // One log sync at `revision`; `nodes` (optional) receives the bytenrs of
  // the log-tree nodes it wrote.
  absl::Status Sync(uint64_t revision, std::vector<uint64_t>* nodes = nullptr) {
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<LogManager::SyncBatch> b, log_->PrepareSync(revision));
    if (b == nullptr) return absl::OkStatus();
    if (nodes != nullptr) {
      for (const NodeRef& n : b->nodes) nodes->push_back(n->bytenr);
    }
    const absl::Status w = log_->WriteSync(*b);
    log_->FinishSync(*b, w);
    return w;
  }
  // The recovered entries applied in order: the last entry of a key wins.
  Model Replayed() const {
    Model out;
    for (const LogEntry& e : recovered_.entries) out[e.subvol][e.key] = e.value;
    return out;
  }

  MemDevice mem_{64 << 20};
  FaultDevice fault_{&mem_};
  uint64_t max_pending_ = 0;
  int formats_ = 0;
  std::unique_ptr<TxnManager> txn_;
  std::unique_ptr<LogManager> log_;
  Recovered recovered_;
};

std::string Key(uint64_t i) { return absl::StrCat("t", 100000 + i); }

// `keys` random changes (puts and deletes of keys [base, base+keys)) over
// `subvols`, written, noted and added to `model`.
void WriteBatch(
    std::mt19937_64& rng, const std::vector<uint64_t>& subvols, uint64_t base, int keys,
    Model* model,
    const std::function<absl::Status(uint64_t, const std::string&, const std::string&)>& write) {
  for (int i = 0; i < keys; ++i) {
    const uint64_t sv = subvols[rng() % subvols.size()];
    const std::string k = Key(base + rng() % keys);
    const bool present = model->count(sv) && (*model)[sv].count(k) && !(*model)[sv][k].empty();
    const std::string v = present && rng() % 4 == 0 ? "" : std::string(1 + rng() % 40, 'v');
    if (v.empty() && !present) continue;
    ASSERT_OK(write(sv, k, v));
    (*model)[sv][k] = v;
  }
}

class LogManagerSyncTest : public LogManagerTest {
 protected:
  auto Writer() {
    return
        [this](uint64_t sv, const std::string& k, const std::string& v) { return Write(sv, k, v); };
  }
  // Subvolumes 5 plus `extra` new ones, committed (with a marker key, so
  // that there is something to commit), with a fresh chain.
  std::vector<uint64_t> Subvols(int extra) {
    std::vector<uint64_t> out = {format::kDefaultTreeId};
    Tree* t = txn_->fs_tree(format::kDefaultTreeId);
    EXPECT_OK(txn_->ReserveForWrite(t, TxnManager::WriteKind::kInsert));
    EXPECT_OK(t->Put(absl::StrCat("t-setup-", txn_->generation()), "x"));
    for (int i = 0; i < extra; ++i) {
      absl::StatusOr<uint64_t> id = txn_->CreateTree();
      EXPECT_OK(id);
      out.push_back(*id);
    }
    Commit();
    EXPECT_FALSE(log_->needs_full_commit());
    return out;
  }
};

TEST_F(LogManagerSyncTest, SyncedChangesAreRecoveredInChainOrderAndUnsyncedOnesAreNot) {
  for (int keys : {1, 20, 400}) {  // one inline entry, a full inline block, log trees
    for (int syncs : {1, 3}) {
      for (int extra_subvols : {0, 3}) {
        SCOPED_TRACE(absl::StrCat(keys, " keys per sync, ", syncs, " syncs, ", 1 + extra_subvols,
                                  " subvolumes"));
        Format();
        const std::vector<uint64_t> subvols = Subvols(extra_subvols);
        std::mt19937_64 rng(keys * 100 + syncs * 10 + extra_subvols);
        Model synced;
        for (int s = 0; s < syncs; ++s) {
          WriteBatch(rng, subvols, 0, keys, &synced, Writer());
          ASSERT_OK(Sync(1000 + s));
        }
        const LogStats stats = log_->Stats();
        EXPECT_EQ(stats.syncs, static_cast<uint64_t>(syncs));
        EXPECT_EQ(stats.inline_syncs, keys <= 20 ? stats.syncs : 0u);
        Model unsynced;
        WriteBatch(rng, subvols, 1000000, keys, &unsynced, Writer());
        CrashAndOpen(FaultDevice::LossMode::kDropAll, 1);
        EXPECT_EQ(recovered_.root_blocks, static_cast<uint64_t>(syncs));
        EXPECT_EQ(recovered_.revision, 1000u + syncs - 1);
        EXPECT_EQ(Replayed(), synced);
        // The trees themselves hold only the last commit: the log is the
        // only copy of the synced changes until the replay commits them.
        EXPECT_FALSE(txn_->HasChanges());
      }
    }
  }
}

TEST_F(LogManagerSyncTest, ACommitRetiresTheChainItsTreesMadeDurable) {
  for (int keys : {5, 400}) {
    SCOPED_TRACE(absl::StrCat(keys, " keys"));
    Format();
    const std::vector<uint64_t> subvols = Subvols(1);
    std::mt19937_64 rng(keys);
    Model model;
    WriteBatch(rng, subvols, 0, keys, &model, Writer());
    ASSERT_OK(Sync(1));
    EXPECT_GT(log_->Stats().chain_blocks, 1u);
    Commit();
    // The old chain's blocks went back to free space; the new chain holds
    // its first block.
    EXPECT_EQ(log_->Stats().chain_blocks, 1u);
    CrashAndOpen(FaultDevice::LossMode::kDropAll, 1);
    EXPECT_EQ(recovered_.root_blocks, 0u);
    for (const auto& [sv, kv] : model) {
      for (const auto& [k, v] : kv) {
        absl::StatusOr<std::string> got = txn_->fs_tree(sv)->Get(k);
        if (v.empty()) {
          EXPECT_THAT(got, StatusIs(absl::StatusCode::kNotFound));
        } else {
          EXPECT_EQ(*got, v);
        }
      }
    }
  }
}

// A sync whose flush did not complete, the device then losing power in
// each mode: the sync is recovered whole or not at all, after every
// earlier sync.
TEST_F(LogManagerSyncTest, AnUnflushedSyncIsRecoveredWholeOrNotAtAll) {
  for (int keys : {3, 400}) {
    for (FaultDevice::LossMode mode :
         {FaultDevice::LossMode::kDropAll, FaultDevice::LossMode::kKeepAll,
          FaultDevice::LossMode::kRandomSubset, FaultDevice::LossMode::kTorn}) {
      for (uint64_t seed = 1; seed <= 6; ++seed) {
        SCOPED_TRACE(absl::StrCat(keys, " keys, mode ", static_cast<int>(mode), ", seed ", seed));
        Format();
        const std::vector<uint64_t> subvols = Subvols(2);
        std::mt19937_64 rng(seed);
        Model before, after;
        WriteBatch(rng, subvols, 0, keys, &before, Writer());
        ASSERT_OK(Sync(1));
        after = before;
        WriteBatch(rng, subvols, 0, keys, &after, Writer());
        fault_.FailAfter(FaultDevice::Op::kFlush, 1, absl::StatusCode::kInternal, false);
        EXPECT_FALSE(Sync(2).ok());
        EXPECT_TRUE(log_->needs_full_commit()) << "a failed sync breaks the chain";
        CrashAndOpen(mode, seed);
        const Model got = Replayed();
        if (mode == FaultDevice::LossMode::kDropAll) {
          EXPECT_EQ(recovered_.root_blocks, 1u);
        }
        if (recovered_.root_blocks == 1) {
          EXPECT_EQ(got, before);
          EXPECT_EQ(recovered_.revision, 1u);
        } else {
          EXPECT_EQ(recovered_.root_blocks, 2u);
          EXPECT_EQ(got, after);
          EXPECT_EQ(recovered_.revision, 2u);
        }
      }
    }
  }
}

TEST_F(LogManagerSyncTest, TooManyPendingKeysMakeTheChainFullUntilTheNextCommit) {
  for (uint64_t bound : {1u, 10u, 100u}) {
    SCOPED_TRACE(absl::StrCat("bound ", bound));
    Format(bound);
    Subvols(0);
    for (uint64_t i = 0; i < bound; ++i) ASSERT_OK(Write(5, Key(i), "v"));
    EXPECT_FALSE(log_->needs_full_commit());
    ASSERT_OK(Write(5, Key(bound), "v"));
    EXPECT_TRUE(log_->needs_full_commit());
    EXPECT_THAT(log_->PrepareSync(1), StatusIs(absl::StatusCode::kFailedPrecondition));
    Commit();
    EXPECT_FALSE(log_->needs_full_commit());
    ASSERT_OK(Write(5, Key(0), "again"));
    ASSERT_OK(Sync(2));
  }
}

TEST_F(LogManagerSyncTest, MoreSubvolumesThanABlockListsMakeTheChainFull) {
  Format(100000, 512);
  const size_t max_trees = MaxLogTrees(512);
  for (size_t subvols : {max_trees, max_trees + 1}) {
    SCOPED_TRACE(absl::StrCat(subvols, " subvolumes"));
    const std::vector<uint64_t> ids = Subvols(static_cast<int>(subvols) - 1);
    // Too big to be inline: one log tree per subvolume.
    for (uint64_t id : ids) ASSERT_OK(Write(id, Key(id), std::string(100, 'b')));
    const absl::Status s = Sync(1);
    if (subvols <= max_trees) {
      ASSERT_OK(s);
      EXPECT_FALSE(log_->needs_full_commit());
    } else {
      EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
      EXPECT_TRUE(log_->needs_full_commit());
    }
  }
}

// A chain grows by a block per sync; on a full device the next block does
// not fit and the chain says so, while the commit's reserve still holds.
TEST(LogManagerSpace, AChainThatOutgrowsItsSpaceNeedsAFullCommit) {
  MemDevice mem(kMinDeviceBytes);
  ASSERT_OK(TxnManager::Mkfs(&mem, 4096, 4096, std::string(16, 's')));
  ASSERT_OK_AND_ASSIGN(std::unique_ptr<TxnManager> txn, TxnManager::Mount(&mem, 16 << 20));
  LogManager log(txn.get(), 100000);
  Tree* t = txn->fs_tree(format::kDefaultTreeId);
  ASSERT_OK(t->Put("t-setup", "x"));  // a commit that changes something names the chain
  std::vector<uint64_t> retired;
  LogAnchor a = log.StartChain(txn->generation(), &retired);
  txn->SetLogAnchor(a.log_root, a.nonce);
  ASSERT_OK(txn->Commit());
  // Fill the device with (unreferenced) data extents, as writes would.
  std::vector<format::DataRef> fill;
  for (uint64_t len = 1 << 20; len >= 4096; len /= 2) {
    for (;;) {
      absl::StatusOr<format::DataRef> d = txn->AllocDataExtent(len);
      if (!d.ok()) break;
      fill.push_back(*d);
    }
  }
  // Then give back room for some 32 log blocks, and no more.
  for (uint64_t released = 0; released < 32 * 4096;) {
    ASSERT_FALSE(fill.empty());
    released += fill.back().len;
    txn->ReleaseUnusedData(fill.back());
    fill.pop_back();
  }
  int syncs = 0;
  absl::Status s;
  for (; syncs < 1000; ++syncs) {
    ASSERT_OK(t->Put(Key(syncs), "v"));  // no reservation: the log is what is measured
    log.NoteChange(format::kDefaultTreeId, Key(syncs));
    absl::StatusOr<std::unique_ptr<LogManager::SyncBatch>> b = log.PrepareSync(syncs);
    s = b.status();
    if (!s.ok()) break;
    ASSERT_OK(log.WriteSync(**b));
    log.FinishSync(**b, absl::OkStatus());
  }
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(ReasonOf(s), ErrorReason::kENOSPC);
  EXPECT_GE(syncs, 16);
  EXPECT_TRUE(log.needs_full_commit());
  // Every sync before the full one is on the device.
  format::Superblock sb = txn->superblock();
  ASSERT_OK_AND_ASSIGN(Recovered r, LogManager::Recover(&mem, sb));
  EXPECT_EQ(r.root_blocks, static_cast<uint64_t>(syncs));
  // The commit the log asks for still fits, and releasing the fill lets
  // the next chain start.
  for (const format::DataRef& d : fill) txn->ReleaseUnusedData(d);
  retired.clear();
  a = log.StartChain(txn->generation(), &retired);
  txn->SetLogAnchor(a.log_root, a.nonce);
  ASSERT_OK(txn->Commit());
  txn->FreeLogBlocks(retired);
  EXPECT_FALSE(log.needs_full_commit());
}

TEST_F(LogManagerSyncTest, ContainsFindsFileKeysPendingAndInEveryWrittenLink) {
  for (int keys : {2, 300}) {
    SCOPED_TRACE(absl::StrCat(keys, " keys per sync"));
    Format();
    const std::vector<uint64_t> subvols = Subvols(1);
    std::vector<std::string> noted;
    for (int round = 0; round < 3; ++round) {
      for (int i = 0; i < keys; ++i) {
        const std::string k = absl::StrCat("f", round, "-", i);
        ASSERT_OK(Write(subvols[0], k, "x"));
        noted.push_back(k);
      }
      ASSERT_OK(Write(subvols[0], absl::StrCat("t-not-a-file-key", round), "x"));
      for (const std::string& k : noted) {
        EXPECT_TRUE(*log_->Contains(subvols[0], k)) << k;
        EXPECT_FALSE(*log_->Contains(subvols[1], k)) << k;
      }
      EXPECT_FALSE(*log_->Contains(subvols[0], "f-never-written"));
      ASSERT_OK(Sync(round));
    }
    EXPECT_TRUE(log_->HasFsEntries(subvols[0]));
    EXPECT_FALSE(log_->HasFsEntries(subvols[1]));
    for (const std::string& k : noted) EXPECT_TRUE(*log_->Contains(subvols[0], k)) << k;
    Commit();  // a new chain: nothing logged in it yet
    EXPECT_FALSE(log_->HasFsEntries(subvols[0]));
    EXPECT_FALSE(*log_->Contains(subvols[0], noted.front()));
  }
}

TEST_F(LogManagerSyncTest, TheNormalEndOfAChainIsNotCorruption) {
  Format();
  Subvols(0);
  ASSERT_OK(Write(5, Key(1), "v"));
  ASSERT_OK(Sync(1));
  const uint64_t before = CorruptionsDetected();
  CrashAndOpen(FaultDevice::LossMode::kDropAll, 1);  // reads link 0, stops at link 1
  EXPECT_EQ(recovered_.root_blocks, 1u);
  ASSERT_OK(Write(5, Key(2), "v"));  // the store's replay would write here
  Commit();
  CrashAndOpen(FaultDevice::LossMode::kDropAll, 1);  // an empty chain: stops at link 0
  EXPECT_EQ(recovered_.root_blocks, 0u);
  EXPECT_EQ(CorruptionsDetected(), before);
}

// A damaged log tree: only the last link may be torn (its sync was never
// acknowledged), so there it ends the chain quietly; in an earlier link,
// which a later link proves was flushed, it is DATA_LOSS.
TEST_F(LogManagerSyncTest, ADamagedLinkIsDataLossUnlessItIsTheLast) {
  for (int links : {1, 2, 3}) {
    for (int damaged = 0; damaged < links; ++damaged) {
      SCOPED_TRACE(absl::StrCat("link ", damaged, " of ", links));
      Format();
      Subvols(0);
      std::vector<std::vector<uint64_t>> nodes(links);
      for (int l = 0; l < links; ++l) {
        for (int i = 0; i < 300; ++i) ASSERT_OK(Write(5, Key(l * 1000 + i), "log tree"));
        ASSERT_OK(Sync(l, &nodes[l]));
        ASSERT_FALSE(nodes[l].empty());
      }
      const char junk = 0x77;
      ASSERT_OK(mem_.WriteAt(nodes[damaged].front() + 100, &junk, 1));
      log_.reset();
      txn_.reset();
      ASSERT_OK_AND_ASSIGN(txn_, TxnManager::Mount(&fault_, 16 << 20));
      absl::StatusOr<Recovered> r = LogManager::Recover(&fault_, txn_->superblock());
      if (damaged + 1 == links) {
        ASSERT_OK(r);
        EXPECT_EQ(r->root_blocks, static_cast<uint64_t>(links - 1));
      } else {
        EXPECT_THAT(r, StatusIs(absl::StatusCode::kDataLoss));
        EXPECT_NE(r.status().message().find(absl::StrCat("replaying log link ", damaged)),
                  std::string::npos)
            << r.status();
      }
    }
  }
}

// A logged KV item pointing at a data extent: replay needs the extent's
// bytes, so their checksum is verified like a log tree's.
TEST_F(LogManagerSyncTest, ALoggedDataExtentMustHoldItsValue) {
  for (bool damage_earlier_link : {false, true}) {
    SCOPED_TRACE(damage_earlier_link ? "damaged in an earlier link" : "damaged in the last link");
    Format();
    Subvols(0);
    ASSERT_OK_AND_ASSIGN(format::DataRef d, txn_->AllocDataExtent(8192));
    const std::string data(8192, 'd');
    ASSERT_OK(fault_.WriteAt(d.bytenr, data.data(), data.size()));
    std::string item(format::kKvExtentItemSize, '\0');
    item[0] = static_cast<char>(format::kKvKindExtent);
    EncodeLE64(&item[format::kKvExtentBytenrOff], d.bytenr);
    EncodeLE64(&item[format::kKvExtentDiskLenOff], d.len);
    EncodeLE64(&item[format::kKvExtentValueLenOff], data.size());
    EncodeLE32(&item[format::kKvExtentCsumOff], Crc32c(data.data(), data.size()));
    ASSERT_OK(Write(5, "kvalue", item));
    ASSERT_OK(Sync(1));
    if (damage_earlier_link) {
      ASSERT_OK(Write(5, Key(2), "later"));
      ASSERT_OK(Sync(2));
    }
    const char junk = 'x';
    ASSERT_OK(mem_.WriteAt(d.bytenr + 4000, &junk, 1));
    log_.reset();
    txn_.reset();
    ASSERT_OK_AND_ASSIGN(txn_, TxnManager::Mount(&fault_, 16 << 20));
    const uint64_t before = CorruptionsDetected();
    absl::StatusOr<Recovered> r = LogManager::Recover(&fault_, txn_->superblock());
    if (!damage_earlier_link) {
      ASSERT_OK(r);
      EXPECT_EQ(r->root_blocks, 0u);  // the only link, unacknowledged: dropped
    } else {
      EXPECT_THAT(r, StatusIs(absl::StatusCode::kDataLoss));
      // The reason survives the "replaying log link" context.
      EXPECT_EQ(ReasonOf(r.status()), ErrorReason::kCorruption);
      EXPECT_NE(r.status().message().find(absl::StrCat("bytenr=", d.bytenr)), std::string::npos)
          << r.status();
      EXPECT_EQ(CorruptionsDetected(), before + 1);
    }
  }
}

}  // namespace
}  // namespace log
}  // namespace cowkv
