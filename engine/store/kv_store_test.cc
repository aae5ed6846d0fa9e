// The transactional key space through the Store facade: revisions, range
// reads, the etcd-style Txn, interactive transactions (read-your-writes,
// point and phantom conflicts, too old, read-only validation), read-only
// snapshots, and the log: one flush per durable commit, group commit,
// replay after power loss, fallback to engine commits. `check` after every
// test that writes.
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

// The store revision a read sees now.
uint64_t CurrentRevision(Subvolume* sv) {
  RangeRequest q;
  q.count_only = true;
  absl::StatusOr<RangeResult> r = sv->Range(q);
  return r.ok() ? r->revision : 0;
}

using testing::ExpectCheckClean;
using testing::IsOk;
using testing::StatusIs;

class KvTest : public testing::StoreTest {
 protected:
  Options DefaultOptions() override {
    Options o = testing::TestOptions();
    o.default_durability = Durability::kDurable;
    return o;
  }
  void OnOpen() override { ASSERT_OK_AND_ASSIGN(sv_, store_->DefaultSubvolume()); }
  void OnClose() override { sv_.reset(); }
  // The KV tests write durably unless they say otherwise.
  void Reopen(Options o = testing::TestOptions()) {
    o.default_durability = Durability::kDurable;
    StoreTest::Reopen(o);
  }
  std::vector<std::string> Keys(const RangeResult& r) {
    std::vector<std::string> out;
    for (const KeyValue& kv : r.kvs) out.push_back(kv.key);
    return out;
  }

  std::unique_ptr<Subvolume> sv_;
};

// The retry rule's waits, as docs/api.md "Retrying transactions" and
// clients/conformance/retry_rule.json give them (every client checks the same).
TEST(TxnRetryRule, WaitsStayInTheirBounds) {
  const int64_t bounds_ms[][2] = {{5, 10},    {10, 20},   {20, 40},    {40, 80},   {80, 160},
                                  {160, 320}, {320, 640}, {500, 1000}, {500, 1000}};
  EXPECT_EQ(kTxnMaxAttempts, 10);
  for (int k = 1; k < kTxnMaxAttempts; ++k) {
    EXPECT_EQ(TxnRetryWait(k, 0), absl::Milliseconds(bounds_ms[k - 1][0])) << k;
    std::mt19937_64 rng(k);
    for (int i = 0; i < 1000; ++i) {
      const absl::Duration w = TxnRetryWait(k, rng());
      EXPECT_GE(w, absl::Milliseconds(bounds_ms[k - 1][0])) << k;
      EXPECT_LE(w, absl::Milliseconds(bounds_ms[k - 1][1])) << k;
    }
  }
  EXPECT_EQ(TxnRetryWait(40, 0), absl::Milliseconds(500));  // capped, no overflow
}

