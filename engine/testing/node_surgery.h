// Test-only surgery on a committed image: find nodes of a tree and rewrite
// them with a valid checksum, so tests can plant exactly the inconsistency
// `check` must find (a refcount mismatch, a leaked extent, misordered keys,
// a fence violation) rather than random noise.
#ifndef COWKV_ENGINE_TESTING_NODE_SURGERY_H_
#define COWKV_ENGINE_TESTING_NODE_SURGERY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cowkv/device.h"
#include "engine/format/node_codec.h"
#include "engine/format/superblock.h"

namespace cowkv {
namespace testing {

struct NodeInfo {
  uint64_t bytenr = 0;
  uint64_t tree = 0;
  int level = 0;
};

// Every node of every tree of the committed state, depth first.
absl::StatusOr<std::vector<NodeInfo>> ListNodes(BlockDevice* dev);

// Reads the node at `bytenr`, lets `edit` change its items, re-encodes it
// with the same header and a fresh checksum, and writes it back. The items
// need not be in order (the encoder's per-item checks are skipped).
absl::Status RewriteNode(BlockDevice* dev, uint64_t bytenr,
                         const std::function<void(std::vector<format::Item>*)>& edit);

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_NODE_SURGERY_H_
