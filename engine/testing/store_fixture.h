// Test helpers shared by engine tests: a formatted MemDevice, options for
// deterministic tests (no background commits), ReadAll() of the default
// subvolume, and ExpectCheckClean() / CheckProblems(), the `cowkv check`
// every test that writes ends with (bbolt's MustCheck).
#ifndef COWKV_ENGINE_TESTING_STORE_FIXTURE_H_
#define COWKV_ENGINE_TESTING_STORE_FIXTURE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace testing {

// Commits happen only when a test asks for them.
// Engine-level tests: nothing happens behind the test's back, and KV writes
// are async (durable at the engine commit), so crash tests see engine
// commits only. The KV and log tests ask for kDurable themselves.
inline Options TestOptions() {
  Options o;
  o.commit_interval_ms = 0;
  o.dirty_bytes_max = 0;
  o.background_cleaner = false;
  o.default_durability = Durability::kAsync;
  return o;
}

inline MkfsOptions TestMkfs(uint32_t nodesize = 4096) {
  MkfsOptions m;
  m.nodesize = nodesize;
  m.fsid = std::string(16, 'T');
  return m;
}

// The full check's findings on `dev`, each prefixed "check: " (empty: clean),
// for tests that collect problems instead of failing at once.
inline std::vector<std::string> CheckProblems(BlockDevice* dev) {
  absl::StatusOr<CheckReport> r = Check(dev);
  if (!r.ok()) return {absl::StrCat("check: ", r.status().ToString())};
  std::vector<std::string> out;
  for (const std::string& p : r->problems) out.push_back("check: " + p);
  return out;
}

// Runs the full check on `dev` and fails the test with every finding.
inline void ExpectCheckClean(BlockDevice* dev) {
  absl::StatusOr<CheckReport> r = Check(dev);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->ok()) << "check found " << r->problems.size() << " problem(s):\n"
                       << absl::StrJoin(r->problems, "\n");
}

// The default subvolume's keys and values, in order (EXPECTs the scan OK).
inline std::map<std::string, std::string> ReadAll(Store* store) {
  std::map<std::string, std::string> m;
  std::unique_ptr<Iterator> it = store->NewIterator();
  for (it->SeekToFirst(); it->Valid(); it->Next())
    m[std::string(it->key())] = std::string(it->value());
  EXPECT_TRUE(it->status().ok()) << it->status();
  return m;
}

// A test over one store on a MemDevice (64 MiB unless the subclass says): SetUp formats and opens
// it, TearDown closes it and runs the full check, so every test that writes ends checked. Reopen()
// closes and mounts again (with other options, or another device). Subclasses add their handles in
// OnOpen().
class StoreTest : public ::testing::Test {
 protected:
  explicit StoreTest(uint64_t device_bytes = 64ull << 20) : dev_(device_bytes) {}
  void SetUp() override {
    ASSERT_TRUE(Store::Mkfs(&dev_, TestMkfs(4096)).ok());
    Reopen(DefaultOptions());
  }
  // The options SetUp mounts with.
  virtual Options DefaultOptions() { return TestOptions(); }
  void TearDown() override {
    CloseStore();
    ExpectCheckClean(&dev_);
  }
  void CloseStore() {
    OnClose();
    if (store_ != nullptr) {
      absl::Status s = store_->Close();
      EXPECT_TRUE(s.ok()) << s;
    }
    store_.reset();
  }
  void Reopen(Options o = TestOptions(), BlockDevice* dev = nullptr) {
    CloseStore();
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(dev ? dev : &dev_, o);
    ASSERT_TRUE(opened.ok()) << opened.status();
    store_ = std::move(*opened);
    OnOpen();
  }
  // Handles derived from store_ (dropped before it closes).
  virtual void OnOpen() {}
  virtual void OnClose() {}

  MemDevice dev_;
  std::unique_ptr<Store> store_;
};

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_STORE_FIXTURE_H_
