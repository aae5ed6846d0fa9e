// CheckFsTree(): the file-namespace part of `check`, run on every live
// subvolume tree. Every fs item must decode, and the namespace must hang
// together:
//   - every name an inode has (INODE_REF and INODE_EXTREF items; a name in
//     one of them only, at most kMaxLinks in all) is in its parent's DIR_ITEM and
//     DIR_INDEX (same index), and every directory entry is a name of its
//     child, with the child's type;
//   - nlink equals the number of names (directories: exactly one name and
//     nlink 1; the root: none); no inode without names unless it is an
//     orphan (nlink 0 and an ORPHAN_ITEM: a file an open handle kept, or an
//     O_TMPFILE; the next mount deletes it), no ORPHAN_ITEM without its
//     inode or on a directory, no items without an inode;
//   - a directory's size is twice the bytes of its entries' names (btrfs);
//   - a file's extents do not overlap, end by its size (preallocated ones,
//     fallocate KEEP_SIZE, may pass it), add up to nbytes (preallocated
//     ones included, as btrfs), and an inline extent is the file's only
//     one, at offset 0. Preallocated extents decode as regular ones do
//     (crc 0); their data extents' references are checked with every
//     other data reference (check.cc).
#include "engine/tools/check_fs.h"

#include <map>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "engine/fs/fs_items.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace {

using fs::DirEntry;
using fs::FsKey;

struct InodeInfo {
  bool has_item = false;
  fs::InodeItem item;
  uint32_t names = 0;
  uint64_t name_bytes = 0;  // directories: of their entries
  uint64_t extent_end = 0;
  uint64_t data_end = 0;  // of inline and regular extents (prealloc may pass EOF)
  uint64_t extent_bytes = 0;
  uint32_t extents = 0;
  bool has_inline = false;
};

class FsChecker {
 public:
  FsChecker(uint64_t tree, std::vector<std::string>* problems) : tree_(tree), p_(problems) {}

  void Add(absl::string_view key, absl::string_view value) {
    FsKey k;
    if (!fs::DecodeFsKey(key, &k)) return Problem("malformed fs key of ", key.size(), " bytes");
    absl::Status v = fs::ValidateItem(k, value);
    if (!v.ok()) return Problem(v.message());
    if (k.type == fs::kOrphanItem) {
      orphan_items_.insert(k.offset);
      return;
    }
    if (k.objectid >= fs::kLastFreeObjectid) {
      return Problem("item of type ", int{k.type}, " under reserved objectid ", k.objectid);
    }
    InodeInfo& in = inodes_[k.objectid];
    switch (k.type) {
      case fs::kInodeItem:
        in.has_item = true;
        in.item = *fs::DecodeInodeItem(value, k.objectid);
        break;
      case fs::kInodeRef: {
        const std::vector<fs::InodeRef> refs = *fs::DecodeInodeRefs(value, k.objectid);
        for (const fs::InodeRef& r : refs) AddName(in, k.objectid, k.offset, r.index, r.name);
        break;
      }
      case fs::kInodeExtref: {
        // Hash slots were checked by ValidateItem.
        const std::vector<fs::InodeExtref> xs =
            *fs::DecodeInodeExtrefs(value, k.objectid, k.offset);
        for (const fs::InodeExtref& x : xs) AddName(in, k.objectid, x.parent, x.index, x.name);
        break;
      }
      case fs::kDirItem: {
        const std::vector<DirEntry> entries = *fs::DecodeDirEntries(value, k.objectid);
        for (const DirEntry& e : entries) {
          if (fs::NameHash(e.name) != k.offset) Problem("dir item in the wrong hash slot");
          dir_items_.insert({k.objectid, e.name, e.child});
        }
        break;
      }
      case fs::kDirIndex: {
        DirEntry e = *fs::DecodeDirIndex(value, k.objectid);
        in.name_bytes += e.name.size();
        index_[{k.objectid, k.offset}] = e;
        break;
      }
      case fs::kExtentData:
        AddExtent(in, k, value);
        break;
      default:
        break;
    }
  }

  void Finish() {
    for (const auto& [ino, in] : inodes_) CheckInode(ino, in);
    for (uint64_t ino : orphan_items_) {
      auto it = inodes_.find(ino);
      if (it == inodes_.end() || !it->second.has_item) {
        Problem("orphan item for inode ", ino, " which does not exist");
      } else if (((it->second.item.mode >> 12) & 0xf) ==
                 static_cast<uint8_t>(fs::FileType::kDirectory)) {
        Problem("orphan item for directory ", ino);
      }
      // On a file with names (nlink > 0): stale, from an O_TMPFILE linked
      // after its item was committed; the mount's cleanup drops it.
    }
    for (const auto& [parent, index, name, child] : refs_) {
      auto it = index_.find({parent, index});
      if (it == index_.end() || it->second.child != child || it->second.name != name) {
        Problem("inode ", child, " name \"", name, "\" (index ", index,
                ") missing from DIR_INDEX of ", parent);
      }
      if (!dir_items_.count({parent, name, child})) {
        Problem("inode ", child, " name \"", name, "\" missing from DIR_ITEM of ", parent);
      }
    }
    for (const auto& [where, e] : index_) {
      if (!refs_.count({where.first, where.second, e.name, e.child})) {
        Problem("DIR_INDEX ", where.second, " of ", where.first, " names \"", e.name, "\" -> ",
                e.child, " which has no such name");
      }
      auto c = inodes_.find(e.child);
      if (c != inodes_.end() && c->second.has_item &&
          static_cast<uint8_t>(e.type) != ((c->second.item.mode >> 12) & 0xf)) {
        Problem("DIR_INDEX of ", where.first, " gives \"", e.name, "\" the wrong type");
      }
    }
    for (const auto& [dir, name, child] : dir_items_) {
      if (!ref_names_.count({dir, name, child}))
        Problem("DIR_ITEM of ", dir, " names \"", name, "\" -> ", child, " with no ref");
    }
  }

