// The file events check: see check_file_events.h.
#include "engine/tools/check_file_events.h"

#include "absl/strings/str_cat.h"
#include "engine/fs/fs_events.h"

namespace cowkv {

void CheckFileEvents(Tree* tree, uint64_t id, uint64_t sealed_revision,
                     std::vector<std::string>* problems) {
  auto problem = [&](const auto&... args) {
    problems->push_back(absl::StrCat("tree ", id, ": file events: ", args...));
  };
  uint64_t last_rev = 0, next_seq = 0;
  TreeIterator it(tree);
  for (it.Seek(std::string(1, fs::kFileEventPrefix));
       it.Valid() && fs::IsFileEventTreeKey(it.key()); it.Next()) {
    if (it.key() == fs::FileEventInfoKey()) {
      absl::StatusOr<fs::FileEventInfo> info = fs::DecodeFileEventInfo(it.value());
      if (!info.ok()) {
        problem(info.status().message());
      } else if (info->span_start > sealed_revision + 1) {
        problem("the span starts at ", info->span_start, ", past the sealed revision ",
                sealed_revision);
      }
      continue;
    }
    absl::StatusOr<FileEvent> ev = fs::DecodeFileEvent(it.key(), it.value());
    if (!ev.ok()) {
      problem(ev.status().message());
      continue;
    }
    if (ev->revision > sealed_revision) {
      problem("an event at revision ", ev->revision, ", past the sealed revision ", sealed_revision,
              " (events are never logged)");
    }
    const uint16_t seq = static_cast<uint16_t>((static_cast<uint8_t>(it.key()[8]) << 8) |
                                               static_cast<uint8_t>(it.key()[9]));
    if (ev->revision != last_rev) next_seq = 0;
    if (seq != next_seq) {
      problem("revision ", ev->revision, " has event ", seq, " where ", next_seq,
              " was due (a lost or stray event)");
    }
    last_rev = ev->revision;
    next_seq = seq + 1;
  }
  if (!it.status().ok()) problem(it.status().message());
}

}  // namespace cowkv
