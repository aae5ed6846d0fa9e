// Watch events against a model (issue 18): random puts (inline and in data
// extents), deletes, Txns with delete-ranges, lease revokes (one revision
// deleting every attached key), writes to another subvolume (never seen
// here), explicit and automatic compactions and reopens. After every step,
// events read from a random start revision (whole, and in pages of a few
// events) must equal the model's change list (testing::ModelEvents); a
// start at or below the compact revision is OUT_OF_RANGE COMPACTED with
// the oldest readable revision; the default read stops at the durable
// revision, which reaches the last write at a commit. The planted bug
// kWatchValueFromLatest (a PUT event carries the key's latest value) is
// caught. Replay: --seed=N --ops=N.
#include "engine/testing/watch_model.h"

#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/errors.h"
#include "cowkv/store.h"
#include "engine/testing/history_model.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::HistoryModel;

struct RunConfig {
  uint64_t seed = 1;
  int ops = 300;
  uint64_t history_revisions = uint64_t{1} << 30;
  Options::TestHooks::PlantedBug bug = Options::TestHooks::PlantedBug::kNone;
};

class WatchRun {
 public:
  explicit WatchRun(const RunConfig& cfg) : cfg_(cfg), rng_(cfg.seed), dev_(96ull << 20) {
    opts_ = testing::TestOptions();
    opts_.history_revisions = cfg.history_revisions;
    opts_.lease_expiry_interval_ms = 0;
    opts_.test_hooks.planted_bug = cfg.bug;
  }

  std::vector<std::string> Run() {
    if (!Store::Mkfs(&dev_, testing::TestMkfs(4096)).ok()) return {"mkfs failed"};
    if (!Open()) return problems_;
    if (!store_->CreateSubvolume("other").ok()) return {"create subvolume failed"};
    if (!Open()) return problems_;
    model_ = HistoryModel(store_->Stats().revision);
    for (op_ = 0; op_ < cfg_.ops && problems_.empty(); ++op_) {
      Step();
      if (problems_.empty()) SyncFloor();
      if (problems_.empty()) CheckFrom(RandomStart());
    }
    for (uint64_t r = EventsFloor() + 1; r <= model_.last() + 1 && problems_.empty(); ++r) {
      CheckFrom(r);
    }
    sv_.reset();
    other_.reset();
    if (absl::Status s = store_->Close(); !s.ok()) problems_.push_back("close: " + s.ToString());
    for (const std::string& p : testing::CheckProblems(&dev_)) problems_.push_back(p);
    return problems_;
  }

 private:
  bool Open() {
    sv_.reset();
    other_.reset();
    if (store_ != nullptr && !store_->Close().ok()) return Fail("close failed");
    store_.reset();
    absl::StatusOr<std::unique_ptr<Store>> s = Store::Open(&dev_, opts_);
    if (!s.ok()) return Fail("open: " + s.status().ToString());
    store_ = std::move(*s);
    sv_ = std::move(*store_->DefaultSubvolume());
    absl::StatusOr<std::unique_ptr<Subvolume>> o = store_->OpenSubvolume("other");
    if (o.ok()) other_ = std::move(*o);
    mount_revision_ = store_->Stats().revision;
    return true;
  }
  bool Fail(const std::string& what) {
    problems_.push_back(absl::StrCat("op ", op_, ": ", what));
    return false;
  }
  std::string Key() { return absl::StrCat("k", rng_() % 20); }
  std::string Value() {
    const size_t n = rng_() % 12 == 0 ? 2000 + rng_() % 5000 : rng_() % 40;
    std::string v = absl::StrCat("v", model_.last() + 1, "-");
    v.resize(std::max(v.size(), n), static_cast<char>('a' + rng_() % 26));
    return v;
  }
  void Detach(const std::string& k) { attached_.erase(k); }

