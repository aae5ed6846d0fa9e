// Goal: the facade's basic contract — put/get/delete/iterate, commit and
// reopen, handles, input validation — on small and large trees.
// Method: direct cases on a MemDevice, each ending with a clean `check`.
#include <map>
#include <string>

#include "engine/io/mem_device.h"
#include "engine/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using testing::ExpectCheckClean;
using testing::StatusIs;
using testing::TestMkfs;
using testing::TestOptions;

TEST(Store, MkfsOpenEmpty) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  EXPECT_THAT(store->Get("x"), StatusIs(absl::StatusCode::kNotFound));
  auto it = store->NewIterator();
  it->SeekToFirst();
  EXPECT_FALSE(it->Valid());
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, PutGetCommitReopen) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
    for (int i = 0; i < 5000; ++i) {
      ASSERT_OK(store->Put("key" + std::to_string(i), std::string(i % 200, 'a' + i % 26)));
    }
    ASSERT_OK(store->Commit());
    for (int i = 0; i < 5000; i += 2) ASSERT_OK(store->Delete("key" + std::to_string(i)));
    EXPECT_THAT(store->Delete("key0"), StatusIs(absl::StatusCode::kNotFound));
    ASSERT_OK(store->Close());
  }
  ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  for (int i = 0; i < 5000; ++i) {
    auto v = store->Get("key" + std::to_string(i));
    if (i % 2 == 0) {
      EXPECT_THAT(v, StatusIs(absl::StatusCode::kNotFound));
    } else {
      ASSERT_OK(v);
      EXPECT_EQ(*v, std::string(i % 200, 'a' + i % 26));
    }
  }
  auto it = store->NewIterator();
  int n = 0;
  std::string prev;
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++n) {
    EXPECT_LT(prev, std::string(it->key()));
    prev = std::string(it->key());
  }
  EXPECT_EQ(n, 2500);
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

TEST(Store, RejectsBadSizes) {
  MemDevice dev(64 << 20);
  ASSERT_OK(Store::Mkfs(&dev, TestMkfs()));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, TestOptions()));
  EXPECT_THAT(store->Put("", "v"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->Put(std::string(1025, 'k'), "v"),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(store->Put("k", std::string(store->max_value_size() + 1, 'v')),
              StatusIs(absl::StatusCode::kInvalidArgument));
  ASSERT_OK(store->Put(std::string(1024, 'k'), std::string(store->max_value_size(), 'v')));
  ASSERT_OK(store->Close());
  ExpectCheckClean(&dev);
}

}  // namespace
}  // namespace cowkv
