// The fs trees' root items, O(1) snapshots (CloneTree), tree drops, and the
// lazy refcounting that makes snapshots O(1). Names, info items and the
// cleaner that drives the drops live a layer up, in engine/subvol.
//
// Back-references (format.md): the pointer from a parent node P to a child
// C is recorded on C as TREE_BLOCK_REF(owner of P) when P is a normal node,
// or as SHARED_BLOCK_REF(P) when P carries FULL_BACKREF; the pointer from a
// subvolume's root item to its root node is TREE_BLOCK_REF(subvolume). A
// snapshot copies the source's root node and adds one TREE_BLOCK_REF(new id)
// to each of its children; nothing else is touched. Sharing is resolved
// lazily when a shared node is first CoWed (CowTreeBlock, btrfs's
// update_ref_for_cow):
//
//   refs > 1, CoW by the owner, normal:  children += SHARED(old); old gets
//                                        FULL_BACKREF (its pointers now
//                                        counted per block, the copy's by
//                                        the owner's TREE refs)
//   refs > 1, CoW by another tree:       children += TREE(tree)  (the copy)
//   refs == 1, old has FULL_BACKREF:     children += TREE(tree),
//                                        children -= SHARED(old)
//   refs == 1, normal, owned by tree:    nothing: the copy inherits them
//   refs == 1, normal, owned by another: children += TREE(tree),
//                                        children -= TREE(owner)
// then the tree's own reference to old is dropped (always TREE(tree): the
// parent on the path was CoWed first, so it is normal and owned by the tree).
//
// A normal node with one reference is not always referenced by its owner:
// after the owner's share is dropped (its deletion turned a shared parent
// into FULL_BACKREF, and the other tree then CoWed that parent), the node is
// reached only from another tree while its children still carry
// TREE(owner). The last case above moves them when that tree CoWs it.
//
// Trouble case the "may be shared" test guards: snapshot S→T, then S writes
// under a node C created before the snapshot. Without looking C's refs up,
// S would treat C as exclusively its own, drop C's only remaining refcount
// and free it while T still points at it. Test: SubvolModel.* (check after
// every commit verifies refs == back-references == pointers).
#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {

using format::Key17;

Tree* TxnManager::fs_tree(uint64_t id) {
  auto it = fs_roots_.find(id);
  return it == fs_roots_.end() || it->second.dying() ? nullptr : it->second.tree.get();
}

absl::StatusOr<uint64_t> TxnManager::CreateTree() {
  const uint64_t id = next_tree_id_++;
  // Ids are never reused (mount refuses a tree at or above next_tree_id).
  COWKV_CHECK(id >= format::kFirstFreeTreeId);
  COWKV_CHECK(fs_roots_.count(id) == 0);
  FsRoot& r = fs_roots_[id];
  COWKV_ASSIGN_OR_RETURN(r.tree, Tree::CreateEmpty(id, cache_.get(), this));
  r.dirty = true;
  return id;
}

absl::StatusOr<uint64_t> TxnManager::CloneTree(uint64_t source_id, bool read_only) {
  auto src = fs_roots_.find(source_id);
  if (src == fs_roots_.end() || src->second.dying()) {
    return absl::NotFoundError(absl::StrCat("no tree ", source_id));
  }
  COWKV_CHECK_MSG(!HasDirtyNodes(), "snapshot of a tree with dirty nodes");
  COWKV_ASSIGN_OR_RETURN(NodeRef root, src->second.tree->ReadRoot());
  const uint64_t id = next_tree_id_++;
  COWKV_CHECK(id >= format::kFirstFreeTreeId);
  COWKV_CHECK(fs_roots_.count(id) == 0);
  // The snapshot's root item points at the source's root node: one more
  // reference, nothing else. The first write to either tree CoWs the shared
  // root and pays for its children's references then.
  {
    absl::MutexLock l(&space_mu_);
    refs_.Add(root->bytenr, sb_.nodesize, root->level, {format::kTreeBlockRef, id}, +1, false,
              generation_);
    ++nodes_per_tree_[id];
  }
  FsRoot& r = fs_roots_[id];
  r.tree = std::make_unique<Tree>(id, RootRef{root->bytenr, root->generation, root->level},
                                  cache_.get(), this);
  r.item.last_snapshot = generation_;
  r.item.flags = read_only ? format::kRootFlagReadOnly : 0;
  r.dirty = true;
  // Every node of the source up to now may be shared from here on.
  FsRoot& s = fs_roots_[source_id];
  s.item.last_snapshot = generation_;
  s.dirty = true;
  return id;
}

