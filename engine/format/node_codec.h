// Node codec: a tree node's bytes <-> its header and item list.
//
// Layout (docs/format.md, "Node"): a 64-byte header, then nritems 8-byte slots
// growing up, item data (key bytes then value bytes) packed downward from the
// end of the node in slot order: item 0 ends at nodesize, item i ends where
// item i-1 starts. Internal nodes (level > 0) store a 16-byte child pointer
// {bytenr, generation} as each item's value.
//
// DecodeNode is the tree-checker: it verifies every field so no other code
// has to — checksum, fsid, bytenr, generation, owner and level against what
// the parent pointer expects, nritems and slot bounds, exact packing, key
// length and strict key order, value sizes, child pointer alignment. Every
// failure is DATA_LOSS built by COWKV_CORRUPTION.
#ifndef COWKV_ENGINE_FORMAT_NODE_CODEC_H_
#define COWKV_ENGINE_FORMAT_NODE_CODEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace format {

struct Item {
  std::string key;
  std::string value;
};

// An item decoded in place: views into the buffer given to DecodeNodeViews.
struct ItemView {
  absl::string_view key;
  absl::string_view value;
};

struct NodeHeader {
  uint64_t bytenr = 0;
  uint64_t generation = 0;
  uint64_t owner = 0;
  uint8_t level = 0;
};

// What the reader expects of a node, from the parent pointer or superblock.
// Zero/negative fields are not checked.
struct NodeExpect {
  uint64_t bytenr = 0;
  uint64_t generation = 0;
  uint64_t owner = 0;
  int level = -1;
};

struct ChildPtr {
  uint64_t bytenr = 0;
  uint64_t generation = 0;
};

inline size_t ItemSize(size_t key_len, size_t value_len) {
  return 8 + key_len + value_len;  // kSlotSize + data
}

std::string EncodeChildPtr(const ChildPtr& c);
// `value` must be exactly kChildPtrSize bytes (DecodeNode guarantees it).
ChildPtr DecodeChildPtr(absl::string_view value);

// Builds a node image item by item into `out` (exactly `nodesize` bytes):
// Add() in key order, then Finish() writes the header and the checksum. The
// items must fit (sum of ItemSize <= NodeCapacity).
//
// The encoder asserts what DecodeNode would refuse, so a bug crashes here
// instead of writing a node the next read reports as DATA_LOSS (TigerBeetle's
// paired assertions; btrfs checks a node before write and after read):
// always (COWKV_CHECK, O(1) per node or item) the level, the bytenr, the fsid
// size, the key length and that the items fit; in debug builds (COWKV_DCHECK,
// one more pass over the items just written) strict key order, the empty key
// only as an internal node's slot 0, leaf item sizes, child pointer sizes,
// bytenrs and generations.
class NodeEncoder {
 public:
  NodeEncoder(char* out, uint32_t nodesize);
  void Add(absl::string_view key, absl::string_view value);
  void Finish(const NodeHeader& header, absl::string_view fsid);

  // Test-only (engine/testing/node_surgery): skip the per-item checks, so a
  // test can plant misordered keys with a valid checksum for `check` to find.
  void TEST_SkipItemChecks() { check_items_ = false; }

 private:
  void DCheckItems(const NodeHeader& header) const;

  char* const out_;
  const uint32_t nodesize_;
  size_t slot_;
  size_t data_end_;
  uint32_t nritems_ = 0;
  bool check_items_ = true;
};

// Encodes `items` into `out` (exactly `nodesize` bytes) with NodeEncoder.
void EncodeNode(const NodeHeader& header, const std::vector<Item>& items,
                absl::string_view fsid, uint32_t nodesize, char* out);

// Decodes and verifies; on success fills `header` and `items`, whose views
// point into `data` and live as long as it does.
absl::Status DecodeNodeViews(absl::string_view data, absl::string_view fsid,
                             uint32_t nodesize, uint32_t sectorsize,
                             const NodeExpect& expect, NodeHeader* header,
                             std::vector<ItemView>* items);

// Same, copying the items out.
absl::Status DecodeNode(absl::string_view data, absl::string_view fsid,
                        uint32_t nodesize, uint32_t sectorsize,
                        const NodeExpect& expect, NodeHeader* header,
                        std::vector<Item>* items);

}  // namespace format
}  // namespace cowkv

#endif  // COWKV_ENGINE_FORMAT_NODE_CODEC_H_
