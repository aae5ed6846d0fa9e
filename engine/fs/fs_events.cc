// File event items and their reads: see fs_events.h and docs/format.md
// "File events".
#include "engine/fs/fs_events.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cowkv/limits.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/fs/fs_items.h"

namespace cowkv {
namespace fs {

namespace {

absl::Status Bad(absl::string_view tree_key, absl::string_view why, int line = __builtin_LINE()) {
  CorruptionSite site;
  site.what = "file event item";
  return CorruptionError(
      site, absl::StrCat("key ", absl::BytesToHexString(tree_key.substr(0, 16)), ": ", why), "", "",
      __FILE__, line);
}

constexpr uint8_t kMaxType = static_cast<uint8_t>(FileEvent::Type::kXattr);

bool TwoPaths(FileEvent::Type t) {
  return t == FileEvent::Type::kRename || t == FileEvent::Type::kExchange;
}

// A recorded path: relative (no leading '/'), no empty component, no NUL.
bool GoodPath(absl::string_view p) {
  if (p.size() > kMaxPathLen || p.find('\0') != absl::string_view::npos) return false;
  if (p.empty()) return true;
  return p.front() != '/' && p.back() != '/' && p.find("//") == absl::string_view::npos;
}

}  // namespace

std::string FileEventKey(uint64_t revision, uint16_t seq) {
  COWKV_CHECK(revision <= kMaxFileEventRevision);
  std::string k(kFileEventKeySize, '\0');
  k[0] = kFileEventPrefix;
  for (int i = 7; i >= 1; --i, revision >>= 8) k[i] = static_cast<char>(revision & 0xff);
  k[8] = static_cast<char>(seq >> 8);
  k[9] = static_cast<char>(seq & 0xff);
  return k;
}

uint64_t FileEventKeyRevision(absl::string_view tree_key) {
  if (tree_key.size() < 8) return 0;
  uint64_t v = 0;
  for (size_t i = 1; i < 8; ++i) v = (v << 8) | static_cast<uint8_t>(tree_key[i]);
  return v;
}

std::string EncodeFileEvent(const FileEventRecord& ev, size_t max_value) {
  const bool lost = kFileEventHeader + ev.path.size() + ev.new_path.size() > max_value ||
                    ev.path.size() > kMaxPathLen || ev.new_path.size() > kMaxPathLen;
  const absl::string_view path = lost ? absl::string_view() : ev.path;
  const absl::string_view new_path = lost ? absl::string_view() : ev.new_path;
  std::string out(kFileEventHeader, '\0');
  out[0] = static_cast<char>(ev.type);
  out[1] = static_cast<char>(lost ? kFileEventPathsLost : 0);
  EncodeLE64(out.data() + 2, ev.ino);
  EncodeLE16(out.data() + 10, static_cast<uint16_t>(path.size()));
  EncodeLE16(out.data() + 12, static_cast<uint16_t>(new_path.size()));
  out.append(path.data(), path.size());
  out.append(new_path.data(), new_path.size());
  return out;
}

absl::StatusOr<FileEvent> DecodeFileEvent(absl::string_view tree_key, absl::string_view raw) {
  if (tree_key.size() != kFileEventKeySize || tree_key[0] != kFileEventPrefix) {
    return Bad(tree_key, absl::StrCat("tree key of ", tree_key.size(), " bytes"));
  }
  FileEvent ev;
  ev.revision = FileEventKeyRevision(tree_key);
  if (ev.revision == 0) return Bad(tree_key, "event at revision 0");
  if (raw.size() < kFileEventHeader)
    return Bad(tree_key, absl::StrCat("event of ", raw.size(), " bytes"));
  const uint8_t type = static_cast<uint8_t>(raw[0]);
  const uint8_t flags = static_cast<uint8_t>(raw[1]);
  if (type == 0 || type > kMaxType) return Bad(tree_key, absl::StrCat("unknown type ", int{type}));
  if ((flags & ~kFileEventPathsLost) != 0) {
    return Bad(tree_key, absl::StrCat("unknown flags ", int{flags}));
  }
  ev.type = static_cast<FileEvent::Type>(type);
  ev.paths_lost = (flags & kFileEventPathsLost) != 0;
  ev.ino = DecodeLE64(raw.data() + 2);
  const size_t plen = DecodeLE16(raw.data() + 10);
  const size_t nlen = DecodeLE16(raw.data() + 12);
  if (kFileEventHeader + plen + nlen != raw.size()) {
    return Bad(tree_key, absl::StrCat("paths of ", plen, " and ", nlen, " bytes in an event of ",
                                      raw.size(), " bytes"));
  }
  if (ev.ino < kRootDirIno || ev.ino >= kLastFreeObjectid) {
    return Bad(tree_key, absl::StrCat("inode ", ev.ino, " is not an inode number"));
  }
  ev.path = std::string(raw.substr(kFileEventHeader, plen));
  ev.new_path = std::string(raw.substr(kFileEventHeader + plen, nlen));
  if (!GoodPath(ev.path) || !GoodPath(ev.new_path)) return Bad(tree_key, "malformed path");
  if (ev.paths_lost && (plen != 0 || nlen != 0)) return Bad(tree_key, "paths lost but present");
  if (!ev.paths_lost && TwoPaths(ev.type) && (ev.path.empty() || ev.new_path.empty())) {
    return Bad(tree_key, "a rename without both paths");
  }
  if (!TwoPaths(ev.type) && nlen != 0) return Bad(tree_key, "a second path on a one-path event");
  return ev;
}

std::string EncodeFileEventInfo(const FileEventInfo& info) {
  std::string out(kFileEventInfoSize, '\0');
  EncodeLE64(out.data(), info.span_start);
  EncodeLE64(out.data() + 8, info.floor);
  return out;
}

absl::StatusOr<FileEventInfo> DecodeFileEventInfo(absl::string_view raw) {
  if (raw.size() != kFileEventInfoSize) {
    return Bad(FileEventInfoKey(), absl::StrCat("info of ", raw.size(), " bytes"));
  }
  FileEventInfo info;
  info.span_start = DecodeLE64(raw.data());
  info.floor = DecodeLE64(raw.data() + 8);
  if (info.span_start > kMaxFileEventRevision || info.floor > kMaxFileEventRevision) {
    return Bad(FileEventInfoKey(), "revision past 2^56");
  }
  return info;
}

absl::StatusOr<FileEventInfo> LoadFileEventInfo(FsBackend* b) {
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> raw, b->Get(FileEventInfoKey()));
  if (!raw.has_value()) return FileEventInfo{};
  return DecodeFileEventInfo(*raw);
}

std::string NormaliseEventPrefix(absl::string_view prefix) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(prefix, '/', absl::SkipEmpty())) {
    if (!out.empty()) out.push_back('/');
    out.append(part.data(), part.size());
  }
  return out;
}