absl::Status TxnManager::MarkTreeDropping(uint64_t id) {
  if (id == format::kDefaultTreeId) {
    return absl::FailedPreconditionError("the default subvolume cannot be deleted");
  }
  auto it = fs_roots_.find(id);
  if (it == fs_roots_.end() || it->second.dying()) {
    return absl::NotFoundError(absl::StrCat("no tree ", id));
  }
  it->second.item.flags |= format::kRootFlagDropping;
  it->second.dirty = true;
  return absl::OkStatus();
}

absl::Status TxnManager::SetTreeFlags(uint64_t id, uint64_t set, uint64_t clear) {
  COWKV_CHECK(((set | clear) & format::kRootFlagDropping) == 0);
  auto it = fs_roots_.find(id);
  if (it == fs_roots_.end() || it->second.dying()) {
    return absl::NotFoundError(absl::StrCat("no tree ", id));
  }
  it->second.item.flags = (it->second.item.flags & ~clear) | set;
  it->second.dirty = true;
  return absl::OkStatus();
}

std::vector<uint64_t> TxnManager::TreeIds(bool dropping) const {
  std::vector<uint64_t> out;
  for (const auto& [id, r] : fs_roots_) {
    if (r.dying() == dropping) out.push_back(id);
  }
  return out;
}

absl::StatusOr<format::RootItem> TxnManager::TreeRootItem(uint64_t id) const {
  auto it = fs_roots_.find(id);
  if (it == fs_roots_.end()) return absl::NotFoundError(absl::StrCat("no tree ", id));
  format::RootItem ri = it->second.item;
  ri.bytenr = it->second.tree->root().bytenr;
  ri.generation = it->second.tree->root().generation;
  ri.level = it->second.tree->root().level;
  return ri;
}

bool TxnManager::IsReadOnly(uint64_t id) const {
  auto it = fs_roots_.find(id);
  return it != fs_roots_.end() && (it->second.item.flags & format::kRootFlagReadOnly);
}

absl::Status TxnManager::ReserveRootTreeWrites(uint64_t count) {
  return ReserveForWrite(root_tree_.get(), WriteKind::kInsert, count);
}

absl::Status TxnManager::PutRootTreeItem(absl::string_view key, absl::string_view value) {
  return root_tree_->Put(key, value);
}

absl::Status TxnManager::DeleteRootTreeItem(absl::string_view key) {
  absl::Status s = root_tree_->Delete(key);
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

absl::Status TxnManager::ScanRootTree(
    uint8_t type, const std::function<absl::Status(uint64_t, absl::string_view)>& fn) {
  TreeIterator it(root_tree_.get());
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    Key17 k;
    if (format::DecodeKey17(it.key(), &k) && k.type == type)
      COWKV_RETURN_IF_ERROR(fn(k.objectid, it.value()));
  }
  return it.status();
}

