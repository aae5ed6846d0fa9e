#include "engine/send/tree_diff.h"

#include <utility>

#include "engine/base/check.h"
#include "engine/base/status.h"

namespace cowkv {
namespace send {

TreeDiff::TreeDiff(Tree* left, Tree* right, std::string lo, std::string hi)
    : lo_(std::move(lo)), hi_(std::move(hi)) {
  left_.tree = left;
  right_.tree = right;
}

absl::Status TreeDiff::Start(Cursor& c, Tree* tree) {
  if (tree == nullptr) return absl::OkStatus();  // stays ended
  COWKV_ASSIGN_OR_RETURN(NodeRef root, tree->ReadRoot());
  ++nodes_read_;
  c.level = root->level;
  c.nodes[c.level] = std::move(root);
  c.slots[c.level] = 0;
  if (c.node().nritems() == 0) c.level = -1;  // an empty tree
  return absl::OkStatus();
}

absl::Status TreeDiff::Down(Cursor& c) {
  COWKV_DCHECK(c.level > 0);
  COWKV_ASSIGN_OR_RETURN(NodeRef child, c.tree->ReadChild(c.node(), c.slots[c.level]));
  ++nodes_read_;
  --c.level;
  c.nodes[c.level] = std::move(child);
  c.slots[c.level] = 0;
  // Only a root may be empty, and a root is never reached by Down.
  if (c.node().nritems() == 0) {
    CorruptionSite site;
    site.bytenr = c.node().bytenr;
    site.level = c.level;
    return COWKV_CORRUPTION(site, "empty non-root node", "0 items", ">= 1");
  }
  return absl::OkStatus();
}

void TreeDiff::NextSlot(Cursor& c) {
  while (c.level >= 0) {
    if (++c.slots[c.level] < c.node().nritems()) return;
    c.nodes[c.level] = NodeRef();
    ++c.level;
    if (c.level >= format::kMaxLevel || c.nodes[c.level] == nullptr) {
      c.level = -1;  // climbed past the root: the walk is over
      return;
    }
  }
}

bool TreeDiff::InRange(absl::string_view key) const { return key >= lo_ && key < hi_; }

void TreeDiff::MergeLeaves(std::optional<Change>* out) {
  const int cmp = left_.ended() ? 1 : right_.ended() ? -1 : left_.key().compare(right_.key());
  if (cmp < 0) {
    if (InRange(left_.key())) {
      *out = Change{std::string(left_.key()), std::string(left_.node().value(left_.slots[0])),
                    std::nullopt};
    }
    NextSlot(left_);
  } else if (cmp > 0) {
    if (InRange(right_.key())) {
      *out = Change{std::string(right_.key()), std::nullopt,
                    std::string(right_.node().value(right_.slots[0]))};
    }
    NextSlot(right_);
  } else {
    const absl::string_view lv = left_.node().value(left_.slots[0]);
    const absl::string_view rv = right_.node().value(right_.slots[0]);
    if (lv != rv && InRange(left_.key())) {
      *out = Change{std::string(left_.key()), std::string(lv), std::string(rv)};
    }
    NextSlot(left_);
    NextSlot(right_);
  }
}

absl::StatusOr<std::optional<Change>> TreeDiff::Next() {
  if (!started_) {
    started_ = true;
    COWKV_RETURN_IF_ERROR(Start(left_, left_.tree));
    COWKV_RETURN_IF_ERROR(Start(right_, right_.tree));
    if (!left_.ended() && !right_.ended() &&
        left_.nodes[left_.level]->bytenr == right_.nodes[right_.level]->bytenr &&
        left_.nodes[left_.level]->generation == right_.nodes[right_.level]->generation) {
      ++subtrees_skipped_;  // the same root: nothing differs
      left_.level = right_.level = -1;
    }
  }
  std::optional<Change> out;
  while (!out.has_value()) {
    if (left_.ended() && right_.ended()) return std::optional<Change>();
    // One side ended: the other descends to its leaves and reports all.
    if (left_.ended() || right_.ended()) {
      Cursor& c = left_.ended() ? right_ : left_;
      if (c.level > 0) {
        COWKV_RETURN_IF_ERROR(Down(c));
      } else {
        MergeLeaves(&out);
      }
      continue;
    }
    if (left_.level != right_.level) {
      COWKV_RETURN_IF_ERROR(Down(left_.level > right_.level ? left_ : right_));
      continue;
    }
    if (left_.level == 0) {
      MergeLeaves(&out);
      continue;
    }
    const format::ChildPtr lp = left_.node().Child(left_.slots[left_.level]);
    const format::ChildPtr rp = right_.node().Child(right_.slots[right_.level]);
    const bool same = lp.bytenr == rp.bytenr && lp.generation == rp.generation;
    if (same || left_.level == bug_skip_level_) {
      ++subtrees_skipped_;
      NextSlot(left_);
      NextSlot(right_);
      continue;
    }
    const int cmp = left_.key().compare(right_.key());
    if (cmp <= 0) COWKV_RETURN_IF_ERROR(Down(left_));
    if (cmp >= 0) COWKV_RETURN_IF_ERROR(Down(right_));
  }
  return out;
}

}  // namespace send
}  // namespace cowkv
