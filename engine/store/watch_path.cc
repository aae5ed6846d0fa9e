// The store's calls for watch (cowkv/watch.h): events from a subvolume's
// history (kv::ReadEvents) under the shared barrier and the subvolume's
// tree lock, bounded by the durable-revision watermark by default.
#include "cowkv/errors.h"
#include "engine/kv/kv_events.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<EventsResult> StoreImpl::ReadEvents(uint64_t subvol, const EventsRequest& req) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  EventsRequest n = req;
  {
    RangeRequest r;
    r.start = req.start;
    r.end = req.end;
    r.prefix = req.prefix;
    COWKV_RETURN_IF_ERROR(kv::NormaliseRange(r, &n.start, &n.end));
    n.prefix.clear();
  }
  const uint64_t durable = durable_rev_->state().revision;
  using Bug = Options::TestHooks::PlantedBug;
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  if (n.to_revision == 0) {
    n.to_revision =
        options_.test_hooks.planted_bug == Bug::kWatchSeesUndurable ? kv_->revision() : durable;
  }
  if (n.to_revision > kv_->revision()) {
    return kv::FutureRevisionError(n.to_revision, kv_->revision());
  }
  return kv::ReadEvents(kv_.get(), tree, n,
                        options_.test_hooks.planted_bug == Bug::kWatchValueFromLatest);
}

absl::StatusOr<EventsResult> Subvolume::ReadEvents(const EventsRequest& req) {
  return store_->ReadEvents(id_, req);
}

DurableState Store::Durable() { return impl_->Durable(); }

DurableState Store::WaitDurable(const DurableState& seen, absl::Duration timeout) {
  return impl_->WaitDurableState(seen, timeout);
}

}  // namespace cowkv
