// Offline tools, the library form of the CLI's check and dump-tree: they
// read a device that no Store has open (take its lock first: device.h).
#ifndef COWKV_INCLUDE_COWKV_TOOLS_H_
#define COWKV_INCLUDE_COWKV_TOOLS_H_

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cowkv/device.h"

namespace cowkv {

struct CheckReport {
  std::vector<std::string> problems;  // empty = clean, one line each
  uint64_t generation = 0;
  std::string fsid_hex;  // of the superblock checked (empty if none)
  uint32_t nodesize = 0;
  uint64_t total_bytes = 0;
  uint64_t trees = 0;
  uint64_t nodes = 0;
  uint64_t items = 0;
  uint64_t extents = 0;
  uint64_t used_bytes = 0;
  bool ok() const { return problems.empty(); }
};

// Verifies the committed state on `device`: every checksum and header, key
// order and parent/child fences, every extent's refcount equals its
// back-references, no leaked, overlapping or out-of-range extent, superblock
// used bytes. Returns an error only when the device cannot be read at all;
// findings go into the report.
absl::StatusOr<CheckReport> Check(BlockDevice* device);

// Writes human-readable nodes and items of the tree `tree_id` (0 = every
// tree) of the committed state, plus the superblock.
absl::Status DumpTree(BlockDevice* device, uint64_t tree_id, std::ostream& out);

// True when `device` holds a cowkv superblock (any copy with our magic).
bool HasCowkvSignature(BlockDevice* device);

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_TOOLS_H_
