// Goal: a full device gives writers a clean RESOURCE_EXHAUSTED, never a
// failed commit or a corrupt store; deletes still work when full; after
// deletes and a commit the space is reused.
// Method: fill a 24 MiB device (4 KiB nodes) with random keys until ENOSPC,
// through implicit writes and through an explicit handle; verify contents
// against a model, commit, reopen, `check`; delete half, commit, refill.
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "engine/io/mem_device.h"
#include "engine/store.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using Model = std::map<std::string, std::string>;
using testing::ExpectCheckClean;
using testing::StatusIs;

void ExpectEqualsModel(Store* store, const Model& model) {
  auto it = store->NewIterator();
  auto m = model.begin();
  for (it->SeekToFirst(); it->Valid(); it->Next(), ++m) {
    ASSERT_NE(m, model.end());
    ASSERT_EQ(it->key(), m->first);
    ASSERT_EQ(it->value(), m->second);
  }
  ASSERT_OK(it->status());
  ASSERT_EQ(m, model.end());
}

// Inserts until the first ENOSPC; returns how many inserts succeeded.
int FillUntilFull(Store* store, Model* model, std::mt19937_64& rng) {
  for (int i = 0;; ++i) {
    std::string k = absl::StrCat("key", rng() % 100000000);
    std::string v(200 + rng() % 600, static_cast<char>('a' + i % 26));
    absl::Status s = store->Put(k, v);
    if (absl::IsResourceExhausted(s)) {
      EXPECT_NE(s.message().find("no space"), std::string::npos) << s;
      return i;
    }
    EXPECT_OK(s);
    if (!s.ok()) return i;
    (*model)[k] = v;
  }
}

TEST(Enospc, FillDeleteRefill) {
  MemDevice dev(24ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  std::mt19937_64 rng(5);
  Model model;
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  int first = FillUntilFull(store.get(), &model, rng);
  ASSERT_GT(first, 1000);
  {
    // The reservation must not be so pessimistic that much space is wasted.
    StoreStats st = store->Stats();
    std::cout << "full at " << first << " keys: used " << st.used_bytes << " of "
              << st.total_bytes << " bytes, free " << st.free_bytes << ", pinned "
              << st.pinned_bytes << ", commits for space " << st.commits_by_space << "\n";
    EXPECT_GT(st.used_bytes, st.total_bytes * 7 / 10);
  }
  // Still usable: reads, a commit, and more ENOSPC without damage.
  ASSERT_NO_FATAL_FAILURE(ExpectEqualsModel(store.get(), model));
  ASSERT_OK(store->Commit());
  EXPECT_THAT(store->Put("zzzz-one-more", std::string(700, 'x')),
              StatusIs(absl::StatusCode::kResourceExhausted));
  ASSERT_OK(store->Close());
  ASSERT_NO_FATAL_FAILURE(ExpectCheckClean(&dev));

  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_NO_FATAL_FAILURE(ExpectEqualsModel(store.get(), model));
  // Deleting works on a full device.
  int n = 0;
  for (auto it = model.begin(); it != model.end();) {
    if (n++ % 2 == 0) {
      ASSERT_OK(store->Delete(it->first)) << "delete " << n;
      it = model.erase(it);
    } else {
      ++it;
    }
  }
  ASSERT_OK(store->Commit());
  ASSERT_NO_FATAL_FAILURE(ExpectCheckClean(&dev));
  int second = FillUntilFull(store.get(), &model, rng);
  EXPECT_GT(second, first / 3) << "freed space was not reused";
  ASSERT_NO_FATAL_FAILURE(ExpectEqualsModel(store.get(), model));
  ASSERT_OK(store->Close());
  ASSERT_NO_FATAL_FAILURE(ExpectCheckClean(&dev));
  ASSERT_OK_AND_ASSIGN(store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_NO_FATAL_FAILURE(ExpectEqualsModel(store.get(), model));
  ASSERT_OK(store->Close());
}

TEST(Enospc, InsideHandle) {
  MemDevice dev(16ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  Model model;
  ASSERT_OK_AND_ASSIGN(auto h, store->Begin());
  absl::Status s;
  for (int i = 0; s.ok(); ++i) {
    std::string k = absl::StrCat("h", i * 7919 % 100003), v(900, 'h');
    s = h->Put(k, v);
    if (s.ok()) model[k] = v;
  }
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kResourceExhausted));
  h->End();
  ASSERT_OK(store->Commit());
  ASSERT_NO_FATAL_FAILURE(ExpectEqualsModel(store.get(), model));
  EXPECT_GT(store->Stats().enospc_errors, 0u);
  ASSERT_OK(store->Close());
  ASSERT_NO_FATAL_FAILURE(ExpectCheckClean(&dev));
}

}  // namespace
}  // namespace cowkv
