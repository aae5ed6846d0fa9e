// The limits every caller of cowkv can rely on, defined once. The engine's
// layers, the facade (store.h re-exports this header), the server and the
// tools all use these names; nothing restates a number.
#ifndef COWKV_INCLUDE_COWKV_LIMITS_H_
#define COWKV_INCLUDE_COWKV_LIMITS_H_

#include <cstddef>
#include <cstdint>

namespace cowkv {

// ---- The key space ----------------------------------------------------------
// KV keys: 1..1024 bytes (etcd's default request limit allows 1.5 MiB, but
// a key lives in internal nodes too: four of the largest keys must fit a
// 4 KiB node, format/layout.h).
inline constexpr size_t kMaxKeySize = 1024;
// KV values: up to 16 MiB, one contiguous data extent (design.md "Free
// space"); a value over the inline bound of a leaf is stored out of line.
inline constexpr size_t kMaxValueSize = 16u << 20;
// Keys one KV commit may change: bounds the log entry and the commit's
// space reservation.
inline constexpr size_t kMaxTxnOps = 10000;

// ---- The file namespace (as Linux: NAME_MAX, PATH_MAX) ----------------------
inline constexpr size_t kMaxNameLen = 255;            // a path component
inline constexpr size_t kMaxPathLen = 4096;           // a whole path
inline constexpr size_t kMaxPathDepth = 256;          // components: bounds path walks
inline constexpr size_t kMaxSymlinkLen = 4095;        // a symlink target (PATH_MAX - 1)
inline constexpr uint64_t kMaxFileSize = 1ull << 50;  // 1 PiB: offsets stay far from 2^63
inline constexpr uint64_t kMaxFileIo = 64ull << 20;   // bytes per Read/Write call
inline constexpr uint32_t kMaxLinks = 65535;          // names of one inode (btrfs's)
// An xattr value: at most this, and at most what fits one item with its
// name (and any xattr whose name hash collides) in a node: ~1 KiB with
// 4 KiB nodes, past 4 KiB from 16 KiB nodes (the default). ERANGE past it.
inline constexpr size_t kMaxXattrValue = 4096;

// ---- The device ----------------------------------------------------------------
inline constexpr uint32_t kMinNodesize = 4096;
inline constexpr uint32_t kMaxNodesize = 65536;
inline constexpr uint32_t kDefaultNodesize = 16384;
// Smallest device Mkfs accepts: the reserved head (1 MiB), the superblock
// mirrors and room for a commit's worst case.
inline constexpr uint64_t kMinDeviceBytes = 16ull << 20;

// ---- Leases (lease.h) ------------------------------------------------------
// A lease's TTL in seconds: 1..kMaxLeaseTtlSeconds (etcd's MaxLeaseTTL).
inline constexpr int64_t kMaxLeaseTtlSeconds = 9000000000;
// Leases one subvolume holds at once.
inline constexpr size_t kMaxLeasesPerSubvolume = 10000;
// Keys one lease holds: its revoke deletes them and their attachment items
// in one commit, 2 * kMaxKeysPerLease + 1 tree changes, within kMaxTxnOps.
inline constexpr size_t kMaxKeysPerLease = 4096;
static_assert(2 * kMaxKeysPerLease + 1 <= kMaxTxnOps);
// Keys attached to any lease in one subvolume: bounds the lessor's memory
// (the attached keys are kept in memory, engine/lease/lessor.h).
inline constexpr size_t kMaxLeasedKeysPerSubvolume = 100000;

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_LIMITS_H_
