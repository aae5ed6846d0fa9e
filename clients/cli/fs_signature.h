// fs_signature: recognises a filesystem that already lives on a device, so
// that `cowkv mkfs` can refuse to destroy it without --force (the check
// mkfs.btrfs makes through libblkid before it writes anything).
//
//   absl::StatusOr<std::optional<FsSignature>> sig = DetectFsSignature(dev);
//   if (sig.ok() && sig->has_value()) ... (*sig)->type is "cowkv", "ext4", ...
//
// Probes, in order: cowkv (cowkv::HasCowkvSignature, any superblock copy),
// ext2/3/4 (0xEF53 at byte 1080; the feature flags name the flavour), btrfs
// ("_BHRfS_M" at 65600), xfs ("XFSB" at 0), swap ("SWAPSPACE2"/"SWAP-SPACE"
// in the last 10 bytes of a 4/8/16/64 KiB page), LUKS, NTFS, FAT, and
// GPT/MBR partition tables. A probe whose bytes lie past the end of the
// device is skipped, so small devices are fine. Magic numbers only: a
// false positive costs a `--force`, a false negative costs a filesystem.
#ifndef COWKV_CLIENTS_CLI_FS_SIGNATURE_H_
#define COWKV_CLIENTS_CLI_FS_SIGNATURE_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "cowkv/device.h"

namespace cowkv {
namespace cli {

struct FsSignature {
  std::string type;     // "cowkv", "ext4", "btrfs", "xfs", "swap", ...
  // Byte offset of the magic that matched; unknown for cowkv, whose
  // superblock copies the facade checks without saying which matched.
  std::optional<uint64_t> offset;
};

// The first signature found on `device`, or nullopt when none is. An error
// only when a read inside the device fails (an I/O error): callers must not
// treat an unreadable device as blank.
absl::StatusOr<std::optional<FsSignature>> DetectFsSignature(
    BlockDevice* device);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_FS_SIGNATURE_H_
