// Goal: a lease's deletes are atomic under power loss — a revoke or an
// expiry keeps every key it deleted or none, and the lease with them — and
// attachments, grants and detaches survive exactly as far as the commits
// that made them; the image mounts (replaying the log) and passes `check`.
// Method: one thread runs a fixed script of durable lease operations
// (grants with chosen ids, puts with and without leases, deletes, revokes,
// an expiry on a fake clock, engine commits in between) on a FaultDevice
// that cuts power at its k-th flush, for every k, in all four loss modes
// (every fourth cut also crashes the mount's replay commit). A model runs
// the same script and records the state after each step: the keys, and
// each lease with its keys. After the cut the mounted state must equal the
// model's state after the acknowledged steps, or after one more (the step
// in flight): every lease's keys whole, never half a revoke.
// The loop is testing::CrashHarness (engine/testing/crash_harness.h).
// Replay: --seed=N.
#include <atomic>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/loss_modes.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

struct Op {
  enum class Kind { kGrant, kPut, kPutLease, kDelete, kRevoke, kExpire, kCommit } kind;
  int64_t lease = 0;  // kGrant (with ttl), kPutLease, kRevoke
  std::string key;    // kPut, kPutLease, kDelete
  int64_t ttl = 0;
};

// The state a mount shows: keys with values, leases with their keys.
struct State {
  std::map<std::string, std::string> kv;
  std::map<int64_t, std::set<std::string>> leases;
  bool operator==(const State& o) const { return kv == o.kv && leases == o.leases; }
  std::string Describe() const {
    std::vector<std::string> ls;
    for (const auto& [id, keys] : leases)
      ls.push_back(absl::StrCat(id, ":[", absl::StrJoin(keys, ","), "]"));
    std::vector<std::string> ks;
    for (const auto& [k, v] : kv) ks.push_back(k);
    return absl::StrCat("keys [", absl::StrJoin(ks, ","), "] leases {", absl::StrJoin(ls, " "),
                        "}");
  }
};

std::vector<Op> Script() {
  std::vector<Op> ops;
  using K = Op::Kind;
  for (int64_t id = 1; id <= 5; ++id) ops.push_back({K::kGrant, id, "", id == 2 ? 5 : 1000});
  for (int64_t id = 1; id <= 5; ++id) {
    for (int i = 0; i < 3; ++i) ops.push_back({K::kPutLease, id, absl::StrCat("l", id, "/", i), 0});
    if (id == 2) ops.push_back({K::kCommit, 0, "", 0});
  }
  ops.push_back({K::kPut, 0, "free", 0});
  ops.push_back({K::kRevoke, 1, "", 0});        // three keys in one revision
  ops.push_back({K::kPut, 0, "l3/0", 0});       // detaches l3/0 from lease 3
  ops.push_back({K::kDelete, 0, "l4/1", 0});    // detaches l4/1
  ops.push_back({K::kPutLease, 5, "l4/2", 0});  // moves l4/2 to lease 5
  ops.push_back({K::kExpire, 0, "", 0});        // lease 2 (TTL 5 s) expires
  ops.push_back({K::kCommit, 0, "", 0});
  ops.push_back({K::kRevoke, 3, "", 0});
  ops.push_back({K::kGrant, 6, "", 1000});
  for (int i = 0; i < 4; ++i) ops.push_back({K::kPutLease, 6, absl::StrCat("l6/", i), 0});
  ops.push_back({K::kRevoke, 4, "", 0});  // one key left (l4/0)
  ops.push_back({K::kRevoke, 6, "", 0});
  ops.push_back({K::kRevoke, 5, "", 0});
  return ops;
}

// The model's state after each prefix of the script: states[i] after i steps.
std::vector<State> ModelStates(const std::vector<Op>& ops) {
  std::vector<State> states(1);
  State s;
  std::map<std::string, int64_t> attached;
  auto detach = [&](const std::string& k) {
    auto a = attached.find(k);
    if (a == attached.end()) return;
    s.leases[a->second].erase(k);
    attached.erase(a);
  };
  auto remove = [&](int64_t id) {
    for (const std::string& k : s.leases[id]) {
      s.kv.erase(k);
      attached.erase(k);
    }
    s.leases.erase(id);
  };
  for (const Op& op : ops) {
    switch (op.kind) {
      case Op::Kind::kGrant:
        s.leases[op.lease];
        break;
      case Op::Kind::kPut:
        detach(op.key);
        s.kv[op.key] = "v";
        break;
      case Op::Kind::kPutLease:
        detach(op.key);
        s.kv[op.key] = "v";
        s.leases[op.lease].insert(op.key);
        attached[op.key] = op.lease;
        break;
      case Op::Kind::kDelete:
        detach(op.key);
        s.kv.erase(op.key);
        break;
      case Op::Kind::kRevoke:
        remove(op.lease);
        break;
      case Op::Kind::kExpire:
        remove(2);
        break;
      case Op::Kind::kCommit:
        break;
    }
    states.push_back(s);
  }
  return states;
}

