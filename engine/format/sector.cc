#include "engine/format/sector.h"

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"

namespace cowkv {
namespace format {
namespace {

uint32_t SectorCrc(absl::string_view sector) {
  return Crc32c(sector.data() + kSectorCsumOff + 4, sector.size() - kSectorCsumOff - 4);
}

std::string WantedSize(const SectorKind& kind) {
  if (kind.min_size == kind.max_size) return absl::StrCat(kind.min_size);
  if (kind.max_size == SIZE_MAX) return absl::StrCat(">=", kind.min_size);
  return absl::StrCat("[", kind.min_size, ", ", kind.max_size, "]");
}

}  // namespace

void SealSector(const SectorKind& kind, std::string* sector) {
  COWKV_CHECK(sector->size() >= kind.min_size);
  COWKV_CHECK(sector->size() <= kind.max_size);
  char* p = sector->data();
  EncodeLE64(p + kSectorMagicOff, kind.magic);
  EncodeLE32(p + kSectorCsumOff, SectorCrc(*sector));
}

std::string SectorProblem(const SectorKind& kind, absl::string_view data) {
  if (data.size() < kind.min_size) return "short sector";
  if (data.size() > kind.max_size) return "long sector";
  if (DecodeLE64(data.data() + kSectorMagicOff) != kind.magic) return "bad magic";
  if (DecodeLE32(data.data() + kSectorCsumOff) != SectorCrc(data)) return "checksum mismatch";
  return "";
}

absl::Status OpenSector(const SectorKind& kind, absl::string_view data,
                        const CorruptionSite& site) {
  if (data.size() < kind.min_size || data.size() > kind.max_size) {
    const char* how = data.size() < kind.min_size ? "short " : "long ";
    return COWKV_CORRUPTION(site, absl::StrCat(how, site.what), absl::StrCat(data.size()),
                            WantedSize(kind));
  }
  const uint64_t magic = DecodeLE64(data.data() + kSectorMagicOff);
  if (magic != kind.magic) {
    return COWKV_CORRUPTION(site, "bad magic", absl::StrCat(absl::Hex(magic)),
                            absl::StrCat(absl::Hex(kind.magic)));
  }
  const uint32_t have = DecodeLE32(data.data() + kSectorCsumOff);
  const uint32_t want = SectorCrc(data);
  if (have != want) {
    return COWKV_CORRUPTION(site, "checksum mismatch", absl::StrCat(have), absl::StrCat(want));
  }
  return absl::OkStatus();
}

}  // namespace format
}  // namespace cowkv
