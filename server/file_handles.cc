// Open file handles with leases; see file_handles.h.
#include "server/file_handles.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {

absl::StatusOr<uint64_t> FileHandles::Add(const std::string& peer, const std::string& connection,
                                          const std::string& subvolume, Files files, OpenFile of,
                                          absl::Duration lease, absl::Time now) {
  uint64_t handle = 0;
  {
    absl::MutexLock l(&mu_);
    absl::Status over;
    int& mine = open_per_peer_[peer];
    if (static_cast<int>(entries_.size()) >= limits_.total) {
      over = WithServerReason(
          absl::ResourceExhaustedError(absl::StrCat("ENFILE: too many open files on the server "
                                                    "(limit ",
                                                    limits_.total, "): close some first")),
          "TOO_MANY_FILES");
    } else if (mine >= limits_.per_peer) {
      over = WithServerReason(absl::ResourceExhaustedError(absl::StrCat(
                                  "EMFILE: too many open files for client ", peer, " (limit ",
                                  limits_.per_peer, "): close some first")),
                              "TOO_MANY_FILES");
    }
    if (!over.ok()) {
      if (mine == 0) open_per_peer_.erase(peer);
      files.Close(of.handle).IgnoreError();
      return over;
    }
    ++mine;
    do {
      handle = absl::Uniform<uint64_t>(rng_);
    } while (handle == 0 || entries_.contains(handle) || expired_.contains(handle));
    entries_.emplace(handle, Entry{files, of, subvolume, peer, connection, lease, now + lease});
  }
  return handle;
}

absl::Status FileHandles::MissingLocked(uint64_t handle) const {
  if (expired_.contains(handle)) {
    return WithServerReason(
        absl::NotFoundError(absl::StrCat("EBADF: file handle ", handle,
                                         " expired (unused for longer than its lease, or its "
                                         "connection closed); open it again")),
        "EBADF");
  }
  return WithServerReason(absl::NotFoundError(absl::StrCat("EBADF: no open file handle ", handle,
                                                           " (closed, or never opened)")),
                          "EBADF");
}

void FileHandles::RemoveLocked(uint64_t handle, const Entry& e, bool expired) {
  auto it = open_per_peer_.find(e.peer);
  if (it != open_per_peer_.end() && --it->second <= 0) open_per_peer_.erase(it);
  if (expired) {
    ++expired_total_;
    expired_.insert(handle);
    expired_order_.push_back(handle);
    while (expired_order_.size() > kRememberExpired) {
      expired_.erase(expired_order_.front());
      expired_order_.pop_front();
    }
  }
  entries_.erase(handle);
}

absl::StatusOr<FileHandles::Target> FileHandles::Use(uint64_t handle, absl::Time now) {
  std::vector<Entry> gone;
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(handle);
    if (it == entries_.end()) return MissingLocked(handle);
    if (now <= it->second.deadline) {
      it->second.deadline = now + it->second.lease;
      return Target{it->second.files, it->second.of.ino, it->second.subvolume};
    }
    // Past its lease (the reaper has not run yet): expired now.
    gone.push_back(it->second);
    RemoveLocked(handle, it->second, /*expired=*/true);
  }
  CloseEngine(gone);
  absl::MutexLock l(&mu_);
  return MissingLocked(handle);
}

absl::Status FileHandles::Close(uint64_t handle, absl::Time now) {
  std::optional<Entry> e;
  bool expired = false;
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(handle);
    if (it == entries_.end()) return MissingLocked(handle);
    e.emplace(it->second);
    expired = now > e->deadline;
    RemoveLocked(handle, *e, expired);
  }
  absl::Status s = e->files.Close(e->of.handle);
  if (!expired) return s;
  absl::MutexLock l(&mu_);
  return MissingLocked(handle);
}

std::vector<FileHandles::Entry> FileHandles::RemoveWhere(
    const std::function<bool(const Entry&)>& doomed, bool expired) {
  std::vector<Entry> gone;
  absl::MutexLock l(&mu_);
  std::vector<uint64_t> handles;
  for (const auto& [h, e] : entries_) {
    if (doomed(e)) handles.push_back(h);
  }
  for (uint64_t h : handles) {
    auto it = entries_.find(h);
    gone.push_back(it->second);
    RemoveLocked(h, it->second, expired);
  }
  return gone;
}

void FileHandles::CloseEngine(std::vector<Entry>& gone) {
  for (Entry& e : gone) e.files.Close(e.of.handle).IgnoreError();  // the store may be closing
}

void FileHandles::ExpireIdle(absl::Time now) {
  std::vector<Entry> gone = RemoveWhere([now](const Entry& e) { return now > e.deadline; }, true);
  CloseEngine(gone);
}

void FileHandles::ExpireClosed(const std::function<bool(const std::string&)>& is_open) {
  std::vector<Entry> gone =
      RemoveWhere([&](const Entry& e) { return !is_open(e.connection); }, true);
  CloseEngine(gone);
}

void FileHandles::CloseAll() {
  std::vector<Entry> gone = RemoveWhere([](const Entry&) { return true; }, false);
  CloseEngine(gone);
}

uint64_t FileHandles::open() const {
  absl::MutexLock l(&mu_);
  return entries_.size();
}

uint64_t FileHandles::expired_total() const {
  absl::MutexLock l(&mu_);
  return expired_total_;
}

}  // namespace server
}  // namespace cowkv
