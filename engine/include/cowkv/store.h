// cowkv engine facade. Public headers, by noun (this one includes them all):
//   options.h  kv.h  files.h  stats.h  tools.h  device.h  errors.h  limits.h
//   status_macros.h  subvolumes.h
//
//   Store::Mkfs(device, {})            formats a device
//   Store::Open(device or path, opts)  mounts it (newest valid superblock)
//   store->Put/Get/Delete/NewIterator  operate on the default tree
//   store->Begin()                     a handle that joins the running engine
//                                      transaction; a commit waits for it
//   store->Commit()                    commits the engine transaction durably
//   Check(device)                      the library form of `cowkv check`
//   DumpTree(device, ...)              the library form of `cowkv dump-tree`
//
// Every method is thread-safe. Errors are absl::Status with these codes:
//   INVALID_ARGUMENT  bad key/value size or option;
//   NOT_FOUND         key absent;
//   RESOURCE_EXHAUSTED no space left on the device (nothing was changed);
//   DATA_LOSS         a checksum or structure check failed on a read;
//   FAILED_PRECONDITION the store is read-only (opened so, or after an I/O
//                     error during commit: reopen to recover);
//   INTERNAL / UNAVAILABLE  I/O errors from the device.
#ifndef COWKV_INCLUDE_COWKV_STORE_H_
#define COWKV_INCLUDE_COWKV_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cowkv/device.h"
#include "cowkv/errors.h"
#include "cowkv/files.h"
#include "cowkv/kv.h"
#include "cowkv/lease.h"
#include "cowkv/limits.h"
#include "cowkv/options.h"
#include "cowkv/send.h"
#include "cowkv/stats.h"
#include "cowkv/status_macros.h"
#include "cowkv/subvolumes.h"
#include "cowkv/tools.h"
#include "cowkv/watch.h"