  void Step() {
    const int dice = static_cast<int>(rng_() % 100);
    if (dice < 30) {
      const std::string k = Key(), v = Value();
      const bool durable = rng_() % 4 == 0;
      absl::StatusOr<uint64_t> rev =
          sv_->PutItem(k, v, durable ? Durability::kDurable : Durability::kAsync);
      if (!rev.ok()) return (void)Fail(rev.status().ToString());
      model_.Apply(*rev, {{k, v}}, {});
      Detach(k);
      // An acknowledged durable write is within the watermark at once.
      if (durable && store_->Durable().revision < *rev) {
        Fail(absl::StrCat("durable put at ", *rev, " but the durable revision is ",
                          store_->Durable().revision));
      }
    } else if (dice < 40) {
      const std::string k = Key();
      absl::StatusOr<uint64_t> rev = sv_->DeleteItem(k);
      if (rev.ok()) {
        model_.Apply(*rev, {}, {k});
        Detach(k);
      } else if (!absl::IsNotFound(rev.status())) {
        Fail(rev.status().ToString());
      }
    } else if (dice < 52) {
      Txn();
    } else if (dice < 62) {
      Lease();
    } else if (dice < 68) {
      // Another subvolume's writes take revisions but are not this one's events.
      if (other_ != nullptr) {
        absl::StatusOr<uint64_t> rev = other_->PutItem(Key(), "elsewhere");
        if (!rev.ok()) return (void)Fail(rev.status().ToString());
      }
    } else if (dice < 70) {
      // Compactions keep most of the history so that old starts are read.
      const uint64_t lo = model_.floor(), cur = model_.last();
      const uint64_t to = lo + (cur > lo ? rng_() % ((cur - lo) / 4 + 1) : 0);
      if (to == 0) return;
      if (absl::Status s = sv_->Compact(to); !s.ok()) return (void)Fail("compact: " + s.ToString());
      // Only a rising floor is written (a compaction to it drops leftovers).
      if (to > model_.floor()) compacted_ = true;
      model_.Compact(to);
    } else if (dice < 76) {
      Open();
    } else if (dice < 80) {
      CheckDurable();
    }
  }

  void Txn() {
    TxnRequest t;
    std::map<std::string, std::string> puts;
    std::set<std::string> dels;
    std::vector<std::pair<std::string, std::string>> ranges;
    for (int i = 0, n = 1 + static_cast<int>(rng_() % 4); i < n; ++i) {
      TxnOp x;
      const int kind = static_cast<int>(rng_() % 6);
      x.key = Key();
      if (kind == 0) {
        x.type = TxnOp::Type::kDeleteRange;
        x.end = absl::StrCat(x.key, "5");
        for (auto it = puts.lower_bound(x.key); it != puts.end() && it->first < x.end;) {
          it = puts.erase(it);
        }
        ranges.emplace_back(x.key, x.end);
      } else if (kind == 1) {
        x.type = TxnOp::Type::kDelete;
        puts.erase(x.key);
        dels.insert(x.key);
      } else {
        x.type = TxnOp::Type::kPut;
        x.value = Value();
        puts[x.key] = x.value;
        dels.erase(x.key);
      }
      t.success.push_back(std::move(x));
    }
    const uint64_t before = store_->Stats().revision;
    absl::StatusOr<TxnResponse> resp = sv_->Txn(t);
    if (!resp.ok()) return (void)Fail(resp.status().ToString());
    if (resp->revision > before) model_.Apply(resp->revision, puts, dels, ranges);
    for (const auto& [s, e] : ranges) {
      for (auto it = attached_.lower_bound(s); it != attached_.end() && it->first < e;) {
        it = attached_.erase(it);
      }
    }
    for (const std::string& k : dels) Detach(k);
    for (const auto& [k, v] : puts) Detach(k);
  }

