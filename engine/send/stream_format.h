// The send stream's bytes (docs/format.md "Send stream"): a 16-byte
// preamble, then records, each framed as
//
//   u32 LE payload_len | u16 LE type | u16 zero | u32 LE crc32c | payload
//
// where the crc covers the first 8 frame bytes and the payload. Every
// integer is little-endian. This file encodes and decodes single records
// and checks every field a decoder reads (bounds, reserved bytes, sizes);
// the order of records is the sender's and the receiver's business.
#ifndef COWKV_ENGINE_SEND_STREAM_FORMAT_H_
#define COWKV_ENGINE_SEND_STREAM_FORMAT_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace send {

// "COWKVSND", then u32 version, u32 zero. The version sits outside the
// record framing so that a future framing is still refused by version.
inline constexpr char kStreamMagic[8] = {'C', 'O', 'W', 'K', 'V', 'S', 'N', 'D'};
inline constexpr size_t kPreambleSize = 16;
// Version 1: a whole stream (kHeader first). Version 2: a continuation of
// an interrupted one (kResume first; docs/format.md "Resume token"). A
// sender writes 1 unless it resumes; this receiver reads both.
inline constexpr uint32_t kStreamVersion = 2;
inline constexpr uint32_t kContinuationVersion = 2;
inline constexpr size_t kFrameHeaderSize = 12;
// Largest payload a record may carry: a DATA chunk is at most
// kMaxDataChunk; an item record at most a key (1032 bytes) and a leaf
// value (< 32 KiB at the largest nodesize) and 2 KiB of fields.
inline constexpr size_t kMaxDataChunk = 64 * 1024;
inline constexpr size_t kMaxRecordPayload = 128 * 1024;
static_assert(kMaxDataChunk < kMaxRecordPayload);
inline constexpr size_t kUuidSize = 16;
using Uuid = std::array<uint8_t, kUuidSize>;

enum class RecordType : uint16_t {
  kHeader = 1,  // first record: the stream's identity (StreamHeader)
  kPut = 2,     // an item with no data extent: its key and whole value
  kDelete = 3,  // an item that the parent has and the snapshot has not
  kExtent = 4,  // an item with a data extent whose bytes follow as kData
  kData = 5,    // up to kMaxDataChunk bytes of the extent being sent
  kClone = 6,   // an item sharing a data extent with the parent or the stream
  kEnd = 7,     // last record: record count and the stream's SHA-256
  kResume = 8,  // a continuation's first record: the resume token (binary form)
};
const char* RecordTypeName(RecordType t);

// kHeader's payload.
struct StreamHeader {
  uint32_t nodesize = 0;
  uint32_t sectorsize = 0;
  Uuid uuid{};            // the snapshot's identity (received_uuid if it was received)
  uint64_t stransid = 0;  // its generation at the sender (root node generation)
  Uuid parent_uuid{};     // all zero: a full stream
  uint64_t parent_stransid = 0;
  uint64_t ctime_ms = 0;  // the snapshot's creation time
  std::string name;       // the snapshot's name (receive's default name)
  bool incremental() const { return parent_uuid != Uuid{}; }
};

// Where a kClone's extent is found on the receiving side.
enum class CloneSource : uint8_t { kParent = 1, kStream = 2 };

// One decoded record. Views point into the buffer given to DecodeRecord.
struct Record {
  RecordType type = RecordType::kEnd;
  StreamHeader header;                        // kHeader
  absl::string_view key;                      // kPut, kDelete, kExtent, kClone
  absl::string_view value;                    // kPut, kExtent, kClone (data bytenr zeroed)
  uint64_t data_len = 0;                      // kExtent: bytes of kData that follow
  absl::string_view data;                     // kData
  CloneSource source = CloneSource::kParent;  // kClone
  absl::string_view source_key;               // kClone
  uint64_t records = 0;                       // kEnd: records before it, kHeader included
  std::array<uint8_t, 32> digest{};           // kEnd: SHA-256 of every byte before the kEnd frame
  absl::string_view token;                    // kResume: the binary resume token
};

std::string EncodePreamble(uint32_t version = 1);
// The version of a preamble CheckPreamble accepted.
uint32_t PreambleVersion(absl::string_view p);
// INVALID_ARGUMENT (kStreamCorrupt) for something that is no send stream,
// FAILED_PRECONDITION (kStreamVersion) for a newer version.
absl::Status CheckPreamble(absl::string_view p);

// Appends one framed record to `out`.
void AppendHeader(const StreamHeader& h, std::string* out);
void AppendPut(absl::string_view key, absl::string_view value, std::string* out);
void AppendDelete(absl::string_view key, std::string* out);
void AppendExtent(absl::string_view key, absl::string_view value, uint64_t data_len,
                  std::string* out);
void AppendData(absl::string_view chunk, std::string* out);
void AppendClone(absl::string_view key, absl::string_view value, CloneSource source,
                 absl::string_view source_key, std::string* out);
void AppendResume(absl::string_view token, std::string* out);
void AppendEnd(uint64_t records, const std::array<uint8_t, 32>& digest, std::string* out);

// The payload length a frame header announces, after checking the frame's
// size bound (DATA_LOSS, kStreamCorrupt, past kMaxRecordPayload).
absl::StatusOr<size_t> FramePayloadLen(absl::string_view frame_header);
// Decodes one whole frame (header and payload): its crc, type and every
// field. DATA_LOSS with kStreamCorrupt on any mismatch, naming `index`.
absl::StatusOr<Record> DecodeRecord(absl::string_view frame, uint64_t index);

// The stream error constructors (code and reason set once, here).
absl::Status StreamCorrupt(absl::string_view what);
absl::Status ParentMismatch(absl::string_view what, bool missing);

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_STREAM_FORMAT_H_
