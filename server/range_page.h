// Paged range reads: turns the range fields of a request (KV.Range,
// KV.TxnRange, a Txn's RangeOp) into one engine RangeRequest per page, and
// an engine RangeResult into a response page with a continuation token.
//
// A page is at most kRangePageKeys keys and kRangePageBytes of keys and
// values (the first pair always fits, whatever its size). The page token is
// opaque to clients:
//
//   "ck1" | fingerprint (8 bytes, little-endian) | resume key
//
// The fingerprint (FNV-1a over the scope, the normalised bounds and the
// order) ties a token to the request it continues: a token from another
// request is INVALID_ARGUMENT. The resume key is where the next page
// starts (forward: the smallest key after the last one returned; reverse:
// the exclusive end, the last key returned). Tokens hold no server state,
// so they survive a restart.
//
// Invariant: the resume bound always lies strictly after (forward) or before
// (reverse) every key already returned, so paging never repeats a key and
// always terminates.
//
// Thread-safe (pure functions).
#ifndef COWKV_SERVER_RANGE_PAGE_H_
#define COWKV_SERVER_RANGE_PAGE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "cowkv/store.h"
#include "cowkv/v1/kv.pb.h"

namespace cowkv {
namespace server {

// The range fields every range-shaped request carries.
struct RangeFields {
  std::string start;
  std::string end;
  std::string prefix;
  uint64_t limit = 0;
  bool reverse = false;
  bool keys_only = false;
  bool count_only = false;
};

template <typename M>
RangeFields FieldsOf(const M& m) {
  RangeFields f;
  f.start = m.start();
  f.end = m.end();
  f.prefix = m.prefix();
  f.limit = m.limit();
  f.reverse = m.reverse();
  f.keys_only = m.keys_only();
  f.count_only = m.count_only();
  return f;
}

// The engine request for the page `page_token` names (empty = the first).
// `scope` names what is read ("sv:<name>", "snap:<name>", "txn:<handle>").
// INVALID_ARGUMENT for bad bounds or a token of another request.
absl::StatusOr<RangeRequest> PlanPage(const RangeFields& fields, absl::string_view scope,
                                      absl::string_view page_token);

// Fills `out` from the engine's result for that page: trims it to the byte
// limit and sets `more` and `next_page_token`.
void FinishPage(RangeResult result, const RangeFields& fields, absl::string_view scope,
                v1::RangeResponse* out);

// What admission control reserves for a page (PlanPage's bounds and its
// framing). PlanPage leaves values over kRangePageBytes unloaded (only a
// page's first pair can be that large): ReadPageAdmitted reserves for it
// and reads the page again.
uint64_t PageBytes(const RangeRequest& page);

// The first key after every key with prefix `p` ("" = none: unbounded).
std::string PrefixEnd(absl::string_view p);

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_RANGE_PAGE_H_
