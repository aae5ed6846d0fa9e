// File events: the items a watched file tree records, beside its file items
// in the subvolume tree, keyed by the store-wide revision, and their reads
// (docs/design.md "File watch", docs/format.md "File events").
//
//   tree key 'e' + u56 BE revision + u16 BE seq   -> event
//   tree key 'e' + 9 zero bytes (revision 0)      -> info
//
// An event: u8 type | u8 flags (bit 0: paths lost) | u64 LE ino |
// u16 LE path length | u16 LE new path length | path | new path.
// The info: u64 LE span start (0: closed, nothing recorded now) |
// u64 LE floor. Invariant: while the span is open (start S), every change
// of the file tree at a revision >= S that is in the tree has its events,
// and none of them at a revision <= floor is kept. So events of [from, to]
// are complete exactly when the span is open, from >= S and from > floor.
#ifndef COWKV_ENGINE_FS_FS_EVENTS_H_
#define COWKV_ENGINE_FS_FS_EVENTS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/watch.h"
#include "engine/fs/fs_backend.h"

namespace cowkv {
namespace fs {

inline constexpr char kFileEventPrefix = 'e';
inline constexpr size_t kFileEventKeySize = 10;
inline constexpr size_t kFileEventHeader = 14;
inline constexpr size_t kFileEventInfoSize = 16;
inline constexpr uint8_t kFileEventPathsLost = 1;
inline constexpr uint64_t kMaxFileEventRevision = (uint64_t{1} << 56) - 1;

// 'e' + BE56 revision + BE16 seq (revision <= kMaxFileEventRevision).
std::string FileEventKey(uint64_t revision, uint16_t seq);
inline std::string FileEventInfoKey() { return FileEventKey(0, 0); }
inline bool IsFileEventTreeKey(absl::string_view tree_key) {
  return !tree_key.empty() && tree_key[0] == kFileEventPrefix;
}
// The revision of an event key (0 for the info or a short key).
uint64_t FileEventKeyRevision(absl::string_view tree_key);

// The event's item value. Paths that would make the value larger than
// `max_value` are left out (flag kFileEventPathsLost).
std::string EncodeFileEvent(const FileEventRecord& ev, size_t max_value);
// DATA_LOSS naming the item when the key or value is malformed.
absl::StatusOr<FileEvent> DecodeFileEvent(absl::string_view tree_key, absl::string_view raw);

struct FileEventInfo {
  uint64_t span_start = 0;  // 0: closed
  uint64_t floor = 0;
};
std::string EncodeFileEventInfo(const FileEventInfo& info);
absl::StatusOr<FileEventInfo> DecodeFileEventInfo(absl::string_view raw);
// The subvolume's info; a tree without one has a closed span, floor 0.
absl::StatusOr<FileEventInfo> LoadFileEventInfo(FsBackend* b);

// `prefix` without leading, trailing or doubled '/'.
std::string NormaliseEventPrefix(absl::string_view prefix);
// `path` is `prefix` (normalised) or below it.
bool PathUnder(absl::string_view path, absl::string_view prefix);
// `bug_old_path_only`: Options' PlantedBug::kFileEventMatchesOldPath.
bool EventMatches(const FileEvent& ev, absl::string_view prefix, bool bug_old_path_only = false);

// The events of [req.from_revision, req.to_revision] (to resolved,
// prefix normalised) under req.prefix; no span or floor check (the store
// does that with the info).
absl::StatusOr<FileEventsResult> ScanFileEvents(FsBackend* b, const FileEventsRequest& req,
                                                bool bug_old_path_only = false);

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_FS_EVENTS_H_
