// Range pages and their tokens; see range_page.h.
#include "server/range_page.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cowkv/status_macros.h"
#include "server/convert.h"
#include "server/limits.h"
#include "server/validate.h"

namespace cowkv {
namespace server {
namespace {

constexpr absl::string_view kTokenMagic = "ck1";

// The normalised [start, end) of a request (prefix turned into bounds).
absl::Status Normalise(const RangeFields& f, std::string* start, std::string* end) {
  if (!f.prefix.empty()) {
    if (!f.start.empty() || !f.end.empty()) {
      return absl::InvalidArgumentError("a range takes a prefix or start/end, not both");
    }
    COWKV_RETURN_IF_ERROR(ValidateKey("prefix", f.prefix));
    *start = f.prefix;
    *end = PrefixEnd(f.prefix);
    return absl::OkStatus();
  }
  if (f.start.size() > kMaxKeySize) {
    return absl::InvalidArgumentError(absl::StrCat("start: at most ", kMaxKeySize, " bytes"));
  }
  COWKV_RETURN_IF_ERROR(ValidateBound("end", f.end));
  *start = f.start;
  *end = f.end;
  return absl::OkStatus();
}

uint64_t Fingerprint(absl::string_view scope, absl::string_view start, absl::string_view end,
                     bool reverse) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a 64
  auto mix = [&h](absl::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ull;
    }
    h ^= 0xff;  // separator, so ("ab","c") and ("a","bc") differ
    h *= 1099511628211ull;
  };
  mix(scope);
  mix(start);
  mix(end);
  mix(reverse ? "r" : "f");
  return h;
}

std::string EncodeToken(uint64_t fingerprint, absl::string_view resume) {
  std::string t(kTokenMagic);
  for (int i = 0; i < 8; ++i) t.push_back(static_cast<char>(fingerprint >> (8 * i)));
  absl::StrAppend(&t, resume);
  return t;
}

// The smallest valid key (at most kMaxKeySize) after `key`; "" if none.
std::string KeyAfter(absl::string_view key) {
  if (key.size() < kMaxKeySize) return absl::StrCat(key, std::string(1, '\0'));
  return PrefixEnd(key);  // a longer key would be invalid
}

}  // namespace

std::string PrefixEnd(absl::string_view p) {
  std::string s(p);
  while (!s.empty() && static_cast<unsigned char>(s.back()) == 0xff) s.pop_back();
  if (!s.empty()) s.back() = static_cast<char>(static_cast<unsigned char>(s.back()) + 1);
  return s;
}

absl::StatusOr<RangeRequest> PlanPage(const RangeFields& fields, absl::string_view scope,
                                      absl::string_view page_token) {
  RangeRequest req;
  COWKV_RETURN_IF_ERROR(Normalise(fields, &req.start, &req.end));
  req.reverse = fields.reverse;
  req.keys_only = fields.keys_only;
  req.count_only = fields.count_only;
  req.limit = fields.limit == 0 || fields.limit > kRangePageKeys ? kRangePageKeys : fields.limit;
  if (req.count_only) req.limit = 0;
  if (!req.count_only) {
    req.max_bytes = kRangePageBytes;  // the engine stops reading there
    req.max_value_load = kRangePageBytes;
  }
  if (page_token.empty()) return req;
  const uint64_t fp = Fingerprint(scope, req.start, req.end, req.reverse);
  if (page_token.size() < kTokenMagic.size() + 8 || !absl::StartsWith(page_token, kTokenMagic) ||
      page_token.substr(0, kTokenMagic.size() + 8) != EncodeToken(fp, "")) {
    return absl::InvalidArgumentError(
        "page_token: not a token of this request (same subvolume, snapshot, bounds and order)");
  }
  const absl::string_view resume = page_token.substr(kTokenMagic.size() + 8);
  if (resume.size() > kMaxKeySize) {
    return absl::InvalidArgumentError("page_token: damaged");
  }
  // The resume bound only ever narrows the range (invariant).
  if (!req.reverse) {
    if (resume > req.start) req.start = std::string(resume);
  } else if (req.end.empty() || resume < req.end) {
    req.end = std::string(resume);
  }
  return req;
}

uint64_t PageBytes(const RangeRequest& page) {
  return page.count_only ? 0 : kRangePageBytes + kRangePageKeys * kRangeEntryOverheadBytes;
}

void FinishPage(RangeResult result, const RangeFields& fields, absl::string_view scope,
                v1::RangeResponse* out) {
  size_t keep = result.kvs.size();
  size_t bytes = 0;
  for (size_t i = 0; i < result.kvs.size(); ++i) {
    bytes += result.kvs[i].key.size() + result.kvs[i].value.size() + kRangeEntryOverheadBytes;
    if (i > 0 && bytes > kRangePageBytes) {
      keep = i;
      break;
    }
  }
  const bool trimmed = keep < result.kvs.size();
  for (size_t i = 0; i < keep; ++i) ToProto(result.kvs[i], out->add_kvs());
  out->set_count(result.count);
  out->set_revision(result.revision);
  bool more = result.more || trimmed;
  if (more && keep > 0) {
    const std::string& last = result.kvs[keep - 1].key;
    const std::string resume = fields.reverse ? last : KeyAfter(last);
    if (!fields.reverse && resume.empty()) {
      more = false;  // the last possible key was returned
    } else {
      std::string start, end;
      if (Normalise(fields, &start, &end).ok()) {
        out->set_next_page_token(EncodeToken(Fingerprint(scope, start, end, fields.reverse),
                                             resume));
      }
    }
  }
  out->set_more(more);
}

}  // namespace server
}  // namespace cowkv