TEST_F(KvTest, RevisionsFollowEtcd) {
  const uint64_t r0 = store_->Stats().revision;
  ASSERT_OK(sv_->Put("a", "1"));
  ASSERT_OK(sv_->Put("b", "1"));
  ASSERT_OK(sv_->Put("a", "2"));
  ASSERT_OK_AND_ASSIGN(KeyValue a, sv_->GetItem("a"));
  EXPECT_EQ(a.value, "2");
  EXPECT_EQ(a.create_revision, r0 + 1);
  EXPECT_EQ(a.mod_revision, r0 + 3);
  EXPECT_EQ(a.version, 2u);
  ASSERT_OK(sv_->Delete("a"));
  EXPECT_THAT(sv_->Delete("a"), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(sv_->Put("a", "3"));
  ASSERT_OK_AND_ASSIGN(a, sv_->GetItem("a"));
  EXPECT_EQ(a.create_revision, r0 + 5);
  EXPECT_EQ(a.version, 1u);
  // Revisions survive a remount (superblock + log).
  Reopen();
  EXPECT_EQ(store_->Stats().revision, r0 + 5);
  ASSERT_OK(sv_->Put("c", ""));
  ASSERT_OK_AND_ASSIGN(KeyValue c, sv_->GetItem("c"));
  EXPECT_EQ(c.mod_revision, r0 + 6);
  EXPECT_EQ(c.value, "");
}

TEST_F(KvTest, BadInputChangesNothing) {
  EXPECT_THAT(sv_->Put("", "v"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sv_->Put(std::string(1025, 'k'), "v"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sv_->Put("k", std::string((16 << 20) + 1, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(sv_->Put(std::string(1024, 'k'), std::string(store_->max_value_size(), 'v')));
  RangeRequest both;
  both.prefix = "a";
  both.start = "b";
  EXPECT_THAT(sv_->Range(both), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(store_->Stats().revision, 1u);
}

TEST_F(KvTest, RangeReads) {
  for (const char* k : {"a", "b", "ba", "bb", "c", "d\xff", "e"}) ASSERT_OK(sv_->Put(k, k));
  RangeRequest r;
  r.start = "b";
  r.end = "d";
  ASSERT_OK_AND_ASSIGN(RangeResult res, sv_->Range(r));
  EXPECT_EQ(Keys(res), (std::vector<std::string>{"b", "ba", "bb", "c"}));
  EXPECT_EQ(res.count, 4u);
  EXPECT_FALSE(res.more);
  r.limit = 2;
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(r));
  EXPECT_EQ(Keys(res), (std::vector<std::string>{"b", "ba"}));
  EXPECT_EQ(res.count, 3u);  // a lower bound once the limit cut it short
  EXPECT_TRUE(res.more);
  r.reverse = true;
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(r));
  EXPECT_EQ(Keys(res), (std::vector<std::string>{"c", "bb"}));
  RangeRequest p;
  p.prefix = "b";
  p.keys_only = true;
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(p));
  EXPECT_EQ(Keys(res), (std::vector<std::string>{"b", "ba", "bb"}));
  EXPECT_EQ(res.kvs[0].value, "");
  p.prefix = "d\xff";
  p.keys_only = false;
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(p));
  EXPECT_EQ(Keys(res), (std::vector<std::string>{"d\xff"}));
  RangeRequest all;
  all.count_only = true;
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(all));
  EXPECT_EQ(res.count, 7u);
  EXPECT_TRUE(res.kvs.empty());
  EXPECT_EQ(res.revision, store_->Stats().revision);
  RangeRequest rev_all;
  rev_all.reverse = true;
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(rev_all));
  EXPECT_EQ(res.kvs.front().key, "e");
  EXPECT_EQ(res.kvs.back().key, "a");
  RangeRequest empty;
  empty.start = "z";
  empty.end = "a";
  ASSERT_OK_AND_ASSIGN(res, sv_->Range(empty));
  EXPECT_EQ(res.count, 0u);
}

// A range read never loads more than its byte bound (plus one pair): the
// cost of a read is what it returns, not what it scans.
TEST_F(KvTest, RangeStopsAtItsByteBound) {
  const std::string big(64 << 10, 'v');  // in data extents at 4 KiB nodes
  for (int i = 0; i < 40; ++i)
    ASSERT_OK(sv_->Put(absl::StrCat("k", 100 + i), big, Durability::kAsync));
  ASSERT_OK(store_->Commit());
  for (uint64_t max : {uint64_t{1}, uint64_t{200} << 10, uint64_t{1} << 20}) {
    for (bool reverse : {false, true}) {
      RangeRequest req;
      req.max_bytes = max;
      req.reverse = reverse;
      const uint64_t before = store_->Stats().kv_range_value_bytes;
      ASSERT_OK_AND_ASSIGN(RangeResult r, sv_->Range(req));
      const uint64_t pair = 4 + big.size() + kRangeEntryOverheadBytes;
      const size_t want = std::max<uint64_t>(1, max / pair);
      EXPECT_EQ(r.kvs.size(), want) << "max_bytes " << max;
      EXPECT_TRUE(r.more);
      EXPECT_EQ(store_->Stats().kv_range_value_bytes - before, want * big.size());
      EXPECT_EQ(r.kvs.front().key, reverse ? "k139" : "k100");
    }
  }
  // keys_only counts keys alone.
  RangeRequest keys;
  keys.keys_only = true;
  keys.max_bytes = 10 * (4 + kRangeEntryOverheadBytes);
  ASSERT_OK_AND_ASSIGN(RangeResult k, sv_->Range(keys));
  EXPECT_EQ(k.kvs.size(), 10u);
}

// A Txn's Range ops share one response budget: past it the Txn is
// RESOURCE_EXHAUSTED, applies nothing, and loaded at most the budget and
// one value (issue 14: 200 ranges built a 1.7 GB response).
TEST_F(KvTest, TxnRangesShareAResponseBudget) {
  const std::string big(64 << 10, 'v');
  for (int i = 0; i < 40; ++i)
    ASSERT_OK(sv_->Put(absl::StrCat("k", 100 + i), big, Durability::kAsync));
  ASSERT_OK(store_->Commit());
  TxnRequest txn;
  txn.max_response_bytes = 1 << 20;
  TxnOp put;
  put.type = TxnOp::Type::kPut;
  put.key = "written-by-the-txn";
  put.value = "x";
  txn.success.push_back(put);
  TxnOp range;
  range.type = TxnOp::Type::kRange;
  for (int i = 0; i < 50; ++i) txn.success.push_back(range);
  const uint64_t before = store_->Stats().kv_range_value_bytes;
  EXPECT_THAT(sv_->Txn(txn), StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_LE(store_->Stats().kv_range_value_bytes - before, txn.max_response_bytes + big.size());
  EXPECT_THAT(sv_->Get("written-by-the-txn"), StatusIs(absl::StatusCode::kNotFound));
  // Within the budget, each op's own bound cuts it short instead.
  txn.success.resize(3);
  for (size_t i = 1; i < 3; ++i) txn.success[i].range.max_bytes = 200 << 10;
  ASSERT_OK_AND_ASSIGN(TxnResponse ok, sv_->Txn(txn));
  ASSERT_EQ(ok.results.size(), 3u);
  EXPECT_EQ(ok.results[1].range.kvs.size(), 3u);
  EXPECT_TRUE(ok.results[1].range.more);
  ASSERT_OK(sv_->Get("written-by-the-txn").status());
  // No budget: the whole range.
  txn.max_response_bytes = 0;
  txn.success.resize(2);
  txn.success[1].range.max_bytes = 0;
  ASSERT_OK_AND_ASSIGN(TxnResponse all, sv_->Txn(txn));
  EXPECT_EQ(all.results[1].range.kvs.size(), 41u);
}

TEST_F(KvTest, TxnCompareThenElse) {
  ASSERT_OK(sv_->Put("x", "1"));
  TxnRequest t;
  Compare c;
  c.key = "x";
  c.target = Compare::Target::kValue;
  c.value = "1";
  t.compare.push_back(c);
  TxnOp put{TxnOp::Type::kPut, "y", "from-then", "", {}};
  TxnOp del{TxnOp::Type::kDelete, "x", "", "", {}};
  TxnOp get;
  get.type = TxnOp::Type::kRange;
  get.range.prefix = "x";
  t.success = {put, get, del};
  t.failure = {TxnOp{TxnOp::Type::kPut, "y", "from-else", "", {}}};
  ASSERT_OK_AND_ASSIGN(TxnResponse r, sv_->Txn(t));
  EXPECT_TRUE(r.succeeded);
  ASSERT_EQ(r.results.size(), 3u);
  EXPECT_EQ(r.results[1].range.kvs.size(), 1u);  // reads see the state before the Txn
  EXPECT_EQ(r.results[2].deleted, 1u);
  EXPECT_THAT(sv_->Get("x"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(*sv_->Get("y"), "from-then");
  ASSERT_OK_AND_ASSIGN(KeyValue y, sv_->GetItem("y"));
  EXPECT_EQ(y.mod_revision, r.revision);
  // Now x is absent: the value compare fails, the else branch runs.
  ASSERT_OK_AND_ASSIGN(r, sv_->Txn(t));
  EXPECT_FALSE(r.succeeded);
  EXPECT_EQ(*sv_->Get("y"), "from-else");
  // Existence and revision compares.
  TxnRequest e;
  Compare absent;
  absent.key = "x";
  absent.target = Compare::Target::kExists;
  absent.exists = false;
  Compare ver;
  ver.key = "y";
  ver.target = Compare::Target::kVersion;
  ver.op = Compare::Op::kGreater;
  ver.number = 1;
  e.compare = {absent, ver};
  e.success = {TxnOp{TxnOp::Type::kDeleteRange, "a", "", "z", {}}};
  ASSERT_OK_AND_ASSIGN(r, sv_->Txn(e));
  EXPECT_TRUE(r.succeeded);
  EXPECT_EQ(r.results[0].deleted, 1u);
  EXPECT_THAT(sv_->Get("y"), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(KvTest, TransactionReadsItsOwnWrites) {
  ASSERT_OK(sv_->Put("a", "0"));
  ASSERT_OK(sv_->Put("b", "0"));
  ASSERT_OK(sv_->Put("c", "0"));
  ASSERT_OK_AND_ASSIGN(auto tx, sv_->BeginTransaction());
  ASSERT_OK(tx->Put("b", "1"));
  ASSERT_OK(tx->Put("bb", "new"));
  ASSERT_OK(tx->Delete("c"));
  EXPECT_EQ(tx->Get("b")->value, "1");
  EXPECT_THAT(tx->Get("c"), StatusIs(absl::StatusCode::kNotFound));
  RangeRequest all;
  ASSERT_OK_AND_ASSIGN(RangeResult r, tx->Range(all));
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"a", "b", "bb"}));
  ASSERT_OK(tx->DeleteRange("a", "b"));
  ASSERT_OK_AND_ASSIGN(r, tx->Range(all));
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"b", "bb"}));
  all.limit = 1;
  all.reverse = true;
  ASSERT_OK_AND_ASSIGN(r, tx->Range(all));
  EXPECT_EQ(Keys(r), (std::vector<std::string>{"bb"}));
  EXPECT_TRUE(r.more);
  // Nothing is visible outside until commit.
  EXPECT_EQ(*sv_->Get("b"), "0");
  ASSERT_OK_AND_ASSIGN(uint64_t rev, tx->Commit());
  EXPECT_THAT(tx->Put("z", "z"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(sv_->Get("a"), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_EQ(*sv_->Get("bb"), "new");
  EXPECT_EQ(sv_->GetItem("b")->mod_revision, rev);
  EXPECT_EQ(sv_->GetItem("bb")->mod_revision, rev);  // one revision for all
}

TEST_F(KvTest, PointConflictAborts) {
  ASSERT_OK(sv_->Put("k", "0"));
  ASSERT_OK_AND_ASSIGN(auto t1, sv_->BeginTransaction());
  ASSERT_OK(t1->Get("k").status());
  ASSERT_OK(t1->Put("k", "t1"));
  ASSERT_OK(sv_->Put("k", "other"));
  EXPECT_THAT(t1->Commit(), StatusIs(absl::StatusCode::kAborted));
  EXPECT_EQ(*sv_->Get("k"), "other");
  // A read after a later write sees the read revision's value (from the
  // history), with no eager abort; the conflict is found at Commit.
  ASSERT_OK_AND_ASSIGN(auto t2, sv_->BeginTransaction());
  ASSERT_OK(sv_->Put("k", "again"));
  ASSERT_OK_AND_ASSIGN(KeyValue seen, t2->Get("k"));
  EXPECT_EQ(seen.value, "other");
  ASSERT_OK(t2->Put("k2", "from t2"));
  EXPECT_THAT(t2->Commit(), StatusIs(absl::StatusCode::kAborted));
  // Blind writes do not conflict.
  ASSERT_OK_AND_ASSIGN(auto t3, sv_->BeginTransaction());
  ASSERT_OK(t3->Put("k", "blind"));
  ASSERT_OK(sv_->Put("k", "meanwhile"));
  ASSERT_OK(t3->Commit().status());
  EXPECT_EQ(*sv_->Get("k"), "blind");
  EXPECT_GE(store_->Stats().kv_conflicts, 2u);
}

TEST_F(KvTest, PhantomInsertAbortsRangeReader) {
  ASSERT_OK(sv_->Put("user/1", "a"));
  ASSERT_OK(sv_->Put("zzz", "outside"));
  ASSERT_OK_AND_ASSIGN(auto tx, sv_->BeginTransaction());
  RangeRequest users;
  users.prefix = "user/";
  ASSERT_OK_AND_ASSIGN(RangeResult r, tx->Range(users));
  ASSERT_EQ(r.count, 1u);
  ASSERT_OK(tx->Put("count", "1"));
  ASSERT_OK(sv_->Put("zzz", "changed"));  // outside the range: no conflict
  ASSERT_OK(sv_->Put("user/2", "b"));     // a phantom
  EXPECT_THAT(tx->Commit(), StatusIs(absl::StatusCode::kAborted));
  EXPECT_THAT(sv_->Get("count"), StatusIs(absl::StatusCode::kNotFound));
  // A deletion inside the range is a phantom too.
  ASSERT_OK_AND_ASSIGN(tx, sv_->BeginTransaction());
  ASSERT_OK(tx->Range(users).status());
  ASSERT_OK(tx->Put("count", "2"));
  ASSERT_OK(sv_->Delete("user/1"));
  EXPECT_THAT(tx->Commit(), StatusIs(absl::StatusCode::kAborted));
  // A limited range only read up to its last key.
  ASSERT_OK(sv_->Put("user/3", "c"));
  ASSERT_OK_AND_ASSIGN(tx, sv_->BeginTransaction());
  users.limit = 1;
  ASSERT_OK_AND_ASSIGN(r, tx->Range(users));
  ASSERT_EQ(Keys(r), std::vector<std::string>{"user/2"});
  ASSERT_OK(tx->Put("count", "3"));
  ASSERT_OK(sv_->Put("user/9", "past the limit"));
  ASSERT_OK(tx->Commit().status());
}

// Issue 18: a read-only transaction reads one revision and always commits.
TEST_F(KvTest, ReadOnlyTransactionAlwaysCommits) {
  ASSERT_OK(sv_->Put("a", "1"));
  ASSERT_OK(sv_->Put("b", "1"));
  ASSERT_OK_AND_ASSIGN(auto tx, sv_->BeginTransaction());
  ASSERT_OK(tx->Get("a").status());
  ASSERT_OK(sv_->Put("a", "2"));
  ASSERT_OK(sv_->Delete("b"));
  EXPECT_EQ(tx->Get("a")->value, "1");
  EXPECT_EQ(tx->Get("b")->value, "1") << "deleted after the read revision: still there";
  RangeRequest all;
  ASSERT_OK_AND_ASSIGN(RangeResult r, tx->Range(all));
  ASSERT_EQ(r.kvs.size(), 2u);
  EXPECT_EQ(r.kvs[0].value, "1");
  EXPECT_EQ(r.kvs[1].key, "b");
  EXPECT_EQ(tx->Commit().status(), absl::OkStatus());
  ASSERT_OK_AND_ASSIGN(tx, sv_->BeginTransaction());
  ASSERT_OK(tx->Get("a").status());
  ASSERT_OK(sv_->Put("b", "2"));
  ASSERT_OK_AND_ASSIGN(uint64_t rev, tx->Commit());
  EXPECT_EQ(rev, tx->read_revision());
}

TEST_F(KvTest, TooOldIsOutOfRangeAndRetried) {
  Options o = testing::TestOptions();
  o.conflict_window_keys = 8;
  Reopen(o);
  ASSERT_OK(sv_->Put("x", "0"));
  ASSERT_OK_AND_ASSIGN(auto old, sv_->BeginTransaction());
  ASSERT_OK(old->Get("x").status());
  ASSERT_OK(old->Put("y", "1"));
  for (int i = 0; i < 20; ++i) ASSERT_OK(sv_->Put(absl::StrCat("w", i), "v", Durability::kAsync));
  EXPECT_THAT(old->Commit(), StatusIs(absl::StatusCode::kOutOfRange));
  EXPECT_EQ(store_->Stats().kv_too_old, 1u);
  int attempts = 0;
  ASSERT_OK(sv_->RunInTransaction([&](KvTransaction& tx) -> absl::Status {
    ++attempts;
    absl::StatusOr<KeyValue> x = tx.Get("x");
    if (!x.ok()) return x.status();
    if (attempts == 1) {  // force a conflict on the first attempt
      if (!sv_->Put("x", "bump").ok()) return absl::InternalError("bump failed");
    }
    return tx.Put("x", x->value + "+1");
  }));
  EXPECT_EQ(attempts, 2);
  EXPECT_EQ(*sv_->Get("x"), "bump+1");
  // Errors that are not conflicts are returned at once.
  attempts = 0;
  EXPECT_THAT(sv_->RunInTransaction([&](KvTransaction&) {
    ++attempts;
    return absl::InvalidArgumentError("app says no");
  }),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(attempts, 1);
  EXPECT_EQ(store_->Stats().open_transactions, 0u);
}

TEST_F(KvTest, ReadOnlySnapshotReadsAndRefusesWrites) {
  ASSERT_OK(sv_->Put("k", "before"));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store_->CreateSnapshot("default", "snap", true));
  EXPECT_TRUE(info.read_only);
  ASSERT_OK(sv_->Put("k", "after"));
  ASSERT_OK(sv_->Put("k2", "after"));
  ASSERT_OK_AND_ASSIGN(auto snap, store_->OpenSubvolume("snap"));
  EXPECT_EQ(*snap->Get("k"), "before");
  EXPECT_THAT(snap->Get("k2"), StatusIs(absl::StatusCode::kNotFound));
  RangeRequest all;
  ASSERT_OK_AND_ASSIGN(RangeResult r, snap->Range(all));
  EXPECT_EQ(Keys(r), std::vector<std::string>{"k"});
  EXPECT_THAT(snap->Put("k", "x"), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(snap->Delete("k"), StatusIs(absl::StatusCode::kFailedPrecondition));
  ASSERT_OK_AND_ASSIGN(auto tx, snap->BeginTransaction());
  ASSERT_OK(tx->Put("k", "x"));
  EXPECT_THAT(tx->Commit(), StatusIs(absl::StatusCode::kFailedPrecondition));
  TxnRequest t;
  t.success = {TxnOp{TxnOp::Type::kPut, "k", "x", "", {}}};
  EXPECT_THAT(snap->Txn(t), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(*snap->Get("k"), "before");
}

// ---- Values in data extents ------------------------------------------------------

std::string Pattern(size_t n, int seed) {
  std::string v(n, '\0');
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < n; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    v[i] = static_cast<char>(x);
  }
  return v;
}

TEST_F(KvTest, LargeValuesLiveInDataExtents) {
  const std::string mib = Pattern(1 << 20, 1), max = Pattern(16 << 20, 2);
  const std::string just_over = Pattern(store_->max_value_size() + 1, 3);
  ASSERT_OK(sv_->Put("mib", mib));
  ASSERT_OK(sv_->Put("max", max));
  ASSERT_OK(sv_->Put("just_over", just_over));
  ASSERT_OK(sv_->Put("small", "s"));
  EXPECT_TRUE(*sv_->Get("mib") == mib);
  EXPECT_TRUE(*sv_->Get("max") == max);
  EXPECT_TRUE(*sv_->Get("just_over") == just_over);
  RangeRequest all;
  ASSERT_OK_AND_ASSIGN(RangeResult r, sv_->Range(all));
  ASSERT_EQ(r.kvs.size(), 4u);
  EXPECT_TRUE(r.kvs[2].value == mib);  // just_over, max, mib, small
  auto it = sv_->NewIterator();
  it->Seek("max");
  ASSERT_TRUE(it->Valid());
  EXPECT_TRUE(it->value() == max);
  it->Next();
  EXPECT_TRUE(it->value() == mib);
  ASSERT_OK(it->status());
  ASSERT_OK(store_->Commit());
  const uint64_t used = store_->Stats().used_bytes;
  EXPECT_GT(used, (17u << 20));
  // Overwrite with a small value and delete: the extents are freed.
  ASSERT_OK(sv_->Put("max", "now small"));
  ASSERT_OK(sv_->Delete("mib"));
  ASSERT_OK(store_->Commit());
  // The history keeps the old values (readable at older revisions) until
  // compacted.
  EXPECT_TRUE(sv_->GetItemAt("mib", CurrentRevision(sv_.get()) - 2)->value == mib);
  ASSERT_OK(sv_->Compact(CurrentRevision(sv_.get())));
  ASSERT_OK(store_->Commit());
  EXPECT_LT(store_->Stats().used_bytes, used - (16u << 20));
  Reopen();
  EXPECT_TRUE(*sv_->Get("max") == "now small");
  EXPECT_TRUE(*sv_->Get("just_over") == just_over);
}

TEST_F(KvTest, LargeValuesInTransactionsAndTxn) {
  const std::string a = Pattern(100000, 4), b = Pattern(200000, 5);
  ASSERT_OK_AND_ASSIGN(auto tx, sv_->BeginTransaction());
  ASSERT_OK(tx->Put("a", a));
  EXPECT_TRUE(tx->Get("a")->value == a);
  ASSERT_OK(tx->Commit().status());
  EXPECT_TRUE(*sv_->Get("a") == a);
  // Both branches carry large values; only the taken one is stored.
  TxnRequest t;
  Compare c;
  c.key = "a";
  c.value = a;  // compared against the value in its extent
  t.compare.push_back(c);
  t.success = {TxnOp{TxnOp::Type::kPut, "b", b, "", {}}};
  t.failure = {TxnOp{TxnOp::Type::kPut, "b", a, "", {}}};
  ASSERT_OK_AND_ASSIGN(TxnResponse resp, sv_->Txn(t));
  EXPECT_TRUE(resp.succeeded);
  EXPECT_TRUE(*sv_->Get("b") == b);
  // A conflicting transaction's extent is released, not leaked (check).
  ASSERT_OK_AND_ASSIGN(tx, sv_->BeginTransaction());
  ASSERT_OK(tx->Get("a").status());
  ASSERT_OK(tx->Put("c", b));
  ASSERT_OK(sv_->Put("a", "changed"));
  EXPECT_THAT(tx->Commit(), StatusIs(absl::StatusCode::kAborted));
  ASSERT_OK(store_->Commit());
}

TEST_F(KvTest, SnapshotsShareDataExtents) {
  const std::string v1 = Pattern(300000, 6), v2 = Pattern(300000, 7);
  ASSERT_OK(sv_->Put("big", v1));
  ASSERT_OK_AND_ASSIGN(SubvolumeInfo snap, store_->CreateSnapshot("default", "snap", false));
  (void)snap;
  const uint64_t used = store_->Stats().used_bytes;
  ASSERT_OK_AND_ASSIGN(auto s, store_->OpenSubvolume("snap"));
  EXPECT_TRUE(*s->Get("big") == v1);
  ASSERT_OK(sv_->Put("big", v2));
  EXPECT_TRUE(*s->Get("big") == v1);
  EXPECT_TRUE(*sv_->Get("big") == v2);
  ASSERT_OK(store_->Commit());
  EXPECT_GT(store_->Stats().used_bytes, used + 200000) << "v1 kept for the snapshot";
  ExpectCheckClean(&dev_);
  ASSERT_OK(store_->DeleteSubvolume("snap"));
  ASSERT_OK(store_->DropDeletedSubvolumes());
  ASSERT_OK(sv_->Compact(CurrentRevision(sv_.get())));  // the history held v1 too
  ASSERT_OK(store_->Commit());
  EXPECT_LT(store_->Stats().used_bytes, used + 100000) << "v1 freed with the snapshot";
}

TEST_F(KvTest, CorruptDataExtentIsDataLoss) {
  const std::string v = Pattern(50000, 8);
  ASSERT_OK(sv_->Put("big", v));
  ASSERT_OK(store_->Close());
  store_.reset();
  sv_.reset();
  // Find the value on the device and flip one byte of it.
  std::string img = dev_.Snapshot();
  size_t pos = img.find(v.substr(1000, 64));
  ASSERT_NE(pos, std::string::npos);
  img[pos + 10] ^= 1;
  dev_.Restore(img);
  ASSERT_OK_AND_ASSIGN(CheckReport rep, Check(&dev_));
  EXPECT_FALSE(rep.ok());
  Reopen();
  EXPECT_THAT(sv_->Get("big"), StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_OK(sv_->Put("big", "repaired"));
  EXPECT_TRUE(*sv_->Get("big") == "repaired");
  // The history still points at the damaged extent: reading the old
  // revision is DATA_LOSS too, until it is compacted away.
  EXPECT_THAT(sv_->GetItemAt("big", CurrentRevision(sv_.get()) - 1),
              StatusIs(absl::StatusCode::kDataLoss));
  ASSERT_OK(sv_->Compact(CurrentRevision(sv_.get())));
}

TEST_F(KvTest, DurableLargeValuesSurvivePowerLoss) {
  ASSERT_OK(store_->Close());
  store_.reset();
  sv_.reset();
  FaultDevice fd(&dev_);
  {
    Options o = testing::TestOptions();
    o.default_durability = Durability::kDurable;
    ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, o));
    ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
    ASSERT_OK(sv->Put("keep", Pattern(70000, 9)));
    ASSERT_OK(s->Commit());
    for (int i = 0; i < 6; ++i) ASSERT_OK(sv->Put(absl::StrCat("big", i), Pattern(40000, i)));
    ASSERT_OK(sv->Put("keep", "overwritten"));       // its old extent goes
    ASSERT_OK(sv->Put("big0", Pattern(40000, 99)));  // logged twice
    fd.CrashAtFlush(1);
    (void)s->Close();
  }
  ASSERT_TRUE(fd.dead());
  fd.PowerLoss(FaultDevice::LossMode::kTorn, 3);
  {
    ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
    EXPECT_TRUE(*sv->Get("big0") == Pattern(40000, 99));
    for (int i = 1; i < 6; ++i) EXPECT_EQ(*sv->Get(absl::StrCat("big", i)), Pattern(40000, i));
    EXPECT_TRUE(*sv->Get("keep") == "overwritten");
    ASSERT_OK(s->Close());
  }
  ExpectCheckClean(&fd);
  ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, testing::TestOptions()));
}

// The largest transaction (10,000 keys) fits a nearly empty small device:
// the reservation is bounded by the nodes that exist plus what the batch's
// bytes can add, not a full path per key.
TEST_F(KvTest, LargestTransactionFitsASmallDevice) {
  TxnRequest req;
  for (int i = 0; i < 10000; ++i) {
    TxnOp op;
    op.key = absl::StrCat("bulk", 100000 + i);
    op.value = "v";
    req.success.push_back(op);
  }
  ASSERT_OK_AND_ASSIGN(TxnResponse r, sv_->Txn(req));
  EXPECT_TRUE(r.succeeded);
  ASSERT_OK_AND_ASSIGN(RangeResult all,
                       sv_->Range(RangeRequest{"bulk", "bulm", "", 0, false, false, true}));
  EXPECT_EQ(all.count, 10000u);
}

// ---- The log ---------------------------------------------------------------------

TEST_F(KvTest, DurablePutCostsOneFlush) {
  ASSERT_OK(store_->Close());
  store_.reset();
  sv_.reset();
  FaultDevice fd(&dev_);
  {
    Options o = testing::TestOptions();
    o.default_durability = Durability::kDurable;
    ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, o));
    ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
    ASSERT_OK(sv->Put("warm", "up"));
    const StoreStats before = s->Stats();
    const uint64_t flushes = fd.flushes();
    for (int i = 0; i < 20; ++i) ASSERT_OK(sv->Put(absl::StrCat("k", i), "v"));
    const StoreStats after = s->Stats();
    EXPECT_EQ(fd.flushes() - flushes, 20u) << "one device flush per durable put";
    EXPECT_EQ(after.log_syncs - before.log_syncs, 20u);
    EXPECT_EQ(after.durable_commits - before.durable_commits, 20u);
    EXPECT_EQ(after.commits, before.commits) << "no engine commit";
    ASSERT_OK(s->Close());
  }
  ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, testing::TestOptions()));
}