std::atomic<int64_t> g_clock{1000000};

Options WorkloadOptions() {
  Options o = testing::TestOptions();
  o.default_durability = Durability::kDurable;
  o.lease_clock_ms = [] { return g_clock.load(); };
  o.lease_expiry_interval_ms = 0;
  return o;
}

// Runs the script until it completes or the device dies; returns the
// number of steps acknowledged.
size_t RunScript(BlockDevice* dev, const std::vector<Op>& ops, std::vector<std::string>* errors) {
  g_clock = 1000000;
  auto store = Store::Open(dev, WorkloadOptions());
  if (!store.ok()) return 0;
  auto sv = (*store)->DefaultSubvolume();
  if (!sv.ok()) return 0;
  size_t acked = 0;
  for (const Op& op : ops) {
    absl::Status s;
    switch (op.kind) {
      case Op::Kind::kGrant: {
        absl::StatusOr<int64_t> id = (*sv)->LeaseGrant(op.ttl, op.lease);
        s = id.status();
        if (id.ok() && *id != op.lease) errors->push_back("grant ignored the id");
        break;
      }
      case Op::Kind::kPut:
        s = (*sv)->Put(op.key, "v");
        break;
      case Op::Kind::kPutLease:
        s = (*sv)->PutItemWithLease(op.key, "v", op.lease).status();
        break;
      case Op::Kind::kDelete:
        s = (*sv)->Delete(op.key);
        break;
      case Op::Kind::kRevoke:
        s = (*sv)->LeaseRevoke(op.lease).status();
        break;
      case Op::Kind::kExpire: {
        g_clock += 10000;
        absl::StatusOr<int> n = (*store)->ExpireLeases();
        s = n.status();
        if (n.ok() && *n != 1) errors->push_back(absl::StrCat("expired ", *n, " leases, want 1"));
        break;
      }
      case Op::Kind::kCommit:
        s = (*store)->Commit();
        break;
    }
    if (!s.ok()) break;
    ++acked;
  }
  sv->reset();
  (void)(*store)->Close();
  return acked;
}

absl::StatusOr<State> Mounted(Store* store) {
  State st;
  COWKV_ASSIGN_OR_RETURN(auto sv, store->DefaultSubvolume());
  COWKV_ASSIGN_OR_RETURN(RangeResult all, sv->Range(RangeRequest{}));
  for (const KeyValue& kv : all.kvs) st.kv[kv.key] = kv.value;
  COWKV_ASSIGN_OR_RETURN(std::vector<int64_t> ids, sv->Leases());
  for (int64_t id : ids) {
    COWKV_ASSIGN_OR_RETURN(LeaseInfo info, sv->LeaseTimeToLive(id, true));
    st.leases[id] = std::set<std::string>(info.keys.begin(), info.keys.end());
  }
  return st;
}

class LeaseCrash : public ::testing::TestWithParam<FaultDevice::LossMode> {};

TEST_P(LeaseCrash, EveryFlushPoint) {
  const std::vector<Op> ops = Script();
  const std::vector<State> states = ModelStates(ops);
  const std::string image = testing::FormattedImage(64ull << 20);
  testing::CrashPlan plan = testing::PlanForMode(&image, GetParam(), 11);
  plan.mount.lease_expiry_interval_ms = 0;
  plan.replay_cut = [](uint64_t, uint64_t k, size_t) { return k % 4 == 0 ? 1 + k / 4 % 2 : 0; };
  testing::CrashHarness<size_t> harness(
      std::move(plan),
      [&ops](FaultDevice* dev, const testing::Cut&, std::vector<std::string>* errors) {
        return RunScript(dev, ops, errors);
      },
      [&states](Store* store, const size_t& acked, const size_t&,
                std::vector<std::string>* problems) {
        absl::StatusOr<State> got = Mounted(store);
        if (!got.ok()) {
          problems->push_back(got.status().ToString());
          return;
        }
        for (size_t i = acked; i <= acked + 1 && i < states.size(); ++i) {
          if (*got == states[i]) return;
        }
        problems->push_back(absl::StrCat(
            "after ", acked, " acknowledged steps the store shows ", got->Describe(),
            "; the model: ", states[acked].Describe(),
            acked + 1 < states.size() ? absl::StrCat(" or ", states[acked + 1].Describe()) : ""));
      });
  const testing::CrashReport report = harness.Sweep();
  EXPECT_EQ(harness.uncut(), ops.size());
  EXPECT_TRUE(report.ok()) << report.Failures();
  std::printf("%llu flush points, %llu cuts\n",
              static_cast<unsigned long long>(report.flush_points),
              static_cast<unsigned long long>(report.cuts));
}

INSTANTIATE_TEST_SUITE_P(AllLossModes, LeaseCrash, testing::AllLossModes(), testing::LossModeName);

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
