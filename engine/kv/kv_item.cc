#include "engine/kv/kv_item.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"

namespace cowkv {
namespace kv {

std::string TreeKey(absl::string_view user_key) {
  std::string k;
  TreeKeyTo(user_key, &k);
  return k;
}

void TreeKeyTo(absl::string_view user_key, std::string* out) {
  out->resize(user_key.size() + 1);
  char* p = out->data();
  p[0] = kKvPrefix;
  if (!user_key.empty()) std::memcpy(p + 1, user_key.data(), user_key.size());
}

std::string EncodeItem(const ItemMeta& meta, absl::string_view value) {
  std::string out;
  EncodeItemTo(meta, value, &out);
  return out;
}

void EncodeItemTo(const ItemMeta& meta, absl::string_view value, std::string* out) {
  out->resize(kKvHeaderSize + value.size());
  char* p = out->data();
  p[0] = static_cast<char>(kKindInline);
  for (int i = 1; i < 8; ++i) p[i] = 0;
  EncodeLE64(p + 8, meta.create_revision);
  EncodeLE64(p + 16, meta.mod_revision);
  EncodeLE64(p + 24, meta.version);
  if (!value.empty()) std::memcpy(p + kKvHeaderSize, value.data(), value.size());
}

std::string EncodeExtentItem(const ItemMeta& meta, const ExtentRef& ref) {
  std::string out = EncodeItem(meta, "");
  out[0] = static_cast<char>(kKindExtent);
  out.resize(format::kKvExtentItemSize, '\0');
  EncodeLE64(out.data() + format::kKvExtentBytenrOff, ref.bytenr);
  EncodeLE64(out.data() + format::kKvExtentDiskLenOff, ref.disk_len);
  EncodeLE64(out.data() + format::kKvExtentValueLenOff, ref.value_len);
  EncodeLE32(out.data() + format::kKvExtentCsumOff, ref.crc);
  return out;
}

absl::StatusOr<ItemView> DecodeItem(absl::string_view tree_key, absl::string_view raw) {
  // Built only on the error paths. The default argument is the caller's
  // line (GCC and Clang), so the message names the check that failed.
  auto bad = [&](absl::string_view why, int line = __builtin_LINE()) {
    CorruptionSite site;
    site.what = "KV item";
    return CorruptionError(
        site, absl::StrCat("key '", absl::CHexEscape(UserKey(tree_key).substr(0, 64)), "': ", why),
        "", "", __FILE__, line);
  };
  if (raw.size() < kKvHeaderSize) return bad(absl::StrCat("item of ", raw.size(), " bytes"));
  const char* p = raw.data();
  const uint8_t kind = static_cast<uint8_t>(p[0]);
  if (kind != kKindInline && kind != kKindExtent) {
    return bad(absl::StrCat("unknown kind ", static_cast<int>(kind)));
  }
  for (int i = 1; i < 8; ++i) {
    if (p[i] != 0) return bad("non-zero reserved header bytes");
  }
  ItemView v;
  v.meta.create_revision = DecodeLE64(p + 8);
  v.meta.mod_revision = DecodeLE64(p + 16);
  v.meta.version = DecodeLE64(p + 24);
  if (v.meta.create_revision == 0 || v.meta.mod_revision < v.meta.create_revision ||
      v.meta.version == 0) {
    return bad(absl::StrCat("revisions create=", v.meta.create_revision,
                            " mod=", v.meta.mod_revision, " version=", v.meta.version));
  }
  if (kind == kKindInline) {
    v.value = raw.substr(kKvHeaderSize);
    return v;
  }
  if (raw.size() != format::kKvExtentItemSize || DecodeLE32(p + 60) != 0) {
    return bad(absl::StrCat("extent item of ", raw.size(), " bytes"));
  }
  v.in_extent = true;
  v.extent.bytenr = DecodeLE64(p + format::kKvExtentBytenrOff);
  v.extent.disk_len = DecodeLE64(p + format::kKvExtentDiskLenOff);
  v.extent.value_len = DecodeLE64(p + format::kKvExtentValueLenOff);
  v.extent.crc = DecodeLE32(p + format::kKvExtentCsumOff);
  if (v.extent.value_len > kMaxValueSize || v.extent.value_len > v.extent.disk_len ||
      v.extent.disk_len == 0 || v.extent.disk_len > kMaxValueSize + (1u << 16) ||
      v.extent.bytenr < format::kReservedHead) {
    return bad(absl::StrCat("extent [", v.extent.bytenr, ", +", v.extent.disk_len,
                            ") holding ", v.extent.value_len, " bytes"));
  }
  return v;
}

size_t MaxInlineValue(uint32_t nodesize) {
  // Less 2 bytes, so that the history entry holding an inline item as its
  // prev item (a 2-byte header before the item: history_item.h) fits.
  return format::MaxInlineValue(nodesize) - kKvHeaderSize - kHistoryInlineReserve;
}

absl::Status ValidateKey(absl::string_view key) {
  if (key.empty() || key.size() > kMaxKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("key size ", key.size(), " outside [1, ", kMaxKeySize, "]"));
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view value) {
  if (value.size() > kMaxValueSize) {
    return absl::InvalidArgumentError(absl::StrCat("value size ", value.size(), " exceeds ",
                                                   kMaxValueSize, " bytes"));
  }
  return absl::OkStatus();
}

}  // namespace kv
}  // namespace cowkv
