// FsOps' file events (docs/design.md "File watch"): an operation on a
// subvolume whose file tree is watched queues its event with the backend
// before its batch commits; the backend writes it with the batch's items.
// Nothing here runs unless FsBackend::recording_file_events().
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

// One of `ino`'s names as a path from the root: at each step the first
// name of the first parent LoadRefs lists (INODE_REF items in parent order,
// then extended refs). A directory has one name, so a directory's path is
// exact; a file with several links gets one of them. nullopt: the inode
// has no name (an orphan, an O_TMPFILE inode).
absl::StatusOr<std::optional<std::string>> FsOps::InodePath(Batch& b, uint64_t ino) {
  std::vector<std::string> parts;
  size_t bytes = 0;
  for (size_t depth = 0; ino != kRootDirIno; ++depth) {
    if (depth > kMaxPathDepth) return DirectoryChainTooDeep(ino);
    COWKV_ASSIGN_OR_RETURN(std::vector<ParentRefs> refs, LoadRefs(b, ino));
    if (refs.empty() || refs.front().second.empty()) {
      if (depth == 0) return std::optional<std::string>();
      return DirectoryWithoutParent(ino);
    }
    parts.push_back(refs.front().second.front().name);
    bytes += parts.back().size() + 1;
    // Longer than any path can be: EncodeFileEvent marks the paths lost.
    if (bytes > kMaxPathLen + 1)
      return std::optional<std::string>(std::string(kMaxPathLen + 1, 'x'));
    ino = refs.front().first;
  }
  std::reverse(parts.begin(), parts.end());
  return std::optional<std::string>(absl::StrJoin(parts, "/"));
}

absl::StatusOr<std::string> FsOps::PlacePath(Batch& b, const Resolved& r) {
  if (r.at_dir == 0) {
    if (r.dir_parts.empty()) return r.name;
    return absl::StrCat(absl::StrJoin(r.dir_parts, "/"), "/", r.name);
  }
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> dir, InodePath(b, r.at_dir));
  if (!dir.has_value()) return DirectoryWithoutParent(r.at_dir);
  if (dir->empty()) return r.name;
  return absl::StrCat(*dir, "/", r.name);
}

absl::Status FsOps::Emit(Batch& b, FileEvent::Type type, uint64_t ino, const Resolved& at,
                         const Resolved* to) {
  if (!b_->recording_file_events()) return absl::OkStatus();
  FileEventRecord ev;
  ev.type = static_cast<uint8_t>(type);
  ev.ino = ino;
  COWKV_ASSIGN_OR_RETURN(ev.path, PlacePath(b, at));
  if (to != nullptr) {
    COWKV_ASSIGN_OR_RETURN(ev.new_path, PlacePath(b, *to));
  }
  b_->AddFileEvent(std::move(ev));
  return absl::OkStatus();
}

absl::Status FsOps::EmitInode(Batch& b, FileEvent::Type type, uint64_t ino) {
  if (!b_->recording_file_events()) return absl::OkStatus();
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> path, InodePath(b, ino));
  if (!path.has_value()) return absl::OkStatus();  // no name: nothing a path watcher sees
  FileEventRecord ev;
  ev.type = static_cast<uint8_t>(type);
  ev.ino = ino;
  ev.path = std::move(*path);
  b_->AddFileEvent(std::move(ev));
  return absl::OkStatus();
}

}  // namespace fs
}  // namespace cowkv
