// FileTreeModel: an in-memory file tree that predicts the file events a
// watched subvolume records (cowkv/watch.h FileEvent; docs/design.md "File
// watch"), for the file watch model and crash tests
// (engine/store/file_watch_model_test.cc,
// engine/crash_test/file_watch_crash_test.cc). Each change is told to the
// model after the store made it, with the revision it took; the model
// names paths as the store does: relative to the root, an inode's data or
// attribute change under the first name of its lowest parent directory.
#ifndef COWKV_ENGINE_TESTING_FILE_WATCH_MODEL_H_
#define COWKV_ENGINE_TESTING_FILE_WATCH_MODEL_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/watch.h"

namespace cowkv {
namespace testing {

inline const char* FileEventName(FileEvent::Type t) {
  switch (t) {
    case FileEvent::Type::kCreate:
      return "CREATE";
    case FileEvent::Type::kMkdir:
      return "MKDIR";
    case FileEvent::Type::kSymlink:
      return "SYMLINK";
    case FileEvent::Type::kLink:
      return "LINK";
    case FileEvent::Type::kUnlink:
      return "UNLINK";
    case FileEvent::Type::kRmdir:
      return "RMDIR";
    case FileEvent::Type::kRename:
      return "RENAME";
    case FileEvent::Type::kExchange:
      return "EXCHANGE";
    case FileEvent::Type::kModify:
      return "MODIFY";
    case FileEvent::Type::kAttrib:
      return "ATTRIB";
    case FileEvent::Type::kXattr:
      return "XATTR";
  }
  return "?";
}

// "rev TYPE ino path[ -> new_path]".
inline std::string ShowFileEvent(const FileEvent& e) {
  return absl::StrCat(e.revision, " ", FileEventName(e.type), " ", e.ino, " ", e.path,
                      e.new_path.empty() ? "" : " -> ", e.new_path, e.paths_lost ? " LOST" : "");
}
inline std::vector<std::string> ShowFileEvents(const std::vector<FileEvent>& es) {
  std::vector<std::string> out;
  for (const FileEvent& e : es) out.push_back(ShowFileEvent(e));
  return out;
}

// The prefix rule of FileEventsRequest (`prefix` already normalised).
inline bool ModelPathUnder(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return true;
  if (path.compare(0, prefix.size(), prefix) != 0) return false;
  return path.size() == prefix.size() || path[prefix.size()] == '/';
}

class FileTreeModel {
 public:
  static constexpr uint64_t kRoot = 256;
  FileTreeModel() { inodes_[kRoot].dir = true; }

  bool Exists(uint64_t ino) const { return inodes_.count(ino) > 0; }
  bool IsDir(uint64_t ino) const { return inodes_.at(ino).dir; }
  std::optional<uint64_t> Child(uint64_t dir, const std::string& name) const {
    auto d = entries_.find(dir);
    if (d == entries_.end()) return std::nullopt;
    auto e = d->second.find(name);
    if (e == d->second.end()) return std::nullopt;
    return e->second;
  }
  bool Empty(uint64_t dir) const {
    auto d = entries_.find(dir);
    return d == entries_.end() || d->second.empty();
  }
  size_t Links(uint64_t ino) const { return inodes_.at(ino).names.size(); }
  // Whether `a` is `d` or one of its ancestors.
  bool IsAncestor(uint64_t a, uint64_t d) const {
    for (uint64_t cur = d;; cur = inodes_.at(cur).names.front().first) {
      if (cur == a) return true;
      if (cur == kRoot) return false;
    }
  }
  std::vector<uint64_t> Inodes(bool dirs) const {
    std::vector<uint64_t> out;
    for (const auto& [ino, n] : inodes_) {
      if (n.dir == dirs) out.push_back(ino);
    }
    return out;
  }
  // The store's path of `ino`: at each step the first name (in the order
  // they were added) in the lowest-numbered parent directory.
  std::string Path(uint64_t ino) const {
    std::vector<std::string> parts;
    for (uint64_t cur = ino; cur != kRoot;) {
      const auto& names = inodes_.at(cur).names;
      auto best = names.begin();
      for (auto it = names.begin(); it != names.end(); ++it) {
        if (it->first < best->first) best = it;
      }
      parts.push_back(best->second);
      cur = best->first;
    }
    std::reverse(parts.begin(), parts.end());
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : "/") + p;
    return out;
  }
  std::string PathIn(uint64_t dir, const std::string& name) const {
    return dir == kRoot ? name : absl::StrCat(Path(dir), "/", name);
  }

