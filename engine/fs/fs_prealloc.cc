// fallocate(2) as btrfs has it: preallocated extents (EXTENT_DATA kind 2,
// btrfs's BTRFS_FILE_EXTENT_PREALLOC) that own their data extent and read
// as zeros; a write into one converts the written part through the
// ordinary CoW write (Punch trims the prealloc item around the range, the
// pieces keep the original data extent with their offsets, the written
// range gets a regular extent); punch hole; zero range.
//
// Extents here are byte-granular (a write of 10 bytes at offset 5 maps
// exactly those bytes), so a punched or zeroed range is exactly the range
// asked for: the partial blocks at its edges btrfs zeroes by a write are
// simply unmapped (punch) or preallocated (zero range) here, and read as
// zeros either way.
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

namespace {

constexpr uint64_t kNoEnd = ~0ull;

absl::Status CheckMode(uint32_t mode) {
  const uint32_t known = kFallocKeepSize | kFallocPunchHole | kFallocZeroRange;
  if ((mode & kFallocPunchHole) && (mode & kFallocZeroRange)) {
    return PosixError(ErrorReason::kEINVAL, "fallocate: PUNCH_HOLE and ZERO_RANGE together");
  }
  if ((mode & ~known) != 0) {
    return PosixError(ErrorReason::kEOPNOTSUPP,
                      absl::StrCat("fallocate mode 0x", absl::Hex(mode),
                                   " (only KEEP_SIZE, PUNCH_HOLE, ZERO_RANGE)"));
  }
  if ((mode & kFallocPunchHole) && !(mode & kFallocKeepSize)) {
    return PosixError(ErrorReason::kEOPNOTSUPP, "fallocate: PUNCH_HOLE needs KEEP_SIZE");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status FsOps::PreallocHoles(Batch& b, uint64_t ino, uint64_t start, uint64_t end,
                                  int64_t* nbytes) {
  COWKV_ASSIGN_OR_RETURN(auto items, Extents(b, ino, start, end));
  const uint64_t gen = b_->generation();
  auto fill = [&](uint64_t lo, uint64_t hi) -> absl::Status {
    for (uint64_t at = lo; at < hi; at += opt_.max_extent) {
      const uint64_t n = std::min<uint64_t>(opt_.max_extent, hi - at);
      COWKV_ASSIGN_OR_RETURN(format::DataRef d, b.AllocData(n));
      FileExtent e;
      e.generation = gen;
      e.kind = kExtentPrealloc;
      e.disk_bytenr = d.bytenr;
      e.disk_len = d.len;
      e.num_bytes = n;
      b.Put(ExtentKey(ino, at), EncodeFileExtent(e));
      *nbytes += static_cast<int64_t>(n);
    }
    return absl::OkStatus();
  };
  // The holes first: a range larger than the free space is refused before
  // anything is allocated (the per-extent allocation is the exact check).
  std::vector<std::pair<uint64_t, uint64_t>> holes;
  uint64_t pos = start, need = 0;
  for (const auto& [s, e] : items) {
    if (s > pos && pos < end) holes.push_back({pos, std::min(s, end)});
    pos = std::max(pos, s + e.length());
  }
  if (pos < end) holes.push_back({pos, end});
  for (const auto& [lo, hi] : holes) need += hi - lo;
  const uint64_t free = b_->FreeDataBytes();
  if (need > free) {
    return PosixError(ErrorReason::kENOSPC,
                      absl::StrCat("fallocate needs ", need, " bytes, ", free, " are free"));
  }
  for (const auto& [lo, hi] : holes) COWKV_RETURN_IF_ERROR(fill(lo, hi));
  return absl::OkStatus();
}

absl::Status FsOps::DropPastEof(Batch& b, uint64_t ino, uint64_t size) {
  int64_t nb = 0;  // the replayed inode item's nbytes stands
  if (opt_.bug_replay_drops_prealloc) return Punch(b, ino, size, kNoEnd, &nb);
  COWKV_ASSIGN_OR_RETURN(auto items, Extents(b, ino, size, kNoEnd));
  for (const auto& [s, e] : items) {
    if (e.kind == kExtentPrealloc) continue;
    COWKV_RETURN_IF_ERROR(Punch(b, ino, std::max(s, size), s + e.length(), &nb));
  }
  if (size == 0) {
    // An emptied inline item (Punch keeps no zero-length left part).
    COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, b.Get(ExtentKey(ino, 0)));
    if (v.has_value()) {
      COWKV_ASSIGN_OR_RETURN(FileExtent e, DecodeFileExtent(*v, ino, 0));
      if (e.kind != kExtentPrealloc) b.Del(ExtentKey(ino, 0));
    }
  }
  return absl::OkStatus();
}

absl::Status FsOps::Fallocate(uint64_t ino, uint32_t mode, uint64_t offset, uint64_t length) {
  COWKV_RETURN_IF_ERROR(CheckMode(mode));
  if (length == 0) return PosixError(ErrorReason::kEINVAL, "fallocate: length 0");
  if (offset > kMaxFileSize || length > kMaxFileSize - offset) {
    return PosixError(ErrorReason::kEFBIG, absl::StrCat("files end at ", kMaxFileSize, " bytes"));
  }
  Batch b(b_);
  COWKV_ASSIGN_OR_RETURN(InodeItem it, LoadInode(b, ino));
  const FileType type = static_cast<FileType>((it.mode >> 12) & 0xf);
  if (type == FileType::kDirectory) {
    return PosixError(ErrorReason::kEISDIR, absl::StrCat("inode ", ino, " is a directory"));
  }
  if (type != FileType::kRegular) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("inode ", ino, " is not a regular file"));
  }
  const uint64_t end = offset + length;
  const bool keep = (mode & kFallocKeepSize) != 0;
  // Preallocated extents sit beside no inline item: its bytes move to a
  // data extent first (as a write past the inline bound does).
  COWKV_RETURN_IF_ERROR(UninlineIfNeeded(b, ino, &it));
  int64_t nb = 0;
  if (mode & kFallocPunchHole) {
    COWKV_RETURN_IF_ERROR(Punch(b, ino, offset, end, &nb));
  } else if (mode & kFallocZeroRange) {
    COWKV_RETURN_IF_ERROR(Punch(b, ino, offset, end, &nb));
    COWKV_RETURN_IF_ERROR(PreallocHoles(b, ino, offset, end, &nb));
  } else {
    // Already-allocated ranges are left alone: only holes are preallocated.
    COWKV_RETURN_IF_ERROR(PreallocHoles(b, ino, offset, end, &nb));
  }
  it.nbytes = static_cast<uint64_t>(std::max<int64_t>(0, static_cast<int64_t>(it.nbytes) + nb));
  if (!keep) it.size = std::max(it.size, end);
  const int64_t now = absl::GetCurrentTimeNanos();
  it.ctime_ns = now;
  if (mode & (kFallocPunchHole | kFallocZeroRange)) it.mtime_ns = now;
  it.transid = b_->generation();
  b.Put(InodeKey(ino), EncodeInodeItem(it));
  COWKV_RETURN_IF_ERROR(EmitInode(b, FileEvent::Type::kModify, ino));
  return b.Commit();
}

}  // namespace fs
}  // namespace cowkv
