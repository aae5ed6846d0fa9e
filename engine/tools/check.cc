// Check(): the library form of `cowkv check`.
//
// Reads the committed state straight from the device (never from a running
// store's memory) and reports every finding instead of stopping at the first:
//   1. superblock copies: each valid, all at the mounted generation;
//   2. every tree reachable from the root tree: node headers and checksums
//      (DecodeNode), key order, parent/child fences, levels, no empty
//      non-root node;
//   3. the extent tree against what the trees reference: each extent's refs
//      equals its back-references and the references actually seen, no
//      leaked extent, no overlap, nothing in reserved space or past the end;
//   4. the superblock's bytes_used equals the sum of extent lengths;
//   5. every live subvolume's file namespace (check_fs.cc).
#include <map>
#include <set>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/store.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/kv/kv_item.h"
#include "engine/tools/check_file_events.h"
#include "engine/tools/check_fs.h"
#include "engine/tools/check_history.h"
#include "engine/tools/check_lease.h"
#include "engine/tree/node_cache.h"
#include "engine/txn/txn_manager.h"

namespace cowkv {
namespace {

using format::Key17;

std::string Hex(absl::string_view s) {
  return absl::BytesToHexString(s.substr(0, 24)) + (s.size() > 24 ? ".." : "");
}

struct ExtentRecord {
  uint64_t len = 0;
  format::ExtentItem item;
  bool has_item = false;
  std::multiset<std::pair<uint8_t, uint64_t>> backrefs;
};

struct Visit {
  format::NodeExpect expect;
  std::string lo;  // lower fence (inclusive)
  std::string hi;  // upper fence (exclusive); empty = none
  bool root = false;
  // A tree being dropped loses its leftmost subtrees without rewriting the
  // fences below, so there slot 0 of an internal node is only a lower bound.
  bool dying = false;
  uint64_t parent = 0;        // bytenr of the parent node; 0 = a root item
  uint64_t parent_owner = 0;  // its owner (or the tree, for a root item)
};

// One pointer to a tree block, and what its back-reference must be.
struct Pointer {
  uint64_t child;
  uint64_t parent;  // 0 = from the root item of tree `parent_owner`
  uint64_t parent_owner;
};

class Checker {
 public:
  Checker(BlockDevice* dev, const format::Superblock& sb, CheckReport* r)
      : dev_(dev), sb_(sb), r_(r), cache_(dev, sb.fsid, sb.nodesize, sb.sectorsize, 64ull << 20) {}

  void Run() {
    WalkTree(format::kRootTreeId,
             {sb_.root, sb_.root_generation, format::kRootTreeId, sb_.root_level});
    for (const auto& [id, ri] : roots_) {
      WalkTree(id, {ri.bytenr, ri.generation, id, ri.level},
               (ri.flags & format::kRootFlagDropping) != 0);
    }
    if (roots_.count(format::kExtentTreeId) == 0) Problem("no extent tree root item");
    if (roots_.count(format::kDefaultTreeId) == 0) Problem("no default tree root item");
    CheckExtents();
    for (const auto& [id, ri] : roots_) {
      // A tree being dropped, or filled by a receive that has not finished
      // (mount drops it), holds no namespace to check.
      if (id < format::kDefaultTreeId ||
          (ri.flags & (format::kRootFlagDropping | format::kRootFlagReceiving))) {
        continue;
      }
      Tree tree(id, RootRef{ri.bytenr, ri.generation, ri.level}, &cache_, nullptr);
      CheckFsTree(&tree, id, &r_->problems);
      CheckHistory(&tree, id, &r_->problems);
      CheckLeaseTree(&tree, id, &r_->problems);
      CheckFileEvents(&tree, id, sb_.revision, &r_->problems);
    }
  }

 private:
  template <typename... Args>
  void Problem(const Args&... args) {
    r_->problems.push_back(absl::StrCat(args...));
  }

  // Walks one tree; a node shared with a tree walked before is recorded as
  // pointed at again but not descended into twice.
  void WalkTree(uint64_t id, format::NodeExpect root, bool dying = false) {
    ++r_->trees;
    if (id >= format::kDefaultTreeId) root.owner = 0;  // shared nodes keep their owner
    std::vector<Visit> stack;
    stack.push_back(Visit{root, "", "", true, dying, 0, id});
    while (!stack.empty()) {
      Visit v = std::move(stack.back());
      stack.pop_back();
      pointers_.push_back({v.expect.bytenr, v.parent, v.parent_owner});
      if (!visited_.insert(v.expect.bytenr).second) continue;
      absl::StatusOr<NodeRef> n = cache_.Read(v.expect);
      if (!n.ok()) {
        Problem("tree ", id, ": ", n.status().message());
        continue;
      }
      levels_[(*n)->bytenr] = (*n)->level;
      ++r_->nodes;
      CheckNode(id, **n, v, &stack);
      cache_.Discard((*n)->bytenr);
    }
  }

