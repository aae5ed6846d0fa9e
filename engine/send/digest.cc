#include "engine/send/digest.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/items.h"

namespace cowkv {
namespace send {

absl::Status Digester::AddItem(absl::string_view key, absl::string_view value, DataReader* data) {
  std::string head;
  char b[4];
  EncodeLE16(b, static_cast<uint16_t>(key.size()));
  head.append(b, 2);
  head.append(key.data(), key.size());
  EncodeLE32(b, static_cast<uint32_t>(value.size()));
  head.append(b, 4);
  format::DataRef ref;
  const bool has_ref = format::LeafDataRef(key, value, &ref);
  std::string v(value);
  if (has_ref) SetDataBytenr(key, &v, 0);
  hash_.Update(head);
  hash_.Update(v);
  ++items_;
  if (!has_ref) return absl::OkStatus();
  uint32_t crc = 0;
  std::string buf;
  for (uint64_t off = 0; off < ref.value_len;) {
    const uint64_t n = std::min<uint64_t>(kMaxDataChunk, ref.value_len - off);
    buf.resize(n);
    COWKV_RETURN_IF_ERROR(data->ReadAt(ref.bytenr + off, buf.data(), n));
    crc = Crc32cExtend(crc, buf.data(), n);
    hash_.Update(buf);
    off += n;
  }
  data_bytes_ += ref.value_len;
  if (ref.value_len > 0 && crc != ref.crc) {
    CorruptionSite site;
    site.what = "data extent";
    site.bytenr = ref.bytenr;
    return COWKV_CORRUPTION(site, "checksum mismatch", absl::StrCat(crc), absl::StrCat(ref.crc));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> Digester::Step(Tree* tree, DataReader* data, size_t max_items) {
  TreeIterator it(tree);
  if (!started_) {
    started_ = true;
    it.Seek(std::string(1, format::kFsKeyPrefix));
  } else {
    it.Seek(last_key_);
    if (it.Valid() && it.key() == last_key_) it.Next();
  }
  const std::string end(1, format::kKvKeyPrefix + 1);
  for (size_t n = 0; it.Valid() && it.key() < end; it.Next()) {
    if (n == max_items) return false;
    const absl::string_view key = it.key();
    if (key[0] != format::kFsKeyPrefix && key[0] != format::kKvKeyPrefix) continue;
    last_key_ = std::string(key);
    COWKV_RETURN_IF_ERROR(AddItem(key, it.value(), data));
    ++n;
  }
  COWKV_RETURN_IF_ERROR(it.status());
  return true;
}

}  // namespace send
}  // namespace cowkv