 private:
  template <typename... Args>
  void Problem(const Args&... args) {
    p_->push_back(absl::StrCat("tree ", tree_, " fs: ", args...));
  }

  // One name of `ino`, from an INODE_REF or an extended ref.
  void AddName(InodeInfo& in, uint64_t ino, uint64_t parent, uint64_t index,
               const std::string& name) {
    if (!ref_names_.insert({parent, name, ino}).second) {
      Problem("inode ", ino, " has name \"", name, "\" in directory ", parent, " twice");
    }
    refs_.insert({parent, index, name, ino});
    if (++in.names > kMaxLinks) Problem("inode ", ino, " has more than ", kMaxLinks, " names");
  }

  void AddExtent(InodeInfo& in, const FsKey& k, absl::string_view value) {
    fs::FileExtent e = *fs::DecodeFileExtent(value, k.objectid, k.offset);
    if (k.offset < in.extent_end) {
      Problem("inode ", k.objectid, " extent at ", k.offset, " overlaps the previous one");
    }
    if (e.kind == fs::kExtentInline && (k.offset != 0 || in.extents != 0)) {
      Problem("inode ", k.objectid, " inline extent not alone at offset 0");
    }
    if (in.has_inline) Problem("inode ", k.objectid, " has extents beside an inline one");
    in.has_inline = in.has_inline || e.kind == fs::kExtentInline;
    in.extent_end = k.offset + e.length();
    if (e.kind != fs::kExtentPrealloc) in.data_end = in.extent_end;
    in.extent_bytes += e.length();
    ++in.extents;
  }

  void CheckInode(uint64_t ino, const InodeInfo& in) {
    if (!in.has_item) {
      if (ino != fs::kRootDirIno) Problem("items of inode ", ino, " without an INODE_ITEM");
      return;
    }
    const bool dir = ((in.item.mode >> 12) & 0xf) == static_cast<uint8_t>(fs::FileType::kDirectory);
    if (ino == fs::kRootDirIno) {
      if (in.names != 0) Problem("the root directory has names");
    } else if (in.names == 0 && !dir && in.item.nlink == 0 && orphan_items_.count(ino)) {
      // An orphan: kept by an open handle (or a crash); no names to check.
    } else if (in.names == 0) {
      Problem("inode ", ino, " has no name",
              in.item.nlink == 0 ? " (nlink 0, no orphan item)" : "");
    } else if (dir && in.names != 1) {
      Problem("directory ", ino, " has ", in.names, " names");
    }
    const uint32_t want = dir || ino == fs::kRootDirIno ? 1 : in.names;
    if (in.item.nlink != want)
      Problem("inode ", ino, " nlink ", in.item.nlink, " but ", want, " names");
    if (dir && in.item.size != 2 * in.name_bytes) {
      Problem("directory ", ino, " size ", in.item.size, " but entries add up to ",
              2 * in.name_bytes);
    }
    if (dir && in.extents) Problem("directory ", ino, " has extents");
    // Preallocated extents may lie past EOF (fallocate KEEP_SIZE), as btrfs.
    if (!dir && in.data_end > in.item.size) {
      Problem("inode ", ino, " has extents to ", in.data_end, " past its size ", in.item.size);
    }
    if (!dir && in.extent_bytes != in.item.nbytes) {
      Problem("inode ", ino, " nbytes ", in.item.nbytes, " but extents add up to ",
              in.extent_bytes);
    }
  }

  const uint64_t tree_;
  std::vector<std::string>* p_;
  std::map<uint64_t, InodeInfo> inodes_;
  std::set<uint64_t> orphan_items_;
  std::set<std::tuple<uint64_t, uint64_t, std::string, uint64_t>>
      refs_;                                                         // parent, index, name, child
  std::set<std::tuple<uint64_t, std::string, uint64_t>> ref_names_;  // parent, name, child
  std::set<std::tuple<uint64_t, std::string, uint64_t>> dir_items_;  // dir, name, child
  std::map<std::pair<uint64_t, uint64_t>, DirEntry> index_;          // (dir, index)
};

}  // namespace

void CheckFsTree(Tree* tree, uint64_t id, std::vector<std::string>* problems) {
  FsChecker c(id, problems);
  TreeIterator it(tree);
  const std::string end(1, fs::kFsPrefix + 1);
  for (it.Seek(std::string(1, fs::kFsPrefix)); it.Valid() && it.key() < end; it.Next()) {
    c.Add(it.key(), it.value());
  }
  if (!it.status().ok()) {
    problems->push_back(absl::StrCat("tree ", id, " fs: ", it.status().message()));
    return;
  }
  c.Finish();
}

}  // namespace cowkv
