// Goal: leases behave as etcd's — a key put with a lease goes when the
// lease is revoked or expires, a put without one detaches it, a delete
// detaches it, every revoke deletes its keys in one revision, leases
// survive a reopen with their TTL restarted — and the lease items always
// pass `check`.
// Method: a seeded random mix of grants (random or chosen ids, some
// clashing), puts with and without a lease (also unknown leases, also in
// a Txn), deletes, delete-ranges, revokes (also of unknown ids),
// keep-alives, time-to-live queries, fake-clock advances, expiry rounds
// (Store::ExpireLeases), commits and reopens, against a model: a map of
// keys and a map of leases {ttl, deadline, keys} on the same fake clock.
// After every step the answers must match; every few steps and at the end
// the whole key space, every lease's TTLs and keys, and `check`.
// A planted bug (kLeasePutKeepsAttachment) must be caught.
// Replay: --seed=N --ops=M.
#include <atomic>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

struct ModelLease {
  int64_t ttl = 0;
  int64_t deadline = 0;
  std::set<std::string> keys;
};

class LeaseRun {
 public:
  LeaseRun(uint64_t seed, Options::TestHooks::PlantedBug bug) : rng_(seed), dev_(64ull << 20) {
    opts_ = testing::TestOptions();
    opts_.lease_clock_ms = [this] { return clock_.load(); };
    opts_.lease_expiry_interval_ms = 0;
    opts_.test_hooks.planted_bug = bug;
  }

  // The first divergence from the model ("" = none) after `ops` steps.
  std::string Run(int ops) {
    if (!Store::Mkfs(&dev_, testing::TestMkfs(4096)).ok()) return "mkfs failed";
    if (std::string e = Open(); !e.empty()) return e;
    for (step_ = 0; step_ < ops; ++step_) {
      if (std::string e = Step(); !e.empty()) return absl::StrCat("step ", step_, ": ", e);
      if (step_ % 50 == 49) {
        if (std::string e = CompareAll(); !e.empty()) return absl::StrCat("step ", step_, ": ", e);
      }
    }
    if (std::string e = CompareAll(); !e.empty()) return absl::StrCat("end: ", e);
    if (!store_->Close().ok()) return "close failed";
    store_.reset();
    std::vector<std::string> problems = testing::CheckProblems(&dev_);
    if (!problems.empty()) return absl::StrJoin(problems, "\n");
    return "";
  }

 private:
  std::string Open() {
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(&dev_, opts_);
    if (!s.ok()) return absl::StrCat("open: ", s.status().ToString());
    store_ = std::move(*s);
    absl::StatusOr<std::unique_ptr<Subvolume>> sv = store_->DefaultSubvolume();
    if (!sv.ok()) return "no default subvolume";
    sv_ = std::move(*sv);
    // etcd: every lease restarts from its full TTL.
    for (auto& [id, l] : leases_) l.deadline = clock_.load() + l.ttl * 1000;
    return "";
  }

  std::string Key() { return absl::StrCat("key", rng_() % 24); }
  int64_t PickLease() {
    if (leases_.empty() || rng_() % 8 == 0) return static_cast<int64_t>(1 + rng_() % 40);
    auto it = leases_.begin();
    std::advance(it, rng_() % leases_.size());
    return it->first;
  }
  uint64_t Revision() { return store_->Stats().revision; }

  void Detach(const std::string& key) {
    auto a = attached_.find(key);
    if (a == attached_.end()) return;
    leases_[a->second].keys.erase(key);
    attached_.erase(a);
  }
  void Attach(const std::string& key, int64_t lease) {
    Detach(key);
    if (lease == 0) return;
    leases_[lease].keys.insert(key);
    attached_[key] = lease;
  }
  // A revoke or expiry in the model; whether it deleted keys.
  bool Remove(int64_t id) {
    ModelLease l = leases_[id];
    for (const std::string& k : l.keys) {
      kv_.erase(k);
      attached_.erase(k);
    }
    leases_.erase(id);
    return !l.keys.empty();
  }