TEST_F(KvTest, DurableCommitsSurvivePowerLoss) {
  store_.reset();
  sv_.reset();
  for (auto mode : {FaultDevice::LossMode::kDropAll, FaultDevice::LossMode::kTorn}) {
    FaultDevice fd(&dev_);
    {
      Options o = testing::TestOptions();
      o.default_durability = Durability::kDurable;
      ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, o));
      ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
      for (int i = 0; i < 50; ++i) ASSERT_OK(sv->Put(absl::StrCat("d", i), absl::StrCat(i)));
      ASSERT_OK(sv->Delete("d7"));
      ASSERT_OK(sv->Put("async", "maybe", Durability::kAsync));
      fd.CrashAtFlush(1);
      (void)s->Close();  // dies at its first flush
    }
    ASSERT_TRUE(fd.dead());
    fd.PowerLoss(mode, 7);
    ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, testing::TestOptions()));
    EXPECT_GT(s->Stats().log_replayed_entries, 0u);
    ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
    for (int i = 0; i < 50; ++i) {
      if (i == 7) {
        EXPECT_THAT(sv->Get("d7"), StatusIs(absl::StatusCode::kNotFound));
      } else {
        EXPECT_EQ(*sv->Get(absl::StrCat("d", i)), absl::StrCat(i));
      }
    }
    ASSERT_OK(s->Close());
    ExpectCheckClean(&fd);
    // Replayed and committed: a second mount replays nothing.
    ASSERT_OK_AND_ASSIGN(s, Store::Open(&fd, testing::TestOptions()));
    EXPECT_EQ(s->Stats().log_replayed_entries, 0u);
    ASSERT_OK(s->Close());
  }
  ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, testing::TestOptions()));
}