  void CheckNode(uint64_t id, const Node& n, const Visit& v, std::vector<Visit>* stack) {
    const std::string where =
        absl::StrCat("tree ", id, " node ", n.bytenr, " level ", int{n.level});
    if (n.nritems() == 0 && (!v.root || !n.leaf())) Problem(where, ": empty non-root node");
    if (!n.leaf() && !v.root && !v.dying && n.nritems() == 1) {
      Problem(where, ": internal node with a single child");
    }
    if (n.nritems() == 0) return;
    const int last = n.nritems() - 1;
    if (!n.leaf() && n.key(0) != v.lo && !(v.dying && n.key(0) > v.lo)) {
      Problem(where, ": first key ", Hex(n.key(0)), " differs from its fence ", Hex(v.lo));
    }
    if (n.key(0) < v.lo) Problem(where, ": key ", Hex(n.key(0)), " below fence ", Hex(v.lo));
    if (!v.hi.empty() && !(n.key(last) < v.hi)) {
      Problem(where, ": key ", Hex(n.key(last)), " not below fence ", Hex(v.hi));
    }
    if (n.used() > format::NodeCapacity(sb_.nodesize)) Problem(where, ": overfull");
    for (int i = 0; i < n.nritems(); ++i) {
      if (i > 0 && !(n.key(i - 1) < n.key(i))) {
        Problem(where, ": keys out of order at slot ", i);
      }
      if (n.leaf()) {
        CheckLeafItem(id, n.key(i), n.value(i));
        if (id >= format::kDefaultTreeId) CheckDataRef(id, n, i);
        continue;
      }
      format::ChildPtr c = n.Child(i);
      Visit child{{c.bytenr, c.generation, v.expect.owner, n.level - 1},
                  i == 0 && !v.dying ? v.lo : std::string(n.key(i)),
                  i + 1 < n.nritems() ? std::string(n.key(i + 1)) : v.hi,
                  false,
                  v.dying,
                  n.bytenr,
                  n.owner};
      stack->push_back(std::move(child));
    }
    r_->items += n.leaf() ? n.nritems() : 0;
  }

  // A subvolume leaf item pointing at a data extent: remember the pointer
  // (for the back-reference check) and verify the data's checksum once.
  void CheckDataRef(uint64_t id, const Node& leaf, int slot) {
    format::DataRef d;
    if (!format::LeafDataRef(leaf.key(slot), leaf.value(slot), &d)) return;
    data_pointers_.push_back({d.bytenr, leaf.bytenr, leaf.owner});
    data_lens_[d.bytenr] = d.len;
    if (!data_verified_.insert(d.bytenr).second) return;
    std::string buf(d.value_len, '\0');
    absl::Status s = d.bytenr + d.len <= dev_->Size()
                         ? dev_->ReadAt(d.bytenr, buf.data(), buf.size())
                         : absl::OutOfRangeError("past the end of the device");
    if (!s.ok()) return Problem("data extent ", d.bytenr, ": ", s.message());
    if (Crc32c(buf.data(), buf.size()) != d.crc) {
      Problem("data extent ", d.bytenr, ": checksum mismatch (value of ", Hex(leaf.key(slot)),
              " in tree ", id, ")");
    }
  }

