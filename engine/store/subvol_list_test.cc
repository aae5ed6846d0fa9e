// Goal: `subvolume list` filters (-r, -s) and sort keys (--sort=[+|-]gen,
// ogen, rootid, path) answer exactly what btrfs-progs would for any history
// of creates, snapshots, renames, deletes and writes; `subvolume show` names
// a subvolume's snapshots; `subvolume sync` returns once deleted
// subvolumes' space is free again, at once when nothing is pending, and
// with a clear error for ids that never were subvolumes.
// Method: a seeded random history against a model (each subvolume's name,
// parent, flags and creation generation; gen read back from the unsorted
// listing, as it is the root node's and only the engine knows it), and after
// every few steps every filter combination times every sort spec of up to
// two keys (both directions, aliases, and three-key specs) compared with the
// model's own sort; the same after reopening. A planted bug (the comparator
// ignores '-') must be caught. Replay: --seed=N --ops=M.
#include <algorithm>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using ::testing::HasSubstr;
using testing::StatusIs;

struct ModelSubvol {
  std::string name;
  uint64_t parent_id = 0;
  bool read_only = false;
  uint64_t ogen = 0;
};

// One sort key of the model: field name as the test spells it, direction.
struct Key {
  std::string field;  // gen, ogen, rootid, path (or an alias)
  bool descending = false;
  bool explicit_plus = false;
  std::string Spec() const {
    return absl::StrCat(descending ? "-" : (explicit_plus ? "+" : ""), field);
  }
};

// Every spec of one and two distinct fields, both directions, aliases
// included, plus a few of three and four.
std::vector<std::vector<Key>> AllSpecs() {
  const std::vector<std::string> fields = {"gen", "ogen", "rootid", "path", "id", "name"};
  std::vector<std::vector<Key>> out = {{}};
  for (const std::string& f : fields) {
    for (int d = 0; d < 3; ++d) out.push_back({Key{f, d == 1, d == 2}});
  }
  for (const std::string& f : {"gen", "ogen", "rootid", "path"}) {
    for (const std::string& g : {"gen", "ogen", "rootid", "path"}) {
      if (f == g) continue;
      for (int d = 0; d < 4; ++d) out.push_back({Key{f, (d & 1) != 0}, Key{g, (d & 2) != 0}});
    }
  }
  out.push_back({Key{"gen", true}, Key{"ogen"}, Key{"path", true}});
  out.push_back({Key{"ogen", true}, Key{"gen", true}, Key{"rootid"}, Key{"path"}});
  out.push_back({Key{"path"}, Key{"gen", true}, Key{"ogen", true}});
  return out;
}

class ListRun {
 public:
  ListRun(uint64_t seed, Options options) : rng_(seed), options_(options) {}

  // Runs `ops` steps; returns the first disagreement with the model, or "".
  std::string Run(uint64_t ops) {
    MemDevice dev(256ull << 20);
    if (!Store::Mkfs(&dev, testing::TestMkfs(4096)).ok()) return "mkfs failed";
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(&dev, options_);
    if (!store.ok()) return std::string(store.status().message());
    absl::StatusOr<SubvolumeInfo> def = (*store)->ShowSubvolume("default");
    if (!def.ok()) return "no default";
    model_[5] = ModelSubvol{"default", 0, false, def->creation_generation};
    for (uint64_t op = 0; op < ops; ++op) {
      std::string err = Step(store->get());
      if (err.empty() && op % 5 == 4) err = CompareAll(store->get());
      if (err.empty() && op % 60 == 59) {
        if (!(*store)->Close().ok()) return "close failed";
        store = Store::Open(&dev, options_);
        if (!store.ok()) return std::string(store.status().message());
        err = CompareAll(store->get());
      }
      if (!err.empty()) return absl::StrCat("op ", op, ": ", err);
    }
    std::string err = CompareAll(store->get());
    if (!(*store)->Close().ok()) return "close failed";
    absl::StatusOr<CheckReport> r = Check(&dev);
    if (!r.ok() || !r->ok()) return "check not clean";
    return err;
  }

