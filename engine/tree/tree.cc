#include "engine/tree/tree.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/coding.h"
#include "engine/base/status.h"

namespace cowkv {

using format::ChildPtr;
using format::EncodeChildPtr;
using format::ItemSize;

Tree::Tree(uint64_t id, RootRef root, NodeCache* cache, TreeHooks* hooks)
    : id_(id),
      expect_owner_(id < format::kDefaultTreeId || id == format::kLogTreeOwner ? id : 0),
      cache_(cache),
      hooks_(hooks),
      root_(root) {}

absl::StatusOr<std::unique_ptr<Tree>> Tree::CreateEmpty(uint64_t id, NodeCache* cache,
                                                        TreeHooks* hooks) {
  auto tree = std::make_unique<Tree>(id, RootRef{}, cache, hooks);
  COWKV_ASSIGN_OR_RETURN(NodeRef root, tree->NewNode(0));
  tree->SetRoot(root);
  return tree;
}

size_t Tree::capacity() const { return format::NodeCapacity(cache_->nodesize()); }

size_t Tree::max_value_size() const { return format::MaxInlineValue(cache_->nodesize()); }

absl::Status Tree::ValidatePut(absl::string_view key, absl::string_view value) const {
  if (key.empty() || key.size() > format::kMaxTreeKeySize) {
    return absl::InvalidArgumentError(
        absl::StrCat("key size ", key.size(), " outside [1, ", format::kMaxTreeKeySize, "]"));
  }
  if (value.size() > max_value_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "value size ", value.size(), " exceeds the inline limit ", max_value_size(),
        " for nodesize ", cache_->nodesize()));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeRef> Tree::ReadRoot() {
  if (root_node_ != nullptr) {
    COWKV_DCHECK(root_node_->bytenr == root_.bytenr && root_node_->level == root_.level);
    return root_node_;
  }
  return cache_->Read({root_.bytenr, root_.generation, expect_owner_, root_.level});
}

absl::StatusOr<NodeRef> Tree::ReadChild(const Node& parent, int slot) {
  if (parent.dirty.load(std::memory_order_relaxed)) {
    const NodeRef& kid = parent.kid(slot);
    if (kid != nullptr) {
      COWKV_DCHECK(kid->bytenr == parent.Child(slot).bytenr);
      COWKV_DCHECK(kid->level + 1 == parent.level);  // the read path checks it as DATA_LOSS
      return kid;
    }
  }
  ChildPtr c = parent.Child(slot);
  return cache_->Read({c.bytenr, c.generation, expect_owner_, parent.level - 1});
}

absl::StatusOr<std::pair<NodeRef, int>> Tree::FindInLeaf(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(NodeRef node, ReadRoot());
  while (!node->leaf()) {
    COWKV_ASSIGN_OR_RETURN(node, ReadChild(*node, node->ChildSlot(key)));
  }
  const int slot = node->LowerBound(key);
  const bool found = slot < node->nritems() && node->key(slot) == key;
  return std::make_pair(std::move(node), found ? slot : -1);
}

absl::StatusOr<bool> Tree::Find(absl::string_view key, NodeRef* leaf, absl::string_view* value) {
  COWKV_ASSIGN_OR_RETURN(auto found, FindInLeaf(key));
  if (found.second < 0) return false;
  *leaf = std::move(found.first);
  *value = (*leaf)->value(found.second);
  return true;
}

absl::StatusOr<std::optional<std::string>> Tree::Lookup(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(auto found, FindInLeaf(key));
  if (found.second < 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(found.first->value(found.second)));
}

absl::StatusOr<std::string> Tree::Get(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(std::optional<std::string> v, Lookup(key));
  if (!v.has_value()) return absl::NotFoundError("key not found");
  return *std::move(v);
}

absl::StatusOr<absl::string_view> Tree::Get(absl::string_view key, LeafHint* hint) {
  const uint64_t version = this->version();
  const bool reuse = hint->leaf != nullptr && hint->version == version &&
                     CompareKeyBytes(key, hint->lo) >= 0 &&
                     (!hint->has_hi || CompareKeyBytes(key, hint->hi) < 0);
  if (reuse) {
    ++hint->hits;
  } else {
    // Descend, narrowing [lo, hi) to the range of each child taken: child
    // s > 0 of an internal node holds keys in [key(s), key(s + 1)).
    std::string lo, hi;
    bool has_hi = false;
    COWKV_ASSIGN_OR_RETURN(NodeRef node, ReadRoot());
    while (!node->leaf()) {
      const int s = node->ChildSlot(key);
      if (s > 0) lo = std::string(node->key(s));
      if (s + 1 < node->nritems()) {
        hi = std::string(node->key(s + 1));
        has_hi = true;
      }
      COWKV_ASSIGN_OR_RETURN(node, ReadChild(*node, s));
    }
    *hint = LeafHint{std::move(node), std::move(lo), std::move(hi), has_hi, version, hint->hits, -1};
  }
  const Node& leaf = *hint->leaf;
  const int n = leaf.nritems();
  int slot = -1;
  if (reuse && hint->slot >= 0 && hint->slot < n && CompareKeyBytes(leaf.key(hint->slot), key) <= 0) {
    // Lookups in key order (seed 002's walk) land a few slots after the
    // last one (an extent item, then its back references): a short scan
    // forward instead of a binary search.
    constexpr int kScan = 8;
    for (int s = hint->slot; s < n && s <= hint->slot + kScan; ++s) {
      if (CompareKeyBytes(leaf.key(s), key) >= 0) {
        slot = s;
        break;
      }
      if (s + 1 == n) slot = n;
    }
  }
  if (slot < 0) slot = leaf.LowerBound(key);
  hint->slot = slot;
  if (slot < n && leaf.key(slot) == key) return leaf.value(slot);
  return absl::NotFoundError("key not found");
}

absl::StatusOr<NodeRef> Tree::NewNode(uint8_t level) {
  COWKV_CHECK(hooks_ != nullptr);
  COWKV_DCHECK(level < format::kMaxLevel);
  COWKV_ASSIGN_OR_RETURN(uint64_t bytenr, hooks_->AllocTreeBlock(id_, level));
  return cache_->NewDirty({bytenr, hooks_->generation(), id_, level});
}

void Tree::SetRoot(const NodeRef& node) {
  ++shape_;
  root_ = RootRef{node->bytenr, node->generation, node->level};
  root_node_ = node;
  root_changed_ = true;
}

absl::StatusOr<NodeRef> Tree::CowIfNeeded(NodeRef node, Node* parent, int parent_slot) {
  COWKV_CHECK(hooks_ != nullptr);
  const uint64_t gen = hooks_->generation();
  if (node->dirty) {
    COWKV_DCHECK(node->generation == gen);
    return node;
  }
  ++shape_;
  COWKV_ASSIGN_OR_RETURN(uint64_t bytenr, hooks_->AllocTreeBlock(id_, node->level));
  NodeRef copy = cache_->CopyDirty({bytenr, gen, id_, node->level}, *node);
  COWKV_RETURN_IF_ERROR(hooks_->CowTreeBlock(id_, *node));
  if (parent != nullptr) {
    parent->SetChild(parent_slot, copy);
  } else {
    SetRoot(copy);
  }
  return copy;
}

bool Tree::UseWriteHint(absl::string_view key, Path& path) {
  for (WriteHint& h : hints_) {
    if (h.top < 0 || h.shape != shape_ || h.path[h.top].node != root_node_) continue;
    Node* leaf = h.path[0].node.get();
    // A commit sealed the path (the next write CoWs it again).
    if (!leaf->dirty.load(std::memory_order_relaxed)) continue;
    if (h.range.has_lo && CompareKeyBytes(key, h.range.lo) < 0) continue;
    if (h.range.has_hi && CompareKeyBytes(key, h.range.hi) >= 0) continue;
    for (int lv = h.top; lv >= 0; --lv) path[lv] = h.path[lv];
    path[0].slot = leaf->LowerBound(key);
    h.used = ++hint_clock_;
    ++write_hint_hits_;
#ifndef COWKV_NDEBUG
    DCheckHintedPath(key, path, h.top);
#endif
    return true;
  }
  return false;
}

void Tree::SaveWriteHint(const Path& path, int top, const LeafRange& range) {
  WriteHint& h = hints_[0].used <= hints_[1].used ? hints_[0] : hints_[1];
  for (int lv = top; lv >= 0; --lv) h.path[lv] = path[lv];
  for (int lv = top + 1; lv <= h.top; ++lv) h.path[lv] = PathEntry{};  // a lower tree now
  h.range = range;
  h.top = top;
  h.shape = shape_;
  h.used = ++hint_clock_;
}

// The hinted path is the one a descent finds: the same node and slot at
// every level.
void Tree::DCheckHintedPath(absl::string_view key, const Path& path, int top) {
  absl::StatusOr<NodeRef> node = ReadRoot();
  COWKV_CHECK(node.ok() && *node == path[top].node);
  for (int lv = top; lv > 0; --lv) {
    const int slot = (*node)->ChildSlot(key);
    COWKV_CHECK_MSG(slot == path[lv].slot, "write hint: stale slot");
    node = ReadChild(**node, slot);
    COWKV_CHECK_MSG(node.ok() && *node == path[lv - 1].node, "write hint: stale node");
  }
}

absl::Status Tree::SearchForWrite(absl::string_view key, Path& path, bool* cow_failed) {
  if (UseWriteHint(key, path)) return absl::OkStatus();
  LeafRange range;
  COWKV_ASSIGN_OR_RETURN(NodeRef node, ReadRoot());
  absl::StatusOr<NodeRef> cowed = CowIfNeeded(std::move(node), nullptr, 0);
  if (!cowed.ok()) {
    if (cow_failed != nullptr) *cow_failed = true;
    return cowed.status();
  }
  node = *std::move(cowed);
  const int top = node->level;
  COWKV_CHECK(top < format::kMaxLevel);  // the decoder refuses deeper; Path holds kMaxLevel
  path[top].node = std::move(node);
  for (int level = top; level > 0; --level) {
    Node* n = path[level].node.get();
    const int slot = n->ChildSlot(key);
    path[level].slot = slot;
    // Child `slot` > 0 holds [key(slot), key(slot + 1)); deeper is tighter.
    if (slot > 0) {
      range.lo = n->key(slot);
      range.has_lo = true;
    }
    if (slot + 1 < n->nritems()) {
      range.hi = n->key(slot + 1);
      range.has_hi = true;
    }
    COWKV_ASSIGN_OR_RETURN(NodeRef child, ReadChild(*n, slot));
    cowed = CowIfNeeded(std::move(child), n, slot);
    if (!cowed.ok()) {
      if (cow_failed != nullptr) *cow_failed = true;
      return cowed.status();
    }
    path[level - 1].node = *std::move(cowed);
    COWKV_DCHECK(path[level - 1].node->level == level - 1);  // levels descend by one
    COWKV_DCHECK(path[level - 1].node->dirty.load(std::memory_order_relaxed));
  }
  path[0].slot = path[0].node->LowerBound(key);
  // Appending: past the leaf's last key, or past the last key sharing the
  // new key's first byte (the history's and new inodes' edges).
  const Node& leaf = *path[0].node;
  const int slot = path[0].slot;
  if (slot == leaf.nritems() || (!key.empty() && leaf.key(slot)[0] != key[0])) {
    SaveWriteHint(path, top, range);
  }
  return absl::OkStatus();
}

absl::Status Tree::Put(absl::string_view key, absl::string_view value) {
  COWKV_RETURN_IF_ERROR(ValidatePut(key, value));
  Path path;
  COWKV_RETURN_IF_ERROR(SearchForWrite(key, path));
  return PutAt(path, key, value);
}

absl::Status Tree::Upsert(absl::string_view key, MakeValue make, bool* changed) {
  *changed = false;
  COWKV_RETURN_IF_ERROR(ValidatePut(key, ""));
  Path path;
  COWKV_RETURN_IF_ERROR(SearchForWrite(key, path, changed));
  const Node& leaf = *path[0].node;
  const int slot = path[0].slot;
  absl::string_view old;
  const bool found = slot < leaf.nritems() && leaf.key(slot) == key;
  if (found) old = leaf.value(slot);
  COWKV_ASSIGN_OR_RETURN(absl::string_view value, make(found ? &old : nullptr));
  COWKV_RETURN_IF_ERROR(ValidatePut(key, value));
  *changed = true;
  return PutAt(path, key, value);
}

absl::Status Tree::PutAt(Path& path, absl::string_view key, absl::string_view value) {
  Node* leaf = path[0].node.get();
  const int slot = path[0].slot;
  int inserted = -1;
  if (slot < leaf->nritems() && leaf->key(slot) == key) {
    leaf->SetValue(slot, value);
  } else {
    leaf->InsertItem(slot, key, value);
    inserted = slot;
  }
  ++version_;
  return Repair(path, 0, inserted);
}

absl::Status Tree::Delete(absl::string_view key) {
  // Probe first so a miss CoWs nothing.
  COWKV_ASSIGN_OR_RETURN(auto found, FindInLeaf(key));
  if (found.second < 0) return absl::NotFoundError("key not found");
  return DeletePresent(key);
}

absl::Status Tree::DeletePresent(absl::string_view key) {
  Path path;
  COWKV_RETURN_IF_ERROR(SearchForWrite(key, path));
  Node* leaf = path[0].node.get();
  if (path[0].slot >= leaf->nritems() || leaf->key(path[0].slot) != key) {
    return absl::NotFoundError("key not found");
  }
  leaf->EraseItem(path[0].slot);
  ++version_;
  return Repair(path, 0, -1);
}

absl::StatusOr<size_t> Tree::DeleteRun(absl::string_view from, absl::string_view to, size_t max,
                                       OnItem on_item) {
  Path path;
  COWKV_RETURN_IF_ERROR(SearchForWrite(from, path));
  Node* leaf = path[0].node.get();
  const int first = path[0].slot;
  int end = first;
  while (end < leaf->nritems() && static_cast<size_t>(end - first) < max &&
         leaf->key(end) < to) {
    COWKV_RETURN_IF_ERROR(on_item(leaf->key(end), leaf->value(end)));
    ++end;
  }
  if (end == first) return 0;
  leaf->EraseLeafRange(first, end);
  ++version_;
  COWKV_RETURN_IF_ERROR(Repair(path, 0, -1));
  return static_cast<size_t>(end - first);
}

// Walks up from `level`, fixing each node the previous step changed: split
// on overflow, merge or borrow on underflow, collapse a one-child root.
// `inserted_slot` is the slot an insert just filled at `level` (-1: none).
absl::Status Tree::Repair(Path& path, int level, int inserted_slot) {
  // Only a node that lost bytes can have become underfull; checking grown
  // nodes would undo the sparse right edge that appending leaves behind.
  bool shrank = inserted_slot < 0;
  for (int lv = level; lv < format::kMaxLevel; ++lv) {
    Node* n = path[lv].node.get();
    COWKV_DCHECK(n->level == lv);
    const bool is_root = n->bytenr == root_.bytenr;
    if (n->used() > capacity()) {
      COWKV_RETURN_IF_ERROR(SplitNode(path, lv, &inserted_slot));
      shrank = false;  // the parent gained a separator
      continue;
    }
    inserted_slot = -1;
    if (is_root) return CollapseRoot();
    // An internal node left with one child is underfull whatever its bytes
    // (one 1 KiB separator is over a quarter of a 4 KiB node): merge it, or
    // its only child could never find a sibling (tree_model_test
    // --seed=300 --ops=300000).
    if (shrank && (n->used() < capacity() / 4 || (!n->leaf() && n->nritems() < 2))) {
      bool changed_parent = false;
      COWKV_RETURN_IF_ERROR(FixUnderflow(path, lv, &changed_parent));
      if (changed_parent) continue;  // shrank stays true: the parent changed
    }
    return absl::OkStatus();
  }
  COWKV_CHECK_MSG(false, "repair ran past kMaxLevel");
}

// Splits path[lv] in two. `*inserted_slot` is the slot just filled there;
// on return, the slot this split filled in the parent.
// Appending at the right edge of the tree (ascending inserts): leave the
// left node full and start the right one with the new item alone (an
// internal node keeps two, so no node has a single child), so sequential
// loads pack nodes full instead of half, as LMDB and btrfs do. The same at
// the right edge of the keys sharing the new key's first byte (the next key
// right of this node starts otherwise): the KV history's entries and new
// inodes are appended there, in order. Only those edges (a spine per first
// byte) are ever left sparse, which keeps the fill bound the space
// reservation relies on (docs/design.md).
// Not in the engine's own trees: while a commit runs delayed refs, an
// append split in the extent tree (a new one-item node) and a merge of
// that node after a nearby delete queue refs that repeat the pattern in
// the next round, forever (subvol_model_test --seed=149 --ops=40000).
// Returns the split point, or -1 for an even split.
int Tree::AppendSplitPoint(const Path& path, int lv, int inserted_slot) const {
  const Node& left = *path[lv].node;
  const int n = left.nritems();
  const int keep_right = left.leaf() ? 1 : 2;
  if (id_ < format::kDefaultTreeId || inserted_slot != n - 1 || n - keep_right < 1) return -1;
  const absl::string_view key = left.key(n - 1);
  for (int j = lv + 1; j <= root_.level; ++j) {
    const Node& up = *path[j].node;
    if (path[j].slot < up.nritems() - 1) {
      const absl::string_view next = up.key(path[j].slot + 1);
      if (!key.empty() && !next.empty() && next[0] == key[0]) return -1;
      break;
    }
  }
  size_t right_bytes = 0;
  for (int i = n - keep_right; i < n; ++i) right_bytes += left.item_size(i);
  return left.used() - right_bytes <= capacity() ? n - keep_right : -1;
}

absl::Status Tree::SplitNode(Path& path, int lv, int* inserted_slot) {
  ++shape_;
  NodeRef left = path[lv].node;
  const int n = left->nritems();
  COWKV_CHECK(n >= 2);
  const size_t total = left->used(), cap = capacity();
  int best = AppendSplitPoint(path, lv, *inserted_slot);
  size_t best_score = SIZE_MAX, prefix = 0;
  const bool appending = best > 0;
  // An internal node keeps at least two children on each side.
  const int min_side = left->leaf() ? 1 : 2;
  for (int k = 1; k < n && !appending; ++k) {
    prefix += left->item_size(k - 1);
    if (prefix > cap) break;
    if (total - prefix > cap || k < min_side || n - k < min_side) continue;
    size_t score = prefix > total / 2 ? prefix - total / 2 : total / 2 - prefix;
    if (score < best_score) {
      best_score = score;
      best = k;
    }
  }
  // Items are at most half the capacity, so some split point always fits.
  COWKV_CHECK_MSG(best > 0, "no split point fits");
  if (left->level + 1 >= format::kMaxLevel && left->bytenr == root_.bytenr) {
    return absl::ResourceExhaustedError("tree height limit reached");
  }
  COWKV_ASSIGN_OR_RETURN(NodeRef right, NewNode(left->level));
  left->MoveTailTo(best, right.get());
  // Both halves fit, and the separator is a real key (not a fence).
  COWKV_DCHECK(left->used() <= cap);
  COWKV_DCHECK(right->used() <= cap);
  COWKV_DCHECK(!right->key(0).empty());
  std::string sep(right->key(0));
  if (left->bytenr == root_.bytenr) {
    COWKV_RETURN_IF_ERROR(GrowRoot(left, std::move(sep), right));
    COWKV_ASSIGN_OR_RETURN(path[lv + 1].node, ReadRoot());
    path[lv + 1].slot = 0;
    *inserted_slot = 1;
    return absl::OkStatus();
  }
  Node* parent = path[lv + 1].node.get();
  const int slot = path[lv + 1].slot + 1;
  parent->InsertItem(slot, sep, EncodeChildPtr({right->bytenr, right->generation}));
  parent->SetChild(slot, right);
  *inserted_slot = slot;
  return absl::OkStatus();
}

absl::Status Tree::GrowRoot(NodeRef left, std::string sep, NodeRef right) {
  COWKV_DCHECK(left->level == right->level);
  // SplitNode refuses (RESOURCE_EXHAUSTED) a root split at the height limit.
  COWKV_CHECK(left->level + 1 < format::kMaxLevel);
  COWKV_ASSIGN_OR_RETURN(NodeRef root, NewNode(left->level + 1));
  root->InsertItem(0, "", EncodeChildPtr({left->bytenr, left->generation}));
  root->InsertItem(1, sep, EncodeChildPtr({right->bytenr, right->generation}));
  root->SetChild(0, left);
  root->SetChild(1, right);
  SetRoot(root);
  return absl::OkStatus();
}

absl::Status Tree::CollapseRoot() {
  for (;;) {
    COWKV_ASSIGN_OR_RETURN(NodeRef root, ReadRoot());
    if (root->leaf() || root->nritems() != 1) return absl::OkStatus();
    ++shape_;
    COWKV_ASSIGN_OR_RETURN(NodeRef child, ReadChild(*root, 0));
    // The child may be shared with a snapshot; a root never is (the
    // reference from a root item is always the tree's own), so CoW it first.
    COWKV_ASSIGN_OR_RETURN(child, CowIfNeeded(std::move(child), root.get(), 0));
    SetRoot(child);
    COWKV_RETURN_IF_ERROR(hooks_->FreeTreeBlock(id_, *root));
  }
}

namespace {
// Removes slot 0 of an internal node and keeps its first key the lower fence.
void RemoveFirstChild(Node* n) {
  std::string fence(n->key(0));
  n->EraseItem(0);
  if (n->nritems() > 0) n->SetKey(0, fence);
}
}  // namespace

absl::StatusOr<bool> Tree::DropLeftmost() {
  ++shape_;
  COWKV_ASSIGN_OR_RETURN(NodeRef root, ReadRoot());
  if (root->leaf()) {  // possibly shared, and holding data references
    COWKV_RETURN_IF_ERROR(hooks_->DropRoot(id_, *root));
    ++version_;
    root_node_.reset();  // the tree is gone
    return false;
  }
  COWKV_ASSIGN_OR_RETURN(bool own_root, hooks_->ShouldDescendForDrop(
                                            id_, {root->bytenr, root->generation}, root->level));
  if (!own_root) {  // shared with a snapshot: drop our reference, keep the nodes
    COWKV_RETURN_IF_ERROR(hooks_->DropRoot(id_, *root));
    ++version_;
    root_node_.reset();  // the tree is gone
    return false;
  }
  COWKV_ASSIGN_OR_RETURN(root, CowIfNeeded(std::move(root), nullptr, 0));
  Path path;
  const int top = root->level;
  COWKV_CHECK(top < format::kMaxLevel);
  path[top].node = root;
  int level = top;
  for (;; --level) {
    // ShouldDescendForDrop answers false for a leaf child: path[level - 1]
    // below stays inside the path.
    COWKV_CHECK(level >= 1);
    Node* n = path[level].node.get();
    COWKV_ASSIGN_OR_RETURN(bool descend, hooks_->ShouldDescendForDrop(id_, n->Child(0), level - 1));
    if (!descend) break;
    COWKV_ASSIGN_OR_RETURN(NodeRef child, ReadChild(*n, 0));
    COWKV_ASSIGN_OR_RETURN(path[level - 1].node, CowIfNeeded(std::move(child), n, 0));
  }
  COWKV_RETURN_IF_ERROR(hooks_->DropChild(id_, *path[level].node, 0));
  RemoveFirstChild(path[level].node.get());
  ++version_;
  // Remove nodes the removal left empty, bottom-up.
  for (; path[level].node->nritems() == 0; ++level) {
    COWKV_RETURN_IF_ERROR(hooks_->FreeTreeBlock(id_, *path[level].node));
    if (level == top) {
      root_node_.reset();  // the tree is gone
      return false;
    }
    RemoveFirstChild(path[level + 1].node.get());
  }
  return true;
}

absl::Status Tree::FixUnderflow(Path& path, int lv, bool* changed_parent) {
  ++shape_;
  *changed_parent = false;
  Node* parent = path[lv + 1].node.get();
  const int pslot = path[lv + 1].slot;
  // Only a root can have a single child, and Repair collapses it at once.
  COWKV_CHECK(parent->nritems() >= 2);
  const int lslot = pslot > 0 ? pslot - 1 : 0;
  const int rslot = lslot + 1;
  const int sib_slot = pslot == lslot ? rslot : lslot;
  COWKV_ASSIGN_OR_RETURN(NodeRef sib, ReadChild(*parent, sib_slot));
  COWKV_ASSIGN_OR_RETURN(sib, CowIfNeeded(std::move(sib), parent, sib_slot));
  NodeRef left = pslot == lslot ? path[lv].node : sib;
  NodeRef right = pslot == lslot ? sib : path[lv].node;
  COWKV_DCHECK(left->level == right->level);
  const size_t cap = capacity();
  if (left->used() + right->used() <= cap) {
    right->MoveTailTo(0, left.get());
    parent->EraseItem(rslot);
    path[lv].node = left;
    path[lv + 1].slot = lslot;
    COWKV_RETURN_IF_ERROR(hooks_->FreeTreeBlock(id_, *right));
    *changed_parent = true;
    return absl::OkStatus();
  }
  // Borrow: move items one at a time while that narrows the imbalance.
  bool moved = false;
  while (left->used() < right->used() && right->nritems() > 1) {
    size_t s = right->item_size(0);
    if (s >= right->used() - left->used() || left->used() + s > cap) break;
    left->InsertItem(left->nritems(), right->key(0), right->value(0));
    right->EraseItem(0);
    moved = true;
  }
  while (right->used() < left->used() && left->nritems() > 1) {
    const int last = left->nritems() - 1;
    size_t s = left->item_size(last);
    if (s >= left->used() - right->used() || right->used() + s > cap) break;
    right->InsertItem(0, left->key(last), left->value(last));
    left->EraseItem(last);
    moved = true;
  }
  if (moved) {
    parent->SetKey(rslot, right->key(0));
    *changed_parent = true;
  }
  return absl::OkStatus();
}

// ---- TreeIterator -------------------------------------------------------------

TreeIterator::TreeIterator(Tree* tree) : tree_(tree) {}

void TreeIterator::Fail(absl::Status s) {
  status_ = std::move(s);
  valid_ = false;
}

void TreeIterator::Load() {
  const Node& leaf = *nodes_[0];
  const int slot = slots_[0];
  if (leaf.dirty.load(std::memory_order_acquire)) {
    // A writer may change a dirty leaf in place between our calls.
    key_.assign(leaf.key(slot).data(), leaf.key(slot).size());
    value_.assign(leaf.value(slot).data(), leaf.value(slot).size());
    key_view_ = key_;
    value_view_ = value_;
  } else {
    key_view_ = leaf.key(slot);
    value_view_ = leaf.value(slot);
  }
  valid_ = true;
}

bool TreeIterator::TryFastPrev() {
  if (!valid_ || Stale()) return false;
  const Node& leaf = *nodes_[0];
  if (leaf.dirty.load(std::memory_order_acquire) || slots_[0] == 0) return false;
  --slots_[0];
  Load();
  return true;
}

void TreeIterator::SeekToFirst() { SeekImpl("", false); }

void TreeIterator::SeekToLast() {
  status_ = absl::OkStatus();
  valid_ = false;
  version_ = tree_->version();
  auto root = tree_->ReadRoot();
  if (!root.ok()) return Fail(root.status());
  levels_ = (*root)->level + 1;
  nodes_[levels_ - 1] = *root;
  slots_[levels_ - 1] = (*root)->nritems() - 1;
  DescendEdge(levels_ - 1, Edge::kLast);
}

void TreeIterator::Seek(absl::string_view key) { SeekImpl(key, false); }
void TreeIterator::SeekForPrev(absl::string_view key) { SeekImpl(key, true); }

void TreeIterator::SeekImpl(absl::string_view key, bool for_prev) {
  status_ = absl::OkStatus();
  valid_ = false;
  version_ = tree_->version();
  auto root = tree_->ReadRoot();
  if (!root.ok()) return Fail(root.status());
  levels_ = (*root)->level + 1;
  nodes_[levels_ - 1] = *root;
  for (int lv = levels_ - 1; lv > 0; --lv) {
    slots_[lv] = nodes_[lv]->ChildSlot(key);
    auto child = tree_->ReadChild(*nodes_[lv], slots_[lv]);
    if (!child.ok()) return Fail(child.status());
    nodes_[lv - 1] = *child;
  }
  const Node& leaf = *nodes_[0];
  int slot = leaf.LowerBound(key);
  if (!for_prev) {
    slots_[0] = slot;
    if (slot < leaf.nritems()) return Load();
    slots_[0] = leaf.nritems() - 1;
    return Step(true);
  }
  if (slot < leaf.nritems() && leaf.key(slot) == key) {
    slots_[0] = slot;
    return Load();
  }
  slots_[0] = slot;  // Step(false) moves to slot - 1 or the previous leaf
  return Step(false);
}

// Moves one item forward or back from the current path position.
void TreeIterator::Step(bool forward) {
  const Node& leaf = *nodes_[0];
  int next = slots_[0] + (forward ? 1 : -1);
  if (next >= 0 && next < leaf.nritems()) {
    slots_[0] = next;
    return Load();
  }
  for (int lv = 1; lv < levels_; ++lv) {
    int s = slots_[lv] + (forward ? 1 : -1);
    if (s >= 0 && s < nodes_[lv]->nritems()) {
      slots_[lv] = s;
      return DescendEdge(lv, forward ? Edge::kFirst : Edge::kLast);
    }
  }
  valid_ = false;
}

void TreeIterator::DescendEdge(int from_level, Edge edge) {
  for (int lv = from_level; lv > 0; --lv) {
    auto child = tree_->ReadChild(*nodes_[lv], slots_[lv]);
    if (!child.ok()) return Fail(child.status());
    nodes_[lv - 1] = *child;
    slots_[lv - 1] = edge == Edge::kFirst ? 0 : (*child)->nritems() - 1;
  }
  if (nodes_[0]->nritems() == 0) {  // only an empty root leaf
    valid_ = false;
    return;
  }
  Load();
}

void TreeIterator::Next() {
  if (!valid_) return;
  if (Stale()) {
    std::string cur(key_view_);
    SeekImpl(cur, false);
    if (valid_ && key_view_ == cur) Step(true);
    return;
  }
  Step(true);
}

void TreeIterator::Prev() {
  if (!valid_) return;
  if (Stale()) {
    std::string cur(key_view_);
    SeekImpl(cur, true);
    if (valid_ && key_view_ == cur) Step(false);
    return;
  }
  Step(false);
}

}  // namespace cowkv
