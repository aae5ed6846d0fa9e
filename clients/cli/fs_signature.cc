// DetectFsSignature(): table-driven magic probes. See fs_signature.h.
#include "clients/cli/fs_signature.h"

#include <string_view>

#include "absl/strings/string_view.h"
#include "cowkv/store.h"

namespace cowkv {
namespace cli {
namespace {

// A fixed byte string at a fixed offset.
struct MagicProbe {
  const char* type;
  uint64_t offset;
  std::string_view magic;
};

using namespace std::string_view_literals;  // NOLINT: embedded NULs/0xBA

// Checked in order after cowkv and ext; the first match wins.
constexpr MagicProbe kMagicProbes[] = {
    {"btrfs", 65536 + 64, "_BHRfS_M"sv},
    {"xfs", 0, "XFSB"sv},
    {"crypto_LUKS", 0, "LUKS\xba\xbe"sv},
    {"ntfs", 3, "NTFS    "sv},
    {"exfat", 3, "EXFAT   "sv},
    {"iso9660", 32769, "CD001"sv},
    {"LVM2_member", 512, "LABELONE"sv},
    {"gpt partition table", 512, "EFI PART"sv},
    // Swap: the signature ends the first page, whatever the page size was.
    {"swap", 4096 - 10, "SWAPSPACE2"sv},
    {"swap", 4096 - 10, "SWAP-SPACE"sv},
    {"swap", 8192 - 10, "SWAPSPACE2"sv},
    {"swap", 16384 - 10, "SWAPSPACE2"sv},
    {"swap", 65536 - 10, "SWAPSPACE2"sv},
};

// Reads `n` bytes at `offset` into `out`. False (and OK) when the range is
// not inside the device; an error only for a failed read inside it.
absl::StatusOr<bool> ReadIfInside(BlockDevice* dev, uint64_t offset, size_t n,
                                  std::string* out) {
  if (offset + n > dev->Size()) return false;
  out->assign(n, '\0');
  absl::Status s = dev->ReadAt(offset, out->data(), n);
  if (!s.ok()) return s;
  return true;
}

uint32_t Le32(const std::string& b, size_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[off + i]);
  return v;
}

// ext2/3/4 superblock at 1024; s_magic (LE16 0xEF53) at +56. The flavour
// follows libblkid: features ext3 lacks mean ext4, a journal means ext3.
absl::StatusOr<std::optional<FsSignature>> ProbeExt(BlockDevice* dev) {
  constexpr uint64_t kSb = 1024;
  constexpr uint32_t kCompatHasJournal = 0x4;
  constexpr uint32_t kExt3IncompatSupported = 0x2 | 0x4 | 0x10;
  constexpr uint32_t kExt3RoCompatSupported = 0x1 | 0x2 | 0x4;
  std::string sb;
  absl::StatusOr<bool> inside = ReadIfInside(dev, kSb, 1024, &sb);
  if (!inside.ok()) return inside.status();
  if (!*inside || static_cast<uint8_t>(sb[56]) != 0x53 ||
      static_cast<uint8_t>(sb[57]) != 0xEF) {
    return std::nullopt;
  }
  const uint32_t compat = Le32(sb, 0x5C);
  const uint32_t incompat = Le32(sb, 0x60);
  const uint32_t ro_compat = Le32(sb, 0x64);
  std::string type = "ext2";
  if ((incompat & ~kExt3IncompatSupported) != 0 ||
      (ro_compat & ~kExt3RoCompatSupported) != 0) {
    type = "ext4";
  } else if ((compat & kCompatHasJournal) != 0) {
    type = "ext3";
  }
  return FsSignature{type, kSb + 56};
}

// The 0x55AA boot signature at 510: a FAT boot sector when the FAT type
// string is where FAT12/16 or FAT32 keep it, otherwise an MBR.
absl::StatusOr<std::optional<FsSignature>> ProbeBootSector(BlockDevice* dev) {
  std::string s;
  absl::StatusOr<bool> inside = ReadIfInside(dev, 0, 512, &s);
  if (!inside.ok()) return inside.status();
  if (!*inside || static_cast<uint8_t>(s[510]) != 0x55 ||
      static_cast<uint8_t>(s[511]) != 0xAA) {
    return std::nullopt;
  }
  absl::string_view v(s);
  if (v.substr(54, 5) == "FAT12" || v.substr(54, 5) == "FAT16" ||
      v.substr(82, 5) == "FAT32") {
    return FsSignature{"vfat", 510};
  }
  return FsSignature{"dos partition table", 510};
}

}  // namespace

absl::StatusOr<std::optional<FsSignature>> DetectFsSignature(
    BlockDevice* device) {
  // store.h does not say which superblock copy matched.
  if (HasCowkvSignature(device)) return FsSignature{"cowkv", std::nullopt};
  absl::StatusOr<std::optional<FsSignature>> ext = ProbeExt(device);
  if (!ext.ok() || ext->has_value()) return ext;
  std::string buf;
  for (const MagicProbe& p : kMagicProbes) {
    absl::StatusOr<bool> inside =
        ReadIfInside(device, p.offset, p.magic.size(), &buf);
    if (!inside.ok()) return inside.status();
    if (*inside && std::string_view(buf) == p.magic) {
      return FsSignature{p.type, p.offset};
    }
  }
  // Last: NTFS and exFAT boot sectors also end in 0x55AA.
  return ProbeBootSector(device);
}

}  // namespace cli
}  // namespace cowkv