namespace cowkv {

class StoreImpl;

// A subvolume: a namespace with its own tree (btrfs). Snapshots are
// subvolumes created from another's root, sharing every node until written.
struct SubvolumeInfo {
  uint64_t id = 0;             // never reused
  std::string name;            // 1..255 bytes, no '/' or NUL
  uint64_t parent_id = 0;      // snapshot source; 0 for a plain subvolume
  uint64_t generation = 0;     // generation of its root node
  uint64_t last_snapshot = 0;  // generation of the last snapshot taken of it
  uint64_t created_unix_ms = 0;
  bool read_only = false;
  uint64_t creation_generation = 0;  // generation that created it (btrfs's ogen)
  std::string uuid;                  // 32 hex digits: the subvolume's identity
  // A snapshot: the uuid of its source (btrfs's parent_uuid); else empty.
  std::string parent_uuid;
  // Received subvolumes (issue 19): the sender's identity (32 hex digits)
  // and generation there (btrfs's received_uuid, stransid); else empty, 0.
  std::string received_uuid;
  uint64_t received_generation = 0;
  // ShowSubvolume only: names of the live snapshots taken of this
  // subvolume (parent_id == id), in id order; empty in listings.
  std::vector<std::string> snapshots;
};

// A handle on one subvolume's key space; cheap, valid while the Store is
// open. Writes to a read-only snapshot are FAILED_PRECONDITION. Each Put or
// Delete is a transaction of its own with a new revision.
// The transaction retry rule (docs/api.md "Retrying transactions";
// clients/conformance/retry_rule.json holds the same numbers): at most
// kTxnMaxAttempts runs; before retry k (k >= 1) a wait uniform in
// [d/2, d], d = min(1 s, 10 ms * 2^(k-1)), picked by `random`.
inline constexpr int kTxnMaxAttempts = 10;
absl::Duration TxnRetryWait(int k, uint64_t random);

class Subvolume {
 public:
  uint64_t id() const { return id_; }
  // The subvolume's file tree.
  Files files() const { return Files(store_, id_); }
  absl::Status Put(absl::string_view key, absl::string_view value,
                   Durability durability = Durability::kDefault);
  absl::StatusOr<std::string> Get(absl::string_view key);
  // NOT_FOUND if absent.
  absl::Status Delete(absl::string_view key, Durability durability = Durability::kDefault);
  // The same three with revisions, as etcd answers them: PutItem and
  // DeleteItem return the write's revision (a durable DeleteItem of an
  // absent key is NOT_FOUND once what it saw is durable); GetItem returns
  // the key's revisions, and in `*revision` (when given) the store revision
  // the read saw. A value larger than `max_value_load` (0 = no bound) is not
  // loaded: it comes back empty with value_size set.
  absl::StatusOr<uint64_t> PutItem(absl::string_view key, absl::string_view value,
                                   Durability durability = Durability::kDefault);
  absl::StatusOr<KeyValue> GetItem(absl::string_view key, uint64_t max_value_load = 0,
                                   uint64_t* revision = nullptr);
  absl::StatusOr<uint64_t> DeleteItem(absl::string_view key,
                                      Durability durability = Durability::kDefault);
  // A consistent read at one revision (RangeRequest::revision: a past one).
  absl::StatusOr<RangeResult> Range(const RangeRequest& req);
  // The key as it was at `revision` (0: the latest), from the subvolume's
  // history, as etcd's Range with a revision: NOT_FOUND if it was absent;
  // OUT_OF_RANGE (ErrorReason::kCompacted, the compact revision in the
  // payload kCompactRevisionPayloadUrl) if the history no longer keeps that
  // revision; OUT_OF_RANGE (kFutureRevision) past the current revision.
  absl::StatusOr<KeyValue> GetItemAt(absl::string_view key, uint64_t revision,
                                     uint64_t max_value_load = 0);
  // The oldest revision reads may ask for (0 before any compaction).
  absl::StatusOr<uint64_t> CompactRevision();
  // Drops the history of revisions below `revision` (etcd's Compact):
  // `revision` stays readable, older ones become OUT_OF_RANGE. OUT_OF_RANGE
  // (kCompacted) if the history was compacted past it already,
  // (kFutureRevision) past the current revision. The history is also
  // compacted automatically to Options::history_revisions / history_bytes.
  absl::Status Compact(uint64_t revision, Durability durability = Durability::kDefault);
  std::unique_ptr<Iterator> NewIterator();
  absl::StatusOr<TxnResponse> Txn(const TxnRequest& req);
  // PutItem, DeleteItem and Txn for a server that must not hold a thread
  // while a write becomes durable. The write is applied on this thread;
  // `done` runs exactly once with the answer the blocking call would give:
  // on this thread when nothing is left to wait for (async durability, or
  // an error); on this thread too, after this thread led the log sync
  // itself, when it is the lone durable writer (nothing else queued or
  // waiting: at most one caller's thread is held so); else from the store's
  // durability thread once the log sync or engine commit covering it is
  // done — one wait for every write queued meanwhile. Keep `done` short:
  // writers queued behind it wait for it.
  using RevisionDone = std::function<void(absl::StatusOr<uint64_t> revision)>;
  using TxnDone = std::function<void(absl::StatusOr<TxnResponse> response)>;
  void PutItemThen(absl::string_view key, absl::string_view value, Durability durability,
                   RevisionDone done);
  void DeleteItemThen(absl::string_view key, Durability durability, RevisionDone done);
  void TxnThen(const TxnRequest& req, TxnDone done);
  absl::StatusOr<std::unique_ptr<KvTransaction>> BeginTransaction();
  // Runs `fn` in a transaction and commits it, retrying ABORTED and
  // OUT_OF_RANGE (too old) up to `max_attempts` runs, waiting
  // TxnRetryWait before each retry (the rule every client keeps, docs/api.md
  // "Retrying transactions"); any other error from `fn` or the commit is
  // returned as is.
  absl::Status RunInTransaction(const std::function<absl::Status(KvTransaction&)>& fn,
                                Durability durability = Durability::kDefault,
                                int max_attempts = kTxnMaxAttempts);

