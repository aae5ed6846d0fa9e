#include "engine/tree/node.h"

#include <algorithm>
#include <cstring>

#include "engine/base/coding.h"
#include "engine/format/layout.h"

namespace cowkv {

namespace {
constexpr size_t kPrefixSlack = 3;
}  // namespace

Node::Node(const format::NodeHeader& header, const std::vector<format::ItemView>& items)
    : bytenr(header.bytenr),
      generation(header.generation),
      owner(header.owner),
      level(header.level) {
  size_t bytes = 0;
  for (const auto& it : items) bytes += it.key.size() + it.value.size();
  arena_.reserve(bytes);
  slots_.reserve(items.size());
  for (const auto& it : items) {
    uint32_t off = Append(it.key, it.value);
    slots_.push_back(Slot{off, static_cast<uint32_t>(it.value.size()),
                          static_cast<uint16_t>(it.key.size())});
    used_ += format::ItemSize(it.key.size(), it.value.size());
  }
  RebuildIndex();
}

uint32_t Node::Append(absl::string_view key, absl::string_view value) {
  return arena_.Append(key.data(), key.size(), value.data(), value.size());
}

uint64_t Node::WordOf(absl::string_view key) const {
  char b[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  size_t p = prefix_.size();
  if (key.size() > p) std::memcpy(b, key.data() + p, std::min<size_t>(8, key.size() - p));
  return DecodeBE64(b);
}

int Node::ComparePrefix(absl::string_view key) const {
  size_t n = std::min(key.size(), prefix_.size());
  int c = std::memcmp(key.data(), prefix_.data(), n);
  if (c != 0) return c < 0 ? -1 : 1;
  return key.size() < prefix_.size() ? -1 : 0;
}

void Node::RebuildIndex() {
  const int first = first_indexed();
  prefix_.clear();
  if (nritems() > first) {
    // Keys are sorted, so the prefix all share is that of the first and last.
    absl::string_view a = key(first), b = key(nritems() - 1);
    size_t n = 0;
    while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
    // Keep a few shared bytes out of the prefix: ascending inserts then
    // rarely break it (each break costs a rebuild), and the 8-byte word
    // still covers the bytes that differ.
    n = n > kPrefixSlack ? n - kPrefixSlack : 0;
    prefix_.assign(a.data(), n);
  }
  words_.resize(slots_.size());
  for (int i = first; i < nritems(); ++i) words_[i] = WordOf(key(i));
}

// Keeps the index true after key(slot) was set.
void Node::NoteKey(int slot) {
  if (slot < first_indexed()) return;
  if (nritems() - first_indexed() == 1 || ComparePrefix(key(slot)) != 0) {
    RebuildIndex();
    return;
  }
  words_[slot] = WordOf(key(slot));
}

template <bool kUpper>
int Node::Bound(absl::string_view k) const {
  const int first = first_indexed();
  const int n = nritems();
  if (n == first) return n;
  int c = ComparePrefix(k);
  if (c < 0) return first;
  if (c > 0) return n;
  const uint64_t w = WordOf(k);
  auto begin = words_.begin() + first, end = words_.end();
  auto lo = std::lower_bound(begin, end, w);
  auto hi = lo;
  while (hi != end && *hi == w) ++hi;  // ties are rare: the word follows the shared prefix
  // Equal words: compare whole keys, by binary search inside the tie range.
  int l = static_cast<int>(lo - words_.begin()), h = static_cast<int>(hi - words_.begin());
  while (l < h) {
    int mid = l + (h - l) / 2;
    bool go_right = kUpper ? !(k < key(mid)) : key(mid) < k;
    if (go_right) {
      l = mid + 1;
    } else {
      h = mid;
    }
  }
  return l;
}

int Node::LowerBound(absl::string_view k) const {
  COWKV_DCHECK(leaf());
  return Bound<false>(k);
}

int Node::ChildSlot(absl::string_view k) const {
  COWKV_DCHECK(!leaf());
  int slot = Bound<true>(k) - 1;  // last slot with key <= k
  return slot < 0 ? 0 : slot;
}

namespace {
const std::shared_ptr<Node> kNoKid;
}  // namespace

const std::shared_ptr<Node>& Node::kid(int slot) const {
  return kids_.empty() ? kNoKid : kids_[slot];
}

void Node::SetChild(int slot, const std::shared_ptr<Node>& child) {
  COWKV_DCHECK(!leaf());
  COWKV_DCHECK(dirty.load(std::memory_order_relaxed));
  COWKV_DCHECK(child->level + 1 == level);  // a path's levels descend by one
  SetValue(slot, format::EncodeChildPtr({child->bytenr, child->generation}));
  if (kids_.empty()) kids_.resize(slots_.size());
  kids_[slot] = child;
}

void Node::InsertItem(int slot, absl::string_view k, absl::string_view v) {
  COWKV_DCHECK(slot >= 0);
  COWKV_DCHECK(slot <= nritems());
  DCheckNewKey(slot, k, /*replacing=*/false);
  DCheckValue(v);
  if (!kids_.empty()) kids_.insert(kids_.begin() + slot, nullptr);
  uint32_t off = Append(k, v);
  slots_.insert(slots_.begin() + slot,
                Slot{off, static_cast<uint32_t>(v.size()), static_cast<uint16_t>(k.size())});
  words_.insert(words_.begin() + slot, 0);
  used_ += format::ItemSize(k.size(), v.size());
  if (!leaf() && slot == 0) {
    RebuildIndex();  // the old fence became an indexed separator
  } else {
    NoteKey(slot);
  }
}

void Node::EraseItem(int slot) {
  COWKV_DCHECK(slot >= 0);
  COWKV_DCHECK(slot < nritems());
  const Slot& s = slots_[slot];
  used_ -= format::ItemSize(s.klen, s.vlen);
  garbage_ += s.klen + s.vlen;
  slots_.erase(slots_.begin() + slot);
  words_.erase(words_.begin() + slot);
  if (!kids_.empty()) kids_.erase(kids_.begin() + slot);
  // The prefix stays shared by the remaining keys; slot 0 of an internal node
  // may now be a former separator, which the index leaves out.
  if (!leaf() && slot == 0) RebuildIndex();
  MaybeCompact();
}

void Node::EraseLeafRange(int from, int to) {
  COWKV_DCHECK(leaf());
  COWKV_DCHECK(0 <= from && from <= to && to <= nritems());
  if (from == to) return;
  for (int i = from; i < to; ++i) {
    const Slot& s = slots_[i];
    used_ -= format::ItemSize(s.klen, s.vlen);
    garbage_ += s.klen + s.vlen;
  }
  slots_.erase(slots_.begin() + from, slots_.begin() + to);
  words_.erase(words_.begin() + from, words_.begin() + to);
  MaybeCompact();
}

void Node::SetValue(int slot, absl::string_view v) {
  COWKV_DCHECK(slot >= 0);
  COWKV_DCHECK(slot < nritems());
  DCheckValue(v);
  if (!kids_.empty()) kids_[slot] = nullptr;
  Slot& s = slots_[slot];
  used_ = used_ - s.vlen + v.size();
  if (v.size() <= s.vlen) {  // fits in place
    std::memcpy(arena_.data() + s.off + s.klen, v.data(), v.size());
    garbage_ += s.vlen - v.size();
    s.vlen = static_cast<uint32_t>(v.size());
    return;
  }
  std::string k(key(slot));
  garbage_ += s.klen + s.vlen;
  s.off = Append(k, v);
  s.vlen = static_cast<uint32_t>(v.size());
  MaybeCompact();
}

void Node::SetKey(int slot, absl::string_view k) {
  COWKV_DCHECK(slot >= 0);
  COWKV_DCHECK(slot < nritems());
  DCheckNewKey(slot, k, /*replacing=*/true);
  std::string v(value(slot));
  Slot& s = slots_[slot];
  used_ = used_ - s.klen + k.size();
  garbage_ += s.klen + s.vlen;
  s.off = Append(k, v);
  s.klen = static_cast<uint16_t>(k.size());
  NoteKey(slot);
  MaybeCompact();
}

void Node::MoveTailTo(int from, Node* dst) {
  COWKV_DCHECK(dst != this);
  COWKV_DCHECK(dst->level == level);
  COWKV_DCHECK(from >= 0);
  COWKV_DCHECK(from <= nritems());
  // Appended after dst's items: dst stays sorted.
  COWKV_DCHECK(from == nritems() || dst->nritems() == 0 ||
               dst->key(dst->nritems() - 1) < key(from));
  if (!kids_.empty() || !dst->kids_.empty()) {
    if (dst->kids_.empty()) dst->kids_.resize(dst->slots_.size());
    for (int i = from; i < nritems(); ++i) {
      dst->kids_.push_back(kids_.empty() ? nullptr : std::move(kids_[i]));
    }
    if (!kids_.empty()) kids_.resize(from);
  }
  // One allocation for what moves, with as much again for dst to grow
  // into (a split's right half fills back up): appending item by item
  // would reallocate and copy dst's arena about ten times per split.
  size_t moved = 0;
  for (int i = from; i < nritems(); ++i) moved += slots_[i].klen + slots_[i].vlen;
  dst->arena_.reserve(dst->arena_.size() + 2 * moved);
  dst->slots_.reserve(dst->slots_.size() + 2 * static_cast<size_t>(nritems() - from));
  for (int i = from; i < nritems(); ++i) {
    uint32_t off = dst->Append(key(i), value(i));
    dst->slots_.push_back(Slot{off, slots_[i].vlen, slots_[i].klen});
    dst->used_ += item_size(i);
    used_ -= item_size(i);
    garbage_ += slots_[i].klen + slots_[i].vlen;
  }
  slots_.resize(from);
  words_.resize(from);
  dst->RebuildIndex();
  RebuildIndex();
  MaybeCompact();
}

void Node::CopyItemsFrom(const Node& src) {
  COWKV_DCHECK(&src != this);
  COWKV_DCHECK(src.level == level);  // a CoW copy keeps its level
  // Room to grow: a CoW copy is made to be changed, and a copy with no spare
  // capacity would reallocate (copy the whole arena again) on its first
  // insert. A quarter more, as a split's halves keep (MoveTailTo).
  const size_t n = src.slots_.size();
  slots_.reserve(n + n / 4 + 4);
  slots_.assign(src.slots_.begin(), src.slots_.end());
  words_.reserve(n + n / 4 + 4);
  words_.assign(src.words_.begin(), src.words_.end());
  kids_.clear();
  arena_.CopyFrom(src.arena_, src.arena_.size() / 4 + 256);
  garbage_ = src.garbage_;
  used_ = src.used_;
  prefix_ = src.prefix_;
}

// `k` may become key(slot): it keeps the keys strictly ascending (an
// internal node's slot 0 holds its lower fence, "" on the leftmost spine)
// and does not view this node's arena, which the change may reallocate.
void Node::DCheckNewKey(int slot, absl::string_view k, bool replacing) const {
  COWKV_DCHECK(!ViewsArena(k));
  COWKV_DCHECK(k.size() <= format::kMaxTreeKeySize);
  COWKV_DCHECK(!k.empty() || (!leaf() && slot == 0));
  COWKV_DCHECK(slot == 0 || key(slot - 1) < k);
  const int next = replacing ? slot + 1 : slot;
  COWKV_DCHECK(next >= nritems() || k < key(next));
}

// An internal node's values are child pointers.
void Node::DCheckValue(absl::string_view v) const {
  COWKV_DCHECK(!ViewsArena(v));
  COWKV_DCHECK(leaf() || v.size() == format::kChildPtrSize);
}

bool Node::ViewsArena(absl::string_view s) const {
  return !s.empty() && s.data() >= arena_.data() && s.data() < arena_.data() + arena_.size();
}

void Node::MaybeCompact() {
  if (garbage_ > 4096 && garbage_ * 2 > arena_.size()) Compact();
}

void Node::Compact() {
  NodeArena fresh;
  fresh.reserve(arena_.size() - garbage_);
  for (Slot& s : slots_) s.off = fresh.Append(arena_.data() + s.off, s.klen + s.vlen, nullptr, 0);
  arena_.swap(fresh);
  garbage_ = 0;
  slots_.shrink_to_fit();
  words_.shrink_to_fit();
}

}  // namespace cowkv
