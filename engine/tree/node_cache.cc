#include "engine/tree/node_cache.h"

#include <algorithm>
#include <memory>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"

namespace cowkv {

NodeCache::NodeCache(BlockDevice* device, std::string fsid, uint32_t nodesize,
                     uint32_t sectorsize, uint64_t limit_bytes)
    : device_(device),
      fsid_(std::move(fsid)),
      nodesize_(nodesize),
      sectorsize_(sectorsize),
      limit_bytes_(limit_bytes) {}

absl::Status NodeCache::CheckExpect(const Node& n, const format::NodeExpect& e) {
  if ((e.generation != 0 && n.generation != e.generation) ||
      (e.owner != 0 && n.owner != e.owner) || (e.level >= 0 && n.level != e.level)) {
    CorruptionSite site;
    site.bytenr = n.bytenr;
    site.owner = n.owner;
    site.level = n.level;
    return COWKV_CORRUPTION(site, "pointer does not match cached node",
                            absl::StrCat("gen ", n.generation, " owner ", n.owner),
                            absl::StrCat("gen ", e.generation, " owner ", e.owner,
                                         " level ", e.level));
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeRef> NodeCache::Read(const format::NodeExpect& expect) {
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = map_.find(expect.bytenr);
    if (it != map_.end()) {
      hits_.fetch_add(1, std::memory_order_relaxed);
      NodeRef n = it->second;
      n->referenced.store(true, std::memory_order_relaxed);
      COWKV_RETURN_IF_ERROR(CheckExpect(*n, expect));
      return n;
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  if (expect.bytenr + nodesize_ > device_->Size()) {
    CorruptionSite site;
    site.bytenr = expect.bytenr;
    return COWKV_CORRUPTION(site, "node beyond end of device", "",
                            absl::StrCat(device_->Size()));
  }
  std::string buf(nodesize_, '\0');
  COWKV_RETURN_IF_ERROR(device_->ReadAt(expect.bytenr, buf.data(), nodesize_));
  format::NodeHeader header;
  std::vector<format::ItemView> items;
  COWKV_RETURN_IF_ERROR(
      format::DecodeNodeViews(buf, fsid_, nodesize_, sectorsize_, expect, &header, &items));
  auto node = std::make_shared<Node>(header, items);
  absl::MutexLock l(&mu_);
  auto it = map_.find(expect.bytenr);
  if (it != map_.end()) return it->second;  // a concurrent reader won
  InsertLocked(node);
  return node;
}

void NodeCache::InsertLocked(NodeRef node) {
  // Callers look up (Read) or drop (NewDirty) what is cached there first:
  // overwriting a clean entry would leave its bytes counted forever.
  COWKV_DCHECK(map_.count(node->bytenr) == 0);
  if (node->dirty) {
    dirty_[node->bytenr] = node;
    dirty_nodes_.store(dirty_.size(), std::memory_order_relaxed);
  } else {
    clean_bytes_ += node->MemoryBytes();
    clock_.push_back(node->bytenr);
  }
  map_[node->bytenr] = std::move(node);
  EvictLocked();
}

NodeRef NodeCache::NewDirty(const format::NodeHeader& header) {
  COWKV_DCHECK(header.level < format::kMaxLevel);
  COWKV_DCHECK(header.bytenr % nodesize_ == 0);  // allocated nodesize-aligned
  auto node = std::make_shared<Node>(header, std::vector<format::ItemView>{});
  node->dirty = true;
  absl::MutexLock l(&mu_);
  auto it = map_.find(header.bytenr);
  if (it != map_.end()) {
    // A stale clean copy of a freed and reallocated extent.
    COWKV_CHECK(!it->second->dirty && !writeback_.count(header.bytenr));
    COWKV_DCHECK(clean_bytes_ >= it->second->MemoryBytes());
    clean_bytes_ -= it->second->MemoryBytes();
    map_.erase(it);
  }
  InsertLocked(node);
  return node;
}

NodeRef NodeCache::CopyDirty(const format::NodeHeader& header, const Node& src) {
  NodeRef node = NewDirty(header);
  node->CopyItemsFrom(src);
  return node;
}

void NodeCache::Discard(uint64_t bytenr) {
  absl::MutexLock l(&mu_);
  auto it = map_.find(bytenr);
  if (it == map_.end()) return;
  if (it->second->dirty) {
    dirty_.erase(bytenr);
    dirty_nodes_.store(dirty_.size(), std::memory_order_relaxed);
  } else if (writeback_.erase(bytenr) == 0) {
    COWKV_DCHECK(clean_bytes_ >= it->second->MemoryBytes());
    clean_bytes_ -= it->second->MemoryBytes();
  }
  map_.erase(it);
}

std::vector<NodeRef> NodeCache::SealDirty() {
  std::vector<NodeRef> out;
  absl::MutexLock l(&mu_);
  out.reserve(dirty_.size());
  for (auto& [bytenr, node] : dirty_) {
    node->ReleaseKids();
    node->CompactIfWasteful();  // before the release below: then immutable
    node->dirty.store(false, std::memory_order_release);
    writeback_[bytenr] = node;
    out.push_back(node);
  }
  dirty_.clear();
  dirty_nodes_.store(0, std::memory_order_relaxed);
  std::sort(out.begin(), out.end(),
            [](const NodeRef& a, const NodeRef& b) { return a->bytenr < b->bytenr; });
  return out;
}

void NodeCache::MarkWritten(const std::vector<NodeRef>& nodes) {
  absl::MutexLock l(&mu_);
  for (const NodeRef& node : nodes) {
    auto wb = writeback_.find(node->bytenr);
    if (wb == writeback_.end() || wb->second != node) continue;  // freed meanwhile
    COWKV_DCHECK(!node->dirty.load(std::memory_order_relaxed));  // sealed: immutable
    writeback_.erase(wb);
    clean_bytes_ += node->MemoryBytes();
    clock_.push_back(node->bytenr);
  }
  EvictLocked();
}

void NodeCache::EvictLocked() {
  size_t scanned = 0;
  while (clean_bytes_ > limit_bytes_ && !clock_.empty()) {
    uint64_t bytenr = clock_.front();
    clock_.pop_front();
    auto it = map_.find(bytenr);
    if (it == map_.end() || it->second->dirty || writeback_.count(bytenr)) continue;  // stale
    Node& n = *it->second;
    if (n.referenced.load(std::memory_order_relaxed) && scanned++ < 2 * clock_.size() + 2) {
      n.referenced.store(false, std::memory_order_relaxed);
      clock_.push_back(bytenr);
      continue;
    }
    COWKV_DCHECK(clean_bytes_ >= n.MemoryBytes());
    clean_bytes_ -= n.MemoryBytes();
    map_.erase(it);
    ++evictions_;
  }
  // Drop stale ring entries so the ring stays proportional to the map.
  if (clock_.size() > 2 * map_.size() + 64) {
    clock_.clear();
    for (auto& [bytenr, node] : map_) {
      if (!node->dirty && !writeback_.count(bytenr)) clock_.push_back(bytenr);
    }
  }
}

NodeCacheStats NodeCache::Stats() {
  absl::MutexLock l(&mu_);
  NodeCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.evictions = evictions_;
  s.clean_bytes = clean_bytes_;
  s.dirty_nodes = dirty_.size();
  s.dirty_bytes = dirty_.size() * nodesize_;
  return s;
}

namespace {
// The bytes of one run of adjacent nodes, in a buffer WriteNodes owns.
struct RunBuffer {
  char* mem;
  size_t len;
  bool empty() const { return len == 0; }
  size_t size() const { return len; }
  char* data() { return mem; }
  void clear() { len = 0; }
};
}  // namespace

absl::Status WriteNodes(BlockDevice* device, const std::vector<NodeRef>& nodes,
                        absl::string_view fsid, uint32_t nodesize, uint64_t* bytes) {
  constexpr size_t kMaxRun = 1 << 20;
  // Not a std::string: resizing one zero-fills every node first, and the
  // encoder writes every byte of a node anyway (the free gap included).
  const size_t cap = std::max<size_t>(nodesize, std::min(kMaxRun, nodes.size() * nodesize));
  std::unique_ptr<char[]> mem(new char[cap]);
  RunBuffer buf{mem.get(), 0};
  uint64_t run_start = 0;
  uint64_t prev = 0;
  auto write_run = [&]() -> absl::Status {
    if (buf.empty()) return absl::OkStatus();
    if (bytes != nullptr) *bytes += buf.size();
    absl::Status s = device->WriteAt(run_start, buf.data(), buf.size());
    buf.clear();
    return s;
  };
  for (const NodeRef& n : nodes) {
    COWKV_CHECK(n->used() <= format::NodeCapacity(nodesize));
    COWKV_DCHECK(!n->dirty.load(std::memory_order_relaxed));  // sealed first
    COWKV_DCHECK(n->bytenr % nodesize == 0);
    COWKV_DCHECK(prev == 0 || n->bytenr > prev);  // sorted, each node once
    prev = n->bytenr;
    if (buf.empty() || n->bytenr != run_start + buf.size() || buf.size() + nodesize > cap) {
      COWKV_RETURN_IF_ERROR(write_run());
      run_start = n->bytenr;
    }
    const size_t off = buf.size();
    buf.len += nodesize;
    format::NodeEncoder enc(buf.data() + off, nodesize);
    for (int i = 0; i < n->nritems(); ++i) enc.Add(n->key(i), n->value(i));
    enc.Finish(n->header(), fsid);
  }
  return write_run();
}

}  // namespace cowkv
