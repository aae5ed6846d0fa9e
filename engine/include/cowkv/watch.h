// Watch: the changes of a subvolume's key space in revision order, read
// from its KV history (kv/history_item.h), as etcd's watch events. A
// Subvolume reads them with ReadEvents; the Store tells when the durable
// revision advances (WaitDurable), so that a watcher is only ever shown
// changes that survive a crash: after a restart, a watcher that resumes at
// the revision after its last event gets exactly the durable changes that
// followed, none lost and none of a write that did not survive.
#ifndef COWKV_INCLUDE_COWKV_WATCH_H_
#define COWKV_INCLUDE_COWKV_WATCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "cowkv/kv.h"

namespace cowkv {

// One change of one key (etcd's mvccpb.Event).
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  // kPut: the key as the change left it (value and revisions). kDelete:
  // the key, with mod_revision the delete's revision (everything else
  // zero), as etcd reports a delete.
  KeyValue kv;
  // The key before the change (EventsRequest::prev_kv; absent when the
  // change created the key).
  bool has_prev = false;
  KeyValue prev_kv;
  uint64_t revision() const { return kv.mod_revision; }
};

struct EventsRequest {
  // The first revision read; revisions at or below the history's compact
  // revision are gone (OUT_OF_RANGE, ErrorReason::kCompacted, with the
  // oldest revision still readable, compact revision + 1, in the payload
  // kCompactRevisionPayloadUrl: a watcher restarts from there).
  uint64_t from_revision = 1;
  // The last revision read (inclusive). 0: the durable revision
  // (Store::Durable); past the current revision: OUT_OF_RANGE
  // (kFutureRevision).
  uint64_t to_revision = 0;
  // The keys, as RangeRequest's: [start, end) (empty end: through the last
  // key), or every key with `prefix`.
  std::string start;
  std::string end;
  std::string prefix;
  bool prev_kv = false;
  // 0 = no bound. Else the read stops at the first revision boundary
  // after this many events (a revision's events are never split; the
  // first revision is always read whole) and sets `more`.
  uint64_t max_events = 0;
};

struct EventsResult {
  std::vector<WatchEvent> events;  // revision order; a revision's in key order
  // Where the next read starts: to_revision + 1, or the first revision not
  // read when `more`.
  uint64_t next_revision = 0;
  bool more = false;
};

// What Store::WaitDurable waits on. `revision`: every change at or below
// it is durable (a log sync or engine commit covers it). `epoch` moves
// whenever `revision` advances, a subvolume is deleted (its watchers must
// end: ReadEvents answers NOT_FOUND for it), or the store closes.
struct DurableState {
  uint64_t revision = 0;
  // Every change at or below it was sealed by an engine commit: what file
  // events are shown up to (FileEventsRequest), since file changes are made
  // durable by commits only while their events are recorded.
  uint64_t committed_revision = 0;
  uint64_t epoch = 0;
  bool closed = false;
};

// File events (Subvolume::ReadFileEvents; docs/design.md "File watch"):
// the changes of a subvolume's file tree, as an inotify-like feed on paths,
// numbered by the store-wide revision (a file change takes a revision of
// its own while its events are recorded). They are recorded only while the
// subvolume has file watchers (Subvolume::StartFileEvents): a file tree
// nobody watches writes nothing for them.
struct FileEvent {
  // The values are the on-disk ones (docs/format.md "File events").
  enum class Type : uint8_t {
    kCreate = 1,  // a regular file (create, O_TMPFILE's first name is kLink)
    kMkdir = 2,
    kSymlink = 3,
    kLink = 4,    // a new name of an existing inode
    kUnlink = 5,  // a name of a file or symlink went
    kRmdir = 6,
    kRename = 7,    // path -> new_path (over new_path's old inode, if any)
    kExchange = 8,  // path <-> new_path (RENAME_EXCHANGE)
    kModify = 9,    // data: write, truncate, fallocate, clone into
    kAttrib = 10,   // setattr (mode, owner, times; a size change is kModify)
    kXattr = 11,    // an extended attribute set or removed
  };
  Type type = Type::kModify;
  uint64_t revision = 0;
  uint64_t ino = 0;  // the inode the event is about (kExchange: path's)
  // Relative to the subvolume's root, without a leading '/' ("" is the
  // root). An inode's data or attribute change names one of its names: the
  // first of its first INODE_REF item (docs/design.md "File watch").
  std::string path;
  std::string new_path;  // kRename, kExchange
  // The paths did not fit an item (two paths of up to 4096 bytes in a
  // small node): both are empty; the watcher should rescan (inotify's
  // IN_Q_OVERFLOW).
  bool paths_lost = false;
};

struct FileEventsRequest {
  // The first revision read. Events are kept from the subvolume's span
  // start (the revision StartFileEvents answered when recording began) and
  // above its file-event floor (compaction): an older start is OUT_OF_RANGE
  // (ErrorReason::kCompacted, the oldest readable revision in the payload
  // kCompactRevisionPayloadUrl), as EventsRequest's.
  uint64_t from_revision = 1;
  // The last revision read (inclusive). 0: DurableState::committed_revision.
  uint64_t to_revision = 0;
  // Paths under it: the path itself or below it ('/'-separated components;
  // leading and trailing '/' ignored; empty: every path). A rename or
  // exchange matches when either of its paths does.
  std::string prefix;
  // As EventsRequest::max_events (a revision's events are never split).
  uint64_t max_events = 0;
};

struct FileEventsResult {
  std::vector<FileEvent> events;  // revision order
  uint64_t next_revision = 0;     // as EventsResult's
  bool more = false;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_WATCH_H_