  void CheckLeafItem(uint64_t id, absl::string_view key, absl::string_view value) {
    const format::ItemView it{key, value};
    if (id != format::kRootTreeId && id != format::kExtentTreeId) return;
    Key17 k;
    if (!format::DecodeKey17(it.key, &k)) {
      Problem("tree ", id, ": key ", Hex(it.key), " is not 17 bytes");
      return;
    }
    if (id == format::kRootTreeId) {
      if (k.type == format::kSubvolInfo) {
        absl::StatusOr<format::SubvolInfoItem> si = format::DecodeSubvolInfo(it.value, k.objectid);
        if (!si.ok()) return Problem(si.status().message());
        // A subvolume is created in a committed generation, never a later one.
        if (si->ogen > sb_.generation) {
          Problem("subvolume info ", k.objectid, ": creation generation ", si->ogen,
                  " is newer than the superblock's ", sb_.generation);
        }
        return;
      }
      if (k.type != format::kRootItem) return;
      absl::StatusOr<format::RootItem> ri = format::DecodeRootItem(it.value, k.objectid);
      if (!ri.ok()) return Problem(ri.status().message());
      if (k.objectid == format::kRootTreeId || roots_.count(k.objectid)) {
        return Problem("root tree: bad or duplicate root item for tree ", k.objectid);
      }
      roots_[k.objectid] = *ri;
      return;
    }
    ExtentRecord& e = extents_[k.objectid];
    if (k.type == format::kExtentItem) {
      absl::StatusOr<format::ExtentItem> ei = format::DecodeExtentItem(it.value, k.objectid);
      if (!ei.ok()) return Problem(ei.status().message());
      e.has_item = true;
      e.len = k.offset;
      e.item = *ei;
    } else if (format::IsBackref(k.type)) {
      if (format::IsDataRef(k.type)) {
        absl::StatusOr<uint32_t> c = format::DecodeDataRefCount(it.value, k.objectid);
        if (!c.ok()) return Problem(c.status().message());
        for (uint32_t i = 0; i < *c; ++i) e.backrefs.insert({k.type, k.offset});
        return;
      }
      if (!it.value.empty()) Problem("extent ", k.objectid, ": backref with a value");
      e.backrefs.insert({k.type, k.offset});
    } else {
      Problem("extent tree: unknown item type ", int{k.type}, " at ", k.objectid);
    }
  }

  bool InReserved(uint64_t start, uint64_t len) const {
    if (start < format::kReservedHead) return true;
    for (int i = 1; i < format::kNumSuperblockMirrors; ++i) {
      uint64_t off = format::kSuperblockOffsets[i];
      if (start < off + format::kMirrorReserve && off < start + len) return true;
    }
    return false;
  }

  // The back-reference each pointer needs: TREE(tree) from a root item;
  // from a node, SHARED(node) if it carries FULL_BACKREF, else TREE(owner).
  void ResolvePointers() {
    for (const Pointer& p : pointers_) {
      if (p.parent == 0) {
        seen_[p.child].insert({format::kTreeBlockRef, p.parent_owner});
        continue;
      }
      auto pe = extents_.find(p.parent);
      bool full = pe != extents_.end() && (pe->second.item.flags & format::kExtentFlagFullBackref);
      seen_[p.child].insert(full ? std::make_pair(uint8_t{format::kSharedBlockRef}, p.parent)
                                 : std::make_pair(uint8_t{format::kTreeBlockRef}, p.parent_owner));
    }
    // Data: SHARED_DATA(leaf) from a FULL_BACKREF leaf, else EXTENT_DATA(owner).
    for (const Pointer& p : data_pointers_) {
      auto pe = extents_.find(p.parent);
      bool full = pe != extents_.end() && (pe->second.item.flags & format::kExtentFlagFullBackref);
      seen_[p.child].insert(full ? std::make_pair(uint8_t{format::kSharedDataRef}, p.parent)
                                 : std::make_pair(uint8_t{format::kExtentDataRef}, p.parent_owner));
    }
  }