// refs and flags of a tree block: the extent item plus what is queued.
TxnManager::QueuedHead TxnManager::QueuedHeadLocked(uint64_t bytenr) const {
  const DelayedRefHead* head = refs_.Find(bytenr);
  if (head == nullptr) return QueuedHead{};
  return QueuedHead{true, head->must_insert, head->set_full_backref, head->ref_mod};
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> TxnManager::LookupExtentInfo(uint64_t bytenr) {
  QueuedHead h;
  {
    absl::MutexLock l(&space_mu_);
    h = QueuedHeadLocked(bytenr);
  }
  return ExtentInfoWithHead(bytenr, h);
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> TxnManager::LookupExtentInfoLocked(uint64_t bytenr) {
  return ExtentInfoWithHead(bytenr, QueuedHeadLocked(bytenr));
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> TxnManager::ExtentInfoWithHead(uint64_t bytenr,
                                                                             const QueuedHead& h) {
  int64_t refs = 0;
  uint64_t flags = 0;
  if (!h.have || !h.must_insert) {
    std::string key = format::EncodeKey17(Key17{bytenr, format::kExtentItem, sb_.nodesize});
    absl::StatusOr<std::string> raw = extent_tree_->Get(key);
    if (absl::IsNotFound(raw.status())) {
      CorruptionSite site;
      site.what = "extent tree";
      site.bytenr = bytenr;
      return COWKV_CORRUPTION(site, "tree block without an extent item", "", "");
    }
    if (!raw.ok()) return raw.status();
    COWKV_ASSIGN_OR_RETURN(format::ExtentItem e, format::DecodeExtentItem(*raw, bytenr));
    refs = static_cast<int64_t>(e.refs);
    flags = e.flags;
  }
  if (h.have) {
    refs += h.ref_mod;
    if (h.set_full_backref) flags |= format::kExtentFlagFullBackref;
  }
  if (refs <= 0) {
    CorruptionSite site;
    site.what = "extent tree";
    site.bytenr = bytenr;
    return COWKV_CORRUPTION(site, "CoW of a tree block with no references",
                            absl::StrCat(refs), ">0");
  }
  return std::make_pair(static_cast<uint64_t>(refs), flags);
}

void TxnManager::AddChildRefs(const Node& node, bool full_backref, uint64_t tree_id,
                              int64_t delta) {
  if (node.leaf()) {
    // A leaf's references are to the data extents its items point at.
    const BackrefKey ref = full_backref ? BackrefKey{format::kSharedDataRef, node.bytenr}
                                        : BackrefKey{format::kExtentDataRef, tree_id};
    for (int i = 0; i < node.nritems(); ++i) {
      format::DataRef d;
      if (format::LeafDataRef(node.key(i), node.value(i), &d)) {
        refs_.Add(d.bytenr, d.len, 0, ref, delta, false, generation_);
      }
    }
    return;
  }
  const BackrefKey ref = full_backref ? BackrefKey{format::kSharedBlockRef, node.bytenr}
                                      : BackrefKey{format::kTreeBlockRef, tree_id};
  for (int i = 0; i < node.nritems(); ++i) {
    format::ChildPtr c = node.Child(i);
    refs_.Add(c.bytenr, sb_.nodesize, node.level - 1, ref, delta, false, generation_);
  }
}

absl::Status TxnManager::CowTreeBlock(uint64_t tree_id, const Node& old) {
  // Roots too: a fresh snapshot shares its source's root node.
  auto sv = fs_roots_.find(tree_id);
  const bool may_be_shared = sv != fs_roots_.end() &&
                             old.generation <= sv->second.item.last_snapshot;
  if (!may_be_shared) {
    absl::MutexLock l(&space_mu_);
    CowRefsLocked(tree_id, old, 1, 0);
    return absl::OkStatus();
  }
  // Trouble case: snapshot S→T, then writers of S and T (each under its
  // own subvolume's lock) CoW the same shared node X at once. Each reads
  // refs == 2 and takes the "refs > 1" branch, so neither moves X's
  // children off SHARED(X) when X's last reference goes: a leaked
  // reference per child. extent_mu_ makes the refcount read and the refs
  // it queues one step. Test: Concurrency.FileWritersInSubvolumesAndDirectories.
  absl::MutexLock el(&extent_mu_);
  uint64_t refs = 1, flags = 0;
  COWKV_ASSIGN_OR_RETURN(std::tie(refs, flags), LookupExtentInfo(old.bytenr));
  absl::MutexLock l(&space_mu_);
  CowRefsLocked(tree_id, old, refs, flags);
  return absl::OkStatus();
}

void TxnManager::CowRefsLocked(uint64_t tree_id, const Node& old, uint64_t refs, uint64_t flags) {
  COWKV_DCHECK(refs >= 1);  // LookupExtentInfo returns DATA_LOSS otherwise
  const bool full = flags & format::kExtentFlagFullBackref;
  if (refs > 1) {
    if (old.owner == tree_id && !full) {
      AddChildRefs(old, /*full_backref=*/true, tree_id, +1);
      refs_.SetFullBackref(old.bytenr, sb_.nodesize, old.level);
    } else {
      AddChildRefs(old, /*full_backref=*/false, tree_id, +1);
    }
  } else if (full) {
    AddChildRefs(old, /*full_backref=*/false, tree_id, +1);
    AddChildRefs(old, /*full_backref=*/true, tree_id, -1);
  } else if (old.owner != tree_id) {
    // One reference, normal, but from a tree that does not own it (its
    // owner dropped its share: deleted, or CoWed away from a FULL_BACKREF
    // parent). Its pointers are recorded as TREE(owner); the copy's must be
    // TREE(tree). Found by SubvolModel --seed=13 --ops=40000.
    AddChildRefs(old, /*full_backref=*/false, tree_id, +1);
    AddChildRefs(old, /*full_backref=*/false, old.owner, -1);
  }
  DropTreeRefLocked(tree_id, old);
}

// ---- Deletion ----------------------------------------------------------------
//
// Subvolume states (root item flags; every transition commits with the rest
// of its engine transaction):
//
//   live --MarkTreeDropping--> dying --DropTreeStep (steps, many commits)--> gone
//
//   - live: in engine/subvol, listed, with a SUBVOL_INFO item and a name.
//   - dying: ROOT_ITEM carries kRootFlagDropping; no name, not listed; the
//     tree shrinks by one child pointer per step (Tree::DropLeftmost), so the
//     root item's root pointer is the persisted progress: after a crash or
//     remount the cleaner continues from the tree as the last commit left it.
//   - gone: the root node is freed and the ROOT_ITEM deleted; the id is not
//     reused (next_tree_id only grows).
//
// Trouble case: snapshot S→T, delete S. T still shares S's nodes, owned by S
// and recorded as TREE(S) on their children. Dropping S's reference to such
// a node must first turn it into FULL_BACKREF (children += SHARED(node),
// children -= TREE(S)), or the children would keep a TREE(S) reference that
// no tree holds and a later CoW by T would drop the wrong one. Test:
// SubvolModel.* (deletions mixed with snapshots, check after every commit).

absl::StatusOr<bool> TxnManager::ShouldDescendForDrop(uint64_t tree_id, format::ChildPtr c,
                                                      int level) {
  if (level == 0) return false;  // leaves hold no tree-block references
  auto sv = fs_roots_.find(tree_id);
  if (sv == fs_roots_.end() || c.generation > sv->second.item.last_snapshot) return true;
  absl::MutexLock el(&extent_mu_);
  COWKV_ASSIGN_OR_RETURN(auto info, LookupExtentInfo(c.bytenr));
  return info.first == 1;
}

absl::Status TxnManager::DropChild(uint64_t tree_id, const Node& parent, int slot) {
  // The tree drops pointers only from nodes it CoWed (Tree::DropLeftmost).
  COWKV_DCHECK(parent.dirty.load(std::memory_order_relaxed));
  format::ChildPtr c = parent.Child(slot);
  COWKV_ASSIGN_OR_RETURN(NodeRef child,
                         cache_->Read({c.bytenr, c.generation, 0, parent.level - 1}));
  return DropRoot(tree_id, *child);
}

absl::Status TxnManager::DropRoot(uint64_t tree_id, const Node& node) {
  auto sv = fs_roots_.find(tree_id);
  const bool may_be_shared =
      sv != fs_roots_.end() && node.generation <= sv->second.item.last_snapshot;
  uint64_t refs = 1, flags = 0;
  if (may_be_shared) {
    absl::MutexLock el(&extent_mu_);
    COWKV_ASSIGN_OR_RETURN(std::tie(refs, flags), LookupExtentInfo(node.bytenr));
  }
  const bool full = flags & format::kExtentFlagFullBackref;
  // The cleaner drops under the exclusive barrier: nothing else runs here.
  absl::ReleasableMutexLock l(&space_mu_);
  if (refs > 1 && node.owner == tree_id && !full) {
    // Others keep the node: its references, recorded as the owner's, must
    // become the node's own (FULL_BACKREF) before the owner lets go.
    AddChildRefs(node, /*full_backref=*/true, tree_id, +1);
    AddChildRefs(node, /*full_backref=*/false, tree_id, -1);
    refs_.SetFullBackref(node.bytenr, sb_.nodesize, node.level);
  }
  COWKV_CHECK_MSG(refs > 1 || node.leaf(), "dropping an exclusive internal node whole");
  if (refs == 1 && node.leaf()) {
    // The last reference: the leaf goes, and with it its data references.
    AddChildRefs(node, full, full ? tree_id : node.owner, -1);
  }
  l.Release();
  return FreeTreeBlock(tree_id, node);  // frees at once what this txn allocated
}

absl::StatusOr<bool> TxnManager::DropTreeStep(uint64_t id) {
  auto it = fs_roots_.find(id);
  if (it == fs_roots_.end() || !it->second.dying()) {
    return absl::NotFoundError(absl::StrCat("no dying tree ", id));
  }
  COWKV_RETURN_IF_ERROR(ReserveForWrite(it->second.tree.get(), WriteKind::kDelete));
  COWKV_ASSIGN_OR_RETURN(bool more, it->second.tree->DropLeftmost());
  if (more) return true;
  COWKV_RETURN_IF_ERROR(DeleteRootTreeItem(RootItemKeyFor(id)));
  fs_roots_.erase(it);
  return false;
}

}  // namespace cowkv
