// Node: one tree node in memory, decoded into its item list.
//
// A node is either clean (its bytes on the device equal EncodeNode(*this);
// immutable, shared by readers, evictable from the cache) or dirty (created by
// CoW in the running engine transaction, modified in place by the single
// writer, pinned in the cache until the commit writes it). `used` is the sum
// of ItemSize over items and is what split/merge decisions look at.
//
// Internal nodes: items[i].value is an encoded ChildPtr; items[0].key is the
// node's lower fence ("" on the leftmost spine), items[i].key for i > 0 is a
// separator: every key in child i is >= items[i].key and < items[i+1].key.
#ifndef COWKV_ENGINE_TREE_NODE_H_
#define COWKV_ENGINE_TREE_NODE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/base/check.h"
#include "engine/format/node_codec.h"

namespace cowkv {

class Node {
 public:
  Node(const format::NodeHeader& header, std::vector<format::Item> items)
      : bytenr(header.bytenr),
        generation(header.generation),
        owner(header.owner),
        level(header.level),
        items(std::move(items)) {
    for (const auto& it : this->items) used += format::ItemSize(it.key.size(), it.value.size());
  }
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  bool leaf() const { return level == 0; }
  int nritems() const { return static_cast<int>(items.size()); }
  format::NodeHeader header() const { return {bytenr, generation, owner, level}; }

  // First slot whose key is >= `key` (nritems() if none).
  int LowerBound(absl::string_view key) const {
    auto it = std::lower_bound(items.begin(), items.end(), key,
                               [](const format::Item& a, absl::string_view k) {
                                 return absl::string_view(a.key) < k;
                               });
    return static_cast<int>(it - items.begin());
  }
  // Internal nodes: the slot of the child whose range holds `key`.
  int ChildSlot(absl::string_view key) const {
    auto it = std::upper_bound(items.begin(), items.end(), key,
                               [](absl::string_view k, const format::Item& a) {
                                 return k < absl::string_view(a.key);
                               });
    int slot = static_cast<int>(it - items.begin()) - 1;
    return slot < 0 ? 0 : slot;
  }
  format::ChildPtr Child(int slot) const {
    COWKV_DCHECK(!leaf() && slot >= 0 && slot < nritems());
    return format::DecodeChildPtr(items[slot].value);
  }

  void InsertItem(int slot, std::string key, std::string value) {
    used += format::ItemSize(key.size(), value.size());
    items.insert(items.begin() + slot, format::Item{std::move(key), std::move(value)});
  }
  void EraseItem(int slot) {
    used -= format::ItemSize(items[slot].key.size(), items[slot].value.size());
    items.erase(items.begin() + slot);
  }
  void SetValue(int slot, std::string value) {
    used -= items[slot].value.size();
    used += value.size();
    items[slot].value = std::move(value);
  }
  void SetKey(int slot, std::string key) {
    used -= items[slot].key.size();
    used += key.size();
    items[slot].key = std::move(key);
  }

  // Approximate heap footprint, for the cache's byte bound.
  size_t MemoryBytes() const {
    return sizeof(Node) + items.capacity() * sizeof(format::Item) + used;
  }

  // Header fields. bytenr/generation/owner/level never change after a node
  // is created (CoW makes a new Node).
  const uint64_t bytenr;
  const uint64_t generation;
  const uint64_t owner;
  const uint8_t level;

  std::vector<format::Item> items;
  size_t used = 0;
  // Set by the writer that creates the node (CoW), cleared by the commit
  // that wrote it, both under the store's exclusive lock. Iterators read it
  // without that lock: once a release-store makes it false the node is
  // immutable, so an acquire-load of false lets them read items lock-free.
  std::atomic<bool> dirty{false};
  // CLOCK "recently used" bit; relaxed: a hint for eviction, nothing more.
  std::atomic<bool> referenced{true};
};

using NodeRef = std::shared_ptr<Node>;

}  // namespace cowkv

#endif  // COWKV_ENGINE_TREE_NODE_H_