  // Grant a lease and attach keys to it, or revoke one: its keys go in one
  // revision (a DELETE each).
  void Lease() {
    if (leases_.empty() || rng_() % 2 == 0) {
      absl::StatusOr<int64_t> id = sv_->LeaseGrant(60);
      if (!id.ok()) return (void)Fail(id.status().ToString());
      leases_.insert(*id);
      for (int i = 0, n = 1 + static_cast<int>(rng_() % 3); i < n; ++i) {
        const std::string k = Key(), v = Value();
        absl::StatusOr<uint64_t> rev = sv_->PutItemWithLease(k, v, *id);
        if (!rev.ok()) return (void)Fail(rev.status().ToString());
        model_.Apply(*rev, {{k, v}}, {});
        attached_[k] = *id;
      }
      return;
    }
    const int64_t id = *leases_.begin();
    leases_.erase(leases_.begin());
    std::set<std::string> keys;
    for (auto it = attached_.begin(); it != attached_.end();) {
      if (it->second == id) {
        keys.insert(it->first);
        it = attached_.erase(it);
      } else {
        ++it;
      }
    }
    const uint64_t before = store_->Stats().revision;
    absl::StatusOr<uint64_t> rev = sv_->LeaseRevoke(id);
    if (!rev.ok()) return (void)Fail("revoke: " + rev.status().ToString());
    if (keys.empty() != (*rev == before)) {
      return (void)Fail(absl::StrCat("revoke of a lease with ", keys.size(), " keys at ", *rev));
    }
    if (!keys.empty()) model_.Apply(*rev, {}, keys);
  }

  // The default read stops at the durable revision; a commit makes the
  // last write durable.
  void CheckDurable() {
    const uint64_t durable = store_->Durable().revision;
    if (durable > store_->Stats().revision) return (void)Fail("durable revision past the current");
    EventsRequest q;
    q.from_revision = model_.floor() + 1;
    q.prev_kv = true;
    absl::StatusOr<EventsResult> r = sv_->ReadEvents(q);
    if (!r.ok()) return (void)Fail("ReadEvents: " + r.status().ToString());
    const uint64_t to = std::max(durable, model_.floor());
    std::string d = testing::DiffEvents(testing::ShowEvents(r->events),
                                        testing::ModelEvents(model_, q.from_revision, to));
    if (!d.empty())
      return (void)Fail(absl::StrCat("up to the durable revision ", durable, ": ", d));
    if (!store_->Commit().ok()) return (void)Fail("commit failed");
    if (store_->Durable().revision != store_->Stats().revision) {
      Fail(absl::StrCat("after a commit the durable revision is ", store_->Durable().revision,
                        ", the current ", store_->Stats().revision));
    }
  }

  void SyncFloor() {
    absl::StatusOr<uint64_t> floor = sv_->CompactRevision();
    if (!floor.ok()) return (void)Fail(floor.status().ToString());
    if (*floor < model_.floor()) return (void)Fail("the compact revision went back");
    model_.Compact(*floor);
    // A never-compacted tree's compact revision is its first change's
    // revision - 1 (the revision at mount before any): anything else is
    // an automatic compaction.
    const uint64_t first = model_.first_change();
    if (*floor != (first != 0 ? first - 1 : mount_revision_)) compacted_ = true;
  }

  // Where events start to be complete: the compact revision once compacted,
  // else the mount (or the first change's revision - 1 if earlier).
  uint64_t EventsFloor() const {
    return compacted_ ? model_.floor() : std::min(model_.floor(), mount_revision_);
  }

  uint64_t RandomStart() {
    const uint64_t lo = EventsFloor() > 2 ? EventsFloor() - 2 : 1;
    return lo + rng_() % (model_.last() + 2 - lo);
  }

