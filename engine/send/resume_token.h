// Resume tokens (issue 19; docs/format.md "Resume token"): where a
// resumable receive stopped, as ZFS's `receive -s` / `send -t TOKEN`.
//
// A ResumePoint names the stream (the snapshot's and the parent's identity
// as the stream's header has them), the receiver's position in it at a
// record boundary outside any extent (records applied, stream bytes, the
// last item key) and the running SHA-256 state of those bytes, so that a
// continuation's END still verifies the whole stream; and the name the
// partial receive will take.
//
// Binary form (the continuation's RESUME record and the partial receive's
// progress item carry it): "CKRT", u16 LE version (1), u16 zero, uuid[16],
// u64 stransid, parent_uuid[16], u64 parent_stransid, u64 records, u64
// offset, then u16-length-prefixed last key, SHA-256 state and name, and a
// u32 LE crc32c of every byte before it. Text form (what users copy): the
// binary form in URL-safe base64 without padding. Decoding checks every
// field; any damage is INVALID_ARGUMENT with reason RESUME_TOKEN.
#ifndef COWKV_ENGINE_SEND_RESUME_TOKEN_H_
#define COWKV_ENGINE_SEND_RESUME_TOKEN_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/send/stream_format.h"

namespace cowkv {
namespace send {

inline constexpr uint16_t kResumeTokenVersion = 1;
// Largest binary token: the fixed fields, a key, a hash state, a name.
inline constexpr size_t kMaxResumeTokenBytes = 96 + 1100 + 120 + 260;

struct ResumePoint {
  Uuid uuid{};
  uint64_t stransid = 0;
  Uuid parent_uuid{};
  uint64_t parent_stransid = 0;
  uint64_t records = 0;   // records before the position, the header included (>= 1)
  uint64_t offset = 0;    // stream bytes before the position, the preamble included
  std::string last_key;   // the last item applied; empty: none yet
  std::string sha_state;  // Sha256::State() of those `offset` bytes
  std::string name;       // the partial receive's (and the subvolume-to-be's) name

  bool operator==(const ResumePoint& o) const {
    return uuid == o.uuid && stransid == o.stransid && parent_uuid == o.parent_uuid &&
           parent_stransid == o.parent_stransid && records == o.records && offset == o.offset &&
           last_key == o.last_key && sha_state == o.sha_state && name == o.name;
  }
  bool operator!=(const ResumePoint& o) const { return !(*this == o); }
};

std::string EncodeResumePoint(const ResumePoint& p);
absl::StatusOr<ResumePoint> DecodeResumePoint(absl::string_view bytes);
// The text form and back.
std::string ResumeTokenText(const ResumePoint& p);
absl::StatusOr<ResumePoint> ParseResumeToken(absl::string_view text);

// A partial receive's progress item (format::kReceiveProgressKey in its
// tree): u32 LE length and the binary ResumePoint, u64 LE local parent id
// (0: a full stream), then the stream's kHeader record, framed.
struct ReceiveProgress {
  ResumePoint point;
  uint64_t parent_id = 0;
  StreamHeader header;
};
std::string EncodeReceiveProgress(const ResumePoint& p, uint64_t parent_id,
                                  const StreamHeader& header);
// DATA_LOSS (reason CORRUPTION) for an item that does not decode.
absl::StatusOr<ReceiveProgress> DecodeReceiveProgress(absl::string_view v);

// INVALID_ARGUMENT with reason RESUME_TOKEN.
absl::Status BadResumeToken(absl::string_view what);
// `missing`: NOT_FOUND, else FAILED_PRECONDITION; reason RESUME_MISMATCH.
absl::Status ResumeMismatch(absl::string_view what, bool missing);

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_RESUME_TOKEN_H_