 private:
  uint64_t PickId(bool writable_only) {
    std::vector<uint64_t> ids;
    for (const auto& [id, m] : model_) {
      if (!writable_only || !m.read_only) ids.push_back(id);
    }
    return ids[rng_() % ids.size()];
  }

  std::string Step(Store* store) {
    const uint64_t r = rng_() % 100;
    if (r < 35) {
      // A write moves the subvolume's gen (its root node's generation).
      const ModelSubvol& m = model_[PickId(true)];
      absl::StatusOr<std::unique_ptr<Subvolume>> sv = store->OpenSubvolume(m.name);
      if (!sv.ok()) return absl::StrCat("open ", m.name, ": ", sv.status().ToString());
      if (!(*sv)->Put(absl::StrCat("k", rng_() % 500), std::string(rng_() % 300, 'v')).ok()) {
        return "put failed";
      }
      if (rng_() % 3 == 0 && !store->Commit().ok()) return "commit failed";
    } else if (r < 55 && model_.size() < 20) {
      const uint64_t src = PickId(false);
      const bool ro = rng_() % 2;
      const std::string name = absl::StrCat("snap", next_++);
      absl::StatusOr<SubvolumeInfo> info = store->CreateSnapshot(model_[src].name, name, ro);
      if (!info.ok()) return info.status().ToString();
      return Add(*info, ModelSubvol{name, src, ro, 0});
    } else if (r < 65 && model_.size() < 20) {
      const std::string name = absl::StrCat("sub", next_++);
      absl::StatusOr<SubvolumeInfo> info = store->CreateSubvolume(name);
      if (!info.ok()) return info.status().ToString();
      return Add(*info, ModelSubvol{name, 0, false, 0});
    } else if (r < 80) {
      const uint64_t id = PickId(false);
      if (id == 5) return "";
      // Names in a random order of bytes, so path order differs from id order.
      std::string to =
          absl::StrCat(std::string(1, static_cast<char>('a' + rng_() % 26)), "r", next_++);
      if (!store->RenameSubvolume(model_[id].name, to).ok()) return "rename failed";
      model_[id].name = to;
    } else if (r < 90 && model_.size() > 2) {
      const uint64_t id = PickId(false);
      if (id == 5) return "";
      if (!store->DeleteSubvolume(model_[id].name).ok()) return "delete failed";
      model_.erase(id);
    } else if (r < 93) {
      if (!store->SyncDeletedSubvolumes({}).ok()) return "sync failed";
    }
    return "";
  }

  std::string Add(const SubvolumeInfo& info, ModelSubvol m) {
    // Each create commits, so creation generations grow with ids.
    if (info.creation_generation <= last_ogen_) {
      return absl::StrCat(m.name, ": ogen ", info.creation_generation, " not above ", last_ogen_);
    }
    last_ogen_ = info.creation_generation;
    m.ogen = info.creation_generation;
    if (info.parent_id != m.parent_id || info.read_only != m.read_only) {
      return absl::StrCat(m.name, ": wrong parent or flags");
    }
    model_[info.id] = std::move(m);
    return "";
  }

