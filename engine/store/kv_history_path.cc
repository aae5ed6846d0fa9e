// The store's calls on the KV history (kv::KvSpace, kv_history.cc): reads
// at a past revision under the shared tree lock, Compact through the write
// group so that it is logged and made durable like a write.
#include "engine/base/check.h"
#include "engine/store/store_impl.h"

namespace cowkv {

absl::StatusOr<KeyValue> StoreImpl::GetItemAt(uint64_t subvol, absl::string_view key, uint64_t at,
                                              uint64_t max_value_load) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  return kv_->GetAt(tree, key, at, max_value_load);
}

absl::StatusOr<uint64_t> StoreImpl::CompactRevision(uint64_t subvol) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  absl::ReaderMutexLock tl(TreeLock(subvol));
  return kv_->CompactRevision(tree);
}

absl::Status StoreImpl::Compact(uint64_t subvol, uint64_t revision, Durability d) {
  return KvWrite(
             [&]() -> absl::StatusOr<uint64_t> {
               COWKV_ASSIGN_OR_RETURN(Tree * tree, WritableTree(subvol));
               COWKV_RETURN_IF_ERROR(kv_->Compact(subvol, tree, revision));
               ++durable_seq_;  // the next log sync covers the compaction
               return kv_->revision();
             },
             d, nullptr)
      .status();
}

}  // namespace cowkv
