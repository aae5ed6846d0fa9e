// Goal: every I/O error path leaves the store either unchanged and usable or
// read-only after the error, and the last committed state mountable.
// Method: SQLite-style countdown injection — EIO on the 1st, 2nd, ... device
// write (then flush) of a commit until the commit succeeds; after each
// failure, writes must be refused with FAILED_PRECONDITION, reads still
// served, and after power loss (pending writes dropped or kept) the image
// must mount to the old or the new committed state and pass `check`. Read
// errors must come back as errors, not crashes or wrong data.
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using Model = std::map<std::string, std::string>;
using testing::ReadAll;
using testing::StatusIs;

void Fill(Store* store, Model* model, int from, int n) {
  for (int i = from; i < from + n; ++i) {
    std::string k = absl::StrCat("k", i * 13 % 10007), v(i % 200, 'a' + i % 26);
    ASSERT_OK(store->Put(k, v));
    (*model)[k] = v;
  }
}

void CountdownOn(FaultDevice::Op op, FaultDevice::LossMode loss) {
  MemDevice mem(64ull << 20);
  ASSERT_OK(Store::Mkfs(&mem, testing::TestMkfs(4096)));
  Model before, after;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&mem, testing::TestOptions()));
    Fill(store.get(), &before, 0, 2000);
    ASSERT_OK(store->Close());
  }
  const std::string base = mem.Snapshot();
  after = before;
  {
    // The "after" model: the same extra writes, committed without faults.
    MemDevice scratch(64ull << 20);
    scratch.Restore(base);
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&scratch, testing::TestOptions()));
    Fill(store.get(), &after, 2000, 1500);
    ASSERT_OK(store->Close());
  }
  for (uint64_t n = 1;; ++n) {
    SCOPED_TRACE(absl::StrCat("fault on call ", n));
    ASSERT_LT(n, 1000u);
    mem.Restore(base);
    FaultDevice fd(&mem);
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&fd, testing::TestOptions()));
    Model scratch_model;
    Fill(store.get(), &scratch_model, 2000, 1500);
    fd.FailAfter(op, n, absl::StatusCode::kInternal, false);
    absl::Status s = store->Commit();
    if (s.ok()) {
      ASSERT_OK(store->Close());
      EXPECT_THAT(store->Get("k0"), StatusIs(absl::StatusCode::kFailedPrecondition));
      break;
    }
    // Read-only after the error, reads still served.
    EXPECT_THAT(store->Put("x", "y"), StatusIs(absl::StatusCode::kFailedPrecondition));
    EXPECT_OK(store->Get("k0"));
    store->Close().IgnoreError();
    store.reset();
    fd.ClearFaults();
    fd.PowerLoss(loss, n);
    ASSERT_OK_AND_ASSIGN(store, Store::Open(&fd, testing::TestOptions()));
    Model got = ReadAll(store.get());
    EXPECT_TRUE(got == before || got == after) << "mounted a state that was never committed";
    ASSERT_OK(store->Close());
    ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&fd));
  }
}

TEST(FaultInjection, WriteErrorsDropPending) {
  CountdownOn(FaultDevice::Op::kWrite, FaultDevice::LossMode::kDropAll);
}
TEST(FaultInjection, WriteErrorsKeepPending) {
  CountdownOn(FaultDevice::Op::kWrite, FaultDevice::LossMode::kKeepAll);
}
TEST(FaultInjection, FlushErrors) {
  CountdownOn(FaultDevice::Op::kFlush, FaultDevice::LossMode::kDropAll);
  CountdownOn(FaultDevice::Op::kFlush, FaultDevice::LossMode::kKeepAll);
}

TEST(FaultInjection, ReadErrorsAreErrors) {
  MemDevice mem(64ull << 20);
  ASSERT_OK(Store::Mkfs(&mem, testing::TestMkfs(4096)));
  Model model;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&mem, testing::TestOptions()));
    Fill(store.get(), &model, 0, 3000);
    ASSERT_OK(store->Close());
  }
  FaultDevice fd(&mem);
  Options o = testing::TestOptions();
  o.node_cache_bytes = 0;  // every read goes to the device
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&fd, o));
  int failed = 0;
  for (uint64_t n = 1; n < 40; ++n) {
    fd.FailAfter(FaultDevice::Op::kRead, n % 4 + 1, absl::StatusCode::kInternal, false);
    for (const auto& [k, v] : model) {
      auto got = store->Get(k);
      if (!got.ok()) {
        EXPECT_EQ(got.status().code(), absl::StatusCode::kInternal);
        ++failed;
        break;
      }
      ASSERT_EQ(*got, v);
    }
    fd.ClearFaults();
  }
  EXPECT_GT(failed, 30);
  EXPECT_EQ(ReadAll(store.get()), model);
  ASSERT_OK(store->Close());
  ASSERT_NO_FATAL_FAILURE(testing::ExpectCheckClean(&fd));
}

}  // namespace
}  // namespace cowkv
