// NodeArena: the byte store of a decoded Node (node.h): keys and values
// appended back to back, addressed by offset. A std::string did the same,
// but every append paid its capacity and length bookkeeping in an
// out-of-line call (about 8 % of a random fill's instructions,
// docs/benchmarks.md "The allocator and the node arena"), and a copy kept
// no spare capacity, so a CoW copy reallocated on its first insert.
#ifndef COWKV_ENGINE_TREE_NODE_ARENA_H_
#define COWKV_ENGINE_TREE_NODE_ARENA_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <utility>

#include "engine/base/check.h"

namespace cowkv {

class NodeArena {
 public:
  NodeArena() = default;
  NodeArena(const NodeArena&) = delete;
  NodeArena& operator=(const NodeArena&) = delete;

  const char* data() const { return mem_.get(); }
  char* data() { return mem_.get(); }
  size_t size() const { return size_; }
  size_t capacity() const { return cap_; }

  void reserve(size_t n) {
    if (n <= cap_) return;
    std::unique_ptr<char[]> fresh(new char[n]);
    if (size_ != 0) std::memcpy(fresh.get(), mem_.get(), size_);
    mem_ = std::move(fresh);
    cap_ = n;
  }

  // Appends a then b; returns the offset of a.
  uint32_t Append(const char* a, size_t alen, const char* b, size_t blen) {
    const size_t need = size_ + alen + blen;
    if (need > cap_) reserve(std::max(need, cap_ * 2));
    const uint32_t off = static_cast<uint32_t>(size_);
    if (alen != 0) std::memcpy(mem_.get() + size_, a, alen);
    if (blen != 0) std::memcpy(mem_.get() + size_ + alen, b, blen);
    size_ = need;
    return off;
  }

  // Replaces the contents with a copy of `src`'s, with `spare` bytes free.
  void CopyFrom(const NodeArena& src, size_t spare) {
    COWKV_DCHECK(&src != this);
    size_ = 0;
    reserve(src.size_ + spare);
    if (src.size_ != 0) std::memcpy(mem_.get(), src.mem_.get(), src.size_);
    size_ = src.size_;
  }

  void swap(NodeArena& other) {
    std::swap(mem_, other.mem_);
    std::swap(size_, other.size_);
    std::swap(cap_, other.cap_);
  }

 private:
  std::unique_ptr<char[]> mem_;
  size_t size_ = 0;
  size_t cap_ = 0;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_TREE_NODE_ARENA_H_