bool PathUnder(absl::string_view path, absl::string_view prefix) {
  if (prefix.empty()) return true;
  if (path.size() < prefix.size() || path.substr(0, prefix.size()) != prefix) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

bool EventMatches(const FileEvent& ev, absl::string_view prefix, bool bug_old_path_only) {
  // A watcher cannot tell where an event without paths happened: all see it.
  if (prefix.empty() || ev.paths_lost) return true;
  return PathUnder(ev.path, prefix) ||
         (TwoPaths(ev.type) && !bug_old_path_only && PathUnder(ev.new_path, prefix));
}

absl::StatusOr<FileEventsResult> ScanFileEvents(FsBackend* b, const FileEventsRequest& req,
                                                bool bug_old_path_only) {
  FileEventsResult r;
  r.next_revision = req.to_revision + 1;
  if (req.from_revision > req.to_revision) {
    r.next_revision = req.from_revision;
    return r;
  }
  const std::string end = FileEventKey(std::min(req.to_revision, kMaxFileEventRevision - 1) + 1, 0);
  absl::Status bad;
  uint64_t last = 0;
  COWKV_RETURN_IF_ERROR(b->Scan(FileEventKey(req.from_revision, 0), end, false,
                                [&](absl::string_view k, absl::string_view v) {
                                  const uint64_t rev = FileEventKeyRevision(k);
                                  if (rev != last && req.max_events != 0 &&
                                      r.events.size() >= req.max_events) {
                                    r.more = true;
                                    r.next_revision = rev;
                                    return false;
                                  }
                                  absl::StatusOr<FileEvent> ev = DecodeFileEvent(k, v);
                                  if (!ev.ok()) {
                                    bad = ev.status();
                                    return false;
                                  }
                                  last = rev;
                                  if (EventMatches(*ev, req.prefix, bug_old_path_only)) {
                                    r.events.push_back(std::move(*ev));
                                  }
                                  return true;
                                }));
  COWKV_RETURN_IF_ERROR(bad);
  return r;
}

}  // namespace fs
}  // namespace cowkv
