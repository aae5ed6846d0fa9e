// FsBackend: what the file namespace needs from the engine, for one
// subvolume, while the caller holds the store's tree lock (exclusive for
// anything that writes, shared for reads).
//
// The fs layer never touches trees, extents or the log directly: it reads
// items, applies batches of item writes (the backend keeps every data
// reference right: an EXTENT_DATA item pointing at a data extent holds one
// reference on it), writes and reads data extents, and notes keys for the
// next log sync. That keeps engine/fs below engine/ (no upward dependency)
// and lets the namespace be tested against the real engine only through
// the store.
#ifndef COWKV_ENGINE_FS_FS_BACKEND_H_
#define COWKV_ENGINE_FS_FS_BACKEND_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/format/items.h"

namespace cowkv {
namespace fs {

// One item write of a batch: a put (*value set) or a delete (nullopt).
// The views point into the caller's batch, which outlives Apply.
// `first_ref`: the item's data extent was just written by WriteData and
// this is its first reference (its allocation becomes an extent item).
struct FsWrite {
  absl::string_view key;
  const std::optional<std::string>* value = nullptr;  // never null
  bool first_ref = false;
  // The item's value before the batch, when the operation read it already
  // (saves Apply a lookup); null = unknown.
  const std::optional<std::string>* old = nullptr;
};

// One file event an operation queues (fs_events.h; cowkv/watch.h's
// FileEvent::Type values in `type`).
struct FileEventRecord {
  uint8_t type = 0;
  uint64_t ino = 0;
  std::string path;
  std::string new_path;
};

// A node on the path from the subvolume root to a leaf (fiemap).
struct PathNode {
  uint64_t bytenr = 0;
  uint64_t generation = 0;
};

class FsBackend {
 public:
  // Return false to stop a scan.
  using ScanFn = std::function<bool(absl::string_view key, absl::string_view value)>;
  // `path`: leaf first, root last.
  using PathScanFn = std::function<bool(absl::string_view key, absl::string_view value,
                                        const std::vector<PathNode>& path)>;

  virtual ~FsBackend() = default;

  virtual uint64_t subvol() const = 0;
  // The running engine transaction.
  virtual uint64_t generation() const = 0;
  virtual bool read_only() const = 0;
  // Largest item value a leaf holds.
  virtual size_t max_value_size() const = 0;

  // The item at `key`, or nullopt.
  virtual absl::StatusOr<std::optional<std::string>> Get(absl::string_view key) = 0;
  // Items with start <= key < end, ascending (descending if `reverse`),
  // until `fn` returns false.
  virtual absl::Status Scan(absl::string_view start, absl::string_view end, bool reverse,
                            const ScanFn& fn) = 0;
  // Ascending, with each item's tree path.
  virtual absl::Status ScanWithPath(absl::string_view start, absl::string_view end,
                                    const PathScanFn& fn) = 0;

  // Applies `writes` in order. Sizes are checked (INVALID_ARGUMENT) and
  // space for all of them reserved first: on either error nothing changed. Any other failure half-way leaves
  // the engine transaction unable to commit (the store goes read-only).
  virtual absl::Status Apply(const std::vector<FsWrite>& writes) = 0;

  // Writes `data` to a fresh data extent (sector-padded with zeros; the
  // ref's crc covers the padded length). Not referenced yet: Apply a write
  // with first_ref, or ReleaseData it.
  virtual absl::StatusOr<format::DataRef> WriteData(absl::string_view data) = 0;
  virtual void ReleaseData(const format::DataRef& d) = 0;
  // Allocates a data extent of `len` bytes (sector-rounded) without
  // writing it (fallocate's preallocated extents: value_len and crc 0).
  // As WriteData: Apply a write with first_ref, or ReleaseData it.
  virtual absl::StatusOr<format::DataRef> AllocData(uint64_t len) = 0;
  // Free bytes of the device now (an upper bound on what AllocData can
  // still grant): fallocate refuses a range larger than this at once
  // rather than allocating extent by extent until ENOSPC.
  virtual uint64_t FreeDataBytes() { return ~uint64_t{0}; }
  // The whole extent, its checksum verified (DATA_LOSS otherwise).
  virtual absl::StatusOr<std::string> ReadData(const format::DataRef& d) = 0;

  // The log: `key` is copied by the next log sync (its item then, or a
  // tombstone).
  virtual void NoteLog(absl::string_view key) = 0;
  // Whether `key` is in the current log chain (seed 004's lookup).
  virtual absl::StatusOr<bool> LogContains(absl::string_view key) = 0;
  // Whether any file key of this subvolume is in the current log chain.
  virtual bool LogHasFsEntries() = 0;

  // File events (docs/design.md "File watch"): whether this operation
  // records them (the subvolume has file watchers), and the queue of events
  // the next Apply writes with its items — in the same reservation, under
  // one new revision — or drops with the backend when no Apply comes.
  virtual bool recording_file_events() const { return false; }
  virtual void AddFileEvent(FileEventRecord ev) { (void)ev; }

  // fiemap: the refcount of a data extent (committed plus queued), and
  // whether a tree block is shared (reachable from more than one root).
  virtual absl::StatusOr<uint64_t> DataExtentRefs(uint64_t bytenr, uint64_t len) = 0;
  virtual absl::StatusOr<bool> TreeBlockShared(const PathNode& node) = 0;
  // Runs `fn`, during which the two calls above may be answered under one
  // hold of the locks they need rather than one per call (a fiemap asks
  // about every extent of a file). `fn` must call no other backend method
  // that writes.
  virtual absl::Status WithExtentReads(absl::FunctionRef<absl::Status()> fn) { return fn(); }
  // Bumped when a snapshot is taken (not-shared answers go stale) and when
  // a root is dropped (shared answers go stale).
  virtual uint64_t snapshot_epoch() const = 0;
  virtual uint64_t drop_epoch() const = 0;
};

}  // namespace fs
}  // namespace cowkv

#endif  // COWKV_ENGINE_FS_FS_BACKEND_H_
