#include "engine/format/superblock.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/format/sector.h"

namespace cowkv {
namespace format {

std::string EncodeSuperblock(const Superblock& sb) {
  // What ValidateFields refuses. DecodeSuperblock re-encodes only a copy
  // that passed it, so these fire on a writer's bug, never on device bytes.
  COWKV_CHECK(sb.fsid.size() == kFsidSize);
  COWKV_CHECK(ValidNodesize(sb.nodesize));
  COWKV_CHECK(sb.sectorsize >= 512);
  COWKV_CHECK(sb.sectorsize <= sb.nodesize);
  COWKV_CHECK((sb.sectorsize & (sb.sectorsize - 1)) == 0);
  COWKV_CHECK(sb.root_level < kMaxLevel);
  COWKV_CHECK(sb.root >= kReservedHead);
  COWKV_CHECK(sb.root % sb.sectorsize == 0);
  COWKV_CHECK(sb.root_generation <= sb.generation);
  COWKV_CHECK(sb.bytes_used <= sb.total_bytes);
  COWKV_CHECK(sb.log_root % sb.nodesize == 0);
  std::string out(kSuperblockSize, '\0');
  char* p = out.data();
  EncodeLE32(p + kSbCsumTypeOff, kCsumTypeCrc32c);
  std::memcpy(p + kSbFsidOff, sb.fsid.data(), kFsidSize);
  EncodeLE64(p + kSbBytenrOff, sb.bytenr);
  EncodeLE64(p + kSbFlagsOff, sb.flags);
  EncodeLE64(p + kSbGenerationOff, sb.generation);
  EncodeLE64(p + kSbRootOff, sb.root);
  EncodeLE64(p + kSbRootGenerationOff, sb.root_generation);
  p[kSbRootLevelOff] = static_cast<char>(sb.root_level);
  EncodeLE64(p + kSbTotalBytesOff, sb.total_bytes);
  EncodeLE64(p + kSbBytesUsedOff, sb.bytes_used);
  EncodeLE32(p + kSbNodesizeOff, sb.nodesize);
  EncodeLE32(p + kSbSectorsizeOff, sb.sectorsize);
  EncodeLE64(p + kSbLogRootOff, sb.log_root);
  EncodeLE64(p + kSbLogNonceOff, sb.log_nonce);
  EncodeLE64(p + kSbNextTreeIdOff, sb.next_tree_id);
  EncodeLE64(p + kSbRevisionOff, sb.revision);
  EncodeLE64(p + kSbFormatVersionOff, kFormatVersion);
  SealSector(kSuperblockSector, &out);
  return out;
}

namespace {
absl::Status ValidateFields(const Superblock& sb, uint64_t expected_bytenr,
                            const CorruptionSite& site);
}  // namespace

absl::StatusOr<Superblock> DecodeSuperblock(absl::string_view data,
                                            uint64_t expected_bytenr) {
  CorruptionSite site;
  site.what = "superblock";
  site.bytenr = expected_bytenr;
  COWKV_RETURN_IF_ERROR(OpenSector(kSuperblockSector, data, site));
  const char* p = data.data();
  if (DecodeLE32(p + kSbCsumTypeOff) != kCsumTypeCrc32c) {
    return COWKV_CORRUPTION(site, "unknown csum type",
                            absl::StrCat(DecodeLE32(p + kSbCsumTypeOff)), "1");
  }
  if (DecodeLE64(p + kSbFormatVersionOff) != kFormatVersion) {
    return COWKV_CORRUPTION(site, "unsupported format version",
                            absl::StrCat(DecodeLE64(p + kSbFormatVersionOff)),
                            absl::StrCat(kFormatVersion));
  }
  Superblock sb;
  sb.fsid.assign(p + kSbFsidOff, kFsidSize);
  sb.bytenr = DecodeLE64(p + kSbBytenrOff);
  sb.flags = DecodeLE64(p + kSbFlagsOff);
  sb.generation = DecodeLE64(p + kSbGenerationOff);
  sb.root = DecodeLE64(p + kSbRootOff);
  sb.root_generation = DecodeLE64(p + kSbRootGenerationOff);
  sb.root_level = static_cast<uint8_t>(p[kSbRootLevelOff]);
  sb.total_bytes = DecodeLE64(p + kSbTotalBytesOff);
  sb.bytes_used = DecodeLE64(p + kSbBytesUsedOff);
  sb.nodesize = DecodeLE32(p + kSbNodesizeOff);
  sb.sectorsize = DecodeLE32(p + kSbSectorsizeOff);
  sb.log_root = DecodeLE64(p + kSbLogRootOff);
  sb.log_nonce = DecodeLE64(p + kSbLogNonceOff);
  sb.next_tree_id = DecodeLE64(p + kSbNextTreeIdOff);
  sb.revision = DecodeLE64(p + kSbRevisionOff);
  COWKV_RETURN_IF_ERROR(ValidateFields(sb, expected_bytenr, site));
  // Every byte that is not a field is zero: the encoder writes back exactly
  // the input, or some reserved byte is set (a writer this code does not
  // know, or damage under a valid checksum).
  const std::string again = EncodeSuperblock(sb);
  if (again != data) {
    size_t i = 0;
    while (i < again.size() && again[i] == data[i]) ++i;
    return COWKV_CORRUPTION(site, "nonzero reserved superblock byte",
                            absl::StrCat("byte ", i, " = ", static_cast<uint8_t>(data[i])), "0");
  }
  return sb;
}

namespace {

absl::Status ValidateFields(const Superblock& sb, uint64_t expected_bytenr,
                            const CorruptionSite& site) {
  if (sb.bytenr != expected_bytenr) {
    return COWKV_CORRUPTION(site, "superblock bytenr mismatch", absl::StrCat(sb.bytenr),
                            absl::StrCat(expected_bytenr));
  }
  if (!ValidNodesize(sb.nodesize)) {
    return COWKV_CORRUPTION(site, "invalid nodesize", absl::StrCat(sb.nodesize), "");
  }
  if (sb.sectorsize < 512 || sb.sectorsize > sb.nodesize ||
      (sb.sectorsize & (sb.sectorsize - 1)) != 0) {
    return COWKV_CORRUPTION(site, "invalid sectorsize", absl::StrCat(sb.sectorsize), "");
  }
  if (sb.root_level >= kMaxLevel) {
    return COWKV_CORRUPTION(site, "root level out of range",
                            absl::StrCat(sb.root_level), absl::StrCat("<", kMaxLevel));
  }
  if (sb.root % sb.sectorsize != 0 || sb.root < kReservedHead ||
      sb.root > sb.total_bytes - sb.nodesize || sb.total_bytes < kMinDeviceBytes) {
    return COWKV_CORRUPTION(site, "root bytenr out of range", absl::StrCat(sb.root),
                            absl::StrCat("[", kReservedHead, ", ", sb.total_bytes, ")"));
  }
  if (sb.root_generation > sb.generation || sb.bytes_used > sb.total_bytes) {
    return COWKV_CORRUPTION(site, "inconsistent generation or usage",
                            absl::StrCat(sb.root_generation, "/", sb.bytes_used),
                            absl::StrCat(sb.generation, "/", sb.total_bytes));
  }
  if (sb.log_root != 0 && (sb.log_root % sb.nodesize != 0 || sb.log_root < kReservedHead ||
                          sb.log_root > sb.total_bytes - sb.nodesize)) {
    return COWKV_CORRUPTION(site, "log root bytenr out of range", absl::StrCat(sb.log_root),
                            absl::StrCat("[", kReservedHead, ", ", sb.total_bytes, ")"));
  }
  return absl::OkStatus();
}

}  // namespace

int MirrorCount(uint64_t device_size) {
  int n = 0;
  for (uint64_t off : kSuperblockOffsets) {
    if (off + kMirrorReserve <= device_size) ++n;
  }
  return n;
}

}  // namespace format
}  // namespace cowkv
