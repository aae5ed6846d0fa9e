#include "engine/format/items.h"

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"

namespace cowkv {
namespace format {

void EncodeKey17To(char* out, const Key17& k) {
  EncodeBE64(out, k.objectid);
  out[8] = static_cast<char>(k.type);
  EncodeBE64(out + 9, k.offset);
}

std::string EncodeKey17(const Key17& k) {
  std::string s(kKeySize17, '\0');
  EncodeKey17To(s.data(), k);
  return s;
}

bool DecodeKey17(absl::string_view s, Key17* k) {
  if (s.size() != kKeySize17) return false;
  k->objectid = DecodeBE64(s.data());
  k->type = static_cast<uint8_t>(s[8]);
  k->offset = DecodeBE64(s.data() + 9);
  return true;
}

std::string EncodeExtentItem(const ExtentItem& e) {
  // A refcount that reaches zero deletes the item (RunDelayedRefs); one is
  // never written with zero, which DecodeExtentItem refuses.
  COWKV_CHECK(e.refs > 0);
  COWKV_CHECK(e.level < kMaxLevel);
  std::string s(kExtentItemSize, '\0');
  EncodeLE64(s.data(), e.refs);
  EncodeLE64(s.data() + 8, e.generation);
  EncodeLE64(s.data() + 16, e.flags);
  s[24] = static_cast<char>(e.level);
  static_assert(kExtentItemFieldBytes == 25, "refs, generation, flags, level");
  return s;
}

absl::StatusOr<ExtentItem> DecodeExtentItem(absl::string_view v, uint64_t bytenr) {
  CorruptionSite site;
  site.what = "extent item";
  site.bytenr = bytenr;
  if (v.size() != kExtentItemSize) {
    return COWKV_CORRUPTION(site, "bad size", absl::StrCat(v.size()),
                            absl::StrCat(kExtentItemSize));
  }
  Reader r(v);
  ExtentItem e;
  e.refs = r.LE64();
  e.generation = r.LE64();
  e.flags = r.LE64();
  e.level = r.U8();
  if (e.refs == 0) return COWKV_CORRUPTION(site, "zero refcount", "0", ">0");
  if (e.flags != kExtentFlagTreeBlock && e.flags != kExtentFlagData &&
      e.flags != (kExtentFlagTreeBlock | kExtentFlagFullBackref)) {
    return COWKV_CORRUPTION(site, "bad flags", absl::StrCat(e.flags), "1, 2 or 257");
  }
  if (e.level >= kMaxLevel) {
    return COWKV_CORRUPTION(site, "bad level", absl::StrCat(e.level), "");
  }
  // What EncodeExtentItem leaves zero must be zero (the fields above
  // re-encode to exactly their bytes).
  for (size_t i = kExtentItemFieldBytes; i < kExtentItemSize; ++i) {
    if (v[i] != 0) return COWKV_CORRUPTION(site, "nonzero reserved bytes", "", "0");
  }
  return e;
}

std::string EncodeRootItem(const RootItem& r) {
  // What DecodeRootItem refuses.
  COWKV_CHECK(r.level < kMaxLevel);
  COWKV_CHECK(r.drop_level < kMaxLevel);
  COWKV_CHECK(r.bytenr >= kReservedHead);
  COWKV_CHECK(r.drop_progress.size() <= kMaxTreeKeySize);
  std::string s(kRootItemSize, '\0');
  EncodeLE64(s.data(), r.bytenr);
  EncodeLE64(s.data() + 8, r.generation);
  s[16] = static_cast<char>(r.level);
  EncodeLE64(s.data() + 24, r.flags);
  EncodeLE64(s.data() + 32, r.last_snapshot);
  s[40] = static_cast<char>(r.drop_level);
  s += r.drop_progress;
  return s;
}

absl::StatusOr<RootItem> DecodeRootItem(absl::string_view v, uint64_t tree_id) {
  CorruptionSite site;
  site.what = "root item";
  site.owner = tree_id;
  if (v.size() < kRootItemSize || v.size() > kRootItemSize + kMaxTreeKeySize) {
    return COWKV_CORRUPTION(site, "bad size", absl::StrCat(v.size()),
                            absl::StrCat(kRootItemSize));
  }
  Reader rd(v);
  RootItem r;
  r.bytenr = rd.LE64();
  r.generation = rd.LE64();
  r.level = rd.U8();
  rd.Bytes(7);
  r.flags = rd.LE64();
  r.last_snapshot = rd.LE64();
  r.drop_level = rd.U8();
  rd.Bytes(7);
  r.drop_progress = std::string(rd.Bytes(rd.remaining()));
  if (r.level >= kMaxLevel || r.drop_level >= kMaxLevel) {
    return COWKV_CORRUPTION(site, "bad level", absl::StrCat(r.level), "");
  }
  if (r.bytenr < kReservedHead) {
    return COWKV_CORRUPTION(site, "bad root bytenr", absl::StrCat(r.bytenr), "");
  }
  if (EncodeRootItem(r) != v) {
    return COWKV_CORRUPTION(site, "nonzero reserved bytes", "", "0");
  }
  return r;
}

std::string EncodeSubvolInfo(const SubvolInfoItem& s) {
  // The name rules of DecodeSubvolInfo (and engine/subvol's ValidateSubvolName).
  COWKV_CHECK(!s.name.empty());
  COWKV_CHECK(s.name.size() <= kMaxSubvolNameSize);
  COWKV_DCHECK(s.name.find('/') == std::string::npos);
  COWKV_DCHECK(s.name.find('\0') == std::string::npos);
  std::string out;
  PutLE64(&out, s.parent_id);
  PutLE64(&out, s.ctime_ms);
  out += s.name;
  // Names hold no NUL: the trailer is unambiguous. A subvolume from before
  // the trailer (ogen 0, unknown) keeps the old form when rewritten.
  if (s.ogen != 0) {
    out += '\0';
    PutLE64(&out, s.ogen);
  }
  if (!s.received_uuid.empty()) {
    COWKV_CHECK(s.ogen != 0 && s.received_uuid.size() == 16 && s.received_generation != 0);
    out += s.received_uuid;
    PutLE64(&out, s.received_generation);
  }
  return out;
}

absl::StatusOr<SubvolInfoItem> DecodeSubvolInfo(absl::string_view v, uint64_t tree_id) {
  CorruptionSite site;
  site.what = "subvolume info";
  site.owner = tree_id;
  // The name ends at the first NUL (then the creation generation
  // follows), or at the end of an item written before that trailer.
  const size_t nul = v.size() > kSubvolInfoFixedSize ? v.find('\0', kSubvolInfoFixedSize)
                                                     : absl::string_view::npos;
  const size_t name_end = nul == absl::string_view::npos ? v.size() : nul;
  const size_t name_len = name_end > kSubvolInfoFixedSize ? name_end - kSubvolInfoFixedSize : 0;
  if (name_len == 0 || name_len > kMaxSubvolNameSize ||
      (nul != absl::string_view::npos && v.size() != nul + 1 + kSubvolInfoOgenSize &&
       v.size() != nul + 1 + kSubvolInfoOgenSize + kSubvolInfoReceivedSize)) {
    return COWKV_CORRUPTION(site, "bad size", absl::StrCat(v.size()),
                            "17..271, or 26..280 with the creation generation, or 50..304 "
                            "received");
  }
  Reader r(v);
  SubvolInfoItem s;
  s.parent_id = r.LE64();
  s.ctime_ms = r.LE64();
  s.name = std::string(r.Bytes(name_len));
  if (nul != absl::string_view::npos) {
    r.Bytes(1);
    s.ogen = r.LE64();
    if (s.ogen == 0) return COWKV_CORRUPTION(site, "bad creation generation", "0", ">= 1");
    if (v.size() == nul + 1 + kSubvolInfoOgenSize + kSubvolInfoReceivedSize) {
      s.received_uuid = std::string(r.Bytes(16));
      s.received_generation = r.LE64();
      if (s.received_uuid == std::string(16, '\0') || s.received_generation == 0) {
        return COWKV_CORRUPTION(site, "bad received identity", "zero", "non-zero");
      }
    }
  }
  if (s.name.find('/') != std::string::npos) {
    return COWKV_CORRUPTION(site, "bad name", "", "no '/' or NUL");
  }
  return s;
}

std::string EncodeDataRefCount(uint32_t count) {
  COWKV_CHECK(count > 0);  // a count that reaches zero deletes the backref
  std::string out;
  PutLE32(&out, count);
  return out;
}

absl::StatusOr<uint32_t> DecodeDataRefCount(absl::string_view v, uint64_t bytenr) {
  CorruptionSite site;
  site.what = "data backref";
  site.bytenr = bytenr;
  if (v.size() != 4) return COWKV_CORRUPTION(site, "bad size", absl::StrCat(v.size()), "4");
  const uint32_t c = DecodeLE32(v.data());
  if (c == 0) return COWKV_CORRUPTION(site, "zero count", "0", ">0");
  return c;
}

bool LeafDataRef(absl::string_view key, absl::string_view value, DataRef* ref) {
  if (key.empty()) return false;
  if (key[0] == kFsKeyPrefix) {
    const uint8_t kind =
        value.size() == kFsExtentItemSize ? static_cast<uint8_t>(value[kFsExtentKindOff]) : 0;
    if (key.size() != 1 + kKeySize17 || static_cast<uint8_t>(key[9]) != kFsExtentDataType ||
        (kind != kFsExtentRegular && kind != kFsExtentPrealloc)) {
      return false;
    }
    ref->bytenr = DecodeLE64(value.data() + kFsExtentBytenrOff);
    ref->len = DecodeLE64(value.data() + kFsExtentDiskLenOff);
    // A preallocated extent was never written: nothing to verify.
    ref->value_len = kind == kFsExtentPrealloc ? 0 : ref->len;
    ref->crc = DecodeLE32(value.data() + kFsExtentCsumOff);
    return ref->len != 0;
  }
  if (key[0] == kKvHistoryPrefix) {
    // A KV history entry (kv/history_item.h): u8 type, u8 flags, then the
    // prev KV item, which may be in an extent.
    if (key.size() <= kKvHistoryKeyHeader || value.size() < 2 || (value[1] & 1) == 0) return false;
    value.remove_prefix(2);
  } else if (key[0] != kKvKeyPrefix) {
    return false;
  }
  if (value.size() != kKvExtentItemSize || static_cast<uint8_t>(value[0]) != kKvKindExtent) {
    return false;
  }
  ref->bytenr = DecodeLE64(value.data() + kKvExtentBytenrOff);
  ref->len = DecodeLE64(value.data() + kKvExtentDiskLenOff);
  ref->value_len = DecodeLE64(value.data() + kKvExtentValueLenOff);
  ref->crc = DecodeLE32(value.data() + kKvExtentCsumOff);
  return ref->len != 0 && ref->value_len <= ref->len;
}

}  // namespace format
}  // namespace cowkv
