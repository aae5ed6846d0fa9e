#include "engine/send/stream_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"

namespace cowkv {
namespace send {
namespace {

void PutLE16(std::string* out, uint16_t v) {
  char b[2];
  EncodeLE16(b, v);
  out->append(b, 2);
}

void PutBytes16(std::string* out, absl::string_view s) {
  PutLE16(out, static_cast<uint16_t>(s.size()));
  out->append(s.data(), s.size());
}

void PutBytes32(std::string* out, absl::string_view s) {
  PutLE32(out, static_cast<uint32_t>(s.size()));
  out->append(s.data(), s.size());
}

// Frames `payload` as a record of type `t` onto `out`.
void Frame(RecordType t, absl::string_view payload, std::string* out) {
  char h[kFrameHeaderSize];
  EncodeLE32(h, static_cast<uint32_t>(payload.size()));
  EncodeLE16(h + 4, static_cast<uint16_t>(t));
  EncodeLE16(h + 6, 0);
  const uint32_t crc = Crc32cExtend(Crc32c(h, 8), payload.data(), payload.size());
  EncodeLE32(h + 8, crc);
  out->append(h, kFrameHeaderSize);
  out->append(payload.data(), payload.size());
}

// A bounds-checked reader over a record's payload: every read past the end
// turns `ok` false and returns zeros, checked once at the end.
struct Reader {
  absl::string_view in;
  bool ok = true;
  absl::string_view Take(size_t n) {
    if (n > in.size()) {
      ok = false;
      in = {};
      return {};
    }
    absl::string_view out = in.substr(0, n);
    in.remove_prefix(n);
    return out;
  }
  uint8_t U8() {
    absl::string_view b = Take(1);
    return b.empty() ? 0 : static_cast<uint8_t>(b[0]);
  }
  uint16_t LE16() {
    absl::string_view b = Take(2);
    return b.size() == 2 ? DecodeLE16(b.data()) : 0;
  }
  uint32_t LE32() {
    absl::string_view b = Take(4);
    return b.size() == 4 ? DecodeLE32(b.data()) : 0;
  }
  uint64_t LE64() {
    absl::string_view b = Take(8);
    return b.size() == 8 ? DecodeLE64(b.data()) : 0;
  }
  absl::string_view Bytes16() { return Take(LE16()); }
  absl::string_view Bytes32() { return Take(LE32()); }
  template <size_t N>
  void Array(std::array<uint8_t, N>* a) {
    absl::string_view b = Take(N);
    if (b.size() == N) std::memcpy(a->data(), b.data(), N);
  }
};

absl::Status DecodeHeader(Reader& r, StreamHeader* h) {
  h->nodesize = r.LE32();
  h->sectorsize = r.LE32();
  r.Array(&h->uuid);
  h->stransid = r.LE64();
  r.Array(&h->parent_uuid);
  h->parent_stransid = r.LE64();
  h->ctime_ms = r.LE64();
  h->name = std::string(r.Bytes16());
  if (r.ok && (h->nodesize == 0 || h->sectorsize == 0 || h->name.empty() || h->stransid == 0)) {
    return StreamCorrupt("header: zero nodesize, sectorsize, generation or name");
  }
  return absl::OkStatus();
}

absl::Status DecodePayload(Reader& r, Record* rec) {
  switch (rec->type) {
    case RecordType::kHeader:
      return DecodeHeader(r, &rec->header);
    case RecordType::kPut:
      rec->key = r.Bytes16();
      rec->value = r.Bytes32();
      break;
    case RecordType::kDelete:
      rec->key = r.Bytes16();
      break;
    case RecordType::kExtent:
      rec->key = r.Bytes16();
      rec->value = r.Bytes32();
      rec->data_len = r.LE64();
      break;
    case RecordType::kData:
      rec->data = r.Take(r.in.size());
      if (rec->data.empty() || rec->data.size() > kMaxDataChunk) {
        return StreamCorrupt(absl::StrCat("data chunk of ", rec->data.size(), " bytes"));
      }
      break;
    case RecordType::kClone: {
      rec->key = r.Bytes16();
      rec->value = r.Bytes32();
      const uint8_t src = r.U8();
      if (src != 1 && src != 2) return StreamCorrupt(absl::StrCat("clone source ", src));
      rec->source = static_cast<CloneSource>(src);
      rec->source_key = r.Bytes16();
      break;
    }
    case RecordType::kEnd:
      rec->records = r.LE64();
      r.Array(&rec->digest);
      break;
    case RecordType::kResume:
      rec->token = r.Take(r.in.size());
      break;
    default:
      return StreamCorrupt(absl::StrCat("unknown record type ", static_cast<int>(rec->type)));
  }
  return absl::OkStatus();
}

}  // namespace

const char* RecordTypeName(RecordType t) {
  switch (t) {
    case RecordType::kHeader:
      return "HEADER";
    case RecordType::kPut:
      return "PUT";
    case RecordType::kDelete:
      return "DELETE";
    case RecordType::kExtent:
      return "EXTENT";
    case RecordType::kData:
      return "DATA";
    case RecordType::kClone:
      return "CLONE";
    case RecordType::kEnd:
      return "END";
    case RecordType::kResume:
      return "RESUME";
  }
  return "UNKNOWN";
}

absl::Status StreamCorrupt(absl::string_view what) {
  return WithReason(absl::DataLossError(absl::StrCat("send stream: ", what)),
                    ErrorReason::kStreamCorrupt);
}

absl::Status ParentMismatch(absl::string_view what, bool missing) {
  absl::Status s = missing ? absl::NotFoundError(absl::StrCat("send stream: ", what))
                           : absl::FailedPreconditionError(absl::StrCat("send stream: ", what));
  return WithReason(s, ErrorReason::kParentMismatch);
}

std::string EncodePreamble(uint32_t version) {
  std::string out(kStreamMagic, sizeof(kStreamMagic));
  PutLE32(&out, version);
  PutLE32(&out, 0);
  return out;
}

uint32_t PreambleVersion(absl::string_view p) { return DecodeLE32(p.data() + 8); }

absl::Status CheckPreamble(absl::string_view p) {
  if (p.size() < kPreambleSize || std::memcmp(p.data(), kStreamMagic, sizeof(kStreamMagic)) != 0) {
    return WithReason(absl::InvalidArgumentError("not a cowkv send stream (bad magic)"),
                      ErrorReason::kStreamCorrupt);
  }
  const uint32_t version = DecodeLE32(p.data() + 8);
  if (version > kStreamVersion) {
    return WithReason(absl::FailedPreconditionError(
                          absl::StrCat("send stream of format version ", version,
                                       "; this cowkv reads versions up to ", kStreamVersion)),
                      ErrorReason::kStreamVersion);
  }
  if (version == 0 || DecodeLE32(p.data() + 12) != 0) {
    return StreamCorrupt(absl::StrCat("bad preamble (version ", version, ")"));
  }
  return absl::OkStatus();
}

void AppendHeader(const StreamHeader& h, std::string* out) {
  std::string p;
  PutLE32(&p, h.nodesize);
  PutLE32(&p, h.sectorsize);
  p.append(reinterpret_cast<const char*>(h.uuid.data()), kUuidSize);
  PutLE64(&p, h.stransid);
  p.append(reinterpret_cast<const char*>(h.parent_uuid.data()), kUuidSize);
  PutLE64(&p, h.parent_stransid);
  PutLE64(&p, h.ctime_ms);
  PutBytes16(&p, h.name);
  Frame(RecordType::kHeader, p, out);
}

void AppendPut(absl::string_view key, absl::string_view value, std::string* out) {
  std::string p;
  PutBytes16(&p, key);
  PutBytes32(&p, value);
  Frame(RecordType::kPut, p, out);
}

void AppendDelete(absl::string_view key, std::string* out) {
  std::string p;
  PutBytes16(&p, key);
  Frame(RecordType::kDelete, p, out);
}

void AppendExtent(absl::string_view key, absl::string_view value, uint64_t data_len,
                  std::string* out) {
  std::string p;
  PutBytes16(&p, key);
  PutBytes32(&p, value);
  PutLE64(&p, data_len);
  Frame(RecordType::kExtent, p, out);
}

void AppendData(absl::string_view chunk, std::string* out) { Frame(RecordType::kData, chunk, out); }

void AppendClone(absl::string_view key, absl::string_view value, CloneSource source,
                 absl::string_view source_key, std::string* out) {
  std::string p;
  PutBytes16(&p, key);
  PutBytes32(&p, value);
  p += static_cast<char>(source);
  PutBytes16(&p, source_key);
  Frame(RecordType::kClone, p, out);
}

void AppendResume(absl::string_view token, std::string* out) {
  Frame(RecordType::kResume, token, out);
}

void AppendEnd(uint64_t records, const std::array<uint8_t, 32>& digest, std::string* out) {
  std::string p;
  PutLE64(&p, records);
  p.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  Frame(RecordType::kEnd, p, out);
}

absl::StatusOr<size_t> FramePayloadLen(absl::string_view frame_header) {
  const uint32_t len = DecodeLE32(frame_header.data());
  if (len > kMaxRecordPayload) {
    return StreamCorrupt(
        absl::StrCat("record of ", len, " bytes (at most ", kMaxRecordPayload, ")"));
  }
  return len;
}

absl::StatusOr<Record> DecodeRecord(absl::string_view frame, uint64_t index) {
  const uint32_t want = DecodeLE32(frame.data() + 8);
  const uint32_t have = Crc32cExtend(Crc32c(frame.data(), 8), frame.data() + kFrameHeaderSize,
                                     frame.size() - kFrameHeaderSize);
  if (want != have) {
    return StreamCorrupt(
        absl::StrCat("record ", index, ": checksum mismatch (have ", have, ", want ", want, ")"));
  }
  if (DecodeLE16(frame.data() + 6) != 0) {
    return StreamCorrupt(absl::StrCat("record ", index, ": nonzero reserved bytes"));
  }
  Record rec;
  rec.type = static_cast<RecordType>(DecodeLE16(frame.data() + 4));
  Reader r{frame.substr(kFrameHeaderSize)};
  absl::Status s = DecodePayload(r, &rec);
  if (!s.ok()) return WithContext(s, absl::StrCat("record ", index));
  if (!r.ok || !r.in.empty()) {
    return StreamCorrupt(absl::StrCat("record ", index, " (", RecordTypeName(rec.type),
                                      "): payload size does not match its fields"));
  }
  return rec;
}

}  // namespace send
}  // namespace cowkv
