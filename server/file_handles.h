// FileHandles: the server's open files (Files.Open, Files.CreateTmpfile ..
// Files.Close), each an engine handle (Files::Open) behind a random 64-bit
// number with a lease, as interactive transactions have (txn_registry.h):
//
//   Open/CreateTmpfile      Use() by a data call, Stat or Fsync renews it
//   ---------------------> open ----------------------------------+
//                            |  ^_________________________________|
//                            +-- Close() -----------------------> closed (removed)
//                            +-- ExpireIdle() past the lease ---> expired (removed,
//                            |                                    remembered)
//                            +-- ExpireClosed() its connection -> expired
//                            |   is gone
//                            +-- CloseAll() (server stop) ------> closed
//
// Removing an entry closes its engine handle (the last one of an orphan
// deletes the file), outside the registry's lock.
//
// Invariants: an entry is in `entries_` iff it is open and its engine
// handle is open; open_per_peer_[p] is the number of open entries of
// client p (its address), never over Limits::per_peer, and entries_ never
// over Limits::total.
//
// Errors: an unknown, closed or expired handle is NOT_FOUND "EBADF: ..."
// (the message says which); over a limit RESOURCE_EXHAUSTED "EMFILE: ..."
// (per client) or "ENFILE: ..." (server), ErrorInfo reason TOO_MANY_FILES.
//
// Thread-safe.
#ifndef COWKV_SERVER_FILE_HANDLES_H_
#define COWKV_SERVER_FILE_HANDLES_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cowkv/store.h"

namespace cowkv {
namespace server {

class FileHandles {
 public:
  struct Limits {
    int per_peer;
    int total;
  };
  // What a handle names: the subvolume's files and the inode.
  struct Target {
    Files files;
    uint64_t ino = 0;
    std::string subvolume;  // its name, for access checks
  };

  explicit FileHandles(Limits limits) : limits_(limits) {}
  ~FileHandles() { CloseAll(); }
  FileHandles(const FileHandles&) = delete;
  FileHandles& operator=(const FileHandles&) = delete;

  // Registers engine handle `of` on `files` for client `identity` on
  // `connection`; over a limit `of` is closed and RESOURCE_EXHAUSTED
  // returned.
  absl::StatusOr<uint64_t> Add(const std::string& identity, const std::string& connection,
                               const std::string& subvolume, Files files, OpenFile of,
                               absl::Duration lease, absl::Time now);
  // The handle's target; renews its lease.
  absl::StatusOr<Target> Use(uint64_t handle, absl::Time now);
  // Closes the handle (its engine handle's Close status).
  absl::Status Close(uint64_t handle, absl::Time now);

  void ExpireIdle(absl::Time now);
  void ExpireClosed(const std::function<bool(const std::string& connection)>& is_open);
  void CloseAll();

  uint64_t open() const;
  uint64_t expired_total() const;

  static constexpr size_t kRememberExpired = 4096;

 private:
  struct Entry {
    Files files;
    OpenFile of;
    std::string subvolume;
    std::string peer;
    std::string connection;
    absl::Duration lease;
    absl::Time deadline;
  };
  // Removes the entries `doomed` picks; returns them for closing.
  std::vector<Entry> RemoveWhere(const std::function<bool(const Entry&)>& doomed, bool expired)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveLocked(uint64_t handle, const Entry& e, bool expired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status MissingLocked(uint64_t handle) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void CloseEngine(std::vector<Entry>& gone);

  const Limits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int> open_per_peer_ ABSL_GUARDED_BY(mu_);
  std::deque<uint64_t> expired_order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> expired_ ABSL_GUARDED_BY(mu_);
  uint64_t expired_total_ ABSL_GUARDED_BY(mu_) = 0;
  absl::BitGen rng_ ABSL_GUARDED_BY(mu_);
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_FILE_HANDLES_H_