  std::string CompareAll(Store* store) {
    // gen comes from the plain listing (in id order, unfiltered).
    std::map<uint64_t, uint64_t> gen;
    for (const SubvolumeInfo& s : store->ListSubvolumes()) gen[s.id] = s.generation;
    if (gen.size() != model_.size()) return "plain listing disagrees with the model";
    for (const auto& [id, m] : model_) {
      absl::StatusOr<SubvolumeInfo> shown = store->ShowSubvolume(m.name);
      if (!shown.ok()) return absl::StrCat("show ", m.name, ": ", shown.status().ToString());
      std::vector<std::string> want_snaps;
      for (const auto& [sid, s] : model_) {
        if (s.parent_id == id) want_snaps.push_back(s.name);
      }
      if (shown->snapshots != want_snaps) {
        return absl::StrCat("show ", m.name, ": snapshots [", absl::StrJoin(shown->snapshots, ","),
                            "], model [", absl::StrJoin(want_snaps, ","), "]");
      }
    }
    for (int filter = 0; filter < 4; ++filter) {
      for (const std::vector<Key>& spec : specs_) {
        SubvolumeListOptions o;
        o.read_only = filter & 1;
        o.snapshots_only = filter & 2;
        std::vector<std::string> spec_strings;
        for (const Key& k : spec) spec_strings.push_back(k.Spec());
        // One element per key, or one comma-separated element: the same.
        if (rng_() % 2) {
          o.sort = spec_strings;
        } else if (!spec_strings.empty()) {
          o.sort = {absl::StrJoin(spec_strings, ",")};
        }
        absl::StatusOr<std::vector<SubvolumeInfo>> got = store->ListSubvolumes(o);
        if (!got.ok()) return got.status().ToString();
        std::vector<uint64_t> want = ModelList(o, spec, gen);
        std::vector<uint64_t> got_ids;
        for (const SubvolumeInfo& s : *got) {
          got_ids.push_back(s.id);
          const auto m = model_.find(s.id);
          if (m == model_.end() || s.name != m->second.name ||
              s.creation_generation != m->second.ogen || !s.snapshots.empty()) {
            return absl::StrCat("listed subvolume ", s.id, " disagrees with the model");
          }
        }
        if (got_ids != want) {
          return absl::StrCat("list -r=", o.read_only, " -s=", o.snapshots_only,
                              " --sort=", absl::StrJoin(spec_strings, ","), ": got [",
                              absl::StrJoin(got_ids, ","), "], model [", absl::StrJoin(want, ","),
                              "]");
        }
      }
    }
    return "";
  }

  std::vector<uint64_t> ModelList(const SubvolumeListOptions& o, const std::vector<Key>& spec,
                                  const std::map<uint64_t, uint64_t>& gen) {
    std::vector<uint64_t> ids;
    for (const auto& [id, m] : model_) {
      if (o.read_only && !m.read_only) continue;
      if (o.snapshots_only && m.parent_id == 0) continue;
      ids.push_back(id);
    }
    std::stable_sort(ids.begin(), ids.end(), [&](uint64_t a, uint64_t b) {
      const ModelSubvol& x = model_.at(a);
      const ModelSubvol& y = model_.at(b);
      for (const Key& k : spec) {
        // Compare (a, b) ascending, or (b, a) for descending.
        const bool d = k.descending;
        if (k.field == "gen") {
          if (gen.at(a) != gen.at(b)) return d ? gen.at(a) > gen.at(b) : gen.at(a) < gen.at(b);
        } else if (k.field == "ogen") {
          if (x.ogen != y.ogen) return d ? x.ogen > y.ogen : x.ogen < y.ogen;
        } else if (k.field == "rootid" || k.field == "id") {
          if (a != b) return d ? a > b : a < b;
        } else {
          if (x.name != y.name) return d ? x.name > y.name : x.name < y.name;
        }
      }
      return a < b;
    });
    return ids;
  }

  std::mt19937_64 rng_;
  Options options_;
  std::map<uint64_t, ModelSubvol> model_;
  std::vector<std::vector<Key>> specs_ = AllSpecs();
  uint64_t last_ogen_ = 0;
  int next_ = 0;
};

std::string RunSeeds(uint64_t default_seed, uint64_t default_ops, const Options& o) {
  const uint64_t first = testing::Flags().seed ? testing::Flags().seed : default_seed;
  const uint64_t seeds = testing::Flags().seeds ? testing::Flags().seeds : 1;
  const uint64_t ops = testing::Flags().ops ? testing::Flags().ops : default_ops;
  for (uint64_t seed = first; seed < first + seeds; ++seed) {
    std::string err = ListRun(seed, o).Run(ops);
    if (!err.empty()) return absl::StrCat("replay: --seed=", seed, " --ops=", ops, ": ", err);
  }
  return "";
}

// The sampled run; the long one is //engine/store:subvol_list_test_long
// (manual: --ops=3000 --seeds=10).
TEST(SubvolList, Model) { EXPECT_EQ(RunSeeds(1, 150, testing::TestOptions()), ""); }

