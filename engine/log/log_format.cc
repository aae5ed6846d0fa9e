#include "engine/log/log_format.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/format/sector.h"

namespace cowkv {
namespace log {

using namespace format;  // NOLINT: the layout constants

size_t MaxLogTrees(uint32_t sectorsize) { return (sectorsize - kLogHeaderSize) / kLogEntrySize; }
size_t MaxInlineBytes(uint32_t sectorsize) { return sectorsize - kLogHeaderSize; }

// Asserts what DecodeLogRoot refuses (it re-encodes only a block that passed
// its checks, so these fire on a writer's bug, never on device bytes).
std::string EncodeLogRoot(const LogRootBlock& b, uint32_t sectorsize) {
  COWKV_CHECK(b.fsid.size() == kFsidSize);
  COWKV_CHECK(b.trees.size() <= MaxLogTrees(sectorsize));
  COWKV_CHECK(b.trees.empty() || b.entries.empty());
  COWKV_CHECK(b.bytenr >= kReservedHead);
  COWKV_CHECK(b.next >= kReservedHead);
  std::string out(sectorsize, '\0');
  char* p = out.data();
  std::memcpy(p + kLogFsidOff, b.fsid.data(), kFsidSize);
  EncodeLE64(p + kLogBytenrOff, b.bytenr);
  EncodeLE64(p + kLogNonceOff, b.nonce);
  EncodeLE64(p + kLogBaseGenOff, b.base_generation);
  EncodeLE64(p + kLogSeqOff, b.seq);
  EncodeLE64(p + kLogNextOff, b.next);
  EncodeLE64(p + kLogRevisionOff, b.revision);
  EncodeLE32(p + kLogNtreesOff, static_cast<uint32_t>(b.trees.size()));
  EncodeLE32(p + kLogNentriesOff, static_cast<uint32_t>(b.entries.size()));
  char* e = p + kLogHeaderSize;
  for (const LogTreeRef& t : b.trees) {
    COWKV_CHECK(t.level < kMaxLevel);
    COWKV_CHECK(t.bytenr >= kReservedHead);
    COWKV_CHECK(t.generation == b.base_generation + 1);  // written in the chain's generation
    EncodeLE64(e, t.subvol);
    EncodeLE64(e + 8, t.bytenr);
    EncodeLE64(e + 16, t.generation);
    e[24] = static_cast<char>(t.level);
    e += kLogEntrySize;
  }
  for (const LogEntry& en : b.entries) {
    COWKV_CHECK(static_cast<size_t>(e - p) + InlineSize(en) <= sectorsize);
    COWKV_CHECK(!en.key.empty());
    COWKV_CHECK(en.key.size() <= kMaxTreeKeySize);
    EncodeLE64(e, en.subvol);
    EncodeLE16(e + 8, static_cast<uint16_t>(en.key.size()));
    EncodeLE32(e + 10, static_cast<uint32_t>(en.value.size()));
    std::memcpy(e + kLogInlineHeaderSize, en.key.data(), en.key.size());
    std::memcpy(e + kLogInlineHeaderSize + en.key.size(), en.value.data(), en.value.size());
    e += InlineSize(en);
  }
  SealSector(kLogRootSector, &out);
  return out;
}

namespace {
// Compares with the last node's start: `b + nodesize` wraps past zero for a
// nodesize-aligned b in the top node of the 64-bit range.
bool BadBytenr(uint64_t b, const LogRootExpect& e) {
  return b % e.nodesize != 0 || b < kReservedHead || e.device_size < e.nodesize ||
         b > e.device_size - e.nodesize;
}

// The log trees a block lists, after the header. Empty when they verify,
// else why not.
std::string DecodeTrees(const char* q, uint32_t n, const LogRootExpect& e, LogRootBlock* b) {
  for (uint32_t i = 0; i < n; ++i, q += kLogEntrySize) {
    LogTreeRef t{DecodeLE64(q), DecodeLE64(q + 8), DecodeLE64(q + 16),
                 static_cast<uint8_t>(q[24])};
    if (BadBytenr(t.bytenr, e) || t.level >= kMaxLevel || t.generation != e.base_generation + 1) {
      return absl::StrCat("log tree of subvolume ", t.subvol, " has a bad root");
    }
    b->trees.push_back(t);
  }
  return "";
}

// The inline entries a block holds, from `q` to `end`.
std::string DecodeEntries(const char* q, const char* end, uint32_t ninline, LogRootBlock* b) {
  for (uint32_t i = 0; i < ninline; ++i) {
    if (end - q < static_cast<ptrdiff_t>(kLogInlineHeaderSize)) return "inline entries overrun";
    LogEntry en;
    en.subvol = DecodeLE64(q);
    const size_t klen = DecodeLE16(q + 8), vlen = DecodeLE32(q + 10);
    q += kLogInlineHeaderSize;
    if (klen == 0 || klen > kMaxTreeKeySize || static_cast<size_t>(end - q) < klen + vlen) {
      return absl::StrCat("inline entry ", i, " of ", klen, "+", vlen, " bytes");
    }
    en.key.assign(q, klen);
    en.value.assign(q + klen, vlen);
    q += klen + vlen;
    b->entries.push_back(std::move(en));
  }
  return "";
}

// Decodes `data` into `b` when it is the link `e` expects. Empty when it
// is, else why not (the one place both entry points below share).
std::string Decode(absl::string_view data, const LogRootExpect& e, LogRootBlock* b) {
  if (std::string why = SectorProblem(kLogRootSector, data); !why.empty()) return why;
  const char* p = data.data();
  if (DecodeLE32(p + kLogFlagsOff) != 0) return "non-zero flags";
  b->fsid.assign(p + kLogFsidOff, kFsidSize);
  b->bytenr = DecodeLE64(p + kLogBytenrOff);
  b->nonce = DecodeLE64(p + kLogNonceOff);
  b->base_generation = DecodeLE64(p + kLogBaseGenOff);
  b->seq = DecodeLE64(p + kLogSeqOff);
  b->next = DecodeLE64(p + kLogNextOff);
  b->revision = DecodeLE64(p + kLogRevisionOff);
  if (b->fsid != e.fsid) return "fsid mismatch";
  if (b->bytenr != e.bytenr) return absl::StrCat("written for bytenr ", b->bytenr);
  if (b->nonce != e.nonce || b->base_generation != e.base_generation || b->seq != e.seq) {
    return absl::StrCat("belongs to chain nonce ", b->nonce, " generation ", b->base_generation,
                        " seq ", b->seq);
  }
  if (BadBytenr(b->next, e)) return absl::StrCat("next bytenr ", b->next, " out of range");
  const uint32_t n = DecodeLE32(p + kLogNtreesOff);
  const uint32_t ninline = DecodeLE32(p + kLogNentriesOff);
  if (n > MaxLogTrees(static_cast<uint32_t>(data.size())) || (n > 0 && ninline > 0)) {
    return absl::StrCat(n, " log trees and ", ninline, " inline entries listed");
  }
  std::string why = DecodeTrees(p + kLogHeaderSize, n, e, b);
  if (why.empty()) why = DecodeEntries(p + kLogHeaderSize, p + data.size(), ninline, b);
  if (!why.empty()) return why;
  // Everything else — the tree entries' padding, the bytes after the last
  // entry — is zero: the encoder writes back exactly this block.
  if (EncodeLogRoot(*b, static_cast<uint32_t>(data.size())) != data) {
    return "nonzero reserved bytes";
  }
  return "";
}

}  // namespace

absl::StatusOr<LogRootBlock> DecodeLogRoot(absl::string_view data, const LogRootExpect& e) {
  LogRootBlock b;
  const std::string why = Decode(data, e, &b);
  if (why.empty()) return b;
  CorruptionSite site;
  site.what = "log root block";
  site.bytenr = e.bytenr;
  return COWKV_CORRUPTION(site, absl::StrCat("seq ", e.seq, ": ", why), "", "");
}

bool ProbeLogRoot(absl::string_view data, const LogRootExpect& e, LogRootBlock* out,
                  std::string* why) {
  LogRootBlock b;
  std::string reason = Decode(data, e, &b);
  if (!reason.empty()) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  }
  *out = std::move(b);
  return true;
}

}  // namespace log
}  // namespace cowkv