// The Then forms (a server's non-blocking writes): each answers exactly
// once; a durable answer comes only after the sync that covers it — every
// acknowledged write survives a power cut at the next flush; async answers
// come on the caller's thread; concurrent writers share syncs; Close
// answers whatever is still waiting. With and without a lone writer's wait
// on its own thread (on this in-memory device a sync is so fast that
// writers seldom overlap it, so sharing is asserted only without).
TEST_F(KvTest, ThenFormsAnswerOnceWhenDurable) {
  store_.reset();
  sv_.reset();
  for (const auto& [mode, lone_inline] :
       std::vector<std::pair<FaultDevice::LossMode, bool>>{{FaultDevice::LossMode::kDropAll, false},
                                                           {FaultDevice::LossMode::kTorn, false},
                                                           {FaultDevice::LossMode::kDropAll, true},
                                                           {FaultDevice::LossMode::kTorn, true}}) {
    SCOPED_TRACE(lone_inline ? "lone writer waits inline" : "every wait on the thread");
    FaultDevice fd(&dev_);
    absl::Mutex mu;
    std::map<std::string, std::string> acked;  // key -> value, answered OK
    std::map<std::string, int> answers;        // key -> times answered
    int not_found = 0;
    {
      Options o = testing::TestOptions();
      o.default_durability = Durability::kDurable;
      o.lone_writer_waits_inline = lone_inline;
      ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, o));
      ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
      const StoreStats before = s->Stats();
      constexpr int kThreads = 4, kPerThread = 50;
      absl::BlockingCounter pending(kThreads * (kPerThread + 2));
      std::vector<std::thread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
          for (int i = 0; i < kPerThread; ++i) {
            const std::string key = absl::StrCat("t", t, "/", i), value = absl::StrCat(i);
            sv->PutItemThen(key, value, Durability::kDurable,
                            [&, key, value](absl::StatusOr<uint64_t> rev) {
                              absl::MutexLock l(&mu);
                              ++answers[key];
                              if (rev.ok()) acked[key] = value;
                              pending.DecrementCount();
                            });
          }
          sv->DeleteItemThen(absl::StrCat("absent", t), Durability::kDurable,
                             [&](absl::StatusOr<uint64_t> rev) {
                               absl::MutexLock l(&mu);
                               if (absl::IsNotFound(rev.status())) ++not_found;
                               pending.DecrementCount();
                             });
          TxnRequest req;
          req.durability = Durability::kDurable;
          TxnOp put;
          put.key = absl::StrCat("txn", t);
          put.value = "x";
          req.success.push_back(put);
          sv->TxnThen(req, [&, t](absl::StatusOr<TxnResponse> resp) {
            absl::MutexLock l(&mu);
            const std::string key = absl::StrCat("txn", t);
            ++answers[key];
            if (resp.ok() && resp->succeeded) acked[key] = "x";
            pending.DecrementCount();
          });
        });
      }
      for (auto& th : threads) th.join();
      pending.Wait();
      {
        absl::MutexLock l(&mu);
        EXPECT_EQ(acked.size(), size_t{kThreads * (kPerThread + 1)});
        for (const auto& [key, n] : answers) EXPECT_EQ(n, 1) << key;
        EXPECT_EQ(not_found, kThreads);
      }
      const StoreStats after = s->Stats();
      const uint64_t writes = kThreads * (kPerThread + 2);
      if (lone_inline) {
        EXPECT_LE(after.log_syncs - before.log_syncs, writes) << "more syncs than writes";
      } else {
        EXPECT_LT(after.log_syncs - before.log_syncs, uint64_t{kThreads * kPerThread})
            << "concurrent Then writers never shared a sync";
      }
      // An async write answers on this thread, before the call returns.
      bool answered = false;
      sv->PutItemThen("async", "a", Durability::kAsync,
                      [&](absl::StatusOr<uint64_t> rev) { answered = rev.ok(); });
      EXPECT_TRUE(answered);
      fd.CrashAtFlush(1);
      (void)s->Close();  // dies at its first flush
    }
    ASSERT_TRUE(fd.dead());
    fd.PowerLoss(mode, 11);
    ASSERT_OK_AND_ASSIGN(auto s, Store::Open(&fd, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, s->DefaultSubvolume());
    for (const auto& [key, value] : acked) {
      absl::StatusOr<std::string> got = sv->Get(key);
      ASSERT_TRUE(got.ok()) << key << " was acknowledged durable and is gone: " << got.status();
      EXPECT_EQ(*got, value) << key;
    }
    ASSERT_OK(s->Close());
    ExpectCheckClean(&fd);
  }
  ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, testing::TestOptions()));
}

