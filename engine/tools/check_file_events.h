// The file events' consistency check of one subvolume tree
// (check_file_events.cc; fs/fs_events.h, docs/format.md "File events"):
// the info and every event decode, no event is newer than the revision the
// superblock sealed (events are only ever committed, never logged), an
// open span starts at revision 1 or later, and a revision's events are
// numbered 0, 1, ... without a gap.
#ifndef COWKV_ENGINE_TOOLS_CHECK_FILE_EVENTS_H_
#define COWKV_ENGINE_TOOLS_CHECK_FILE_EVENTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "engine/tree/tree.h"

namespace cowkv {

// `sealed_revision`: the superblock's revision. Appends one line per finding.
void CheckFileEvents(Tree* tree, uint64_t id, uint64_t sealed_revision,
                     std::vector<std::string>* problems);

}  // namespace cowkv

#endif  // COWKV_ENGINE_TOOLS_CHECK_FILE_EVENTS_H_