TEST(SubvolList, CatchesPlantedSortBug) {
  if (testing::Flags().seed != 0) GTEST_SKIP() << "replaying another seed";
  Options o = testing::TestOptions();
  o.test_hooks.planted_bug = Options::TestHooks::PlantedBug::kSortIgnoresDirection;
  const std::string err = RunSeeds(1, 150, o);
  EXPECT_THAT(err, HasSubstr("--sort=-")) << "the model missed a comparator that ignores '-'";
  std::cout << "planted bug caught: " << err << "\n";
}

TEST(SubvolList, BadSortKeysAreInvalidArgumentNamingTheKey) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  for (const std::vector<std::string>& sort : std::vector<std::vector<std::string>>{
           {"bogus"}, {"gen", "size"}, {"gen,*ogen"}, {""}, {"gen,"}, {"--gen"}, {"GEN"}}) {
    SubvolumeListOptions o;
    o.sort = sort;
    absl::StatusOr<std::vector<SubvolumeInfo>> got = store->ListSubvolumes(o);
    EXPECT_THAT(got, StatusIs(absl::StatusCode::kInvalidArgument)) << absl::StrJoin(sort, "|");
    EXPECT_THAT(std::string(got.status().message()),
                HasSubstr("EINVAL: unknown subvolume sort key"));
  }
  SubvolumeListOptions o;
  o.sort = {"gen", "size"};
  EXPECT_THAT(std::string(store->ListSubvolumes(o).status().message()), HasSubstr("'size'"));
  o.sort = {"+gen,-ogen,+rootid,path"};
  ASSERT_OK(store->ListSubvolumes(o).status());
  o.sort = std::vector<std::string>(kMaxSubvolumeSortKeys, "gen");
  ASSERT_OK(store->ListSubvolumes(o).status());
  o.sort.push_back("gen");
  EXPECT_THAT(store->ListSubvolumes(o), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(store->Close());
}

TEST(SubvolShow, SnapshotsOfASubvolume) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK(store->CreateSubvolume("a"));
  ASSERT_OK(store->CreateSnapshot("a", "s1", true));
  ASSERT_OK(store->CreateSnapshot("a", "s2", false));
  ASSERT_OK(store->CreateSnapshot("s1", "s3", true));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo a, store->ShowSubvolume("a"));
  EXPECT_EQ(a.snapshots, (std::vector<std::string>{"s1", "s2"}));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo s1, store->ShowSubvolume("s1"));
  EXPECT_EQ(s1.snapshots, (std::vector<std::string>{"s3"}));
  EXPECT_GT(s1.creation_generation, a.creation_generation);
  ASSERT_OK(store->DeleteSubvolume("s2"));
  ASSERT_OK(store->RenameSubvolume("s1", "s1-renamed"));
  ASSERT_OK(store->Close());
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(a, store->ShowSubvolume("a"));
  EXPECT_EQ(a.snapshots, (std::vector<std::string>{"s1-renamed"}));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo again, store->ShowSubvolume("s1-renamed"));
  EXPECT_EQ(again.creation_generation, s1.creation_generation);
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo def, store->ShowSubvolume("default"));
  EXPECT_EQ(def.creation_generation, 1u);  // mkfs's
  EXPECT_TRUE(def.snapshots.empty());
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

// ---- sync ----------------------------------------------------------------

class SubvolSync : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    Options o = testing::TestOptions();
    o.background_cleaner = GetParam();
    ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, o));
  }
  void TearDown() override {
    if (store_) ASSERT_OK(store_->Close());
    testing::ExpectCheckClean(&dev_);
  }
  // A subvolume with many items, inline values and data extents, committed.
  uint64_t MakeBig(const std::string& name) {
    absl::StatusOr<SubvolumeInfo> info = store_->CreateSubvolume(name);
    EXPECT_TRUE(info.ok());
    absl::StatusOr<std::unique_ptr<Subvolume>> sv = store_->OpenSubvolume(name);
    EXPECT_TRUE(sv.ok());
    for (int i = 0; i < 15000; ++i) {
      const size_t len = i % 500 == 0 ? store_->max_value_size() + 5000 : 100;
      EXPECT_TRUE((*sv)->Put(absl::StrCat("key", i), std::string(len, 'x')).ok());
    }
    EXPECT_TRUE(store_->Commit().ok());
    return info.ok() ? info->id : 0;
  }

  MemDevice dev_{256ull << 20};
  std::unique_ptr<Store> store_;
};