TEST_F(KvTest, CloseAnswersThenWritersStillWaiting) {
  constexpr int kWriters = 64;
  absl::Mutex mu;
  int answered = 0, ok = 0, closed = 0;
  std::vector<std::string> acked;
  for (int i = 0; i < kWriters; ++i) {
    const std::string key = absl::StrCat("w", i);
    sv_->PutItemThen(key, "v", Durability::kDurable, [&, key](absl::StatusOr<uint64_t> rev) {
      absl::MutexLock l(&mu);
      ++answered;
      if (rev.ok()) {
        ++ok;
        acked.push_back(key);
      } else if (absl::IsFailedPrecondition(rev.status())) {
        ++closed;
      }
    });
  }
  sv_.reset();
  ASSERT_OK(store_->Close());
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(answered, kWriters) << "Close returned before answering every writer";
    EXPECT_EQ(ok + closed, kWriters);
  }
  // After Close, a Then write is refused at once.
  Reopen();
  ASSERT_OK_AND_ASSIGN(auto sv, store_->DefaultSubvolume());
  for (const std::string& key : acked) EXPECT_OK(sv->Get(key).status()) << key;
}

TEST_F(KvTest, GroupCommitSharesSyncs) {
  constexpr int kThreads = 8, kPerThread = 60;
  const StoreStats before = store_->Stats();
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        if (!sv_->Put(absl::StrCat("t", t, "/", i), "v").ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(errors.load(), 0);
  const StoreStats after = store_->Stats();
  const uint64_t commits = after.durable_commits - before.durable_commits;
  const uint64_t syncs = after.log_syncs - before.log_syncs;
  EXPECT_EQ(commits, uint64_t{kThreads * kPerThread});
  EXPECT_LT(syncs, commits) << "concurrent durable commits never shared a sync";
}

TEST_F(KvTest, EngineHandleForcesFullCommitForDurableWrites) {
  ASSERT_OK_AND_ASSIGN(auto h, store_->Begin());
  ASSERT_OK(h->Put("handle", "1"));
  h->End();
  const StoreStats before = store_->Stats();
  ASSERT_OK(sv_->Put("durable", "1"));
  const StoreStats after = store_->Stats();
  EXPECT_EQ(after.commits_by_log_full, before.commits_by_log_full + 1);
  // The next chain logs again.
  ASSERT_OK(sv_->Put("durable2", "1"));
  EXPECT_EQ(store_->Stats().log_syncs, after.log_syncs + 1);
}

TEST_F(KvTest, LogOverflowFallsBackToEngineCommit) {
  Options o = testing::TestOptions();
  o.log_max_pending_keys = 16;
  Reopen(o);
  for (int i = 0; i < 40; ++i) ASSERT_OK(sv_->Put(absl::StrCat("a", i), "v", Durability::kAsync));
  const StoreStats before = store_->Stats();
  ASSERT_OK(sv_->Put("d", "v"));
  EXPECT_EQ(store_->Stats().commits_by_log_full, before.commits_by_log_full + 1);
  Reopen(o);
  for (int i = 0; i < 40; ++i) EXPECT_EQ(*sv_->Get(absl::StrCat("a", i)), "v");
}

}  // namespace
}  // namespace cowkv
