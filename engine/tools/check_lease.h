// The lease consistency check of one subvolume tree (check_lease.cc):
// format.md "Lease items", invariants 1-4 of engine/lease/lease_item.h.
#ifndef COWKV_ENGINE_TOOLS_CHECK_LEASE_H_
#define COWKV_ENGINE_TOOLS_CHECK_LEASE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tree/tree.h"

namespace cowkv {

// Appends one line per finding to `problems`.
void CheckLeaseTree(Tree* tree, uint64_t id, std::vector<std::string>* problems);

}  // namespace cowkv

#endif  // COWKV_ENGINE_TOOLS_CHECK_LEASE_H_
