// Leases, one behaviour per test: the errors and bounds, the TTL rule at
// a reopen, snapshots (writable: independent; read-only: frozen), the
// background expiry on the real clock, and a revoke of a lease whose keys
// were all deleted. lease_model_test covers the random mix.
#include <atomic>
#include <string>

#include "absl/time/clock.h"
#include "cowkv/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::StatusIs;

class LeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    opts_ = testing::TestOptions();
    opts_.lease_clock_ms = [this] { return clock_.load(); };
    opts_.lease_expiry_interval_ms = 0;
    Open();
  }
  void TearDown() override {
    sv_.reset();
    if (store_ != nullptr) ASSERT_OK(store_->Close());
    store_.reset();
    testing::ExpectCheckClean(&dev_);
  }
  void Open() {
    ASSERT_OK_AND_ASSIGN(store_, Store::Open(&dev_, opts_));
    ASSERT_OK_AND_ASSIGN(sv_, store_->DefaultSubvolume());
  }
  void Reopen() {
    sv_.reset();
    ASSERT_OK(store_->Close());
    store_.reset();
    Open();
  }

  MemDevice dev_{64ull << 20};
  Options opts_;
  std::atomic<int64_t> clock_{5000};
  std::unique_ptr<Store> store_;
  std::unique_ptr<Subvolume> sv_;
};

