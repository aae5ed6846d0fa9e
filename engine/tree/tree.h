// Tree: a copy-on-write B+tree over byte-string keys in memcmp order.
//
// Keys are 1..format::kMaxTreeKeySize bytes; leaf values are stored inline up to
// format::MaxInlineValue(nodesize). Every write CoWs the path from the root
// to the leaf it changes (a node already dirty in the running engine
// transaction is changed in place), then repairs the path bottom-up: an
// overflowing node splits, an underfull one (< 1/4 of capacity) merges with
// or borrows from a sibling, a root with one child collapses. The path is an
// explicit array bounded by kMaxLevel; nothing recurses.
//
// The tree never decides when to commit and never allocates space itself: it
// asks TreeHooks for new node bytenrs and reports nodes it stops using, so the
// transaction layer can queue the delayed refs and account for space.
//
// Thread safety: none. The owner serialises writers against each other and
// against readers (StoreImpl holds its lock around every call). Readers may
// share the tree with each other.
#ifndef COWKV_ENGINE_TREE_TREE_H_
#define COWKV_ENGINE_TREE_TREE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/format/layout.h"
#include "engine/tree/node.h"
#include "engine/tree/node_cache.h"

namespace cowkv {

// Where a tree's root is.
struct RootRef {
  uint64_t bytenr = 0;
  uint64_t generation = 0;
  uint8_t level = 0;
};

// What a tree needs from the transaction layer to change itself.
class TreeHooks {
 public:
  virtual ~TreeHooks() = default;
  // Generation of the running engine transaction.
  virtual uint64_t generation() const = 0;
  // Allocates space for a new node of tree `owner` at `level` and queues its
  // +1 ref. Only fails if the caller did not reserve enough space first.
  virtual absl::StatusOr<uint64_t> AllocTreeBlock(uint64_t owner, uint8_t level) = 0;
  // Tree `tree_id` replaced the clean node `old` (root or not: a snapshot
  // shares roots too) by a copy: adjust the refs of `old`'s children if
  // `old` may be shared (lazy refcounting, docs/design.md "Snapshots and
  // shared blocks"), and drop the tree's reference to `old`.
  virtual absl::Status CowTreeBlock(uint64_t tree_id, const Node& old) = 0;
  // Tree `tree_id` stops referencing `node`, a node it owns exclusively
  // (merged away, or a collapsed root): queue the -1.
  virtual absl::Status FreeTreeBlock(uint64_t tree_id, const Node& node) = 0;
  // Dropping a deleted tree: should the walk descend into child `c` (at
  // `level`) of a node of tree `tree_id`? Only into internal nodes the tree
  // owns exclusively; anything else is dropped whole by DropChild.
  virtual absl::StatusOr<bool> ShouldDescendForDrop(uint64_t tree_id, format::ChildPtr c,
                                                    int level) = 0;
  // Tree `tree_id` drops its pointer to child `slot` of `parent` (a dirty
  // node it owns) and with it the whole subtree below, as far as it is not
  // shared.
  virtual absl::Status DropChild(uint64_t tree_id, const Node& parent, int slot) = 0;
  // Same for a root node the walk may not descend into (a shared root).
  virtual absl::Status DropRoot(uint64_t tree_id, const Node& root) = 0;
};

class Tree {
 public:
  // `cache` and `hooks` are borrowed and outlive the tree. `hooks` may be
  // null for a read-only tree.
  Tree(uint64_t id, RootRef root, NodeCache* cache, TreeHooks* hooks);
  Tree(const Tree&) = delete;
  Tree& operator=(const Tree&) = delete;

  // Creates an empty tree: one empty dirty leaf as its root.
  static absl::StatusOr<std::unique_ptr<Tree>> CreateEmpty(uint64_t id, NodeCache* cache,
                                                           TreeHooks* hooks);

