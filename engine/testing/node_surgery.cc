#include "engine/testing/node_surgery.h"

#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/tree/node_cache.h"
#include "engine/tree/tree.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {
namespace testing {

absl::StatusOr<std::vector<NodeInfo>> ListNodes(BlockDevice* dev) {
  COWKV_ASSIGN_OR_RETURN(format::Superblock sb, ReadBestSuperblock(dev, nullptr));
  NodeCache cache(dev, sb.fsid, sb.nodesize, sb.sectorsize, 64ull << 20);
  std::vector<std::pair<uint64_t, format::NodeExpect>> stack;
  stack.push_back({format::kRootTreeId, {sb.root, sb.root_generation, format::kRootTreeId, sb.root_level}});
  std::vector<NodeInfo> out;
  while (!stack.empty()) {
    auto [tree, e] = stack.back();
    stack.pop_back();
    COWKV_ASSIGN_OR_RETURN(NodeRef n, cache.Read(e));
    out.push_back({n->bytenr, tree, n->level});
    for (int i = n->nritems() - 1; i >= 0; --i) {
      if (!n->leaf()) {
        format::ChildPtr c = n->Child(i);
        stack.push_back({tree, {c.bytenr, c.generation, tree, n->level - 1}});
      } else if (tree == format::kRootTreeId) {
        format::Key17 k;
        if (!format::DecodeKey17(n->key(i), &k) || k.type != format::kRootItem) continue;
        COWKV_ASSIGN_OR_RETURN(format::RootItem ri,
                               format::DecodeRootItem(n->value(i), k.objectid));
        stack.push_back({k.objectid, {ri.bytenr, ri.generation, k.objectid, ri.level}});
      }
    }
  }
  return out;
}

absl::Status RewriteNode(BlockDevice* dev, uint64_t bytenr,
                         const std::function<void(std::vector<format::Item>*)>& edit) {
  COWKV_ASSIGN_OR_RETURN(format::Superblock sb, ReadBestSuperblock(dev, nullptr));
  std::string buf(sb.nodesize, '\0');
  COWKV_RETURN_IF_ERROR(dev->ReadAt(bytenr, buf.data(), buf.size()));
  format::NodeHeader h;
  std::vector<format::Item> items;
  COWKV_RETURN_IF_ERROR(
      format::DecodeNode(buf, sb.fsid, sb.nodesize, sb.sectorsize, {bytenr, 0, 0, -1}, &h, &items));
  edit(&items);
  // The edit may break what the encoder asserts (key order): that is what
  // the tests plant for `check` to find.
  format::NodeEncoder enc(buf.data(), sb.nodesize);
  enc.TEST_SkipItemChecks();
  for (const format::Item& it : items) enc.Add(it.key, it.value);
  enc.Finish(h, sb.fsid);
  COWKV_RETURN_IF_ERROR(dev->WriteAt(bytenr, buf.data(), buf.size()));
  return dev->Flush();
}

}  // namespace testing
}  // namespace cowkv
