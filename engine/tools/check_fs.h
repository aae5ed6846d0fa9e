// The file-namespace consistency check of one subvolume tree (check_fs.cc).
#ifndef COWKV_ENGINE_CHECK_FS_H_
#define COWKV_ENGINE_CHECK_FS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tree/tree.h"

namespace cowkv {

// Appends one line per finding to `problems`.
void CheckFsTree(Tree* tree, uint64_t id, std::vector<std::string>* problems);

}  // namespace cowkv

#endif  // COWKV_ENGINE_CHECK_FS_H_
