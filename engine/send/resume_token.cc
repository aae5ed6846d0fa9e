#include "engine/send/resume_token.h"

#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/send/sha256.h"

namespace cowkv {
namespace send {
namespace {

constexpr char kMagic[4] = {'C', 'K', 'R', 'T'};
constexpr size_t kFixed = 4 + 2 + 2 + kUuidSize + 8 + kUuidSize + 8 + 8 + 8;

void PutBytes16(std::string* out, absl::string_view s) {
  char b[2];
  EncodeLE16(b, static_cast<uint16_t>(s.size()));
  out->append(b, 2);
  out->append(s.data(), s.size());
}

// Reads a u16-length-prefixed field at *pos, within `in`.
bool TakeBytes16(absl::string_view in, size_t* pos, std::string* out) {
  if (in.size() - *pos < 2) return false;
  const size_t n = DecodeLE16(in.data() + *pos);
  if (in.size() - *pos - 2 < n) return false;
  *out = std::string(in.substr(*pos + 2, n));
  *pos += 2 + n;
  return true;
}

}  // namespace

absl::Status BadResumeToken(absl::string_view what) {
  return WithReason(absl::InvalidArgumentError(absl::StrCat("resume token: ", what)),
                    ErrorReason::kResumeToken);
}

absl::Status ResumeMismatch(absl::string_view what, bool missing) {
  const std::string m = absl::StrCat("resume: ", what);
  return WithReason(missing ? absl::NotFoundError(m) : absl::FailedPreconditionError(m),
                    ErrorReason::kResumeMismatch);
}

std::string EncodeResumePoint(const ResumePoint& p) {
  std::string out(kMagic, sizeof(kMagic));
  char b[2];
  EncodeLE16(b, kResumeTokenVersion);
  out.append(b, 2);
  EncodeLE16(b, 0);
  out.append(b, 2);
  out.append(reinterpret_cast<const char*>(p.uuid.data()), kUuidSize);
  PutLE64(&out, p.stransid);
  out.append(reinterpret_cast<const char*>(p.parent_uuid.data()), kUuidSize);
  PutLE64(&out, p.parent_stransid);
  PutLE64(&out, p.records);
  PutLE64(&out, p.offset);
  PutBytes16(&out, p.last_key);
  PutBytes16(&out, p.sha_state);
  PutBytes16(&out, p.name);
  PutLE32(&out, Crc32c(out.data(), out.size()));
  return out;
}

absl::StatusOr<ResumePoint> DecodeResumePoint(absl::string_view in) {
  if (in.size() < kFixed + 6 + 4 || in.size() > kMaxResumeTokenBytes ||
      std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0) {
    return BadResumeToken("not a cowkv resume token");
  }
  const uint32_t want = DecodeLE32(in.data() + in.size() - 4);
  if (Crc32c(in.data(), in.size() - 4) != want) return BadResumeToken("checksum mismatch");
  const uint16_t version = DecodeLE16(in.data() + 4);
  if (version != kResumeTokenVersion || DecodeLE16(in.data() + 6) != 0) {
    return BadResumeToken(
        absl::StrCat("version ", version, "; this cowkv reads version ", kResumeTokenVersion));
  }
  ResumePoint p;
  size_t pos = 8;
  std::memcpy(p.uuid.data(), in.data() + pos, kUuidSize);
  p.stransid = DecodeLE64(in.data() + pos + kUuidSize);
  pos += kUuidSize + 8;
  std::memcpy(p.parent_uuid.data(), in.data() + pos, kUuidSize);
  p.parent_stransid = DecodeLE64(in.data() + pos + kUuidSize);
  pos += kUuidSize + 8;
  p.records = DecodeLE64(in.data() + pos);
  p.offset = DecodeLE64(in.data() + pos + 8);
  pos += 16;
  const absl::string_view body = in.substr(0, in.size() - 4);
  if (!TakeBytes16(body, &pos, &p.last_key) || !TakeBytes16(body, &pos, &p.sha_state) ||
      !TakeBytes16(body, &pos, &p.name) || pos != body.size()) {
    return BadResumeToken("field sizes do not add up");
  }
  Sha256 h;
  if (p.stransid == 0 || p.records == 0 || p.offset < kPreambleSize || p.name.empty() ||
      (p.parent_uuid == Uuid{}) != (p.parent_stransid == 0) ||
      !Sha256::FromState(p.sha_state, &h) || p.offset != DecodeLE64(p.sha_state.data() + 32)) {
    return BadResumeToken("inconsistent fields");
  }
  return p;
}

std::string ResumeTokenText(const ResumePoint& p) {
  return absl::WebSafeBase64Escape(EncodeResumePoint(p));
}

absl::StatusOr<ResumePoint> ParseResumeToken(absl::string_view text) {
  std::string bytes;
  if (text.size() > 2 * kMaxResumeTokenBytes || !absl::WebSafeBase64Unescape(text, &bytes)) {
    return BadResumeToken("not URL-safe base64");
  }
  return DecodeResumePoint(bytes);
}

std::string EncodeReceiveProgress(const ResumePoint& p, uint64_t parent_id,
                                  const StreamHeader& header) {
  const std::string point = EncodeResumePoint(p);
  std::string out;
  PutLE32(&out, static_cast<uint32_t>(point.size()));
  out += point;
  PutLE64(&out, parent_id);
  AppendHeader(header, &out);
  return out;
}

absl::StatusOr<ReceiveProgress> DecodeReceiveProgress(absl::string_view v) {
  const absl::Status bad = WithReason(absl::DataLossError("receive progress item does not decode"),
                                      ErrorReason::kCorruption);
  if (v.size() < 4) return bad;
  const size_t n = DecodeLE32(v.data());
  if (v.size() - 4 < n + 8 + kFrameHeaderSize) return bad;
  ReceiveProgress out;
  absl::StatusOr<ResumePoint> p = DecodeResumePoint(v.substr(4, n));
  if (!p.ok()) return bad;
  out.point = *p;
  out.parent_id = DecodeLE64(v.data() + 4 + n);
  absl::StatusOr<Record> h = DecodeRecord(v.substr(4 + n + 8), 0);
  if (!h.ok() || h->type != RecordType::kHeader) return bad;
  out.header = h->header;
  return out;
}

}  // namespace send
}  // namespace cowkv
