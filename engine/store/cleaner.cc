// The cleaner: drops deleted subvolumes (btrfs's cleaner kthread) in short
// batches under the locks, on its own thread or when asked.
#include <algorithm>
#include <chrono>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<int> StoreImpl::CleanerBatch(int max_steps) {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<Transaction> h, Begin());
  absl::StatusOr<int> steps;
  {
    absl::WriterMutexLock l(&mu_);
    steps = subvols_->CleanDeadRoots(max_steps);
    if (steps.ok()) cleaner_steps_ += *steps;
    if (steps.ok() && *steps > 0) drop_epoch_.fetch_add(1, std::memory_order_acq_rel);
  }
  h->End();
  if (absl::IsResourceExhausted(steps.status())) {
    // The drop needs a little space for CoW; what it freed is pinned.
    COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kSpace));
    return 0;
  }
  if (steps.ok()) {
    uint64_t dirty;
    {
      absl::ReaderMutexLock l(&mu_);
      dirty = txn_->dirty_bytes();
    }
    MaybeCommitForDirtyBytes(dirty);
  }
  return steps;
}

void StoreImpl::CleanerLoop() {
  constexpr int kBatch = 256;  // child pointers per lock hold
  for (;;) {
    {
      absl::MutexLock hl(&handles_mu_);
      handles_mu_.Await(absl::Condition(
          +[](StoreImpl* s) ABSL_NO_THREAD_SAFETY_ANALYSIS { return s->stop_ || s->cleaner_work_; },
          this));
      if (stop_) return;
    }
    absl::StatusOr<int> steps = CleanerBatch(kBatch);
    bool more;
    {
      absl::ReaderMutexLock l(&mu_);
      more = subvols_->HasDeadRoots();
    }
    if (!steps.ok() || !more) {
      absl::MutexLock hl(&handles_mu_);
      cleaner_work_ = more && steps.ok();
      if (!steps.ok()) {
        // Retry later (e.g. after other deletions free space); not busily.
        handles_mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Seconds(1));
        cleaner_work_ = true;
      }
    }
  }
}

absl::Status StoreImpl::DropDeletedSubvolumes(uint64_t max_steps) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  uint64_t done = 0;
  for (;;) {
    {
      absl::ReaderMutexLock l(&mu_);
      if (!subvols_->HasDeadRoots()) break;
    }
    if (max_steps != 0 && done >= max_steps) break;
    int batch = max_steps == 0 ? 256 : static_cast<int>(std::min<uint64_t>(256, max_steps - done));
    COWKV_ASSIGN_OR_RETURN(int steps, CleanerBatch(batch));
    done += steps;
  }
  return Commit(CommitTrigger::kExplicit);
}

}  // namespace cowkv
