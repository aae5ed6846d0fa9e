// Applying delayed-ref heads to the extent tree.
//
// The extent tree holds, per allocated extent, an EXTENT_ITEM {refs,
// generation, flags, level} and one back-reference item per referrer (see
// format/items.h). RunDelayedRefs applies merged heads in bytenr order:
//   - a fresh allocation inserts its EXTENT_ITEM and back-references;
//   - otherwise back-references are inserted or deleted and refs adjusted;
//   - an extent whose refs reach zero loses its items and is handed to
//     `on_free` (the caller pins the space until the commit is durable).
// A head that contradicts the tree (drop of a missing reference, refs below
// zero) is DATA_LOSS: the extent tree and the trees disagree.
#ifndef COWKV_ENGINE_REFS_EXTENT_TREE_H_
#define COWKV_ENGINE_REFS_EXTENT_TREE_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "engine/refs/delayed_refs.h"
#include "engine/tree/tree.h"

namespace cowkv {

using ExtentFreeFn = std::function<void(uint64_t bytenr, uint64_t num_bytes)>;

absl::Status RunDelayedRefs(Tree* extent_tree, const std::vector<DelayedRefHead>& heads,
                            const ExtentFreeFn& on_free);

// Bytes an extent contributes to the extent tree at most (EXTENT_ITEM plus one
// back-reference, slots included); used for space reservation.
inline constexpr uint64_t kExtentTreeBytesPerHead = 8 + 17 + 32 + 8 + 17;

}  // namespace cowkv

#endif  // COWKV_ENGINE_REFS_EXTENT_TREE_H_