  std::string Step() {
    const int op = static_cast<int>(rng_() % 100);
    if (op < 10) {  // grant
      const int64_t ttl = 1 + static_cast<int64_t>(rng_() % 10);
      const int64_t want = rng_() % 3 == 0 ? static_cast<int64_t>(1 + rng_() % 40) : 0;
      absl::StatusOr<int64_t> id = sv_->LeaseGrant(ttl, want);
      if (want != 0 && leases_.count(want)) {
        if (!absl::IsAlreadyExists(id.status()))
          return absl::StrCat("grant of used id ", want, ": ", id.status().ToString());
        return "";
      }
      if (!id.ok()) return absl::StrCat("grant: ", id.status().ToString());
      if (want != 0 && *id != want) return "grant ignored the id asked for";
      if (*id <= 0 || leases_.count(*id)) return absl::StrCat("grant returned id ", *id);
      leases_[*id] = ModelLease{ttl, clock_.load() + ttl * 1000, {}};
    } else if (op < 35) {  // put with a lease (sometimes unknown), directly or in a Txn
      const std::string k = Key();
      const int64_t lease = PickLease();
      const std::string v = absl::StrCat("v", step_);
      absl::Status s;
      if (rng_() % 3 == 0) {
        TxnRequest req;
        TxnOp put;
        put.key = k;
        put.value = v;
        put.lease = lease;
        req.success.push_back(put);
        s = sv_->Txn(req).status();
      } else {
        s = sv_->PutItemWithLease(k, v, lease).status();
      }
      if (!leases_.count(lease)) {
        if (!absl::IsNotFound(s) || ReasonOf(s) != ErrorReason::kLeaseNotFound)
          return absl::StrCat("put with unknown lease ", lease, ": ", s.ToString());
        return "";
      }
      if (!s.ok()) return absl::StrCat("put with lease: ", s.ToString());
      kv_[k] = v;
      Attach(k, lease);
    } else if (op < 50) {  // put without a lease: detaches
      const std::string k = Key();
      const std::string v = absl::StrCat("w", step_);
      if (!sv_->Put(k, v).ok()) return "put";
      kv_[k] = v;
      Detach(k);
    } else if (op < 58) {  // delete
      const std::string k = Key();
      absl::Status s = sv_->Delete(k);
      if (kv_.count(k) != (s.ok() ? 1u : 0u)) return absl::StrCat("delete: ", s.ToString());
      kv_.erase(k);
      Detach(k);
    } else if (op < 61) {  // delete-range
      std::string a = Key(), b = Key();
      if (b < a) std::swap(a, b);
      TxnRequest req;
      TxnOp del;
      del.type = TxnOp::Type::kDeleteRange;
      del.key = a;
      del.end = b;
      req.success.push_back(del);
      if (!sv_->Txn(req).ok()) return "delete-range";
      for (auto it = kv_.lower_bound(a); it != kv_.end() && it->first < b;) {
        Detach(it->first);
        it = kv_.erase(it);
      }
    } else if (op < 68) {  // revoke
      const int64_t id = PickLease();
      const uint64_t before = Revision();
      absl::StatusOr<uint64_t> rev = sv_->LeaseRevoke(id);
      if (!leases_.count(id)) {
        if (ReasonOf(rev.status()) != ErrorReason::kLeaseNotFound)
          return absl::StrCat("revoke of unknown lease ", id, ": ", rev.status().ToString());
        return "";
      }
      if (!rev.ok()) return absl::StrCat("revoke: ", rev.status().ToString());
      const bool had_keys = Remove(id);
      // One revision for all its keys (none without keys).
      if (*rev != before + (had_keys ? 1 : 0) || Revision() != *rev)
        return absl::StrCat("revoke went from revision ", before, " to ", *rev);
    } else if (op < 76) {  // keep-alive
      const int64_t id = PickLease();
      absl::StatusOr<int64_t> ttl = sv_->LeaseKeepAlive(id);
      auto it = leases_.find(id);
      if (it == leases_.end() || it->second.deadline <= clock_.load()) {
        if (ReasonOf(ttl.status()) != ErrorReason::kLeaseNotFound)
          return absl::StrCat("keep-alive of gone lease ", id, ": ", ttl.status().ToString());
        return "";
      }
      if (!ttl.ok() || *ttl != it->second.ttl) return "keep-alive";
      it->second.deadline = clock_.load() + it->second.ttl * 1000;
    } else if (op < 82) {  // time-to-live
      return CheckLease(PickLease());
    } else if (op < 90) {  // the clock moves
      clock_ += static_cast<int64_t>(rng_() % 2500);
    } else if (op < 95) {  // expiry round
      int due = 0;
      std::vector<int64_t> gone;
      for (auto& [id, l] : leases_) {
        if (l.deadline <= clock_.load()) gone.push_back(id);
      }
      for (int64_t id : gone) {
        Remove(id);
        ++due;
      }
      absl::StatusOr<int> n = store_->ExpireLeases();
      if (!n.ok() || *n != due) return absl::StrCat("expired ", n.ok() ? *n : -1, " want ", due);
    } else if (op < 98) {
      if (!store_->Commit().ok()) return "commit";
    } else {  // reopen
      sv_.reset();
      if (!store_->Close().ok()) return "close";
      store_.reset();
      return Open();
    }
    return "";
  }

