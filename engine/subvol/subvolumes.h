// Subvolumes: the names over the engine transaction's fs trees.
//
// A subvolume is one fs tree (TxnManager owns the trees, their root items
// and the lazy refcounting that makes a snapshot O(1)) plus a SUBVOL_INFO
// item in the root tree: name, parent (the source of a snapshot), creation
// time. This layer keeps those items, validates names, and drives the
// deletion of a subvolume: its name goes at once, and CleanDeadRoots takes
// its tree apart step by step across commits (resumable: the root item is
// the progress).
//
// Invariants (asserted):
//   1. Every live subvolume has exactly one name, and every name names one
//      live subvolume (by_name_ and live_ agree).
//   2. Ids are never reused: a new subvolume's id is >= kFirstFreeTreeId and
//      was never live (mount refuses a root tree listing a tree at or above
//      the superblock's next_tree_id, so this holds for any image mounted).
//   3. A dying tree has no name.
//
// Every change is made in the running engine transaction; the store commits
// after each one. Not thread-safe: StoreImpl holds its tree lock.
#ifndef COWKV_ENGINE_SUBVOL_SUBVOLUMES_H_
#define COWKV_ENGINE_SUBVOL_SUBVOLUMES_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {

// A subvolume as the root tree records it.
struct SubvolInfo {
  uint64_t id = 0;
  std::string name;
  uint64_t parent_id = 0;  // the source of a snapshot; 0 for a plain subvolume
  uint64_t ctime_ms = 0;   // creation time, Unix milliseconds
  uint64_t flags = 0;      // format::kRootFlagReadOnly
  uint64_t last_snapshot = 0;
  uint64_t generation = 0;  // generation of its root node
  uint64_t ogen = 0;        // generation that created it (btrfs's otransid)
  std::string uuid;         // 16 bytes: SubvolUuid(fsid, id)
  std::string parent_uuid;  // 16 bytes: SubvolUuid(fsid, parent_id); empty for parent_id 0
  std::string received_uuid;         // 16 bytes if received (btrfs's received_uuid), else empty
  uint64_t received_generation = 0;  // the sender's generation (btrfs's stransid)
};

// A subvolume's identity (16 bytes): the store's fsid with its last 8 bytes
// XORed with the big-endian id. Unique within a store (ids are never
// reused) and across stores (fsids are random); not stored.
std::string SubvolUuid(absl::string_view fsid, uint64_t id);

// Subvolume names: 1..255 bytes, no '/' and no NUL.
absl::Status ValidateSubvolName(absl::string_view name);

class Subvolumes {
 public:
  explicit Subvolumes(TxnManager* txn) : txn_(txn) {}
  Subvolumes(const Subvolumes&) = delete;
  Subvolumes& operator=(const Subvolumes&) = delete;

  // Mkfs: names the default tree "default".
  static absl::Status NameDefault(TxnManager* txn);
  // Mount: reads the SUBVOL_INFO items. A live tree without one is named
  // "subvol-<id>"; an item without a live tree is DATA_LOSS.
  absl::Status Load();

  // Ids are never reused.
  absl::StatusOr<uint64_t> Create(absl::string_view name);
  // A snapshot of `source_id` named `name` (see TxnManager::CloneTree).
  absl::StatusOr<uint64_t> Snapshot(uint64_t source_id, absl::string_view name, bool read_only);
  absl::Status Rename(uint64_t id, absl::string_view new_name);
  // Receive (issue 19). BeginReceive makes the hidden tree a receive fills:
  // empty, or a writable snapshot of `parent_id` (0: none), flagged
  // kRootFlagReceiving, with no name: a partial receive. Load keeps the
  // ones a crash left (the store then drops those that hold no receive
  // progress item: not resumable). AdoptReceived names it, makes it
  // read-only and records the sender's identity, in one engine
  // transaction; AbortReceive drops it.
  absl::StatusOr<uint64_t> BeginReceive(uint64_t parent_id);
  absl::Status AdoptReceived(uint64_t id, absl::string_view name, uint64_t parent_id,
                             absl::string_view received_uuid, uint64_t received_generation);
  absl::Status AbortReceive(uint64_t id);
  // The partial receives' trees (no names: the store reads their progress).
  std::vector<uint64_t> PartialReceives() const { return {partial_.begin(), partial_.end()}; }
  bool IsPartialReceive(uint64_t id) const { return partial_.count(id) != 0; }
  // The name goes at once; the tree is dropped by CleanDeadRoots.
  absl::Status Delete(uint64_t id);

  absl::StatusOr<uint64_t> Lookup(absl::string_view name) const;
  absl::StatusOr<SubvolInfo> Get(uint64_t id) const;
  std::vector<SubvolInfo> List() const;
  bool IsReadOnly(uint64_t id) const { return txn_->IsReadOnly(id); }
  // Names of the live snapshots whose source is `id` (btrfs show's
  // "Snapshot(s)"), in id order. Reads no root item.
  std::vector<std::string> SnapshotNamesOf(uint64_t id) const;
  bool IsLive(uint64_t id) const { return live_.count(id) != 0; }

  // The cleaner. Drops up to `max_steps` child pointers of deleted trees
  // (oldest deletion first); returns the steps done.
  absl::StatusOr<int> CleanDeadRoots(int max_steps);
  // Deleted subvolumes whose trees are not fully dropped yet.
  uint64_t dead_roots() const { return txn_->TreeIds(/*dropping=*/true).size(); }
  bool HasDeadRoots() const { return dead_roots() > 0; }

 private:
  struct Entry {
    std::string name;
    uint64_t parent_id = 0;
    uint64_t ctime_ms = 0;
    uint64_t ogen = 0;
    std::string received_uuid;
    uint64_t received_generation = 0;
  };
  absl::Status CheckNewName(absl::string_view name) const;
  // Writes `id`'s SUBVOL_INFO item (space reserved by the caller).
  absl::Status PutInfo(uint64_t id, const Entry& e);
  // Records a new subvolume (Create, Snapshot) in live_ and by_name_.
  void AddLive(uint64_t id, Entry e);
  void DCheckNames() const;

  TxnManager* const txn_;
  std::map<uint64_t, Entry> live_;
  std::map<std::string, uint64_t, std::less<>> by_name_;
  std::set<uint64_t> partial_;  // never in live_
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_SUBVOL_SUBVOLUMES_H_
