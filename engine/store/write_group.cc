#include "engine/store/write_group.h"

#include "engine/base/check.h"

namespace cowkv {

void WriteGroup::Run(GroupWrite* w, const RunBatch& run) {
  COWKV_DCHECK(w->apply != nullptr && !w->done);
  std::vector<GroupWrite*> batch;
  {
    absl::MutexLock l(&mu_);
    queue_.push_back(w);
    while (!w->done && leader_) cv_.Wait(&mu_);
    if (w->done) return;  // a leader ran it
    leader_ = true;
    batch.assign(queue_.begin(), queue_.end());
    queue_.clear();
  }
  COWKV_DCHECK(!batch.empty());
  run(batch);
  absl::MutexLock l(&mu_);
  for (GroupWrite* g : batch) g->done = true;
  leader_ = false;
  cv_.SignalAll();
}

}  // namespace cowkv
