// CheckTxnDevice: the refcount half of `cowkv check`, for tests of the
// layers below the store facade (txn, refs, log), which cannot depend on
// //engine:store and its Check().
//
// Reads the committed state from the device only — a fresh NodeCache, never
// a running manager's memory (bbolt's MustCheck after every test) — and
// verifies:
//   1. the superblock ReadBestSuperblock picks names a readable root tree,
//      and every node reachable from it and from the root items decodes as
//      its pointer expects (NodeCache::Read verifies bytenr, generation,
//      level and checksum);
//   2. each tree block's EXTENT_ITEM refs equals the pointers to it (parent
//      nodes, root items, the superblock) and the number of its
//      back-reference items;
//   3. each data extent's refs equals the leaf items pointing at it and the
//      sum of its data back-reference counts;
//   4. no EXTENT_ITEM without a pointer, no pointer without an EXTENT_ITEM;
//   5. the superblock's bytes_used equals the sum of the extents' lengths.
// Log blocks are outside the extent tree and not reachable from a root
// item, so a live log chain is invisible here (as it is to check.cc).
//
// The full check (fences, key order, file namespace, superblock copies) is
// engine/check.cc; this one is deliberately small. Thread-compatible: call it
// while nothing writes the device.
#ifndef COWKV_ENGINE_TESTING_TXN_CHECK_H_
#define COWKV_ENGINE_TESTING_TXN_CHECK_H_

#include <string>
#include <vector>

#include "cowkv/device.h"

namespace cowkv {
namespace testing {

// One line per finding; empty when the committed state is consistent.
std::vector<std::string> CheckTxnDevice(BlockDevice* device);

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_TXN_CHECK_H_
