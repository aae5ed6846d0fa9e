#include "bench/cowkv_peer.h"

#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "cowkv/device.h"
#include "cowkv/store.h"

namespace cowkv_bench {
namespace {

absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

std::string Err(const char* what, const absl::Status& s) {
  return absl::StrCat("cowkv ", what, ": ", s.ToString());
}

class CowkvPeer : public KvSystem {
 public:
  explicit CowkvPeer(const CowkvPeerOptions& o) : options_(o) {}
  ~CowkvPeer() override { (void)Close(); }

  const char* name() const override { return "cowkv"; }

  std::string Create(const std::string& path) override {
    cowkv::FileDeviceOptions fo;
    fo.create_size = options_.device_bytes;
    auto dev = cowkv::FileDevice::Open(path, fo);
    if (!dev.ok()) return Err("FileDevice::Open", dev.status());
    device_ = std::move(*dev);
    absl::Status s = cowkv::Store::Mkfs(device_.get(), cowkv::MkfsOptions{});
    if (!s.ok()) return Err("Store::Mkfs", s);
    cowkv::Options opts;
    opts.node_cache_bytes = options_.node_cache_bytes;
    opts.commit_interval_ms = 0;  // commits only when the benchmark says
    opts.dirty_bytes_max = 0;
    auto store = cowkv::Store::Open(device_.get(), opts);
    if (!store.ok()) return Err("Store::Open", store.status());
    store_ = std::move(*store);
    return "";
  }

  std::string Close() override {
    std::string err;
    if (store_ != nullptr) {
      absl::Status s = store_->Close();
      if (!s.ok()) err = Err("Store::Close", s);
      store_.reset();
    }
    device_.reset();
    return err;
  }

  std::string FillBatch(const Dataset& d, const std::vector<uint32_t>& order) override {
    auto h = store_->Begin();
    if (!h.ok()) return Err("Store::Begin", h.status());
    for (uint32_t i : order) {
      absl::Status s = (*h)->Put(AV(d.key(i)), AV(d.value(i)));
      if (!s.ok()) return Err(absl::StrCat("Transaction::Put(key ", i, ")").c_str(), s);
    }
    (*h)->End();
    absl::Status s = store_->Commit();
    if (!s.ok()) return Err("Store::Commit", s);
    return "";
  }

  std::string ReadBatch(const Dataset& d, const std::vector<uint32_t>& order) override {
    for (uint32_t i : order) {
      absl::StatusOr<std::string> v = store_->Get(AV(d.key(i)));
      if (!v.ok()) return Err(absl::StrCat("Store::Get(key ", i, ")").c_str(), v.status());
      if (!d.ValueOk(i, *v)) return absl::StrCat("cowkv Store::Get(key ", i, "): wrong value");
    }
    return "";
  }

  std::string Scan(uint64_t* items, uint64_t* bytes) override {
    uint64_t n = 0, b = 0;
    std::unique_ptr<cowkv::Iterator> it = store_->NewIterator();
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      ++n;
      b += it->key().size() + it->value().size();
    }
    if (!it->status().ok()) return Err("Iterator", it->status());
    *items = n;
    *bytes = b;
    return "";
  }

  std::string PutCommit(std::string_view key, std::string_view value) override {
    // The engine commit is what this measures: the put itself is async.
    absl::Status s = store_->Put(AV(key), AV(value), cowkv::Durability::kAsync);
    if (!s.ok()) return Err("Store::Put", s);
    s = store_->Commit();
    if (!s.ok()) return Err("Store::Commit", s);
    return "";
  }

  uint64_t UsedBytes() override { return store_->Stats().used_bytes; }

  bool DeviceFlushes(uint64_t* flushes) override {
    *flushes = store_->Stats().device_flushes;
    return true;
  }

  bool CacheMisses(uint64_t* misses) override {
    *misses = store_->Stats().cache_misses;
    return true;
  }

 private:
  const CowkvPeerOptions options_;
  std::unique_ptr<cowkv::FileDevice> device_;  // outlives store_
  std::unique_ptr<cowkv::Store> store_;
};

}  // namespace

std::unique_ptr<KvSystem> NewCowkvPeer(const CowkvPeerOptions& options) {
  return std::make_unique<CowkvPeer>(options);
}

}  // namespace cowkv_bench