TEST_P(SubvolSync, FreesTheSpaceOfDeletedSubvolumes) {
  ASSERT_OK(store_->Commit());
  ASSERT_OK(store_->Commit());
  const StoreStats before = store_->Stats();
  const uint64_t id = MakeBig("big");
  EXPECT_GT(store_->Stats().used_bytes, before.used_bytes + (2u << 20));
  ASSERT_OK(store_->DeleteSubvolume("big"));
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> synced, store_->SyncDeletedSubvolumes({}));
  // Without the background cleaner the sync did the drop, so it waited for
  // `id`; with it, the cleaner may have finished first.
  if (!GetParam()) EXPECT_EQ(synced, std::vector<uint64_t>{id});
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.deleted_subvolumes_pending, 0u);
  // What the create/delete commits themselves CoWed in the root and extent
  // trees is all that may differ: a few nodes.
  EXPECT_LE(after.used_bytes, before.used_bytes + 8 * 4096);
  EXPECT_GE(after.free_bytes + 8 * 4096, before.free_bytes);
  // Nothing pending now: at once, even with a deadline already past.
  SubvolumeSyncOptions past;
  past.deadline = absl::InfinitePast();
  ASSERT_OK_AND_ASSIGN(synced, store_->SyncDeletedSubvolumes(past));
  EXPECT_TRUE(synced.empty());
  // An id that was deleted and dropped: nothing to wait for.
  SubvolumeSyncOptions gone;
  gone.ids = {id};
  gone.deadline = absl::InfinitePast();
  ASSERT_OK_AND_ASSIGN(synced, store_->SyncDeletedSubvolumes(gone));
  EXPECT_TRUE(synced.empty());
}

INSTANTIATE_TEST_SUITE_P(BackgroundCleaner, SubvolSync, ::testing::Values(false, true));

TEST(SubvolSyncErrors, UnknownLiveDeadlineCancelAndOneId) {
  MemDevice dev(256ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo a, store->CreateSubvolume("a"));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo b, store->CreateSubvolume("b"));
  for (const std::string& n : {"a", "b"}) {
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume(n));
    for (int i = 0; i < 20000; ++i) {
      ASSERT_OK(sv->Put(absl::StrCat("k", i), std::string(100, 'v')));
    }
  }
  ASSERT_OK(store->Commit());
  SubvolumeSyncOptions o;
  for (uint64_t bad : {uint64_t{1}, uint64_t{2}, uint64_t{255}, b.id + 1, uint64_t{99999}}) {
    o.ids = {bad};
    auto r = store->SyncDeletedSubvolumes(o);
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kNotFound)) << bad;
    EXPECT_THAT(std::string(r.status().message()),
                HasSubstr(absl::StrCat("ENOENT: no subvolume ever had id ", bad)));
  }
  o.ids = {a.id};
  auto live = store->SyncDeletedSubvolumes(o);
  EXPECT_THAT(live, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(std::string(live.status().message()), HasSubstr("EBUSY: subvolume"));
  o.ids = {5};
  EXPECT_THAT(store->SyncDeletedSubvolumes(o), StatusIs(absl::StatusCode::kFailedPrecondition));

  ASSERT_OK(store->DeleteSubvolume("a"));
  ASSERT_OK(store->DeleteSubvolume("b"));
  // A deadline already past: DEADLINE_EXCEEDED naming what is pending.
  o.ids = {};
  o.deadline = absl::InfinitePast();
  auto late = store->SyncDeletedSubvolumes(o);
  EXPECT_THAT(late, StatusIs(absl::StatusCode::kDeadlineExceeded));
  EXPECT_THAT(std::string(late.status().message()),
              HasSubstr(absl::StrCat("still pending: ", a.id, ", ", b.id)));
  // Cancelled before the first batch.
  o.deadline = absl::InfiniteFuture();
  o.cancelled = [] { return true; };
  EXPECT_THAT(store->SyncDeletedSubvolumes(o), StatusIs(absl::StatusCode::kCancelled));
  EXPECT_EQ(store->Stats().deleted_subvolumes_pending, 2u);
  // One id: waits for it (and drops the older deletion on the way).
  o.cancelled = nullptr;
  o.ids = {b.id};
  ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> synced, store->SyncDeletedSubvolumes(o));
  EXPECT_EQ(synced, std::vector<uint64_t>{b.id});
  EXPECT_EQ(store->Stats().deleted_subvolumes_pending, 0u);
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

