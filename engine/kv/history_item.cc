// KV history items: see history_item.h and docs/format.md "KV history".
#include "engine/kv/history_item.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/limits.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/kv/kv_item.h"

namespace cowkv {
namespace kv {

namespace {

absl::Status Bad(absl::string_view tree_key, absl::string_view why, int line = __builtin_LINE()) {
  CorruptionSite site;
  site.what = "KV history item";
  return CorruptionError(
      site, absl::StrCat("key ", absl::BytesToHexString(tree_key.substr(0, 72)), ": ", why), "", "",
      __FILE__, line);
}

}  // namespace

std::string HistoryKey(uint64_t revision, absl::string_view user_key) {
  COWKV_CHECK(revision <= kMaxHistoryRevision);
  std::string k(kHistoryKeyHeader + user_key.size(), '\0');
  k[0] = kHistoryPrefix;
  for (int i = 7; i >= 1; --i, revision >>= 8) k[i] = static_cast<char>(revision & 0xff);
  if (!user_key.empty())
    std::memcpy(k.data() + kHistoryKeyHeader, user_key.data(), user_key.size());
  return k;
}

uint64_t HistoryKeyRevision(absl::string_view tree_key) {
  if (tree_key.size() < kHistoryKeyHeader) return 0;
  uint64_t v = 0;
  for (size_t i = 1; i < kHistoryKeyHeader; ++i) v = (v << 8) | static_cast<uint8_t>(tree_key[i]);
  return v;
}

std::string EncodeHistoryEntry(uint8_t type, const absl::string_view* prev_item) {
  std::string out(kHistoryEntryHeader, '\0');
  out[0] = static_cast<char>(type);
  out[1] = static_cast<char>(prev_item != nullptr ? 1 : 0);
  if (prev_item != nullptr) out.append(prev_item->data(), prev_item->size());
  return out;
}

absl::StatusOr<HistoryEntry> DecodeHistoryEntry(absl::string_view tree_key, absl::string_view raw) {
  if (tree_key.size() <= kHistoryKeyHeader || tree_key[0] != kHistoryPrefix ||
      tree_key.size() > kHistoryKeyHeader + kMaxKeySize) {
    return Bad(tree_key, absl::StrCat("tree key of ", tree_key.size(), " bytes"));
  }
  HistoryEntry e;
  e.revision = HistoryKeyRevision(tree_key);
  if (e.revision == 0) return Bad(tree_key, "entry at revision 0");
  e.key = tree_key.substr(kHistoryKeyHeader);
  if (raw.size() < kHistoryEntryHeader) {
    return Bad(tree_key, absl::StrCat("entry of ", raw.size(), " bytes"));
  }
  e.type = static_cast<uint8_t>(raw[0]);
  const uint8_t flags = static_cast<uint8_t>(raw[1]);
  if (e.type != kHistoryPut && e.type != kHistoryDelete) {
    return Bad(tree_key, absl::StrCat("unknown type ", int{e.type}));
  }
  if (flags > 1) return Bad(tree_key, absl::StrCat("unknown flags ", int{flags}));
  e.has_prev = flags == 1;
  e.prev = raw.substr(kHistoryEntryHeader);
  if (!e.has_prev && !e.prev.empty()) return Bad(tree_key, "bytes after an entry with no prev");
  if (e.has_prev && e.prev.empty()) return Bad(tree_key, "prev flag without a prev item");
  if (e.type == kHistoryDelete && !e.has_prev) return Bad(tree_key, "delete of an absent key");
  return e;
}

std::optional<std::string> HistoryEntryBaseForm(absl::string_view tree_key, absl::string_view raw,
                                                uint64_t base_revision) {
  if (!IsHistoryTreeKey(tree_key) || HistoryKeyRevision(tree_key) == 0) return std::nullopt;
  absl::StatusOr<HistoryEntry> e = DecodeHistoryEntry(tree_key, raw);
  if (!e.ok() || !e->has_prev) return std::nullopt;
  absl::StatusOr<ItemView> prev = DecodeItem(TreeKey(e->key), e->prev);
  if (!prev.ok() || prev->meta.mod_revision > base_revision) return std::nullopt;
  std::string out(kHistoryBaseFormSize, '\0');
  out[0] = static_cast<char>(e->type);
  out[1] = static_cast<char>(kHistoryPrevInBase);
  EncodeLE64(out.data() + kHistoryEntryHeader, prev->meta.mod_revision);
  return out;
}

bool IsHistoryBaseForm(absl::string_view tree_key, absl::string_view raw) {
  return IsHistoryTreeKey(tree_key) && HistoryKeyRevision(tree_key) != 0 &&
         raw.size() >= kHistoryEntryHeader && static_cast<uint8_t>(raw[1]) == kHistoryPrevInBase;
}

absl::StatusOr<std::string> HistoryEntryFromBase(absl::string_view tree_key,
                                                 absl::string_view base_form,
                                                 const std::string* base_item) {
  if (base_form.size() != kHistoryBaseFormSize ||
      static_cast<uint8_t>(base_form[1]) != kHistoryPrevInBase) {
    return Bad(tree_key, absl::StrCat("logged base-form entry of ", base_form.size(), " bytes"));
  }
  const uint64_t want = DecodeLE64(base_form.data() + kHistoryEntryHeader);
  const absl::string_view user_key = tree_key.substr(std::min(tree_key.size(), kHistoryKeyHeader));
  if (base_item == nullptr) {
    return Bad(tree_key, absl::StrCat("logged entry's prev item (revision ", want,
                                      ") is not in the tree the log extends"));
  }
  COWKV_ASSIGN_OR_RETURN(ItemView item, DecodeItem(TreeKey(user_key), *base_item));
  if (item.meta.mod_revision != want) {
    return Bad(tree_key,
               absl::StrCat("logged entry's prev item is of revision ", want,
                            ", the tree the log extends holds revision ", item.meta.mod_revision));
  }
  const absl::string_view prev = *base_item;
  std::string full = EncodeHistoryEntry(static_cast<uint8_t>(base_form[0]), &prev);
  COWKV_RETURN_IF_ERROR(DecodeHistoryEntry(tree_key, full).status());
  return full;
}

std::string EncodeHistoryInfo(uint64_t compact_revision) {
  std::string out(kHistoryInfoSize, '\0');
  EncodeLE64(out.data(), compact_revision);
  return out;
}

absl::StatusOr<uint64_t> DecodeHistoryInfo(absl::string_view raw) {
  if (raw.size() != kHistoryInfoSize || DecodeLE64(raw.data() + 8) != 0) {
    return Bad(HistoryInfoKey(), absl::StrCat("info item of ", raw.size(), " bytes"));
  }
  return DecodeLE64(raw.data());
}

}  // namespace kv
}  // namespace cowkv