  // Leases (lease.h, etcd's lease API), per subvolume. LeaseGrant returns
  // the id (`id` 0: the store picks one); ALREADY_EXISTS for an id in use,
  // INVALID_ARGUMENT for a TTL outside 1..kMaxLeaseTtlSeconds,
  // RESOURCE_EXHAUSTED (kLimit) past kMaxLeasesPerSubvolume. A lease that
  // does not exist (or whose deadline passed) is NOT_FOUND with reason
  // kLeaseNotFound everywhere. LeaseRevoke deletes the lease and every key
  // attached to it in one revision, and returns it (the current revision
  // when no key was left). LeaseKeepAlive restarts the lease's TTL and
  // returns it (seconds).
  absl::StatusOr<int64_t> LeaseGrant(int64_t ttl_seconds, int64_t id = 0,
                                     Durability durability = Durability::kDefault);
  absl::StatusOr<uint64_t> LeaseRevoke(int64_t id, Durability durability = Durability::kDefault);
  absl::StatusOr<int64_t> LeaseKeepAlive(int64_t id);
  absl::StatusOr<LeaseInfo> LeaseTimeToLive(int64_t id, bool keys = false);
  absl::StatusOr<std::vector<int64_t>> Leases();
  // PutItem attaching the key to `lease` (0: none, as PutItem). NOT_FOUND
  // (kLeaseNotFound) for an unknown lease; RESOURCE_EXHAUSTED (kLimit)
  // past kMaxKeysPerLease or kMaxLeasedKeysPerSubvolume.
  absl::StatusOr<uint64_t> PutItemWithLease(absl::string_view key, absl::string_view value,
                                            int64_t lease,
                                            Durability durability = Durability::kDefault);
  void PutItemWithLeaseThen(absl::string_view key, absl::string_view value, int64_t lease,
                            Durability durability, RevisionDone done);

  // Watch (watch.h): the changes of revisions [from_revision, to_revision]
  // of the keys asked for, from the subvolume's history, as etcd's events.
  // NOT_FOUND once the subvolume is deleted.
  absl::StatusOr<EventsResult> ReadEvents(const EventsRequest& req);

  // File watch (watch.h "File events"; docs/design.md "File watch").
  // StartFileEvents registers one file watcher: from now on every change of
  // the file tree records its event (until StopFileEvents ends the last
  // registration); it answers the span start, the oldest revision whose
  // file events are complete (a watcher may resume at or after it).
  // FAILED_PRECONDITION for a read-only snapshot or store. ReadFileEvents
  // reads them (FAILED_PRECONDITION when nothing is being recorded).
  absl::StatusOr<uint64_t> StartFileEvents();
  void StopFileEvents();
  absl::StatusOr<FileEventsResult> ReadFileEvents(const FileEventsRequest& req);

 private:
  friend class StoreImpl;
  Subvolume(StoreImpl* store, uint64_t id) : store_(store), id_(id) {}
  StoreImpl* store_;
  uint64_t id_;
};

// A handle joined to the running engine transaction (btrfs's
// start_transaction/end_transaction). Everything written through one handle
// lands in the same engine transaction, so it is atomic across a crash. The
// engine transaction cannot commit while a handle is open; End() (or the
// destructor) releases it. It writes the default subvolume's key space
// (each write gets a revision) and is durable only at the engine commit:
// durable KV commits made meanwhile fall back to engine commits, so a log
// replay never shows half a handle's writes.
class Transaction {
 public:
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  absl::Status Put(absl::string_view key, absl::string_view value);
  absl::Status Delete(absl::string_view key);
  absl::StatusOr<std::string> Get(absl::string_view key);
  uint64_t generation() const { return generation_; }
  void End();

 private:
  friend class StoreImpl;
  Transaction(StoreImpl* store, uint64_t generation) : store_(store), generation_(generation) {}
  StoreImpl* store_;
  uint64_t generation_;
  bool ended_ = false;
};

class Store {
 public:
  // Formats `device` (borrowed). Overwrites whatever is there: callers that
  // must not (the CLI) check for an existing filesystem first.
  static absl::Status Mkfs(BlockDevice* device, const MkfsOptions& options);

  // Mounts `device` (borrowed; must outlive the Store).
  static absl::StatusOr<std::unique_ptr<Store>> Open(BlockDevice* device, const Options& options);
  // Opens the file or block device at `path` and mounts it; the Store owns it.
  static absl::StatusOr<std::unique_ptr<Store>> Open(const std::string& path,
                                                     const Options& options);

  ~Store();  // Close() if still open; errors are lost, call Close() to see them.
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Commits pending changes and stops background work. Idempotent.
  absl::Status Close();

  // Key-space operations on the default subvolume (id 5), as Subvolume's.
  absl::Status Put(absl::string_view key, absl::string_view value,
                   Durability durability = Durability::kDefault);
  absl::StatusOr<std::string> Get(absl::string_view key);
  absl::Status Delete(absl::string_view key,
                      Durability durability = Durability::kDefault);  // NOT_FOUND if absent
  std::unique_ptr<Iterator> NewIterator();
  absl::StatusOr<std::unique_ptr<Subvolume>> DefaultSubvolume();