// Goal: a power cut anywhere in a sync loses nothing and leaks nothing: the
// deletion stays committed, the remaining drop resumes, a second sync
// finishes it, and check is clean (freed space neither lost nor reused
// while still referenced).
// Method: a subvolume sharing most of its nodes with a snapshot is deleted
// (committed); then a sync runs on a FaultDevice that dies at its k-th flush,
// for every k until the sync completes, with each loss mode in turn.
TEST(SubvolSyncCrash, PowerCutAtEveryFlushOfASync) {
  MemDevice mem(128ull << 20);
  ASSERT_OK(Store::Mkfs(&mem, testing::TestMkfs(4096)));
  uint64_t snap_ogen = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&mem, testing::TestOptions()));
    ASSERT_OK(store->CreateSubvolume("big"));
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("big"));
    for (int i = 0; i < 20000; ++i) {
      ASSERT_OK(sv->Put(absl::StrCat("k", i), std::string(100, 'v')));
    }
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo snap, store->CreateSnapshot("big", "snap", true));
    snap_ogen = snap.creation_generation;
    for (int i = 0; i < 20000; i += 4) ASSERT_OK(sv->Put(absl::StrCat("k", i), "changed"));
    ASSERT_OK(store->DeleteSubvolume("big"));
    ASSERT_OK(store->Close());
  }
  const std::string base = mem.Snapshot();
  const Options o = testing::TestOptions();
  const FaultDevice::LossMode modes[] = {
      FaultDevice::LossMode::kDropAll, FaultDevice::LossMode::kKeepAll,
      FaultDevice::LossMode::kRandomSubset, FaultDevice::LossMode::kTorn};
  uint64_t cuts = 0;
  for (uint64_t k = 1;; ++k) {
    SCOPED_TRACE(absl::StrCat("power cut at flush ", k));
    ASSERT_LT(k, 200u);
    mem.Restore(base);
    FaultDevice fd(&mem);
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&fd, o));
    fd.CrashAtFlush(k);
    absl::StatusOr<std::vector<uint64_t>> synced = store->SyncDeletedSubvolumes({});
    if (synced.ok() && !fd.dead()) {
      ASSERT_OK(store->Close());
      ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&fd));
      break;
    }
    store->Close().IgnoreError();  // the device is dead: errors are expected
    store.reset();
    ++cuts;
    fd.PowerLoss(modes[k % 4], k);
    ASSERT_OK_AND_ASSIGN(store, Store::Open(&fd, o));
    EXPECT_THAT(store->OpenSubvolume("big"), StatusIs(absl::StatusCode::kNotFound));
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo snap, store->ShowSubvolume("snap"));
    EXPECT_EQ(snap.creation_generation, snap_ogen);
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("snap"));
    ASSERT_OK_AND_ASSIGN(std::string v, sv->Get("k0"));
    EXPECT_EQ(v, std::string(100, 'v'));
    ASSERT_OK(store->SyncDeletedSubvolumes({}).status());
    EXPECT_EQ(store->Stats().deleted_subvolumes_pending, 0u);
    ASSERT_OK(store->Close());
    ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&fd));
  }
  // The sync's first commit, which carries the whole drop here, flushes
  // twice (nodes, then superblocks); its second finds nothing dirty. (Cuts
  // between the cleaner's own commits of a longer drop are the existing
  // cleaner's crash tests' business.)
  EXPECT_GE(cuts, 2u);
  std::cout << "sync survived power cuts at " << cuts << " flushes\n";
}

}  // namespace
}  // namespace cowkv

COWKV_TEST_MAIN()