  void CheckExtents() {
    ResolvePointers();
    uint64_t prev_end = 0, used = 0;
    for (const auto& [bytenr, e] : extents_) {
      const std::string where = absl::StrCat("extent ", bytenr);
      if (!e.has_item) {
        Problem(where, ": back-references without an extent item");
        continue;
      }
      ++r_->extents;
      used += e.len;
      if (bytenr < prev_end)
        Problem(where, ": overlaps the previous extent (ends at ", prev_end, ")");
      prev_end = std::max(prev_end, bytenr + e.len);
      if (InReserved(bytenr, e.len)) Problem(where, ": inside reserved space");
      if (bytenr + e.len > dev_->Size()) Problem(where, ": past the end of the device");
      if (e.item.refs != e.backrefs.size()) {
        Problem(where, ": refcount ", e.item.refs, " but ", e.backrefs.size(), " back-references");
      }
      auto s = seen_.find(bytenr);
      if (s == seen_.end()) {
        Problem(where, ": leaked (allocated, refs ", e.item.refs, ", but no tree references it)");
        continue;
      }
      if (data_lens_.count(bytenr)) {
        if (!(e.item.flags & format::kExtentFlagData) || e.len != data_lens_[bytenr] ||
            levels_.count(bytenr)) {
          Problem(where, ": referenced as data of ", data_lens_[bytenr], " bytes but flags ",
                  e.item.flags, " len ", e.len);
        }
      } else if (!(e.item.flags & format::kExtentFlagTreeBlock) || e.len != sb_.nodesize) {
        Problem(where, ": referenced as a tree block but flags ", e.item.flags, " len ", e.len);
      } else if (e.item.level != levels_[bytenr]) {
        Problem(where, ": extent item level ", int{e.item.level}, " but node level ",
                int{levels_[bytenr]});
      }
      if (s->second != e.backrefs) {
        Problem(where, ": back-references do not match the ", s->second.size(), " pointers to it");
      }
    }
    for (const auto& [bytenr, refs] : seen_) {
      auto e = extents_.find(bytenr);
      if (e == extents_.end() || !e->second.has_item) {
        Problem(data_lens_.count(bytenr) ? "data extent " : "tree block ", bytenr,
                " is referenced but has no extent item");
      }
    }
    r_->used_bytes = used;
    if (used != sb_.bytes_used) {
      Problem("superblock bytes_used ", sb_.bytes_used, " but extents add up to ", used);
    }
  }

  BlockDevice* dev_;
  const format::Superblock& sb_;
  CheckReport* r_;
  NodeCache cache_;
  std::map<uint64_t, format::RootItem> roots_;
  std::map<uint64_t, ExtentRecord> extents_;
  std::map<uint64_t, std::multiset<std::pair<uint8_t, uint64_t>>> seen_;
  std::map<uint64_t, uint8_t> levels_;
  std::vector<Pointer> pointers_;
  std::vector<Pointer> data_pointers_;  // child = data extent, parent = leaf
  std::map<uint64_t, uint64_t> data_lens_;
  std::set<uint64_t> data_verified_;
  std::set<uint64_t> visited_;
};

void CheckSuperblockCopies(BlockDevice* dev, const format::Superblock& best, CheckReport* r) {
  for (int i = 0; i < format::MirrorCount(dev->Size()); ++i) {
    uint64_t off = format::kSuperblockOffsets[i];
    std::string buf(format::kSuperblockSize, '\0');
    absl::Status s = dev->ReadAt(off, buf.data(), buf.size());
    absl::StatusOr<format::Superblock> sb =
        s.ok() ? format::DecodeSuperblock(buf, off) : absl::StatusOr<format::Superblock>(s);
    if (!sb.ok()) {
      r->problems.push_back(absl::StrCat("superblock copy at ", off, ": ", sb.status().message()));
    } else if (sb->generation != best.generation || sb->fsid != best.fsid) {
      r->problems.push_back(absl::StrCat("superblock copy at ", off, " has generation ",
                                         sb->generation, ", the newest is ", best.generation));
    }
  }
}

}  // namespace

absl::StatusOr<CheckReport> Check(BlockDevice* device) {
  CheckReport r;
  std::string notes;
  absl::StatusOr<format::Superblock> sb = ReadBestSuperblock(device, &notes);
  if (!sb.ok()) {
    if (!absl::IsDataLoss(sb.status())) return sb.status();
    r.problems.push_back(std::string(sb.status().message()));
    return r;
  }
  r.generation = sb->generation;
  r.fsid_hex = absl::BytesToHexString(sb->fsid);
  r.nodesize = sb->nodesize;
  r.total_bytes = sb->total_bytes;
  CheckSuperblockCopies(device, *sb, &r);
  Checker(device, *sb, &r).Run();
  return r;
}

static_assert(kRootTreeId == format::kRootTreeId && kExtentTreeId == format::kExtentTreeId &&
              kDefaultTreeId == format::kDefaultTreeId);

bool HasCowkvSignature(BlockDevice* device) {
  for (uint64_t off : format::kSuperblockOffsets) {
    if (off + 16 > device->Size()) continue;
    char buf[16];
    if (!device->ReadAt(off, buf, sizeof(buf)).ok()) continue;
    uint64_t magic = 0;
    for (int i = 7; i >= 0; --i) magic = (magic << 8) | static_cast<uint8_t>(buf[8 + i]);
    if (magic == format::kSuperMagic) return true;
  }
  return false;
}

}  // namespace cowkv