  std::string CheckLease(int64_t id) {
    absl::StatusOr<LeaseInfo> info = sv_->LeaseTimeToLive(id, true);
    auto it = leases_.find(id);
    if (it == leases_.end()) {
      if (ReasonOf(info.status()) != ErrorReason::kLeaseNotFound)
        return absl::StrCat("ttl of unknown lease ", id, ": ", info.status().ToString());
      return "";
    }
    if (!info.ok()) return absl::StrCat("ttl of lease ", id, ": ", info.status().ToString());
    const int64_t left = it->second.deadline - clock_.load();
    const int64_t want = left <= 0 ? 0 : (left + 999) / 1000;
    if (info->granted_ttl != it->second.ttl || info->ttl != want) {
      return absl::StrCat("lease ", id, " ttl ", info->granted_ttl, "/", info->ttl, " want ",
                          it->second.ttl, "/", want);
    }
    std::vector<std::string> keys(it->second.keys.begin(), it->second.keys.end());
    if (info->keys != keys) {
      return absl::StrCat("lease ", id, " keys [", absl::StrJoin(info->keys, ","), "] want [",
                          absl::StrJoin(keys, ","), "]");
    }
    return "";
  }

  std::string CompareAll() {
    std::map<std::string, std::string> got;
    std::unique_ptr<Iterator> it = sv_->NewIterator();
    for (it->SeekToFirst(); it->Valid(); it->Next())
      got[std::string(it->key())] = std::string(it->value());
    if (got != kv_) return absl::StrCat("keys differ: ", got.size(), " keys, model ", kv_.size());
    absl::StatusOr<std::vector<int64_t>> ids = sv_->Leases();
    if (!ids.ok()) return "leases";
    std::vector<int64_t> want;
    for (const auto& [id, l] : leases_) want.push_back(id);
    if (*ids != want)
      return absl::StrCat("leases [", absl::StrJoin(*ids, ","), "] want [",
                          absl::StrJoin(want, ","), "]");
    for (int64_t id : want) {
      if (std::string e = CheckLease(id); !e.empty()) return e;
    }
    return "";
  }

  std::mt19937_64 rng_;
  MemDevice dev_;
  Options opts_;
  std::atomic<int64_t> clock_{1000000};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Subvolume> sv_;
  int step_ = 0;
  std::map<std::string, std::string> kv_;
  std::map<int64_t, ModelLease> leases_;
  std::map<std::string, int64_t> attached_;
};

void RunSeeds(uint64_t default_seed, uint64_t seeds, int default_ops) {
  const uint64_t first = testing::Flags().seed ? testing::Flags().seed : default_seed;
  const uint64_t n =
      testing::Flags().seed ? 1 : (testing::Flags().seeds ? testing::Flags().seeds : seeds);
  const int ops = testing::Flags().ops ? static_cast<int>(testing::Flags().ops) : default_ops;
  for (uint64_t seed = first; seed < first + n; ++seed) {
    LeaseRun run(seed, Options::TestHooks::PlantedBug::kNone);
    const std::string e = run.Run(ops);
    ASSERT_EQ(e, "") << "seed " << seed << " (replay: --seed=" << seed << " --ops=" << ops << ")";
  }
}

TEST(LeaseModel, Sample) { RunSeeds(1, 4, 1500); }

// The long form (manual): --seeds=200 --ops=5000.
TEST(LeaseModel, Long) {
  if (!testing::Flags().full) GTEST_SKIP() << "run with --full (lease_model_test_long)";
  RunSeeds(100, 200, 5000);
}

// The generator catches a put that leaves its key attached.
TEST(LeaseModel, CatchesPlantedBug) {
  int caught = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    LeaseRun run(seed, Options::TestHooks::PlantedBug::kLeasePutKeepsAttachment);
    if (!run.Run(1500).empty()) ++caught;
  }
  EXPECT_GE(caught, 4) << "kLeasePutKeepsAttachment caught by " << caught << " of 5 seeds";
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
