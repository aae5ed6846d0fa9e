// The KV history's consistency check of one subvolume tree
// (check_history.cc): every history item decodes (info item, entries and
// their prev items), no entry's prev item is newer than its change, and
// the history is complete — every KV item changed after the compact
// revision has the entry of that change (kv/history_item.h's invariant).
#ifndef COWKV_ENGINE_TOOLS_CHECK_HISTORY_H_
#define COWKV_ENGINE_TOOLS_CHECK_HISTORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tree/tree.h"

namespace cowkv {

// Appends one line per finding to `problems`.
void CheckHistory(Tree* tree, uint64_t id, std::vector<std::string>* problems);

}  // namespace cowkv

#endif  // COWKV_ENGINE_TOOLS_CHECK_HISTORY_H_
