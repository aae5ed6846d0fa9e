// Iterator: a KV cursor over a subvolume at the latest state; it re-seeks
// after a concurrent write instead of holding the tree lock between steps.
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

// Iterates the KV key space of one subvolume tree: tree keys 'k' + key,
// values behind a KV item header (checked, so a corrupt header ends the
// iteration with DATA_LOSS instead of returning garbage).
class Iterator::Impl {
 public:
  using Loader = std::function<absl::StatusOr<std::string>(absl::string_view tree_key)>;
  // `mu`: the store's barrier; `tree_mu`: the subvolume's tree lock (both
  // taken shared around every step that reads the tree).
  Impl(absl::Mutex* mu, absl::Mutex* tree_mu, Tree* tree, Loader load)
      : mu_(mu), tree_mu_(tree_mu), it_(tree), load_(std::move(load)) {}
  bool Valid() const { return valid_; }
  // After every move, without the lock: inside the key space? a sane item?
  // A value in a data extent is loaded through the store (under its lock,
  // from the key's current item).
  void Settle() {
    valid_ = it_.Valid() && kv::IsKvTreeKey(it_.key());
    if (!valid_) return;
    if (kv::InlineValue(it_.value(), &value_)) return;
    absl::StatusOr<kv::ItemView> item = kv::DecodeItem(it_.key(), it_.value());
    if (!item.ok()) return Fail(item.status());
    if (!item->in_extent) {
      value_ = item->value;
      return;
    }
    absl::StatusOr<std::string> loaded = load_(it_.key());
    if (absl::IsNotFound(loaded.status())) {
      return Fail(absl::AbortedError("the key was deleted while iterating; seek again"));
    }
    if (!loaded.ok()) return Fail(loaded.status());
    storage_ = *std::move(loaded);
    value_ = storage_;
  }
  void Fail(absl::Status s) {
    valid_ = false;
    status_ = std::move(s);
  }
  absl::Mutex* mu_;
  absl::Mutex* tree_mu_;
  TreeIterator it_;
  Loader load_;
  bool valid_ = false;
  absl::string_view value_;
  std::string storage_;
  absl::Status status_;
};

Iterator::Iterator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Iterator::~Iterator() = default;

bool Iterator::Valid() const { return impl_->Valid(); }

void Iterator::SeekToFirst() {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    absl::ReaderMutexLock tl(impl_->tree_mu_);
    impl_->it_.Seek(std::string(1, kv::kKvPrefix));
  }
  impl_->Settle();
}

void Iterator::SeekToLast() {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    absl::ReaderMutexLock tl(impl_->tree_mu_);
    impl_->it_.SeekForPrev(std::string(1, kv::kKvPrefixEnd));
  }
  impl_->Settle();
}

void Iterator::Seek(absl::string_view key) {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    absl::ReaderMutexLock tl(impl_->tree_mu_);
    impl_->it_.Seek(kv::TreeKey(key));
  }
  impl_->Settle();
}

void Iterator::SeekForPrev(absl::string_view key) {
  {
    absl::ReaderMutexLock l(impl_->mu_);
    absl::ReaderMutexLock tl(impl_->tree_mu_);
    impl_->it_.SeekForPrev(kv::TreeKey(key));
  }
  impl_->Settle();
}

void Iterator::Next() {
  if (!impl_->it_.TryFastNext()) {
    absl::ReaderMutexLock l(impl_->mu_);
    absl::ReaderMutexLock tl(impl_->tree_mu_);
    impl_->it_.Next();
  }
  impl_->Settle();
}

void Iterator::Prev() {
  if (!impl_->it_.TryFastPrev()) {
    absl::ReaderMutexLock l(impl_->mu_);
    absl::ReaderMutexLock tl(impl_->tree_mu_);
    impl_->it_.Prev();
  }
  impl_->Settle();
}

absl::string_view Iterator::key() const { return kv::UserKey(impl_->it_.key()); }

absl::string_view Iterator::value() const { return impl_->value_; }

absl::Status Iterator::status() const {
  return impl_->status_.ok() ? impl_->it_.status() : impl_->status_;
}

std::unique_ptr<Iterator> StoreImpl::NewIterator(uint64_t subvol) {
  Tree* tree;
  absl::Mutex* tree_mu;
  {
    absl::ReaderMutexLock l(&mu_);
    tree = txn_->fs_tree(subvol);  // subvolume trees live as long as the store
    COWKV_CHECK(tree != nullptr);
    tree_mu = TreeLock(subvol);  // as long as the store too
  }
  return std::make_unique<Iterator>(std::make_unique<Iterator::Impl>(
      &mu_, tree_mu, tree,
      [this, subvol](absl::string_view tk) { return LoadByTreeKey(subvol, tk); }));
}

}  // namespace cowkv
