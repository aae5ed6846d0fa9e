#include "engine/send/sender.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/base/coding.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"

namespace cowkv {
namespace send {

void SetDataBytenr(absl::string_view key, std::string* value, uint64_t bytenr) {
  const size_t off =
      key[0] == format::kFsKeyPrefix ? format::kFsExtentBytenrOff : format::kKvExtentBytenrOff;
  EncodeLE64(value->data() + off, bytenr);
}

namespace {
// The sendable items: files and KV, not the KV history between them.
bool Sendable(absl::string_view key) {
  return !key.empty() && (key[0] == format::kFsKeyPrefix || key[0] == format::kKvKeyPrefix);
}
}  // namespace

Sender::Sender(Tree* snapshot, Tree* parent, const StreamHeader& header, DataReader* data)
    : diff_(snapshot, parent, std::string(1, format::kFsKeyPrefix),
            std::string(1, format::kKvKeyPrefix + 1)),
      header_(header),
      data_(data) {}

namespace {
// The first key a continuation reports: just after the last one applied.
std::string ResumeFrom(const ResumePoint& from) {
  return from.last_key.empty() ? std::string(1, format::kFsKeyPrefix) : from.last_key + '\0';
}
}  // namespace

Sender::Sender(Tree* snapshot, Tree* parent, const StreamHeader& header, DataReader* data,
               const ResumePoint& from)
    : diff_(snapshot, parent, ResumeFrom(from), std::string(1, format::kKvKeyPrefix + 1)),
      header_(header),
      data_(data),
      resume_(from) {}

SendStats Sender::stats() const {
  SendStats s = stats_;
  s.nodes_read = diff_.nodes_read();
  s.subtrees_skipped = diff_.subtrees_skipped();
  return s;
}

void Sender::Remember(uint64_t bytenr, CloneSource from, absl::string_view key) {
  if (sources_.size() >= kMaxCloneSources) return;
  sources_.emplace(bytenr, Source{from, std::string(key)});
}

absl::Status Sender::EmitChange(const Change& c, std::string* out) {
  format::DataRef rref;
  if (c.right.has_value() && format::LeafDataRef(c.key, *c.right, &rref)) {
    Remember(rref.bytenr, CloneSource::kParent, c.key);
  }
  ++stats_.records;
  if (!c.left.has_value()) {
    ++stats_.deletes;
    AppendDelete(c.key, out);
    return absl::OkStatus();
  }
  ++stats_.items;
  format::DataRef ref;
  if (!format::LeafDataRef(c.key, *c.left, &ref)) {
    AppendPut(c.key, *c.left, out);
    return absl::OkStatus();
  }
  std::string value = *c.left;
  SetDataBytenr(c.key, &value, 0);
  auto src = sources_.find(ref.bytenr);
  if (src != sources_.end()) {
    ++stats_.clones;
    AppendClone(c.key, value, src->second.from, src->second.key, out);
    return absl::OkStatus();
  }
  Remember(ref.bytenr, CloneSource::kStream, c.key);
  AppendExtent(c.key, value, ref.value_len, out);
  if (ref.value_len > 0) pending_ = std::make_unique<Pending>(Pending{c.key, ref, 0, 0});
  return absl::OkStatus();
}

// One kData chunk of the pending extent, read from the device; the crc
// accumulated over the chunks must match the item's at the last one.
absl::Status Sender::EmitChunk(std::string* out) {
  Pending& p = *pending_;
  const uint64_t n = std::min<uint64_t>(kMaxDataChunk, p.ref.value_len - p.offset);
  std::string buf(n, '\0');
  COWKV_RETURN_IF_ERROR(data_->ReadAt(p.ref.bytenr + p.offset, buf.data(), n));
  p.crc = Crc32cExtend(p.crc, buf.data(), n);
  p.offset += n;
  if (p.offset == p.ref.value_len && p.crc != p.ref.crc) {
    CorruptionSite site;
    site.what = "data extent";
    site.bytenr = p.ref.bytenr;
    return COWKV_CORRUPTION(site,
                            absl::StrCat("checksum mismatch over ", p.ref.value_len, " bytes"),
                            absl::StrCat(p.crc), absl::StrCat(p.ref.crc));
  }
  AppendData(buf, out);
  ++stats_.records;
  stats_.data_bytes += n;
  if (p.offset == p.ref.value_len) pending_.reset();
  return absl::OkStatus();
}

absl::StatusOr<bool> Sender::Fill(std::string* out, size_t budget) {
  if (done_) return true;
  const size_t start = out->size();
  size_t hashed = start;
  if (!started_ && resume_.has_value()) {
    started_ = true;
    out->append(EncodePreamble(kContinuationVersion));
    AppendResume(EncodeResumePoint(*resume_), out);
    hashed = out->size();  // not part of the stream the end record covers
    if (!Sha256::FromState(resume_->sha_state, &hash_)) return BadResumeToken("bad hash state");
    stats_.records = resume_->records;
  }
  if (!started_) {
    started_ = true;
    out->append(EncodePreamble());
    AppendHeader(header_, out);
    ++stats_.records;
  }
  while (out->size() - start < budget) {
    if (pending_ != nullptr) {
      COWKV_RETURN_IF_ERROR(EmitChunk(out));
      continue;
    }
    COWKV_ASSIGN_OR_RETURN(std::optional<Change> c, diff_.Next());
    if (!c.has_value()) {
      hash_.Update(absl::string_view(*out).substr(hashed));
      hashed = out->size();
      AppendEnd(stats_.records, hash_.Final(), out);
      ++stats_.records;
      done_ = true;
      break;
    }
    if (Sendable(c->key) && bug_skip_items_ > 0) {
      --bug_skip_items_;
      continue;
    }
    if (Sendable(c->key)) COWKV_RETURN_IF_ERROR(EmitChange(*c, out));
  }
  if (!done_) hash_.Update(absl::string_view(*out).substr(hashed));
  stats_.bytes += out->size() - start;
  return done_;
}

}  // namespace send
}  // namespace cowkv
