// Watch events from a subvolume's KV history (history_item.h): the changes
// of revisions [from, to] in revision order. An entry keeps the key's item
// *before* its change, so a PUT's new item is found later: it is the prev
// item of the key's next entry, or the current item when that has the
// PUT's revision. ReadEvents resolves them in one forward pass over the
// entries (keys with a PUT still waiting are remembered), continuing past
// `to` only as far as some waiting key needs: never a scan per event.
//
// Runs under the store's tree lock (shared), as KvSpace's reads.
#ifndef COWKV_ENGINE_KV_KV_EVENTS_H_
#define COWKV_ENGINE_KV_KV_EVENTS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "cowkv/watch.h"
#include "engine/kv/kv_space.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace kv {

// `req`'s keys already normalised into [start, end) (NormaliseRange), its
// to_revision resolved (<= kv->revision()). OUT_OF_RANGE (kCompacted,
// payload: compact revision + 1, the oldest revision with events) when
// req.from_revision is at or below the compact revision; INVALID_ARGUMENT
// for from_revision 0.
// `bug_latest`: Options::TestHooks::PlantedBug::kWatchValueFromLatest.
absl::StatusOr<EventsResult> ReadEvents(KvSpace* kv, Tree* tree, const EventsRequest& req,
                                        bool bug_latest = false);

}  // namespace kv
}  // namespace cowkv

#endif  // COWKV_ENGINE_KV_KV_EVENTS_H_
