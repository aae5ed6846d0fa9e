// Lease items; see lease_item.h.
#include "engine/lease/lease_item.h"

#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/limits.h"
#include "engine/base/coding.h"

namespace cowkv {
namespace lease {

namespace {

void PutBE64(std::string* out, uint64_t v) {
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetBE64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

absl::Status Corrupt(absl::string_view tree_key, absl::string_view what) {
  return WithReason(absl::DataLossError(absl::StrCat(
                        "lease item '", absl::CHexEscape(tree_key.substr(0, 40)), "': ", what)),
                    ErrorReason::kCorruption);
}

}  // namespace

std::string RecordKey(uint64_t id) {
  std::string k(1, kLeasePrefix);
  PutBE64(&k, id);
  return k;
}

std::string AttachmentKey(uint64_t id, absl::string_view user_key) {
  std::string k = RecordKey(id);
  k.append(user_key.data(), user_key.size());
  return k;
}

std::string EncodeRecord(int64_t ttl_seconds) {
  std::string v(kLeaseRecordSize, '\0');
  v[0] = static_cast<char>(kKindRecord);
  EncodeLE64(v.data() + 8, static_cast<uint64_t>(ttl_seconds));
  return v;
}

std::string EncodeAttachment() {
  std::string v(kAttachmentSize, '\0');
  v[0] = static_cast<char>(kKindAttachment);
  return v;
}

absl::StatusOr<LeaseItem> DecodeLeaseItem(absl::string_view tree_key, absl::string_view value) {
  if (tree_key.size() < kLeaseRecordKeySize || tree_key[0] != kLeasePrefix) {
    return Corrupt(tree_key, "key shorter than prefix and id");
  }
  LeaseItem item;
  item.id = GetBE64(tree_key.data() + 1);
  if (item.id == 0 || item.id > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Corrupt(tree_key, absl::StrCat("lease id ", item.id, " out of range"));
  }
  item.record = tree_key.size() == kLeaseRecordKeySize;
  const size_t want = item.record ? kLeaseRecordSize : kAttachmentSize;
  if (value.size() != want) {
    return Corrupt(tree_key, absl::StrCat("value of ", value.size(), " bytes, want ", want));
  }
  const uint8_t kind = static_cast<uint8_t>(value[0]);
  if (kind != (item.record ? kKindRecord : kKindAttachment)) {
    return Corrupt(tree_key, absl::StrCat("kind ", kind, " does not match the key"));
  }
  for (size_t i = 1; i < 8; ++i) {
    if (value[i] != 0) return Corrupt(tree_key, "nonzero padding");
  }
  if (item.record) {
    const uint64_t ttl = DecodeLE64(value.data() + 8);
    if (ttl == 0 || ttl > static_cast<uint64_t>(kMaxLeaseTtlSeconds)) {
      return Corrupt(tree_key, absl::StrCat("ttl ", ttl, " out of range"));
    }
    item.ttl_seconds = static_cast<int64_t>(ttl);
  } else {
    const absl::string_view uk = tree_key.substr(kLeaseRecordKeySize);
    if (uk.size() > kMaxKeySize) return Corrupt(tree_key, "attached key longer than the largest");
    item.user_key = std::string(uk);
  }
  return item;
}

absl::Status ValidateTtl(int64_t ttl_seconds) {
  if (ttl_seconds >= 1 && ttl_seconds <= kMaxLeaseTtlSeconds) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("lease TTL ", ttl_seconds, "s out of range: 1..", kMaxLeaseTtlSeconds));
}

absl::Status ValidateId(int64_t id) {
  if (id >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("lease id ", id, " is negative"));
}

}  // namespace lease
}  // namespace cowkv