TEST_F(LeaseTest, Errors) {
  EXPECT_THAT(sv_->LeaseGrant(0).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sv_->LeaseGrant(kMaxLeaseTtlSeconds + 1).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(sv_->LeaseGrant(10, -3).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK_AND_ASSIGN(int64_t id, sv_->LeaseGrant(10, 42));
  EXPECT_EQ(id, 42);
  EXPECT_THAT(sv_->LeaseGrant(10, 42).status(), StatusIs(absl::StatusCode::kAlreadyExists));
  for (absl::Status s :
       {sv_->LeaseRevoke(43).status(), sv_->LeaseKeepAlive(43).status(),
        sv_->LeaseTimeToLive(43).status(), sv_->PutItemWithLease("k", "v", 43).status()}) {
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kNotFound));
    EXPECT_EQ(ReasonOf(s), ErrorReason::kLeaseNotFound);
    EXPECT_EQ(s.message(), "lease 43 not found");
  }
  EXPECT_THAT(sv_->Get("k").status(), StatusIs(absl::StatusCode::kNotFound));
  // A Txn with an unknown lease applies nothing.
  TxnRequest req;
  TxnOp a, b;
  a.key = "a";
  a.value = "1";
  b.key = "b";
  b.value = "2";
  b.lease = 44;
  req.success = {a, b};
  EXPECT_EQ(ReasonOf(sv_->Txn(req).status()), ErrorReason::kLeaseNotFound);
  EXPECT_THAT(sv_->Get("a").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(LeaseTest, KeysPerLeaseBound) {
  ASSERT_OK_AND_ASSIGN(int64_t id, sv_->LeaseGrant(100));
  TxnRequest req;
  for (size_t i = 0; i <= kMaxKeysPerLease; ++i) {
    TxnOp op;
    op.key = absl::StrCat("k", i);
    op.value = "v";
    op.lease = id;
    req.success.push_back(op);
  }
  absl::Status s = sv_->Txn(req).status();
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
  EXPECT_EQ(ReasonOf(s), ErrorReason::kLimit);
  req.success.pop_back();
  ASSERT_OK(sv_->Txn(req).status());
  ASSERT_OK_AND_ASSIGN(LeaseInfo info, sv_->LeaseTimeToLive(id, true));
  EXPECT_EQ(info.keys.size(), kMaxKeysPerLease);
  // The largest lease goes in one revision.
  const uint64_t before = store_->Stats().revision;
  ASSERT_OK_AND_ASSIGN(uint64_t rev, sv_->LeaseRevoke(id));
  EXPECT_EQ(rev, before + 1);
  ASSERT_OK_AND_ASSIGN(RangeResult all, sv_->Range(RangeRequest{}));
  EXPECT_EQ(all.count, 0u);
}

TEST_F(LeaseTest, TtlRestartsAtReopen) {
  ASSERT_OK_AND_ASSIGN(int64_t id, sv_->LeaseGrant(10));
  ASSERT_OK(sv_->PutItemWithLease("k", "v", id).status());
  clock_ += 8000;
  ASSERT_OK_AND_ASSIGN(LeaseInfo info, sv_->LeaseTimeToLive(id));
  EXPECT_EQ(info.ttl, 2);
  Reopen();
  ASSERT_OK_AND_ASSIGN(info, sv_->LeaseTimeToLive(id, true));
  EXPECT_EQ(info.granted_ttl, 10);
  EXPECT_EQ(info.ttl, 10);
  EXPECT_EQ(info.keys, std::vector<std::string>{"k"});
  clock_ += 10000;
  ASSERT_OK_AND_ASSIGN(int n, store_->ExpireLeases());
  EXPECT_EQ(n, 1);
  EXPECT_THAT(sv_->Get("k").status(), StatusIs(absl::StatusCode::kNotFound));
}

TEST_F(LeaseTest, RevokeAfterKeysDeleted) {
  ASSERT_OK_AND_ASSIGN(int64_t id, sv_->LeaseGrant(10));
  ASSERT_OK(sv_->PutItemWithLease("k", "v", id).status());
  ASSERT_OK(sv_->Delete("k"));
  const uint64_t before = store_->Stats().revision;
  ASSERT_OK_AND_ASSIGN(uint64_t rev, sv_->LeaseRevoke(id));
  EXPECT_EQ(rev, before);  // nothing deleted: no revision, as etcd
  ASSERT_OK_AND_ASSIGN(std::vector<int64_t> ids, sv_->Leases());
  EXPECT_TRUE(ids.empty());
}

TEST_F(LeaseTest, Snapshots) {
  ASSERT_OK_AND_ASSIGN(int64_t id, sv_->LeaseGrant(10));
  ASSERT_OK(sv_->PutItemWithLease("k", "v", id).status());
  ASSERT_OK(store_->CreateSnapshot("default", "rw", false).status());
  ASSERT_OK(store_->CreateSnapshot("default", "ro", true).status());
  ASSERT_OK_AND_ASSIGN(auto rw, store_->OpenSubvolume("rw"));
  ASSERT_OK_AND_ASSIGN(auto ro, store_->OpenSubvolume("ro"));
  // The writable snapshot's copy is a lease of its own.
  ASSERT_OK(rw->LeaseRevoke(id).status());
  EXPECT_THAT(rw->Get("k").status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(sv_->Get("k").status());
  // The read-only one's is frozen.
  EXPECT_EQ(ReasonOf(ro->LeaseKeepAlive(id).status()), ErrorReason::kReadOnlySnapshot);
  clock_ += 60000;
  ASSERT_OK_AND_ASSIGN(int n, store_->ExpireLeases());
  EXPECT_EQ(n, 1);  // the default subvolume's
  EXPECT_THAT(sv_->Get("k").status(), StatusIs(absl::StatusCode::kNotFound));
  ASSERT_OK(ro->Get("k").status());
  ASSERT_OK_AND_ASSIGN(LeaseInfo info, ro->LeaseTimeToLive(id, true));
  EXPECT_EQ(info.keys.size(), 1u);
}

TEST(LeaseExpiry, BackgroundThreadOnRealClock) {
  MemDevice dev(64ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  Options o = testing::TestOptions();
  o.lease_expiry_interval_ms = 20;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, o));
  ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
  ASSERT_OK_AND_ASSIGN(int64_t id, sv->LeaseGrant(1));
  ASSERT_OK(sv->PutItemWithLease("k", "v", id).status());
  for (int i = 0; i < 300 && sv->Get("k").ok(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_THAT(sv->Get("k").status(), StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(sv->LeaseTimeToLive(id).status(), StatusIs(absl::StatusCode::kNotFound));
  sv.reset();
  ASSERT_OK(store->Close());
  testing::ExpectCheckClean(&dev);
}

}  // namespace
}  // namespace cowkv
