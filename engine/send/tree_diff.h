// TreeDiff: the items that differ between two trees that share nodes, in
// key order, found as btrfs send's btrfs_compare_trees finds them.
//
// Two cursors (explicit paths, bounded by kMaxLevel; nothing recurses)
// walk the trees in step. At each step:
//   - cursors at different levels: the higher one descends (ADVANCE);
//   - both at child pointers of the same level, pointing at the same node
//     (same bytenr and generation): both move past it without reading it
//     (ADVANCE_ONLY_NEXT) — a shared subtree holds the same items on both
//     sides, so nothing below it can differ;
//   - both at child pointers, different nodes: the one whose key is
//     smaller descends, both when equal;
//   - both at leaf items: an ordinary merge by key (left only: added;
//     right only: deleted; both: changed if the values differ).
// Why skipping is safe: a cursor at child pointer P has consumed exactly
// the items before P's subtree; two cursors at the same node therefore
// both have that subtree's items next, and skipping both consumes the same
// items on each side (docs/design.md "Send and receive").
//
// The cost is the nodes on the paths to what changed: a small change to a
// large tree reads few nodes (nodes_read() counts them; send_test checks).
//
// Lifetime: borrows the trees; they must not change while a TreeDiff walks
// them (the sender diffs read-only snapshots). Holds NodeRefs on its paths.
#ifndef COWKV_ENGINE_SEND_TREE_DIFF_H_
#define COWKV_ENGINE_SEND_TREE_DIFF_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/format/layout.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace send {

struct Change {
  std::string key;
  std::optional<std::string> left;   // the item in the left (new) tree, if any
  std::optional<std::string> right;  // the item in the right (old) tree, if any
};

class TreeDiff {
 public:
  // `right` may be null: every item of `left` is then an addition (a full
  // send). Only keys in [lo, hi) are reported (subtrees wholly outside are
  // still walked; the prefixes cowkv sends are contiguous).
  TreeDiff(Tree* left, Tree* right, std::string lo, std::string hi);
  TreeDiff(const TreeDiff&) = delete;
  TreeDiff& operator=(const TreeDiff&) = delete;

  // The next difference, or nullopt at the end.
  absl::StatusOr<std::optional<Change>> Next();

  uint64_t nodes_read() const { return nodes_read_; }
  uint64_t subtrees_skipped() const { return subtrees_skipped_; }
  // Test hook: skip a pointer pair that differs only in generation of its
  // child — a planted bug the round-trip test must catch.
  void TEST_set_skip_any_pointer_at_level(int level) { bug_skip_level_ = level; }

 private:
  struct Cursor {
    Tree* tree = nullptr;
    std::array<NodeRef, format::kMaxLevel> nodes;
    std::array<int, format::kMaxLevel> slots{};
    int level = -1;  // the level of the current element's node; -1 = ended
    bool ended() const { return level < 0; }
    const Node& node() const { return *nodes[level]; }
    absl::string_view key() const { return node().key(slots[level]); }
  };

  absl::Status Start(Cursor& c, Tree* tree);
  // ADVANCE into the child at the current slot (internal nodes only).
  absl::Status Down(Cursor& c);
  // ADVANCE_ONLY_NEXT: the next slot, climbing while a node is exhausted.
  static void NextSlot(Cursor& c);
  bool InRange(absl::string_view key) const;
  // One leaf-level merge step; sets *out when it found a difference.
  void MergeLeaves(std::optional<Change>* out);

  Cursor left_, right_;
  const std::string lo_, hi_;
  bool started_ = false;
  uint64_t nodes_read_ = 0;
  uint64_t subtrees_skipped_ = 0;
  int bug_skip_level_ = -1;
};

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_TREE_DIFF_H_
