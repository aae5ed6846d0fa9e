// An inode's names: INODE_REF items (all names in one directory, as many as
// one item holds) and extended refs (INODE_EXTREF items keyed by a hash of
// the directory and the name), as btrfs's extended_iref feature: a file may
// have up to kMaxLinks names, in one directory or many.
#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/fs/fs_batch.h"
#include "engine/fs/fs_ops.h"

namespace cowkv {
namespace fs {

ItemKey ExtrefKey(uint64_t ino, uint64_t parent, absl::string_view name) {
  return ItemKey(FsKey{ino, kInodeExtref, ExtrefHash(parent, name)});
}

ItemKey NameRefKey(uint64_t ino, uint64_t parent, const InodeRef& r) {
  return r.extref ? ExtrefKey(ino, parent, r.name) : RefKey(ino, parent);
}

absl::StatusOr<std::vector<FsOps::ParentRefs>> FsOps::LoadRefs(Batch& b, uint64_t ino) {
  std::vector<ParentRefs> refs;
  std::map<uint64_t, size_t> at;  // parent -> its place in `refs`
  absl::Status bad;
  auto add = [&](uint64_t parent, InodeRef r) {
    auto [it, fresh] = at.emplace(parent, refs.size());
    if (fresh) refs.push_back({parent, {}});
    refs[it->second].second.push_back(std::move(r));
  };
  // INODE_REF (12) and INODE_EXTREF (13) items are adjacent: one scan.
  static_assert(kInodeExtref == kInodeRef + 1);
  COWKV_RETURN_IF_ERROR(b.Scan(TypeStart(ino, kInodeRef), TypeStart(ino, kInodeExtref + 1), false,
                               [&](absl::string_view k, absl::string_view v) {
                                 FsKey fk;
                                 DecodeFsKey(k, &fk);
                                 if (fk.type == kInodeRef) {
                                   absl::StatusOr<std::vector<InodeRef>> r =
                                       DecodeInodeRefs(v, ino);
                                   if (!r.ok()) {
                                     bad = r.status();
                                     return false;
                                   }
                                   for (InodeRef& x : *r) add(fk.offset, std::move(x));
                                   return true;
                                 }
                                 absl::StatusOr<std::vector<InodeExtref>> r =
                                     DecodeInodeExtrefs(v, ino, fk.offset);
                                 if (!r.ok()) {
                                   bad = r.status();
                                   return false;
                                 }
                                 for (InodeExtref& x : *r)
                                   add(x.parent, InodeRef{x.index, std::move(x.name), true});
                                 return true;
                               }));
  COWKV_RETURN_IF_ERROR(bad);
  // In parent order, as the INODE_REF keys are; an extref's parent may
  // have come first.
  std::sort(refs.begin(), refs.end(),
            [](const ParentRefs& a, const ParentRefs& b) { return a.first < b.first; });
  return refs;
}

absl::Status FsOps::AddRef(Batch& b, uint64_t ino, uint64_t parent, const InodeRef& r) {
  const ItemKey rk = RefKey(ino, parent);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* rv, b.Find(rk));
  std::vector<InodeRef> refs;
  if (rv->has_value()) {
    COWKV_ASSIGN_OR_RETURN(refs, DecodeInodeRefs(**rv, ino));
  }
  const size_t ref_bytes = (rv->has_value() ? (*rv)->size() : 0) + kInodeRefHeader + r.name.size();
  const bool fits = ref_bytes <= b_->max_value_size() &&
                    (opt_.ref_item_names == 0 || refs.size() < opt_.ref_item_names);
  if (fits) {
    refs.push_back({r.index, r.name});
    b.Put(rk, EncodeInodeRefs(refs));
    return absl::OkStatus();
  }
  const ItemKey xk = ExtrefKey(ino, parent, r.name);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* xv, b.Find(xk));
  std::vector<InodeExtref> xs;
  if (xv->has_value()) {
    FsKey fk;
    DecodeFsKey(xk, &fk);
    COWKV_ASSIGN_OR_RETURN(xs, DecodeInodeExtrefs(**xv, ino, fk.offset));
  }
  const size_t x_bytes = (xv->has_value() ? (*xv)->size() : 0) + kInodeExtrefHeader + r.name.size();
  if (x_bytes > b_->max_value_size()) {
    return PosixError(ErrorReason::kEMLINK,
                      absl::StrCat("inode ", ino, ": the extended ref item for \"", r.name,
                                   "\" in directory ", parent, " is full"));
  }
  xs.push_back({parent, r.index, r.name});
  b.Put(xk, EncodeInodeExtrefs(xs));
  return absl::OkStatus();
}

absl::StatusOr<std::optional<InodeRef>> FsOps::FindRef(Batch& b, uint64_t ino, uint64_t parent,
                                                       absl::string_view name) {
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* rv, b.Find(RefKey(ino, parent)));
  if (rv->has_value()) {
    COWKV_ASSIGN_OR_RETURN(std::vector<InodeRef> refs, DecodeInodeRefs(**rv, ino));
    for (InodeRef& r : refs) {
      if (r.name == name) return std::move(r);
    }
  }
  const ItemKey xk = ExtrefKey(ino, parent, name);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* xv, b.Find(xk));
  if (!xv->has_value()) return std::nullopt;
  FsKey fk;
  DecodeFsKey(xk, &fk);
  COWKV_ASSIGN_OR_RETURN(std::vector<InodeExtref> xs, DecodeInodeExtrefs(**xv, ino, fk.offset));
  for (InodeExtref& x : xs) {
    if (x.parent == parent && x.name == name) return InodeRef{x.index, std::move(x.name), true};
  }
  return std::nullopt;
}

absl::StatusOr<std::optional<InodeRef>> FsOps::TakeRef(Batch& b, uint64_t ino, uint64_t parent,
                                                       absl::string_view name,
                                                       std::optional<uint64_t> index) {
  auto match = [&](uint64_t i, absl::string_view n) {
    return n == name && (!index.has_value() || *index == i);
  };
  const ItemKey rk = RefKey(ino, parent);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* rv, b.Find(rk));
  if (rv->has_value()) {
    COWKV_ASSIGN_OR_RETURN(std::vector<InodeRef> refs, DecodeInodeRefs(**rv, ino));
    auto r = std::find_if(refs.begin(), refs.end(),
                          [&](const InodeRef& x) { return match(x.index, x.name); });
    if (r != refs.end()) {
      InodeRef out = std::move(*r);
      refs.erase(r);
      if (refs.empty()) {
        b.Del(rk);
      } else {
        b.Put(rk, EncodeInodeRefs(refs));
      }
      return out;
    }
  }
  const ItemKey xk = ExtrefKey(ino, parent, name);
  COWKV_ASSIGN_OR_RETURN(const std::optional<std::string>* xv, b.Find(xk));
  if (!xv->has_value()) return std::nullopt;
  FsKey fk;
  DecodeFsKey(xk, &fk);
  COWKV_ASSIGN_OR_RETURN(std::vector<InodeExtref> xs, DecodeInodeExtrefs(**xv, ino, fk.offset));
  auto x = std::find_if(xs.begin(), xs.end(), [&](const InodeExtref& e) {
    return e.parent == parent && match(e.index, e.name);
  });
  if (x == xs.end()) return std::nullopt;
  InodeRef out{x->index, std::move(x->name), true};
  xs.erase(x);
  if (xs.empty()) {
    b.Del(xk);
  } else {
    b.Put(xk, EncodeInodeExtrefs(xs));
  }
  return out;
}

}  // namespace fs
}  // namespace cowkv