  void CheckFrom(uint64_t from) {
    const std::string at = absl::StrCat("from ", from, ": ");
    EventsRequest q;
    q.from_revision = from;
    // Revisions past model_.last() are other subvolumes' (no events here).
    q.to_revision = store_->Stats().revision;
    q.prev_kv = rng_() % 4 != 0;
    if (rng_() % 3 == 0) q.prefix = absl::StrCat("k", rng_() % 3);
    if (from <= EventsFloor()) {
      absl::StatusOr<EventsResult> r = sv_->ReadEvents(q);
      const absl::optional<absl::Cord> p = r.status().GetPayload(kCompactRevisionPayloadUrl);
      if (ReasonOf(r.status()) != ErrorReason::kCompacted || !p.has_value() ||
          std::string(*p) != absl::StrCat(EventsFloor() + 1)) {
        Fail(at + "at or below the events floor " + absl::StrCat(EventsFloor()) +
             ", ReadEvents answered " + r.status().ToString());
      }
      return;
    }
    std::vector<std::string> want = testing::ModelEvents(model_, from, model_.last(), q.prev_kv);
    if (!q.prefix.empty()) {
      std::vector<std::string> kept;
      for (const std::string& e : want) {
        if (e.find(absl::StrCat(" ", q.prefix)) != std::string::npos) kept.push_back(e);
      }
      want = kept;
    }
    // Whole, then in pages that never split a revision.
    absl::StatusOr<EventsResult> r = sv_->ReadEvents(q);
    if (!r.ok()) return (void)Fail(at + r.status().ToString());
    std::string d = testing::DiffEvents(testing::ShowEvents(r->events), want);
    if (!d.empty()) return (void)Fail(at + d);
    if (r->more || r->next_revision != std::max(q.to_revision + 1, from)) {
      return (void)Fail(at + absl::StrCat("next revision ", r->next_revision));
    }
    std::vector<WatchEvent> paged;
    q.max_events = 1 + rng_() % 3;
    for (int pages = 0; pages < 10000; ++pages) {
      absl::StatusOr<EventsResult> p = sv_->ReadEvents(q);
      if (!p.ok()) return (void)Fail(at + "paged: " + p.status().ToString());
      if (!paged.empty() && !p->events.empty() &&
          paged.back().revision() == p->events.front().revision()) {
        return (void)Fail(at + absl::StrCat("a page split revision ", paged.back().revision()));
      }
      paged.insert(paged.end(), p->events.begin(), p->events.end());
      if (!p->more) break;
      q.from_revision = p->next_revision;
    }
    d = testing::DiffEvents(testing::ShowEvents(paged), want);
    if (!d.empty()) Fail(at + "paged: " + d);
  }

  const RunConfig cfg_;
  std::mt19937_64 rng_;
  MemDevice dev_;
  Options opts_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<Subvolume> sv_, other_;
  HistoryModel model_;
  uint64_t mount_revision_ = 0;              // the store's revision at the last Open
  bool compacted_ = false;                   // the tree has a compact revision of its own
  std::map<std::string, int64_t> attached_;  // key -> lease
  std::set<int64_t> leases_;
  std::vector<std::string> problems_;
  int op_ = 0;
};

std::vector<std::string> RunWorkload(const RunConfig& cfg) { return WatchRun(cfg).Run(); }

TEST(WatchModel, EventsFromAnyRevisionMatchTheModel) {
  testing::ExpectSeededRunsAgree(1, 5, false, [](uint64_t seed) {
    RunConfig cfg;
    cfg.seed = seed;
    if (testing::Flags().ops != 0) cfg.ops = static_cast<int>(testing::Flags().ops);
    return RunWorkload(cfg);
  });
}

TEST(WatchModel, AutomaticCompaction) {
  testing::ExpectSeededRunsAgree(100, 2, true, [](uint64_t seed) {
    RunConfig cfg;
    cfg.seed = seed;
    cfg.history_revisions = 24;
    return RunWorkload(cfg);
  });
}

// The planted bug: a PUT event carries the key's latest value.
TEST(WatchModel, CatchesPlantedValueFromLatest) {
  const int caught = testing::SeedsCatching(3, [](uint64_t seed) {
    RunConfig cfg;
    cfg.seed = seed;
    cfg.bug = Options::TestHooks::PlantedBug::kWatchValueFromLatest;
    return RunWorkload(cfg);
  });
  EXPECT_GE(caught, 2) << "the model did not see PUT events with the latest value";
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