  absl::StatusOr<std::unique_ptr<Transaction>> Begin();

  // Subvolumes. Create, snapshot and rename commit before they return, as
  // btrfs's do; a snapshot sees everything written before the call. The
  // default tree is the subvolume "default" (id 5).
  absl::StatusOr<SubvolumeInfo> CreateSubvolume(absl::string_view name);
  absl::StatusOr<SubvolumeInfo> CreateSnapshot(absl::string_view source, absl::string_view name,
                                               bool read_only);
  absl::Status RenameSubvolume(absl::string_view name, absl::string_view new_name);
  // Renames `name` to `target`, deleting the subvolume `target` names (if
  // any) in the same commit: readers of `target` find the old one or the
  // new one, never nothing (read replicas). Neither may be "default".
  absl::Status ReplaceSubvolume(absl::string_view name, absl::string_view target);
  // Deletes a subvolume: its name is gone when this returns (committed); the
  // cleaner frees its nodes in the background, resuming after a crash.
  absl::Status DeleteSubvolume(absl::string_view name);
  // Runs the cleaner here, up to `max_steps` child pointers (0 = until every
  // deleted subvolume is gone), committing as it goes.
  absl::Status DropDeletedSubvolumes(uint64_t max_steps = 0);
  absl::StatusOr<SubvolumeInfo> ShowSubvolume(absl::string_view name);
  std::vector<SubvolumeInfo> ListSubvolumes();
  absl::StatusOr<std::unique_ptr<Subvolume>> OpenSubvolume(absl::string_view name);
  // The live subvolumes `options` keeps, in its order (cowkv/subvolumes.h).
  absl::StatusOr<std::vector<SubvolumeInfo>> ListSubvolumes(const SubvolumeListOptions& options);
  // Waits until the trees of deleted subvolumes are dropped and their space
  // is free again (btrfs `subvolume sync`), running the cleaner here and
  // committing; returns the ids it waited for, ascending.
  absl::StatusOr<std::vector<uint64_t>> SyncDeletedSubvolumes(const SubvolumeSyncOptions& options);
  // Commits the running engine transaction; on OK everything written before
  // the call is durable. Waits for open handles to End().
  absl::Status Commit();

  StoreStats Stats();
  // Send and receive (cowkv/send.h). Send: NOT_FOUND for an unknown
  // snapshot or parent, FAILED_PRECONDITION when either is writable or they
  // share no lineage. Receive: the errors of docs/api.md "Send and receive".
  absl::StatusOr<SendReport> Send(const SendOptions& options, const SendSink& sink);
  absl::StatusOr<std::unique_ptr<ReceiveStream>> Receive(const ReceiveOptions& options);
  absl::StatusOr<SubvolumeDigest> DigestSubvolume(absl::string_view name);
  // The snapshot and parent a resume token names here (SendOptions with
  // them and the token set); the errors of SendOptions::resume_token.
  absl::StatusOr<SendOptions> ResumeSendOptions(absl::string_view token);
  // Resumable receives that stopped before their end, by name.
  absl::StatusOr<std::vector<PartialReceive>> PartialReceives();
  // Drops the partial receive `name` (committed; the cleaner frees its
  // tree). NOT_FOUND (RESUME_MISMATCH) if there is none, FAILED_PRECONDITION
  // (PARTIAL_RECEIVE) while a receive is writing to it.
  absl::Status AbortPartialReceive(absl::string_view name);
  // Revokes up to `max` expired leases here (each in one commit), as the
  // background expiry does; returns how many (tests with a fake clock).
  absl::StatusOr<int> ExpireLeases(int max = 1 << 20);
  // Watch (watch.h): the durable-revision watermark, and a wait until it
  // moves (or `timeout`).
  DurableState Durable();
  DurableState WaitDurable(const DurableState& seen, absl::Duration timeout);
  uint32_t nodesize() const;
  // Largest KV value this store holds (inline in a node).
  size_t max_value_size() const;

 private:
  explicit Store(std::unique_ptr<StoreImpl> impl);
  std::unique_ptr<StoreImpl> impl_;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_STORE_H_
