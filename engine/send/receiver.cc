#include "engine/send/receiver.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/send/sender.h"

namespace cowkv {
namespace send {

absl::Status Receiver::Feed(absl::string_view bytes) {
  if (end_seen_ && !bytes.empty()) return StreamCorrupt("bytes after the end record");
  if (pos_ > 0 && pos_ * 2 >= buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  buf_.append(bytes.data(), bytes.size());
  stats_.bytes += bytes.size();
  return absl::OkStatus();
}

absl::Status Receiver::Finish() const {
  if (!end_seen_) {
    return StreamCorrupt(
        absl::StrCat("truncated after ", stats_.records, " records (no end record)"));
  }
  if (pos_ != buf_.size()) return StreamCorrupt("bytes after the end record");
  return absl::OkStatus();
}

void Receiver::Abort() {
  if (pending_.has_value() && target_ != nullptr && pending_->local.len != 0) {
    target_->ReleaseData(pending_->local);
  }
  pending_.reset();
}

absl::StatusOr<Receiver::Event> Receiver::Step() {
  absl::string_view in = absl::string_view(buf_).substr(pos_);
  if (!preamble_seen_) {
    if (in.size() < kPreambleSize) return Event::kNeedMore;
    COWKV_RETURN_IF_ERROR(CheckPreamble(in));
    version_ = PreambleVersion(in);
    if (version_ < kContinuationVersion) {  // a continuation's preamble is not part of the stream
      hash_.Update(in.substr(0, kPreambleSize));
      consumed_ += kPreambleSize;
    }
    pos_ += kPreambleSize;
    preamble_seen_ = true;
    in.remove_prefix(kPreambleSize);
  }
  if (in.size() < kFrameHeaderSize) return Event::kNeedMore;
  COWKV_ASSIGN_OR_RETURN(const size_t len, FramePayloadLen(in));
  if (in.size() < kFrameHeaderSize + len) return Event::kNeedMore;
  const absl::string_view frame = in.substr(0, kFrameHeaderSize + len);
  COWKV_ASSIGN_OR_RETURN(Record r, DecodeRecord(frame, stats_.records));
  const bool continuation = version_ >= kContinuationVersion;
  if ((r.type == RecordType::kResume) != (continuation && !header_seen_)) {
    return StreamCorrupt(continuation && !header_seen_
                             ? "a continuation stream must start with a RESUME record"
                             : "a RESUME record past a continuation's start");
  }
  if (r.type == RecordType::kResume) {
    if (!resume_token_.empty()) return StreamCorrupt("a second RESUME record");
    resume_token_ = std::string(r.token);
    pos_ += frame.size();
    return Event::kResume;
  }
  COWKV_RETURN_IF_ERROR(CheckOrder(r));
  if (r.type == RecordType::kEnd) {
    COWKV_RETURN_IF_ERROR(CheckEnd(r));
  } else {
    hash_.Update(frame);
  }
  if (r.type == RecordType::kHeader) {
    header_ = r.header;
    header_seen_ = true;
  } else if (r.type != RecordType::kEnd) {
    COWKV_RETURN_IF_ERROR(ApplyRecord(r));
  }
  ++stats_.records;
  pos_ += frame.size();
  consumed_ += frame.size();
  if (r.type == RecordType::kEnd) {
    end_seen_ = true;
    if (pos_ != buf_.size()) return StreamCorrupt("bytes after the end record");
    return Event::kEnd;
  }
  return r.type == RecordType::kHeader ? Event::kHeader : Event::kRecord;
}

absl::Status Receiver::ContinueFrom(const StreamHeader& header, const ResumePoint& p) {
  if (header_seen_ || resume_token_.empty()) {
    return absl::InternalError("receive: ContinueFrom outside a continuation's start");
  }
  if (!Sha256::FromState(p.sha_state, &hash_)) return BadResumeToken("bad hash state");
  header_ = header;
  header_seen_ = true;
  last_key_ = p.last_key;
  stats_.records = p.records;
  consumed_ = p.offset;
  return absl::OkStatus();
}

ResumePoint Receiver::Position() const {
  ResumePoint p;
  p.uuid = header_.uuid;
  p.stransid = header_.stransid;
  p.parent_uuid = header_.parent_uuid;
  p.parent_stransid = header_.parent_stransid;
  p.records = stats_.records;
  p.offset = consumed_;
  p.last_key = last_key_;
  p.sha_state = hash_.State();
  return p;
}

// Where a record may stand in the stream.
absl::Status Receiver::CheckOrder(const Record& r) {
  const std::string at = absl::StrCat("record ", stats_.records, " (", RecordTypeName(r.type), ")");
  if ((r.type == RecordType::kHeader) != (stats_.records == 0)) {
    return StreamCorrupt(absl::StrCat(at, ": the header must come first, and only there"));
  }
  if (pending_.has_value() != (r.type == RecordType::kData)) {
    return StreamCorrupt(absl::StrCat(
        at, pending_.has_value() ? ": inside an unfinished extent" : ": data outside an extent"));
  }
  if (r.key.empty() && r.type != RecordType::kPut && r.type != RecordType::kDelete &&
      r.type != RecordType::kExtent && r.type != RecordType::kClone) {
    return absl::OkStatus();
  }
  const bool sendable =
      !r.key.empty() && (r.key[0] == format::kFsKeyPrefix || r.key[0] == format::kKvKeyPrefix);
  if (!sendable || r.key.size() > format::kMaxTreeKeySize) {
    return StreamCorrupt(absl::StrCat(at, ": not a file or KV item key"));
  }
  if (r.key <= last_key_) return StreamCorrupt(absl::StrCat(at, ": keys out of order"));
  last_key_ = std::string(r.key);
  return absl::OkStatus();
}

absl::Status Receiver::CheckEnd(const Record& r) {
  if (r.records != stats_.records) {
    return StreamCorrupt(
        absl::StrCat("end record counts ", r.records, " records, the stream had ", stats_.records));
  }
  Sha256 h = hash_;
  if (h.Final() != r.digest) return StreamCorrupt("end record digest mismatch");
  return absl::OkStatus();
}

absl::Status Receiver::ApplyRecord(const Record& r) {
  format::DataRef ref;
  const bool has_ref = (r.type == RecordType::kPut || r.type == RecordType::kExtent ||
                        r.type == RecordType::kClone) &&
                       format::LeafDataRef(r.key, r.value, &ref);
  switch (r.type) {
    case RecordType::kPut:
      if (has_ref) return StreamCorrupt("a put of an item with a data extent");
      ++stats_.items;
      return target_ ? target_->Apply(r.key, std::string(r.value), false) : absl::OkStatus();
    case RecordType::kDelete:
      ++stats_.deletes;
      return target_ ? target_->Apply(r.key, std::nullopt, false) : absl::OkStatus();
    case RecordType::kExtent:
      if (!has_ref || ref.bytenr != 0 || r.data_len != ref.value_len) {
        return StreamCorrupt("an extent record whose item does not match its data");
      }
      ++stats_.items;
      return BeginExtent(r, ref);
    case RecordType::kData:
      return ApplyData(r.data);
    case RecordType::kClone:
      if (!has_ref || ref.bytenr != 0) return StreamCorrupt("a clone of an item without extent");
      ++stats_.items;
      ++stats_.clones;
      return ApplyClone(r, ref);
    default:
      return StreamCorrupt("unexpected record");
  }
}

absl::Status Receiver::BeginExtent(const Record& r, const format::DataRef& ref) {
  Pending p{std::string(r.key), std::string(r.value), ref, {}, 0, 0};
  if (target_ != nullptr) {
    COWKV_ASSIGN_OR_RETURN(p.local, target_->AllocData(ref.len));
    if (p.local.len != ref.len) {
      target_->ReleaseData(p.local);
      return absl::FailedPreconditionError(absl::StrCat(
          "send stream: an extent of ", ref.len, " bytes does not fit this store's sector size"));
    }
  }
  pending_ = std::move(p);
  if (ref.value_len == 0) return ApplyData("");  // preallocated: nothing follows
  return absl::OkStatus();
}

absl::Status Receiver::ApplyData(absl::string_view chunk) {
  Pending& p = *pending_;
  if (chunk.size() > p.ref.value_len - p.offset) {
    return StreamCorrupt("more data than the extent holds");
  }
  if (target_ != nullptr && !chunk.empty()) {
    COWKV_RETURN_IF_ERROR(target_->WriteDataAt(p.local, p.offset, chunk));
  }
  p.crc = Crc32cExtend(p.crc, chunk.data(), chunk.size());
  p.offset += chunk.size();
  stats_.data_bytes += chunk.size();
  if (p.offset < p.ref.value_len) return absl::OkStatus();
  if (p.ref.value_len > 0 && p.crc != p.ref.crc) {
    return StreamCorrupt(absl::StrCat("extent data of ", p.key.size() > 1 ? "item" : "?",
                                      " fails its crc (have ", p.crc, ", want ", p.ref.crc, ")"));
  }
  absl::Status s;
  if (target_ != nullptr) {
    // A KV value: zero the sector's tail (a preallocated file extent, whose
    // value_len is 0, stays unwritten).
    if (p.key[0] == format::kKvKeyPrefix && p.ref.len > p.ref.value_len) {
      s = target_->WriteDataAt(p.local, p.ref.value_len,
                               std::string(p.ref.len - p.ref.value_len, '\0'));
    }
    SetDataBytenr(p.key, &p.value, p.local.bytenr);
    if (s.ok()) s = target_->Apply(p.key, p.value, /*first_ref=*/true);
    if (!s.ok()) return s;  // Abort releases the extent
  }
  pending_.reset();
  return absl::OkStatus();
}

absl::Status Receiver::ApplyClone(const Record& r, const format::DataRef& ref) {
  if (r.source == CloneSource::kParent && !header_.incremental()) {
    return StreamCorrupt("a clone from the parent in a full stream");
  }
  if (r.source == CloneSource::kStream && r.source_key >= r.key) {
    return StreamCorrupt("a clone from a key not received yet");
  }
  if (target_ == nullptr) return absl::OkStatus();
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> src, r.source == CloneSource::kParent
                                                             ? target_->GetParent(r.source_key)
                                                             : target_->Get(r.source_key));
  format::DataRef have;
  if (!src.has_value() || !format::LeafDataRef(r.source_key, *src, &have) || have.len != ref.len ||
      have.value_len != ref.value_len || have.crc != ref.crc) {
    return ParentMismatch(
        absl::StrCat("the clone source of an item is not the extent the sender had (",
                     r.source == CloneSource::kParent ? "parent" : "stream", ")"),
        false);
  }
  std::string value(r.value);
  SetDataBytenr(r.key, &value, have.bytenr);
  return target_->Apply(r.key, value, false);
}

}  // namespace send
}  // namespace cowkv
