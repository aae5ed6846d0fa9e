// KvSystem: the one interface both benchmarked stores (cowkv and LMDB) sit
// behind, and Dataset: the keys and values every benchmark uses.
//
// Fairness: engine_bench.cc never talks to a store directly. Setup (temp
// paths, key generation, the fill that ReadRandom/Scan/SmallCommit start
// from, cleanup) and timing are one code path for both systems; only the few
// calls below differ, and each is the store's plain, durable API.
//
// Errors are strings: empty = OK, otherwise a message naming the failed call.
#ifndef COWKV_BENCH_KV_SYSTEM_H_
#define COWKV_BENCH_KV_SYSTEM_H_

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace cowkv_bench {

inline constexpr size_t kKeySize = 16;
inline constexpr size_t kValueSize = 100;

// N fixed-size keys ("%016u": byte order == numeric order) and values, plus
// three fixed-seed orders over them.
class Dataset {
 public:
  explicit Dataset(uint64_t n);

  uint64_t size() const { return n_; }
  std::string_view key(uint32_t i) const {
    return std::string_view(keys_.data() + size_t{i} * kKeySize, kKeySize);
  }
  // The value a fill writes for key i.
  std::string_view value(uint32_t i) const {
    return std::string_view(pool_.data() + Offset(i, 0), kValueSize);
  }
  // The value SmallCommit overwrites key i with (a real change, same size).
  std::string_view alt_value(uint32_t i) const {
    return std::string_view(pool_.data() + Offset(i, 7919), kValueSize);
  }
  // A stored value is correct when it is one of the two above.
  bool ValueOk(uint32_t i, std::string_view v) const {
    return v.size() == kValueSize &&
           (std::memcmp(v.data(), value(i).data(), kValueSize) == 0 ||
            std::memcmp(v.data(), alt_value(i).data(), kValueSize) == 0);
  }

  const std::vector<uint32_t>& seq_order() const { return seq_; }
  const std::vector<uint32_t>& fill_random_order() const { return fill_random_; }
  const std::vector<uint32_t>& read_random_order() const { return read_random_; }

 private:
  static constexpr size_t kPool = 1 << 20;
  size_t Offset(uint32_t i, uint64_t salt) const {
    return static_cast<size_t>((uint64_t{i} * 2654435761ull + salt) % kPool);
  }
  uint64_t n_;
  std::string keys_;
  std::string pool_;  // kPool + kValueSize random bytes
  std::vector<uint32_t> seq_, fill_random_, read_random_;
};

class KvSystem {
 public:
  virtual ~KvSystem() = default;
  virtual const char* name() const = 0;

  // Creates a fresh empty store at `path` (which must not exist) and opens it.
  virtual std::string Create(const std::string& path) = 0;
  // Closes the store (idempotent). The files stay; the caller removes them.
  virtual std::string Close() = 0;

  // One write transaction: Put every key of `order` (with its value), then a
  // durable commit.
  virtual std::string FillBatch(const Dataset& d, const std::vector<uint32_t>& order) = 0;
  // A point read of every key of `order`; every key must be present with a
  // correct value.
  virtual std::string ReadBatch(const Dataset& d, const std::vector<uint32_t>& order) = 0;
  // A full forward scan; counts items and key+value bytes.
  virtual std::string Scan(uint64_t* items, uint64_t* bytes) = 0;
  // One key put, then a durable commit.
  virtual std::string PutCommit(std::string_view key, std::string_view value) = 0;

  // Bytes the store occupies on its device / file.
  virtual uint64_t UsedBytes() = 0;
  // Device flushes so far; false when the system cannot count them.
  virtual bool DeviceFlushes(uint64_t* flushes) { return false; }
  // Node-cache misses so far (reads that went to the device); false when the
  // system cannot count them (LMDB reads through the page cache).
  virtual bool CacheMisses(uint64_t* misses) { return false; }
};

}  // namespace cowkv_bench

#endif  // COWKV_BENCH_KV_SYSTEM_H_
