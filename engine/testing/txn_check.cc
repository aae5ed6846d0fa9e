#include "engine/testing/txn_check.h"

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/tree/node_cache.h"
#include "engine/tree/tree.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {
namespace testing {
namespace {

using format::Key17;

// What the trees say about one extent, and what the extent tree says.
struct Extent {
  uint64_t len = 0;
  bool tree_block = false;
  uint64_t pointers = 0;  // parents, root items, superblock; or leaf items
  bool has_item = false;
  uint64_t refs = 0;      // EXTENT_ITEM refs
  uint64_t backrefs = 0;  // back-reference items (data: the sum of counts)
};

struct Walk {
  NodeCache* cache;
  std::map<uint64_t, Extent> extents;
  std::set<uint64_t> visited;
  std::vector<std::string> findings;
};

// Every node of tree `id` rooted at `root`, each shared node once: its
// children's pointers (and, for fs trees, its leaves' data references)
// are counted on its first visit only.
void WalkTree(uint64_t id, RootRef root, Walk* w) {
  Tree tree(id, root, w->cache, nullptr);
  Extent& r = w->extents[root.bytenr];
  r.len = w->cache->nodesize();
  r.tree_block = true;
  ++r.pointers;
  if (!w->visited.insert(root.bytenr).second) return;
  absl::StatusOr<NodeRef> n = tree.ReadRoot();
  std::vector<NodeRef> stack;
  if (n.ok()) stack.push_back(*n);
  if (!n.ok()) w->findings.push_back(absl::StrCat("tree ", id, ": ", n.status().ToString()));
  const bool engine_tree = id == format::kRootTreeId || id == format::kExtentTreeId;
  while (!stack.empty()) {
    NodeRef node = std::move(stack.back());
    stack.pop_back();
    for (int i = 0; i < node->nritems(); ++i) {
      format::DataRef d;
      if (node->leaf()) {
        if (!engine_tree && format::LeafDataRef(node->key(i), node->value(i), &d)) {
          Extent& e = w->extents[d.bytenr];
          e.len = d.len;
          ++e.pointers;
        }
        continue;
      }
      const format::ChildPtr c = node->Child(i);
      Extent& e = w->extents[c.bytenr];
      e.len = w->cache->nodesize();
      e.tree_block = true;
      ++e.pointers;
      if (!w->visited.insert(c.bytenr).second) continue;
      absl::StatusOr<NodeRef> child = tree.ReadChild(*node, i);
      if (!child.ok()) {
        w->findings.push_back(absl::StrCat("tree ", id, ": ", child.status().ToString()));
        continue;
      }
      stack.push_back(*std::move(child));
    }
  }
}

// The extent tree's view: EXTENT_ITEM refs and back-reference counts.
void ReadExtentTree(Tree* extent_tree, Walk* w) {
  TreeIterator it(extent_tree);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    Key17 k;
    if (!format::DecodeKey17(it.key(), &k)) {
      w->findings.push_back("extent tree: a key that is not 17 bytes");
      continue;
    }
    Extent& e = w->extents[k.objectid];
    if (k.type == format::kExtentItem) {
      absl::StatusOr<format::ExtentItem> item = format::DecodeExtentItem(it.value(), k.objectid);
      if (!item.ok()) {
        w->findings.push_back(item.status().ToString());
        continue;
      }
      e.has_item = true;
      e.refs = item->refs;
      e.tree_block = e.tree_block || (item->flags & format::kExtentFlagTreeBlock);
      if (e.len != 0 && e.len != k.offset) {
        w->findings.push_back(absl::StrCat("extent ", k.objectid, ": item length ", k.offset,
                                           ", pointed at as ", e.len));
      }
      e.len = k.offset;
    } else if (format::IsDataRef(k.type)) {
      absl::StatusOr<uint32_t> count = format::DecodeDataRefCount(it.value(), k.objectid);
      e.backrefs += count.ok() ? *count : 0;
    } else if (format::IsBackref(k.type)) {
      ++e.backrefs;
    }
  }
  if (!it.status().ok()) w->findings.push_back(it.status().ToString());
}

void CompareExtents(const format::Superblock& sb, Walk* w) {
  uint64_t used = 0;
  for (const auto& [bytenr, e] : w->extents) {
    const std::string what = absl::StrCat(e.tree_block ? "tree block " : "data extent ", bytenr);
    if (!e.has_item) {
      w->findings.push_back(absl::StrCat(what, ": ", e.pointers, " pointers, no extent item"));
      continue;
    }
    used += e.len;
    if (e.refs != e.pointers) {
      w->findings.push_back(absl::StrCat(what, ": refs ", e.refs, ", pointers ", e.pointers));
    }
    if (e.refs != e.backrefs) {
      w->findings.push_back(
          absl::StrCat(what, ": refs ", e.refs, ", back-references ", e.backrefs));
    }
  }
  if (used != sb.bytes_used) {
    w->findings.push_back(
        absl::StrCat("superblock bytes_used ", sb.bytes_used, ", extents hold ", used));
  }
}

}  // namespace

std::vector<std::string> CheckTxnDevice(BlockDevice* device) {
  absl::StatusOr<format::Superblock> sb = ReadBestSuperblock(device, nullptr);
  if (!sb.ok()) return {sb.status().ToString()};
  NodeCache cache(device, sb->fsid, sb->nodesize, sb->sectorsize, 64ull << 20);
  Walk w{&cache, {}, {}, {}};
  WalkTree(format::kRootTreeId, {sb->root, sb->root_generation, sb->root_level}, &w);
  Tree root_tree(format::kRootTreeId, {sb->root, sb->root_generation, sb->root_level}, &cache,
                 nullptr);
  std::unique_ptr<Tree> extent_tree;
  TreeIterator it(&root_tree);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    Key17 k;
    if (!format::DecodeKey17(it.key(), &k) || k.type != format::kRootItem) continue;
    absl::StatusOr<format::RootItem> ri = format::DecodeRootItem(it.value(), k.objectid);
    if (!ri.ok()) {
      w.findings.push_back(ri.status().ToString());
      continue;
    }
    const RootRef root{ri->bytenr, ri->generation, ri->level};
    WalkTree(k.objectid, root, &w);
    if (k.objectid == format::kExtentTreeId) {
      extent_tree = std::make_unique<Tree>(k.objectid, root, &cache, nullptr);
    }
  }
  if (!it.status().ok()) w.findings.push_back(it.status().ToString());
  if (extent_tree == nullptr) {
    w.findings.push_back("root tree has no extent tree root item");
    return w.findings;
  }
  ReadExtentTree(extent_tree.get(), &w);
  CompareExtents(*sb, &w);
  return w.findings;
}

}  // namespace testing
}  // namespace cowkv
