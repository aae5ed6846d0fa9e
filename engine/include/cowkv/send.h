// Send and receive of read-only snapshots (issue 19; docs/design.md "Send
// and receive", docs/format.md "Send stream"):
//
//   SendOptions o{"snap-2", "snap-1"};     // incremental against snap-1
//   COWKV_ASSIGN_OR_RETURN(SendReport r,
//       store->Send(o, [&](absl::string_view bytes) { return out.Write(bytes); }));
//
//   COWKV_ASSIGN_OR_RETURN(std::unique_ptr<ReceiveStream> rs, other->Receive({}));
//   while (...) COWKV_RETURN_IF_ERROR(rs->Write(piece));
//   COWKV_ASSIGN_OR_RETURN(ReceiveReport done, rs->Finish());   // now visible
//
// A stream holds a snapshot's file tree and KV items (with their
// revisions), not its KV history or leases. Receive builds a new read-only
// subvolume that appears only when Finish has verified the whole stream;
// until then, and after any error or a crash, nothing of it is visible.
// Values; thread-safe as the Store is.
#ifndef COWKV_INCLUDE_COWKV_SEND_H_
#define COWKV_INCLUDE_COWKV_SEND_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {

struct SendOptions {
  std::string snapshot;  // a read-only subvolume
  // Empty: a full stream. Else a read-only subvolume of the same lineage
  // (the two share a snapshot ancestor): only the difference is sent.
  std::string parent;
  // A resume token (`cowkv receive --resume-token`): send the rest of the
  // stream a resumable receive stopped in, as a continuation stream. The
  // snapshot and parent are found by the identities in the token (if
  // `snapshot` / `parent` are set they must be those). INVALID_ARGUMENT
  // (RESUME_TOKEN) for a damaged token, NOT_FOUND (RESUME_MISMATCH) when
  // this store has not those snapshots.
  std::string resume_token;
  // Bytes handed to the sink at a time (at most this plus one record,
  // 128 KiB); the store's locks are released between pieces.
  size_t piece_bytes = 256 * 1024;
};

// Receives each piece of the stream in order; an error stops the send.
using SendSink = std::function<absl::Status(absl::string_view bytes)>;

struct SendReport {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t items = 0;  // items sent whole, as extents or as clones
  uint64_t deletes = 0;
  uint64_t clones = 0;  // items whose extent the receiver already has
  uint64_t data_bytes = 0;
  uint64_t nodes_read = 0;        // tree nodes the comparison read
  uint64_t subtrees_skipped = 0;  // shared subtrees it did not read
};

struct ReceiveOptions {
  std::string name;      // empty: the sender's snapshot name
  bool dry_run = false;  // check the stream and its parent; write nothing
  // Keep what arrived when the receive fails or is cut (client gone,
  // truncated or damaged stream, crash) as a partial receive that a
  // continuation stream (SendOptions::resume_token) completes; see
  // PartialReceive. A continuation stream is always received so.
  bool resumable = false;
};

// A resumable receive that stopped before its end (Store::PartialReceives):
// hidden, named by the subvolume it will become. Receive a continuation
// stream made from `token` into `name` to finish it, or drop it with
// Store::AbortPartialReceive. A new receive into `name` is refused
// (ALREADY_EXISTS, PARTIAL_RECEIVE) while it exists.
struct PartialReceive {
  std::string name;
  std::string token;     // the resume token (docs/format.md "Resume token")
  uint64_t records = 0;  // records applied so far, the header included
  uint64_t bytes = 0;    // stream bytes applied so far
  std::string uuid;      // the snapshot being received (32 hex digits)
  uint64_t generation = 0;
  std::string parent_uuid;  // its parent (incremental streams), else empty
  bool in_use = false;      // a receive is writing to it now
};

struct ReceiveReport {
  std::string name;  // the subvolume made (dry run: what it would be called)
  uint64_t id = 0;   // 0 for a dry run
  bool incremental = false;
  std::string parent;  // the local parent's name (incremental streams)
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t items = 0;
  uint64_t deletes = 0;
  uint64_t clones = 0;
  uint64_t data_bytes = 0;
};

// One receive in progress. Write the stream's bytes in order (any piece
// sizes), then Finish. Dropping it unfinished (or any error) abandons the
// receive: the hidden subvolume is deleted. It must not outlive the Store
// (drop it before Close; a receive cut short by Close is dropped at the
// next mount). One thread at a time.
class ReceiveStream {
 public:
  virtual ~ReceiveStream() = default;
  virtual absl::Status Write(absl::string_view bytes) = 0;
  virtual absl::StatusOr<ReceiveReport> Finish() = 0;
};

// `cowkv subvolume digest`: SHA-256 over a subvolume's file items, KV items
// and file data (docs/format.md "Subvolume digest").
struct SubvolumeDigest {
  std::string sha256_hex;
  uint64_t items = 0;
  uint64_t data_bytes = 0;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_SEND_H_
