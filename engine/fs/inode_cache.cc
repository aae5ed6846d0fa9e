#include "engine/fs/inode_cache.h"

#include <algorithm>

#include "engine/base/check.h"

namespace cowkv {
namespace fs {
namespace internal {

RadixArray::~RadixArray() {
  if (root_ != nullptr) Free(root_, height_ - 1);
}

void RadixArray::Free(Node* n, int level) {
  if (level > 0) {
    for (void* s : n->slots) {
      if (s != nullptr) Free(static_cast<Node*>(s), level - 1);
    }
  }
  delete n;
}

uint64_t RadixArray::MaxIndex(int height) {
  const int bits = kBits * height;
  return bits >= 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
}

void* RadixArray::Get(uint64_t index) const {
  if (height_ == 0 || index > MaxIndex(height_)) return nullptr;
  const Node* n = root_;
  for (int level = height_ - 1; level > 0; --level) {
    n = static_cast<const Node*>(n->slots[(index >> (kBits * level)) & (kSlots - 1)]);
    if (n == nullptr) return nullptr;
  }
  return n->slots[index & (kSlots - 1)];
}

void* RadixArray::Set(uint64_t index, void* value) {
  COWKV_CHECK(value != nullptr);
  if (height_ == 0) {  // empty: start as tall as `index` needs
    height_ = 1;
    while (index > MaxIndex(height_)) ++height_;
    root_ = new Node;
  }
  while (index > MaxIndex(height_)) {  // grow: the old root becomes slot 0
    Node* r = new Node;
    r->slots[0] = root_;
    r->count = 1;
    root_ = r;
    ++height_;
  }
  COWKV_DCHECK(height_ <= kMaxHeight);  // MaxIndex(kMaxHeight) covers 64 bits
  Node* n = root_;
  for (int level = height_ - 1; level > 0; --level) {
    void*& slot = n->slots[(index >> (kBits * level)) & (kSlots - 1)];
    if (slot == nullptr) {
      slot = new Node;
      ++n->count;
    }
    n = static_cast<Node*>(slot);
  }
  void*& leaf = n->slots[index & (kSlots - 1)];
  void* old = leaf;
  if (old == nullptr) {
    ++n->count;
    ++size_;
  }
  COWKV_DCHECK(n->count <= kSlots);
  leaf = value;
  return old;
}

void* RadixArray::Erase(uint64_t index) {
  if (height_ == 0 || index > MaxIndex(height_)) return nullptr;
  std::array<Node*, kMaxHeight> path{};  // path[level]
  Node* n = root_;
  for (int level = height_ - 1; level > 0; --level) {
    path[level] = n;
    n = static_cast<Node*>(n->slots[(index >> (kBits * level)) & (kSlots - 1)]);
    if (n == nullptr) return nullptr;
  }
  path[0] = n;
  void*& leaf = n->slots[index & (kSlots - 1)];
  void* old = leaf;
  if (old == nullptr) return nullptr;
  leaf = nullptr;
  COWKV_DCHECK(size_ > 0);
  --size_;
  // Free the nodes this emptied, bottom-up. Each count is the node's
  // non-null slots, one of which this erase empties: it never goes below 0.
  for (int level = 0; level < height_; ++level) {
    COWKV_DCHECK(path[level]->count > 0);
    if (--path[level]->count != 0) break;
    delete path[level];
    if (level + 1 == height_) {
      root_ = nullptr;
      height_ = 0;
      break;
    }
    path[level + 1]->slots[(index >> (kBits * (level + 1))) & (kSlots - 1)] = nullptr;
  }
  return old;
}

// Recursion depth is the tree height (at most 11 levels for 64 bits).
bool RadixArray::NextIn(const Node* n, int level, uint64_t base, uint64_t from, uint64_t* out) {
  const int shift = kBits * level;
  const uint64_t first = from > base ? ((from - base) >> shift) & (kSlots - 1) : 0;
  for (uint64_t s = first; s < kSlots; ++s) {
    const void* p = n->slots[s];
    if (p == nullptr) continue;
    const uint64_t child_base = base + (s << shift);
    if (level == 0) {
      *out = child_base;
      return true;
    }
    if (NextIn(static_cast<const Node*>(p), level - 1, child_base, std::max(from, child_base),
               out)) {
      return true;
    }
  }
  return false;
}

bool RadixArray::Next(uint64_t from, uint64_t* index) const {
  if (height_ == 0 || from > MaxIndex(height_)) return false;
  return NextIn(root_, height_ - 1, 0, from, index);
}

}  // namespace internal
}  // namespace fs
}  // namespace cowkv
