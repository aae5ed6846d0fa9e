// Receiver: a send stream's bytes, as they arrive, checked record by record
// and applied to a ReceiveTarget (the hidden tree the store receives into).
//
// Checks, before anything of a record is applied: its frame (size bound,
// crc32c, reserved bytes, fields), its place (kHeader first and once;
// kData only inside an extent and never beyond its length; item keys
// strictly ascending and inside the file or KV items; kEnd last), and for
// each extent the crc over its bytes against the item's. kEnd must repeat
// the count of records before it and the SHA-256 of every stream byte
// before it. A stream that stops before kEnd is truncated (Finish).
// Errors: DATA_LOSS / kStreamCorrupt for a damaged or truncated stream,
// FAILED_PRECONDITION / kStreamVersion for a newer format, kParentMismatch
// when a clone's source differs from what the stream says.
//
// Resume (docs/format.md "Resume token"): a continuation stream (version
// 2) starts with kResume instead of kHeader; Step then returns kResume,
// and the owner, having found the partial receive the token names, calls
// ContinueFrom with the header and position it had stored. Position() is
// where a resume would start (valid when at_boundary()).
//
// Memory: the input buffer holds at most one record plus what one Feed
// brings (the caller bounds that); extents are written chunk by chunk.
//
// Thread safety: none; one receive at a time per Receiver. The caller
// holds whatever locks the target needs around Step.
#ifndef COWKV_ENGINE_SEND_RECEIVER_H_
#define COWKV_ENGINE_SEND_RECEIVER_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/format/items.h"
#include "engine/send/resume_token.h"
#include "engine/send/sha256.h"
#include "engine/send/stream_format.h"

namespace cowkv {
namespace send {

// Where received items go. The store implements it over the hidden tree.
class ReceiveTarget {
 public:
  virtual ~ReceiveTarget() = default;
  // The item at `key` in the tree being received, and in the parent
  // snapshot (incremental streams only).
  virtual absl::StatusOr<std::optional<std::string>> Get(absl::string_view key) = 0;
  virtual absl::StatusOr<std::optional<std::string>> GetParent(absl::string_view key) = 0;
  // Puts (value set) or deletes an item, keeping data references right;
  // `first_ref`: the value's data extent was just allocated here.
  virtual absl::Status Apply(absl::string_view key, const std::optional<std::string>& value,
                             bool first_ref) = 0;
  // A data extent of `len` bytes (sector-rounded), written chunk by chunk.
  virtual absl::StatusOr<format::DataRef> AllocData(uint64_t len) = 0;
  virtual absl::Status WriteDataAt(const format::DataRef& d, uint64_t offset,
                                   absl::string_view bytes) = 0;
  // Gives back an extent no item took.
  virtual void ReleaseData(const format::DataRef& d) = 0;
};

struct ReceiveStats {
  uint64_t records = 0;
  uint64_t bytes = 0;
  uint64_t items = 0;
  uint64_t deletes = 0;
  uint64_t clones = 0;
  uint64_t data_bytes = 0;
};

class Receiver {
 public:
  enum class Event { kNeedMore, kHeader, kResume, kRecord, kEnd };

  Receiver() = default;
  Receiver(const Receiver&) = delete;
  Receiver& operator=(const Receiver&) = delete;
  // The owner calls Abort before the target goes (the destructor does not
  // touch the target).
  ~Receiver() = default;

  // Appends input. Bytes after kEnd are DATA_LOSS.
  absl::Status Feed(absl::string_view bytes);
  // Parses (and, with a target, applies) the next record.
  absl::StatusOr<Event> Step();
  // After kHeader: where records go; null = check only (a dry run).
  void SetTarget(ReceiveTarget* target) { target_ = target; }
  // Once the input ended: OK only after kEnd with nothing left over.
  absl::Status Finish() const;
  // Gives back an extent allocated for a record not finished.
  void Abort();

  // After kResume: the token it carried (binary form, unchecked).
  const std::string& resume_token() const { return resume_token_; }
  // After kResume: continue the stream `header` from `p`.
  absl::Status ContinueFrom(const StreamHeader& header, const ResumePoint& p);
  // Between records, outside any extent: where a resume would start.
  bool at_boundary() const { return header_seen_ && !pending_.has_value() && !end_seen_; }
  // The position now (name left empty); meaningful when at_boundary().
  ResumePoint Position() const;

  bool header_seen() const { return header_seen_; }
  const StreamHeader& header() const { return header_; }
  ReceiveStats stats() const { return stats_; }

 private:
  struct Pending {
    std::string key;
    std::string value;
    format::DataRef ref;    // the sender's
    format::DataRef local;  // allocated here (len 0 in a dry run)
    uint64_t offset = 0;
    uint32_t crc = 0;
  };
  absl::Status CheckOrder(const Record& r);
  absl::Status ApplyRecord(const Record& r);
  absl::Status BeginExtent(const Record& r, const format::DataRef& ref);
  absl::Status ApplyData(absl::string_view chunk);
  absl::Status ApplyClone(const Record& r, const format::DataRef& ref);
  absl::Status CheckEnd(const Record& r);

  ReceiveTarget* target_ = nullptr;
  std::string buf_;
  size_t pos_ = 0;
  bool preamble_seen_ = false;
  uint32_t version_ = 0;
  uint64_t consumed_ = 0;  // stream bytes before pos_ (a continuation: of the whole stream)
  std::string resume_token_;
  bool header_seen_ = false;
  bool end_seen_ = false;
  StreamHeader header_;
  std::string last_key_;
  std::optional<Pending> pending_;
  Sha256 hash_;
  ReceiveStats stats_;
};

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_RECEIVER_H_
