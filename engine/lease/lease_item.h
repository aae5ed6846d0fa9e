// Lease items: how a subvolume's leases sit in its tree (docs/format.md
// "Lease items"), beside the KV key space ('k') and the file tree ('f').
//
//   'L' | u64 BE id                  -> lease record, 16 bytes:
//                                       u8 kind (1) | 7 bytes zero | u64 LE ttl_seconds
//   'L' | u64 BE id | user key       -> attachment, 8 bytes:
//                                       u8 kind (2) | 7 bytes zero
//
// A lease's record comes first in key order, then its attachments sorted
// by user key, so one scan from 'L' loads every lease with its keys.
// Invariants (engine/tools/check_lease.cc verifies them):
//   1. every attachment's lease has a record;
//   2. every attachment's user key exists in the KV key space;
//   3. a user key is attached to at most one lease;
//   4. ids are 1..INT64_MAX, TTLs 1..kMaxLeaseTtlSeconds; a lease holds at
//      most kMaxKeysPerLease keys.
// Values are never empty: a log entry with an empty value is a delete.
//
// Thread-safe (pure functions on values).
#ifndef COWKV_ENGINE_LEASE_LEASE_ITEM_H_
#define COWKV_ENGINE_LEASE_LEASE_ITEM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace lease {

inline constexpr char kLeasePrefix = 'L';
inline constexpr size_t kLeaseRecordKeySize = 9;
inline constexpr size_t kLeaseRecordSize = 16;
inline constexpr size_t kAttachmentSize = 8;
inline constexpr uint8_t kKindRecord = 1;
inline constexpr uint8_t kKindAttachment = 2;

inline bool IsLeaseTreeKey(absl::string_view tree_key) {
  return !tree_key.empty() && tree_key[0] == kLeasePrefix;
}

std::string RecordKey(uint64_t id);
std::string AttachmentKey(uint64_t id, absl::string_view user_key);
std::string EncodeRecord(int64_t ttl_seconds);
std::string EncodeAttachment();

// One decoded lease item: a record (user_key empty) or an attachment.
struct LeaseItem {
  uint64_t id = 0;
  bool record = false;
  int64_t ttl_seconds = 0;  // records
  std::string user_key;     // attachments
};
// Decodes an item under the 'L' prefix. DATA_LOSS naming the item when the
// key or the value is malformed (short key, id 0 or past INT64_MAX, bad
// kind or padding, TTL out of range, key longer than kMaxKeySize).
absl::StatusOr<LeaseItem> DecodeLeaseItem(absl::string_view tree_key, absl::string_view value);

// INVALID_ARGUMENT unless 1 <= ttl <= kMaxLeaseTtlSeconds / 0 <= id.
absl::Status ValidateTtl(int64_t ttl_seconds);
absl::Status ValidateId(int64_t id);

}  // namespace lease
}  // namespace cowkv

#endif  // COWKV_ENGINE_LEASE_LEASE_ITEM_H_