  // NOT_FOUND when absent.
  absl::StatusOr<std::string> Get(absl::string_view key);
  // Get with absence as nullopt (no NOT_FOUND status to build).
  absl::StatusOr<std::optional<std::string>> Lookup(absl::string_view key);
  // Lookup without a copy: true and `*value` viewing the item inside
  // `*leaf` (valid while the caller holds `*leaf` and the tree does not
  // change), or false when absent.
  absl::StatusOr<bool> Find(absl::string_view key, NodeRef* leaf, absl::string_view* value);
  // The leaf a lookup ended in and the key range it covers, kept between
  // lookups that move through the tree in key order (fiemap's extent-tree
  // lookups, seed 002): while the tree is unchanged (version) and the key
  // falls in [lo, hi), Get answers from the leaf without descending.
  struct LeafHint {
    NodeRef leaf;
    std::string lo;         // inclusive
    std::string hi;         // exclusive, if has_hi
    bool has_hi = false;
    uint64_t version = 0;
    uint64_t hits = 0;      // lookups answered from the leaf
    int slot = -1;          // the leaf slot the last lookup landed on
  };
  // The value views the hinted leaf: valid while `hint` holds it and the
  // tree does not change.
  absl::StatusOr<absl::string_view> Get(absl::string_view key, LeafHint* hint);
  // Inserts or overwrites.
  absl::Status Put(absl::string_view key, absl::string_view value);
  // Put whose value depends on the current one, in one descent: `make`
  // sees the current value (null when absent; a view valid only during the
  // call) and returns the new one (which must not view the tree). The path
  // to the key is CoWed first (as DeletePresent). On failure `*changed`
  // tells whether the tree may be half written (a CoW or the change itself
  // failed); false means its items are as before (`make` failed, or a node
  // read did).
  using MakeValue =
      absl::FunctionRef<absl::StatusOr<absl::string_view>(const absl::string_view* old)>;
  absl::Status Upsert(absl::string_view key, MakeValue make, bool* changed);
  // NOT_FOUND when absent (and nothing is CoWed).
  absl::Status Delete(absl::string_view key);
  // Delete without the probe descent, for a key the caller has just seen
  // in the tree or expects there: an absent key is still NOT_FOUND, but
  // the path to where it would be has been CoWed.
  absl::Status DeletePresent(absl::string_view key);

  // Deletes, in one change of one leaf, the items of [from, to) held by the
  // leaf where `from` belongs, at most `max` of them (the caller has just
  // seen `from` in the tree: the path to it is CoWed whatever is found).
  // `on_item` sees each before it goes; its error stops the run before
  // anything is deleted. Returns how many went: 0 when that leaf holds no
  // key of the range (the next one, if any, starts a later leaf).
  using OnItem = absl::FunctionRef<absl::Status(absl::string_view key, absl::string_view value)>;
  absl::StatusOr<size_t> DeleteRun(absl::string_view from, absl::string_view to, size_t max,
                                   OnItem on_item);

  // Validates sizes without touching the tree.
  absl::Status ValidatePut(absl::string_view key, absl::string_view value) const;

  uint64_t id() const { return id_; }
  const RootRef& root() const { return root_; }
  int height() const { return root_.level + 1; }
  // Bumped by every change; iterators re-seek when it moved.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  // True when the root moved since the last ClearRootChanged().
  bool root_changed() const { return root_changed_; }
  void ClearRootChanged() { root_changed_ = false; }
  NodeCache* cache() const { return cache_; }
  size_t max_value_size() const;

  // Dropping a deleted tree, one child pointer at a time: descends the
  // leftmost path while nodes are exclusively owned (CoWing them), drops the
  // first child it may not descend into, removes the pointer and any node
  // left empty. Every step leaves a valid, smaller tree, so a crash between
  // commits resumes where the last commit left it. Returns false once the
  // whole tree, root included, is gone.
  absl::StatusOr<bool> DropLeftmost();

  // Worst-case nodes one Put or Delete can allocate at the current height.
  int WorstCaseNodesPerOp() const { return 3 * (height() + 2); }

  // Read access for iterators and tools.
  absl::StatusOr<NodeRef> ReadRoot();
  absl::StatusOr<NodeRef> ReadChild(const Node& parent, int slot);

 private:
  struct PathEntry {
    NodeRef node;
    int slot = 0;
  };
  using Path = std::array<PathEntry, format::kMaxLevel>;

  // The leaf `key` belongs in, and its slot there (-1: absent). Reads only.
  absl::StatusOr<std::pair<NodeRef, int>> FindInLeaf(absl::string_view key);

  // `*cow_failed` (when given) is set if a failure came from a CoW (which
  // may be half done) rather than from a read (which changes nothing).
  absl::Status SearchForWrite(absl::string_view key, Path& path, bool* cow_failed = nullptr);
  // Puts `value` at the leaf slot SearchForWrite found for `key` and repairs.
  absl::Status PutAt(Path& path, absl::string_view key, absl::string_view value);
  absl::StatusOr<NodeRef> CowIfNeeded(NodeRef node, Node* parent, int parent_slot);
  absl::Status Repair(Path& path, int level, int inserted_slot);
  absl::Status SplitNode(Path& path, int level, int* inserted_slot);
  int AppendSplitPoint(const Path& path, int lv, int inserted_slot) const;
  absl::Status FixUnderflow(Path& path, int level, bool* changed_parent);
  absl::Status GrowRoot(NodeRef left, std::string sep, NodeRef right);
  absl::Status CollapseRoot();
  absl::StatusOr<NodeRef> NewNode(uint8_t level);
  void SetRoot(const NodeRef& node);
  size_t capacity() const;

