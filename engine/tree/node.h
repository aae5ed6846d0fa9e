// Node: one tree node in memory.
//
// A node is either clean (its bytes on the device equal its encoding;
// immutable, shared by readers, evictable from the cache) or dirty (created by
// CoW in the running engine transaction, changed in place by the single
// writer, pinned in the cache until the commit writes it).
//
// Representation, chosen for search speed (see docs/design.md "Decoded nodes
// in memory"): key and value bytes live in one arena; a slot array holds, per
// item, its arena offset, lengths and a 64-bit search word — the 8 key bytes
// that follow the prefix every indexed key shares, big-endian. Binary search
// compares words (contiguous, no pointer chasing, no memcmp call) and falls
// back to full key comparison only among items with equal words. Internal
// nodes leave slot 0 (the lower fence) out of the index.
//
// key(i)/value(i) views are valid until the next change to this node.
//
// Internal nodes: value(i) is an encoded ChildPtr; key(0) is the node's lower
// fence ("" on the leftmost spine); key(i) for i > 0 is a separator: every key
// in child i is >= key(i) and < key(i+1).
#ifndef COWKV_ENGINE_TREE_NODE_H_
#define COWKV_ENGINE_TREE_NODE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/base/check.h"
#include "engine/format/node_codec.h"
#include "engine/tree/node_arena.h"

namespace cowkv {

class Node {
 public:
  Node(const format::NodeHeader& header, const std::vector<format::ItemView>& items);
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  bool leaf() const { return level == 0; }
  int nritems() const { return static_cast<int>(slots_.size()); }
  format::NodeHeader header() const { return {bytenr, generation, owner, level}; }

  absl::string_view key(int i) const {
    const Slot& s = slots_[i];
    return absl::string_view(arena_.data() + s.off, s.klen);
  }
  absl::string_view value(int i) const {
    const Slot& s = slots_[i];
    return absl::string_view(arena_.data() + s.off + s.klen, s.vlen);
  }
  size_t item_size(int i) const { return format::ItemSize(slots_[i].klen, slots_[i].vlen); }

  // First slot whose key is >= `key` (nritems() if none).
  int LowerBound(absl::string_view key) const;
  // Internal nodes: the slot of the child whose range holds `key`.
  int ChildSlot(absl::string_view key) const;
  format::ChildPtr Child(int slot) const {
    COWKV_DCHECK(!leaf() && slot >= 0 && slot < nritems());
    return format::DecodeChildPtr(value(slot));
  }

  // Changes (the writer only, on a dirty node). `key`/`value` must not view
  // this node's own arena.
  void InsertItem(int slot, absl::string_view key, absl::string_view value);
  void EraseItem(int slot);
  // Erases the items [from, to) of a leaf at once.
  void EraseLeafRange(int from, int to);
  void SetValue(int slot, absl::string_view value);
  void SetKey(int slot, absl::string_view key);
  // Moves items [from, nritems()) to the end of `dst`.
  void MoveTailTo(int from, Node* dst);
  // Replaces this node's items with a copy of `src`'s.
  void CopyItemsFrom(const Node& src);
  // Drops arena garbage and spare capacity.
  void Compact();
  // Compacts only when a quarter or more of the arena is garbage (a commit
  // seals thousands of nodes under the tree lock; copying each costs).
  void CompactIfWasteful() {
    if (garbage_ * 4 > arena_.size()) Compact();
  }

  // Dirty internal nodes remember the dirty children they point to, so the
  // writer's descent skips the cache lookup. A pure cache: null = unknown;
  // a non-null kid(i) is always the node at Child(i). Set only by the writer;
  // released by the commit before the node becomes clean.
  const std::shared_ptr<Node>& kid(int slot) const;
  void SetChild(int slot, const std::shared_ptr<Node>& child);
  void ReleaseKids() { kids_.clear(); kids_.shrink_to_fit(); }

  // Approximate heap footprint, for the cache's byte bound.
  size_t MemoryBytes() const {
    return sizeof(Node) + slots_.capacity() * (sizeof(Slot) + sizeof(uint64_t)) +
           arena_.capacity();
  }
  // Sum of ItemSize over items: the encoded size split/merge decisions use.
  size_t used() const { return used_; }

  // Header fields; fixed for the node's life (CoW makes a new Node).
  const uint64_t bytenr;
  const uint64_t generation;
  const uint64_t owner;
  const uint8_t level;

  // Set by the writer that creates the node (CoW), cleared by the commit
  // that wrote it, both under the store's exclusive lock. Iterators read it
  // without that lock: once a release-store makes it false the node is
  // immutable, so an acquire-load of false lets them read items lock-free.
  std::atomic<bool> dirty{false};
  // CLOCK "recently used" bit; relaxed: a hint for eviction, nothing more.
  std::atomic<bool> referenced{true};

 private:
  struct Slot {
    uint32_t off;
    uint32_t vlen;
    uint16_t klen;
  };
  int first_indexed() const { return leaf() ? 0 : 1; }
  uint64_t WordOf(absl::string_view key) const;
  // Where `key` falls relative to the shared prefix: -1 below every indexed
  // key, +1 above, 0 shares it (then WordOf applies).
  int ComparePrefix(absl::string_view key) const;
  void RebuildIndex();
  void NoteKey(int slot);
  uint32_t Append(absl::string_view key, absl::string_view value);
  void MaybeCompact();
  template <bool kUpper>
  int Bound(absl::string_view key) const;
  // Debug checks of a change's arguments (node.cc).
  void DCheckNewKey(int slot, absl::string_view k, bool replacing) const;
  void DCheckValue(absl::string_view v) const;
  bool ViewsArena(absl::string_view s) const;

  std::vector<Slot> slots_;
  // words_[i] is slot i's search word; kept apart from slots_ so a binary
  // search touches as few cache lines as possible.
  std::vector<uint64_t> words_;
  NodeArena arena_;
  size_t garbage_ = 0;
  size_t used_ = 0;
  std::string prefix_;  // shared by every indexed key
  std::vector<std::shared_ptr<Node>> kids_;  // empty or parallel to slots_
};

using NodeRef = std::shared_ptr<Node>;

}  // namespace cowkv

#endif  // COWKV_ENGINE_TREE_NODE_H_
