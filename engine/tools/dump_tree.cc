// DumpTree(): the library form of `cowkv dump-tree`. Prints the superblock,
// then every node of the requested tree(s), depth first, with decoded items
// for the engine's own trees and escaped keys/values for fs trees.
#include <map>
#include <ostream>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/store.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/tree/node_cache.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {
namespace {

using format::Key17;

std::string TypeName(uint8_t t) {
  switch (t) {
    case format::kRootItem:
      return "ROOT_ITEM";
    case format::kExtentItem:
      return "EXTENT_ITEM";
    case format::kTreeBlockRef:
      return "TREE_BLOCK_REF";
    case format::kSharedBlockRef:
      return "SHARED_BLOCK_REF";
    case format::kExtentDataRef:
      return "EXTENT_DATA_REF";
    case format::kSharedDataRef:
      return "SHARED_DATA_REF";
    default:
      return absl::StrCat("TYPE_", int{t});
  }
}

std::string Escaped(absl::string_view s, size_t max) {
  std::string out = absl::CHexEscape(s.substr(0, max));
  if (s.size() > max) absl::StrAppend(&out, "...");
  return out;
}

std::string DescribeItem(uint64_t tree, const format::ItemView& it) {
  Key17 k;
  if ((tree == format::kRootTreeId || tree == format::kExtentTreeId) &&
      format::DecodeKey17(it.key, &k)) {
    std::string s = absl::StrCat("(", k.objectid, " ", TypeName(k.type), " ", k.offset, ")");
    if (k.type == format::kExtentItem) {
      auto e = format::DecodeExtentItem(it.value, k.objectid);
      if (e.ok()) {
        absl::StrAppend(&s, " refs ", e->refs, " gen ", e->generation, " flags ",
                        (e->flags & format::kExtentFlagTreeBlock) ? "TREE_BLOCK" : "DATA",
                        (e->flags & format::kExtentFlagFullBackref) ? "|FULL_BACKREF" : "",
                        " level ", int{e->level});
      }
    } else if (k.type == format::kRootItem) {
      auto r = format::DecodeRootItem(it.value, k.objectid);
      if (r.ok()) {
        absl::StrAppend(&s, " root ", r->bytenr, " gen ", r->generation, " level ", int{r->level},
                        " flags ", r->flags);
      }
    }
    return s;
  }
  return absl::StrCat("key \"", Escaped(it.key, 64), "\" len ", it.value.size(), " value \"",
                      Escaped(it.value, 32), "\"");
}

// Prints what it can; returns the first read error after printing the rest.
absl::Status DumpOne(NodeCache* cache, uint64_t tree, format::NodeExpect root, std::ostream& out) {
  out << "tree " << tree << "\n";
  absl::Status first_error;
  std::vector<format::NodeExpect> stack{root};
  while (!stack.empty()) {
    format::NodeExpect e = stack.back();
    stack.pop_back();
    absl::StatusOr<NodeRef> n = cache->Read(e);
    if (!n.ok()) {
      out << "  node " << e.bytenr << ": " << n.status().message() << "\n";
      if (first_error.ok()) first_error = n.status();
      continue;
    }
    const Node& node = **n;
    out << (node.leaf() ? "  leaf " : "  node ") << node.bytenr << " level " << int{node.level}
        << " items " << node.nritems() << " free "
        << format::NodeCapacity(cache->nodesize()) - node.used() << " generation "
        << node.generation << " owner " << node.owner << "\n";
    for (int i = 0; i < node.nritems(); ++i) {
      if (node.leaf()) {
        out << "    item " << i << " " << DescribeItem(tree, {node.key(i), node.value(i)}) << "\n";
      } else {
        format::ChildPtr c = node.Child(i);
        out << "    key \"" << Escaped(node.key(i), 64) << "\" block " << c.bytenr << " gen "
            << c.generation << "\n";
      }
    }
    for (int i = node.nritems() - 1; !node.leaf() && i >= 0; --i) {
      format::ChildPtr c = node.Child(i);
      stack.push_back({c.bytenr, c.generation, tree, node.level - 1});
    }
  }
  return first_error;
}

}  // namespace

absl::Status DumpTree(BlockDevice* device, uint64_t tree_id, std::ostream& out) {
  std::string notes;
  COWKV_ASSIGN_OR_RETURN(format::Superblock sb, ReadBestSuperblock(device, &notes));
  out << "superblock bytenr " << sb.bytenr << " generation " << sb.generation << " root " << sb.root
      << " root_level " << int{sb.root_level} << "\n"
      << "  fsid " << absl::BytesToHexString(sb.fsid) << " nodesize " << sb.nodesize
      << " sectorsize " << sb.sectorsize << " total_bytes " << sb.total_bytes << " bytes_used "
      << sb.bytes_used << " log_root " << sb.log_root << "\n";
  if (!notes.empty()) out << notes;
  NodeCache cache(device, sb.fsid, sb.nodesize, sb.sectorsize, 16ull << 20);
  std::map<uint64_t, format::RootItem> roots;
  Tree root_tree(format::kRootTreeId, RootRef{sb.root, sb.root_generation, sb.root_level}, &cache,
                 nullptr);
  TreeIterator it(&root_tree);
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    Key17 k;
    if (!format::DecodeKey17(it.key(), &k) || k.type != format::kRootItem) continue;
    COWKV_ASSIGN_OR_RETURN(roots[k.objectid], format::DecodeRootItem(it.value(), k.objectid));
  }
  COWKV_RETURN_IF_ERROR(it.status());
  if (tree_id != 0 && tree_id != format::kRootTreeId && roots.count(tree_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no tree with id ", tree_id));
  }
  absl::Status status;
  if (tree_id == 0 || tree_id == format::kRootTreeId) {
    status.Update(DumpOne(&cache, format::kRootTreeId,
                          {sb.root, sb.root_generation, format::kRootTreeId, sb.root_level}, out));
  }
  for (const auto& [id, ri] : roots) {
    if (tree_id != 0 && tree_id != id) continue;
    status.Update(DumpOne(&cache, id, {ri.bytenr, ri.generation, id, ri.level}, out));
  }
  return status;
}

}  // namespace cowkv
