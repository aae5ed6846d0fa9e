// The transactional key space of a subvolume: reads (KeyValue, Range),
// one-shot conditional transactions (Txn), interactive transactions
// (KvTransaction) and iterators. Subvolume (store.h) hands them out.
#ifndef COWKV_INCLUDE_COWKV_KV_H_
#define COWKV_INCLUDE_COWKV_KV_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/options.h"

namespace cowkv {

class StoreImpl;
struct KvTxnState;

struct KeyValue {
  std::string key;
  std::string value;  // empty for keys_only reads
  // The value's size, also when it was not loaded (keys_only, or over
  // RangeRequest::max_value_load).
  uint64_t value_size = 0;
  uint64_t create_revision = 0;
  uint64_t mod_revision = 0;
  uint64_t version = 0;  // writes since the key was created; 1 = just created
};

struct RangeRequest {
  std::string start;   // inclusive; empty = from the first key
  std::string end;     // exclusive; empty = through the last key
  std::string prefix;  // non-empty: exactly the keys with this prefix
                       // (start and end must then be empty)
  uint64_t limit = 0;  // 0 = no limit
  bool reverse = false;
  bool keys_only = false;
  bool count_only = false;
  // 0 = no bound. Else the result holds at most this many bytes of keys and
  // values, each pair counted with kRangeEntryOverheadBytes more (its
  // revisions and framing): the scan stops before the pair that would pass
  // it — the first pair is always returned, whatever its size — and sets
  // `more`. A value is never loaded past the bound.
  uint64_t max_bytes = 0;
  // 0 = no bound. Else a value larger than this is not loaded: its pair
  // comes back with an empty value and value_size set (a server reserves
  // memory for it before reading it again).
  uint64_t max_value_load = 0;
  // 0 = the latest state. Else the range as it was at this revision, read
  // from the subvolume's history (etcd's RangeRequest.revision):
  // OUT_OF_RANGE (ErrorReason::kCompacted, the compact revision in the
  // status payload kCompactRevisionPayloadUrl) when the history no longer
  // keeps it, OUT_OF_RANGE (kFutureRevision) past the current revision.
  uint64_t revision = 0;
};
inline constexpr uint64_t kRangeEntryOverheadBytes = 64;

struct RangeResult {
  std::vector<KeyValue> kvs;
  // Keys in the range: exact unless the limit cut the result short (then
  // limit + 1, a lower bound: the rest of the range is not scanned); use
  // count_only for an exact count of a large range.
  uint64_t count = 0;
  bool more = false;      // the limit cut the result short
  uint64_t revision = 0;  // store revision the read saw
};

// One-shot conditional transaction (etcd's Txn): if every compare holds,
// run `success`, else `failure`; atomically, one revision for all writes.
struct Compare {
  enum class Target { kValue, kCreateRevision, kModRevision, kVersion, kExists };
  enum class Op { kEqual, kNotEqual, kLess, kGreater };
  std::string key;
  Target target = Target::kValue;
  Op op = Op::kEqual;
  std::string value;    // kValue
  uint64_t number = 0;  // kCreateRevision, kModRevision, kVersion
  bool exists = true;   // kExists (kEqual / kNotEqual only)
};

struct TxnOp {
  enum class Type { kPut, kDelete, kDeleteRange, kRange };
  Type type = Type::kPut;
  std::string key;     // kPut, kDelete; start of kDeleteRange
  std::string value;   // kPut
  std::string end;     // kDeleteRange: exclusive end, empty = through the last key
  RangeRequest range;  // kRange
  // kPut: the lease (lease.h) the key is attached to; 0 = none (the put
  // detaches the key from any lease, as etcd's).
  int64_t lease = 0;
};

struct TxnRequest {
  std::vector<Compare> compare;
  std::vector<TxnOp> success;
  std::vector<TxnOp> failure;
  Durability durability = Durability::kDefault;
  // 0 = no bound. Else the Range ops of the branch taken may return at most
  // this many bytes together (counted as RangeRequest::max_bytes counts):
  // past it the Txn is RESOURCE_EXHAUSTED and applies nothing. Each op's
  // own max_bytes still cuts it short (`more`) within its share.
  uint64_t max_response_bytes = 0;
};

struct TxnOpResult {
  RangeResult range;     // kRange
  uint64_t deleted = 0;  // kDelete, kDeleteRange: keys removed
};

struct TxnResponse {
  bool succeeded = false;
  uint64_t revision = 0;             // of the writes, or the revision read at
  std::vector<TxnOpResult> results;  // one per op of the branch taken
};

// An interactive client transaction. Reads see the latest committed state
// plus this transaction's own writes and are recorded (keys and ranges);
// writes are buffered. Commit validates that nothing read changed since
// read_revision() — ABORTED if it did (retry), OUT_OF_RANGE if the
// transaction is older than the conflict window (retry) — and applies the
// writes atomically under one new revision. Read-write transactions are
// strictly serializable. Not thread-safe; destroying it aborts it.
class KvTransaction {
 public:
  ~KvTransaction();
  KvTransaction(const KvTransaction&) = delete;
  KvTransaction& operator=(const KvTransaction&) = delete;

  uint64_t read_revision() const;
  absl::StatusOr<KeyValue> Get(absl::string_view key);  // NOT_FOUND if absent
  absl::StatusOr<RangeResult> Range(const RangeRequest& req);
  absl::Status Put(absl::string_view key, absl::string_view value);
  absl::Status Delete(absl::string_view key);  // absent keys are fine
  absl::Status DeleteRange(absl::string_view start, absl::string_view end);
  // The commit revision (read_revision() for a transaction that wrote
  // nothing). The transaction is finished whatever the result.
  absl::StatusOr<uint64_t> Commit(Durability durability = Durability::kDefault);
  void Abort();

 private:
  friend class StoreImpl;
  KvTransaction(StoreImpl* store, std::unique_ptr<KvTxnState> state);
  StoreImpl* store_;
  std::unique_ptr<KvTxnState> state_;
};

// An iterator over the default tree at the latest state. Stable across
// concurrent writes: after a write it re-seeks to the key it was on. The
// key()/value() views are valid until the next call on this iterator.
class Iterator {
 public:
  class Impl;
  explicit Iterator(std::unique_ptr<Impl> impl);
  ~Iterator();
  Iterator(const Iterator&) = delete;
  Iterator& operator=(const Iterator&) = delete;

  bool Valid() const;
  void SeekToFirst();
  void SeekToLast();
  void Seek(absl::string_view key);         // first key >= key
  void SeekForPrev(absl::string_view key);  // last key <= key
  void Next();
  void Prev();
  absl::string_view key() const;
  absl::string_view value() const;
  // Not OK after a read error; Valid() is then false.
  absl::Status status() const;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_KV_H_