  // The changes, each after the store made it at `rev`.
  void Create(uint64_t rev, uint64_t dir, const std::string& name, uint64_t ino,
              FileEvent::Type t) {
    Add(rev, t, ino, PathIn(dir, name), "");
    inodes_[ino].dir = t == FileEvent::Type::kMkdir;
    AddName(ino, dir, name);
  }
  void Remove(uint64_t rev, uint64_t dir, const std::string& name) {
    const uint64_t ino = *Child(dir, name);
    Add(rev, IsDir(ino) ? FileEvent::Type::kRmdir : FileEvent::Type::kUnlink, ino,
        PathIn(dir, name), "");
    DropName(ino, dir, name, true);
  }
  void Link(uint64_t rev, uint64_t ino, uint64_t dir, const std::string& name) {
    Add(rev, FileEvent::Type::kLink, ino, PathIn(dir, name), "");
    AddName(ino, dir, name);
  }
  void Rename(uint64_t rev, uint64_t fdir, const std::string& fname, uint64_t tdir,
              const std::string& tname, bool exchange) {
    const uint64_t f = *Child(fdir, fname);
    const std::optional<uint64_t> t = Child(tdir, tname);
    Add(rev, exchange ? FileEvent::Type::kExchange : FileEvent::Type::kRename, f,
        PathIn(fdir, fname), PathIn(tdir, tname));
    DropName(f, fdir, fname, false);
    if (t.has_value()) DropName(*t, tdir, tname, !exchange);
    AddName(f, tdir, tname);
    if (exchange) AddName(*t, fdir, fname);
  }
  void Touch(uint64_t rev, uint64_t ino, FileEvent::Type t) { Add(rev, t, ino, Path(ino), ""); }

  // The events of [from, to] under `prefix` (normalised).
  std::vector<std::string> Events(uint64_t from, uint64_t to, const std::string& prefix) const {
    std::vector<std::string> out;
    for (const FileEvent& e : events_) {
      if (e.revision < from || e.revision > to) continue;
      if (ModelPathUnder(e.path, prefix) ||
          (!e.new_path.empty() && ModelPathUnder(e.new_path, prefix))) {
        out.push_back(ShowFileEvent(e));
      }
    }
    return out;
  }
  const std::vector<FileEvent>& events() const { return events_; }
  uint64_t last() const { return events_.empty() ? 0 : events_.back().revision; }
  // Forgets the events after `rev` (a crash lost them).
  void ForgetEventsAfter(uint64_t rev) {
    while (!events_.empty() && events_.back().revision > rev) events_.pop_back();
  }

 private:
  struct Node {
    bool dir = false;
    std::vector<std::pair<uint64_t, std::string>> names;  // (parent, name), as added
  };
  void Add(uint64_t rev, FileEvent::Type t, uint64_t ino, std::string path, std::string np) {
    FileEvent e;
    e.type = t;
    e.revision = rev;
    e.ino = ino;
    e.path = std::move(path);
    e.new_path = std::move(np);
    events_.push_back(std::move(e));
  }
  void AddName(uint64_t ino, uint64_t dir, const std::string& name) {
    inodes_[ino].names.emplace_back(dir, name);
    entries_[dir][name] = ino;
  }
  // `may_delete`: the inode goes with its last name (not while it moves).
  void DropName(uint64_t ino, uint64_t dir, const std::string& name, bool may_delete) {
    auto& names = inodes_[ino].names;
    names.erase(std::find(names.begin(), names.end(), std::make_pair(dir, name)));
    entries_[dir].erase(name);
    if (names.empty() && may_delete) {
      inodes_.erase(ino);
      entries_.erase(ino);
    }
  }

  std::map<uint64_t, Node> inodes_;
  std::map<uint64_t, std::map<std::string, uint64_t>> entries_;
  std::vector<FileEvent> events_;
};

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_FILE_WATCH_MODEL_H_