  // The path of a recent descent for a write, reused by a later one whose
  // key falls in the same leaf while the tree's shape is unchanged (no
  // split, merge, CoW or new root since: shape_), so appends (the KV
  // history's entries, new inodes, a sequential load) skip the descent.
  // Two, least recently used replaced: the history's and a sequential
  // load's data keys each keep theirs.
  // A leaf's key range [lo, hi), as views into internal nodes of the path
  // to it, which change only with shape_.
  struct LeafRange {
    absl::string_view lo, hi;
    bool has_lo = false, has_hi = false;
  };
  // Saved only by writes that append (past the leaf's last key or its last
  // key of the new key's first byte): a random write neither pays for
  // saving one nor evicts an appender's.
  struct WriteHint {
    Path path;
    int top = -1;  // -1: empty
    LeafRange range;
    uint64_t shape = 0;
    uint64_t used = 0;
  };
  bool UseWriteHint(absl::string_view key, Path& path);
  void SaveWriteHint(const Path& path, int top, const LeafRange& range);
  void DCheckHintedPath(absl::string_view key, const Path& path, int top);

  const uint64_t id_;
  // Nodes of subvolume trees may be owned by the tree they were shared from,
  // so only the engine's own trees check the owner on read.
  const uint64_t expect_owner_;
  NodeCache* const cache_;
  TreeHooks* const hooks_;
  RootRef root_;
  // The node at root_ once a writer has set it (SetRoot): ReadRoot returns
  // it without the cache's lock and lookup. Held even if the cache evicts
  // it (one node per tree); changed only with root_, under the store's
  // exclusive lock.
  NodeRef root_node_;
  // Bumped by the writer under the store's exclusive lock; read lock-free by
  // iterators' fast path (acquire pairs with the writer's release).
  std::atomic<uint64_t> version_{0};
  bool root_changed_ = false;
  // Bumped by every change of the tree's shape (any change but an item
  // put or erased in a leaf): WriteHint's validity. Writer only.
  uint64_t shape_ = 0;
  std::array<WriteHint, 2> hints_;
  uint64_t hint_clock_ = 0;

 public:
  // Writes that reused a hinted path (tests, benchmarks).
  uint64_t write_hint_hits() const { return write_hint_hits_; }

 private:
  uint64_t write_hint_hits_ = 0;
};

// Iterates a tree at its latest state. Holds NodeRefs along its path; when the
// tree's version moved since it positioned itself, it re-seeks by key, so it
// is safe (and sees newer data) across writes. Not thread-safe; the caller
// holds the same lock it would hold for Tree::Get.
class TreeIterator {
 public:
  explicit TreeIterator(Tree* tree);

  bool Valid() const { return valid_; }
  void SeekToFirst();
  void SeekToLast();
  void Seek(absl::string_view key);         // first key >= key
  void SeekForPrev(absl::string_view key);  // last key <= key
  void Next();
  void Prev();
  // Steps within the current leaf without any lock when that leaf is clean
  // (immutable) and the tree has not changed; false = take the lock and
  // call Next()/Prev().
  bool TryFastNext() {
    if (!valid_ || Stale()) return false;
    const Node& leaf = *nodes_[0];
    if (leaf.dirty.load(std::memory_order_acquire) || slots_[0] + 1 >= leaf.nritems()) {
      return false;
    }
    // Load() for a clean leaf: views into it.
    const int slot = ++slots_[0];
    key_view_ = leaf.key(slot);
    value_view_ = leaf.value(slot);
    return true;
  }
  bool TryFastPrev();
  absl::string_view key() const { return key_view_; }
  absl::string_view value() const { return value_view_; }
  const absl::Status& status() const { return status_; }
  // The nodes from the current item's leaf (level 0) up to the root:
  // {bytenr, generation}. Valid while Valid().
  int path_levels() const { return levels_; }
  std::pair<uint64_t, uint64_t> PathNode(int level) const {
    return {nodes_[level]->bytenr, nodes_[level]->generation};
  }

 private:
  enum class Edge { kFirst, kLast };
  void SeekImpl(absl::string_view key, bool for_prev);
  void DescendEdge(int from_level, Edge edge);
  void Step(bool forward);
  bool Stale() const { return tree_->version() != version_; }
  void Load();
  void Fail(absl::Status s);

  Tree* const tree_;
  std::array<NodeRef, format::kMaxLevel> nodes_;
  std::array<int, format::kMaxLevel> slots_{};
  int levels_ = 0;
  uint64_t version_ = 0;
  bool valid_ = false;
  // Views into the leaf when it is clean, else into the copies below.
  absl::string_view key_view_;
  absl::string_view value_view_;
  std::string key_;
  std::string value_;
  absl::Status status_;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_TREE_TREE_H_
