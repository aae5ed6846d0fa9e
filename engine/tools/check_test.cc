// Goal: `check` finds each kind of inconsistency it promises to, with a
// message naming it — and finds nothing on a healthy image.
// Method: build a committed image (4 KiB nodes, enough keys for a 3-level
// default tree), then plant one inconsistency per test with node surgery
// (nodes re-encoded with valid checksums, so only the structural check can
// see the problem): refcount != back-references, a leaked extent, an
// overlapping extent, misordered keys, a key outside its parent's fence, and
// a flipped byte.
#include <algorithm>
#include <functional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/coding.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/fs/fs_items.h"
#include "engine/testing/node_surgery.h"
#include "engine/testing/status_matchers.h"
#include "engine/testing/store_fixture.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace {

using format::Item;
using testing::ListNodes;
using testing::NodeInfo;
using testing::RewriteNode;

class CheckTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
    for (int i = 0; i < 20000; ++i) {
      ASSERT_OK(store->Put(absl::StrCat("key", 100000 + i), std::string(40, 'v')));
    }
    ASSERT_OK(store->Close());
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(nodes_, ListNodes(&dev_));
  }

  NodeInfo Find(uint64_t tree, int level, int nth = 0) {
    for (const NodeInfo& n : nodes_) {
      if (n.tree == tree && n.level == level && nth-- == 0) return n;
    }
    ADD_FAILURE() << "no node of tree " << tree << " level " << level;
    return {};
  }

  void ExpectFinding(absl::string_view needle) {
    ASSERT_OK_AND_ASSIGN(CheckReport r, Check(&dev_));
    ASSERT_FALSE(r.ok()) << "check found nothing, expected: " << needle;
    std::string all = absl::StrJoin(r.problems, "\n");
    EXPECT_NE(all.find(std::string(needle)), std::string::npos) << all;
  }

  MemDevice dev_{96ull << 20};
  std::vector<NodeInfo> nodes_;
};

TEST_F(CheckTest, RefcountMismatch) {
  NodeInfo leaf = Find(format::kExtentTreeId, 0);
  ASSERT_OK(RewriteNode(&dev_, leaf.bytenr, [](std::vector<Item>* items) {
    for (Item& it : *items) {
      format::Key17 k;
      if (format::DecodeKey17(it.key, &k) && k.type == format::kExtentItem) {
        format::ExtentItem e = *format::DecodeExtentItem(it.value, k.objectid);
        e.refs += 1;
        it.value = format::EncodeExtentItem(e);
        return;
      }
    }
  }));
  ExpectFinding("refcount 2 but 1 back-references");
}

TEST_F(CheckTest, LeakedExtent) {
  NodeInfo leaf = Find(format::kExtentTreeId, 0);
  ASSERT_OK(RewriteNode(&dev_, leaf.bytenr, [](std::vector<Item>* items) {
    // An extent at the very end of the device: allocated on paper, used by nothing.
    uint64_t b = (96ull << 20) - 4096;
    format::ExtentItem e{1, 1, format::kExtentFlagTreeBlock, 0};
    items->push_back(
        {format::EncodeKey17({b, format::kExtentItem, 4096}), format::EncodeExtentItem(e)});
    items->push_back({format::EncodeKey17({b, format::kTreeBlockRef, 5}), ""});
    items->erase(items->begin(), items->begin() + 2);  // keep it fitting; also breaks refs
  }));
  ExpectFinding("leaked");
}

TEST_F(CheckTest, OverlappingExtent) {
  NodeInfo leaf = Find(format::kExtentTreeId, 0);
  ASSERT_OK(RewriteNode(&dev_, leaf.bytenr, [](std::vector<Item>* items) {
    format::Key17 k;
    ASSERT_TRUE(format::DecodeKey17((*items)[0].key, &k));
    format::ExtentItem e{1, 1, format::kExtentFlagTreeBlock, 0};
    Item extra{format::EncodeKey17({k.objectid + 2048, format::kExtentItem, 4096}),
               format::EncodeExtentItem(e)};
    // Insert right after the first extent's items, keeping key order.
    size_t pos = 1;
    while (pos < items->size() && (*items)[pos].key < extra.key) ++pos;
    items->insert(items->begin() + pos, extra);
    items->pop_back();
  }));
  ExpectFinding("overlaps the previous extent");
}

TEST_F(CheckTest, MisorderedKeys) {
  NodeInfo leaf = Find(format::kDefaultTreeId, 0, 1);
  ASSERT_OK(RewriteNode(&dev_, leaf.bytenr, [](std::vector<Item>* items) {
    std::swap((*items)[1].key, (*items)[2].key);
  }));
  ExpectFinding("keys out of order");
}

TEST_F(CheckTest, KeyOutsideFence) {
  NodeInfo leaf = Find(format::kDefaultTreeId, 0, 0);  // leftmost leaf
  ASSERT_OK(RewriteNode(&dev_, leaf.bytenr, [](std::vector<Item>* items) {
    items->back().key = "zzzz";  // still sorted inside the leaf, beyond the next separator
  }));
  ExpectFinding("not below fence");
}

// The SUBVOL_INFO's creation generation (ogen) is checked against the
// superblock: a subvolume cannot have been created after the last commit.
TEST_F(CheckTest, SubvolumeCreatedAfterTheSuperblock) {
  NodeInfo root = Find(format::kRootTreeId, 0);
  ASSERT_OK(RewriteNode(&dev_, root.bytenr, [](std::vector<Item>* items) {
    for (Item& it : *items) {
      format::Key17 k;
      if (format::DecodeKey17(it.key, &k) && k.type == format::kSubvolInfo) {
        format::SubvolInfoItem si = *format::DecodeSubvolInfo(it.value, k.objectid);
        si.ogen = 1u << 30;
        it.value = format::EncodeSubvolInfo(si);
        return;
      }
    }
    ADD_FAILURE() << "no SUBVOL_INFO in the root tree's leaf";
  }));
  ExpectFinding("subvolume info 5: creation generation 1073741824 is newer than the superblock's");
}

TEST_F(CheckTest, FlippedByte) {
  NodeInfo leaf = Find(format::kDefaultTreeId, 0, 3);
  char b;
  ASSERT_OK(dev_.ReadAt(leaf.bytenr + 1000, &b, 1));
  b ^= 0x10;
  ASSERT_OK(dev_.WriteAt(leaf.bytenr + 1000, &b, 1));
  ExpectFinding("checksum mismatch");
}

// The file namespace: a subvolume with a directory and two names of one
// file; the leaf loses the file's DIR_INDEX entry, or the inode's link
// count goes wrong.
class CheckFsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSubvolume("files"));
    tree_ = info.id;
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("files"));
    Files f = sv->files();
    ASSERT_OK(f.Mkdir("/d").status());
    ASSERT_OK(f.Create("/d/file").status());
    ASSERT_OK(f.Link("/d/file", "/other").status());
    ASSERT_OK(store->Close());
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev_));
    for (const NodeInfo& n : nodes) {
      if (n.tree == tree_ && n.level == 0) leaf_ = n.bytenr;
    }
    ASSERT_NE(leaf_, 0u);
  }
  void ExpectFinding(absl::string_view needle) {
    ASSERT_OK_AND_ASSIGN(CheckReport r, Check(&dev_));
    std::string all = absl::StrJoin(r.problems, "\n");
    EXPECT_NE(all.find(std::string(needle)), std::string::npos) << all;
  }
  // Key type byte of an fs item key ('f' + objectid + type + offset).
  static int Type(const Item& it) {
    return it.key.size() == 18 ? static_cast<uint8_t>(it.key[9]) : -1;
  }

  MemDevice dev_{64ull << 20};
  uint64_t tree_ = 0;
  uint64_t leaf_ = 0;
};

TEST_F(CheckFsTest, MissingDirIndex) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (auto it = items->begin(); it != items->end(); ++it) {
      if (Type(*it) == 96) {  // DIR_INDEX
        items->erase(it);
        return;
      }
    }
  }));
  ExpectFinding("missing from DIR_INDEX");
}

TEST_F(CheckFsTest, WrongLinkCount) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (Item& it : *items) {
      // The file's inode item (the one with nlink 2): make it 1.
      if (Type(it) == 1 && it.value.size() == 96 && it.value[32] == 2) it.value[32] = 1;
    }
  }));
  ExpectFinding("nlink 1 but 2 names");
}

// Preallocated extents (fallocate): a file with data, preallocated extents
// inside its size and past it (KEEP_SIZE), one of them split by a write,
// is clean; a prealloc item turned regular past EOF, one with a checksum,
// and a lost piece (the data extent's back-references no longer match its
// pointers) are found.
class CheckPreallocTest : public CheckFsTest {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSubvolume("files"));
    tree_ = info.id;
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("files"));
    Files f = sv->files();
    ASSERT_OK_AND_ASSIGN(FileStat st, f.Create("/file"));
    ASSERT_OK(f.Write(st.ino, 0, std::string(3000, 'x')));
    ASSERT_OK(f.Fallocate(st.ino, 0, 3000, 20000));
    ASSERT_OK(f.Write(st.ino, 10000, "split"));
    ASSERT_OK(f.Fallocate(st.ino, kFallocKeepSize, 0, 60000));
    ASSERT_OK(store->Close());
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev_));
    for (const NodeInfo& n : nodes) {
      if (n.tree == tree_ && n.level == 0) leaf_ = n.bytenr;
    }
    ASSERT_NE(leaf_, 0u);
  }
  // Applies `fn` to the value of every preallocated EXTENT_DATA item.
  void RewritePrealloc(const std::function<bool(std::string*)>& fn) {
    ASSERT_OK(RewriteNode(&dev_, leaf_, [&](std::vector<Item>* items) {
      for (auto it = items->begin(); it != items->end(); ++it) {
        if (Type(*it) == 108 && it->value.size() == 56 && it->value[8] == 2 && fn(&it->value)) {
          if (it->value.empty()) items->erase(it);
          return;
        }
      }
    }));
  }
};

TEST_F(CheckPreallocTest, RegularPastEof) {
  RewritePrealloc([](std::string* v) {
    const uint64_t num = DecodeLE64(v->data() + 40);
    if (num != 60000 - 23000) return false;  // the KEEP_SIZE one, past EOF
    (*v)[8] = 1;
    return true;
  });
  ExpectFinding("past its size");
}

TEST_F(CheckPreallocTest, ChecksumOnPreallocatedExtent) {
  RewritePrealloc([](std::string* v) {
    (*v)[48] = 7;
    return true;
  });
  ExpectFinding("preallocated extent with a checksum");
}

TEST_F(CheckPreallocTest, LostPieceOfASplitExtent) {
  RewritePrealloc([](std::string* v) {
    v->clear();  // the first piece of the split extent goes
    return true;
  });
  ExpectFinding("back-references do not match");
}

// Orphans: a file unlinked while open is in the closed image as nlink 0
// with an ORPHAN_ITEM (the closing commit ran with the handle open), which
// check accepts; without its item, or an item without its inode, it
// reports.
class CheckOrphanTest : public CheckFsTest {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSubvolume("files"));
    tree_ = info.id;
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("files"));
    Files f = sv->files();
    ASSERT_OK(f.Create("/kept").status());
    ASSERT_OK_AND_ASSIGN(FileStat st, f.Create("/gone"));
    ASSERT_OK(f.Write(st.ino, 0, std::string(5000, 'x')));
    ASSERT_OK_AND_ASSIGN(OpenFile h, f.Open(st.ino));
    ASSERT_OK(f.Unlink("/gone"));
    ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> orphans, f.Orphans());
    EXPECT_EQ(orphans, std::vector<uint64_t>{st.ino});
    orphan_ = st.ino;
    (void)h;
    ASSERT_OK(store->Close());  // the handle dies with the store; the item stays
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev_));
    for (const NodeInfo& n : nodes) {
      if (n.tree == tree_ && n.level == 0) leaf_ = n.bytenr;
    }
    ASSERT_NE(leaf_, 0u);
  }
  uint64_t orphan_ = 0;
};

TEST_F(CheckOrphanTest, NlinkZeroWithoutOrphanItem) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (auto it = items->begin(); it != items->end(); ++it) {
      if (Type(*it) == 48) {  // ORPHAN_ITEM
        items->erase(it);
        return;
      }
    }
  }));
  ExpectFinding(absl::StrCat("inode ", orphan_, " has no name (nlink 0, no orphan item)"));
}

TEST_F(CheckOrphanTest, OrphanItemWithoutInode) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (Item& it : *items) {
      if (Type(it) == 48) it.key[17] = static_cast<char>(it.key[17] + 100);  // another inode
    }
  }));
  ExpectFinding("which does not exist");
}

// Extended refs: with one name per INODE_REF item, /d/b (the second name
// of /d/a's file in /d) is an INODE_EXTREF item. The clean image passes;
// an extended ref moved to another hash slot, lost, or duplicating the
// INODE_REF's name is found.
class CheckExtrefTest : public CheckFsTest {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    Options o = testing::TestOptions();
    o.test_hooks.ref_item_names = 1;
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, o));
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSubvolume("files"));
    tree_ = info.id;
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("files"));
    Files f = sv->files();
    ASSERT_OK(f.Mkdir("/d").status());
    ASSERT_OK(f.Create("/d/a").status());
    ASSERT_OK(f.Link("/d/a", "/d/b").status());
    ASSERT_OK(store->Close());
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev_));
    for (const NodeInfo& n : nodes) {
      if (n.tree == tree_ && n.level == 0) leaf_ = n.bytenr;
    }
    ASSERT_NE(leaf_, 0u);
  }
  // The leaf's extended ref item (exactly one).
  static std::vector<Item>::iterator Extref(std::vector<Item>* items) {
    auto it =
        std::find_if(items->begin(), items->end(), [](const Item& i) { return Type(i) == 13; });
    EXPECT_NE(it, items->end());
    return it;
  }
};

TEST_F(CheckExtrefTest, WrongHashSlot) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    auto it = Extref(items);
    it->key[17] = static_cast<char>(it->key[17] ^ 1);  // the next item is another type
  }));
  ExpectFinding("in the wrong hash slot");
}

TEST_F(CheckExtrefTest, LostExtref) {
  ASSERT_OK(
      RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) { items->erase(Extref(items)); }));
  ExpectFinding("names \"b\" -> ");
  ExpectFinding("nlink 2 but 1 names");
}

TEST_F(CheckExtrefTest, NameInBothKindsOfItem) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    // The INODE_REF's name ("a", under /d) copied into an extended ref.
    auto ref = std::find_if(items->begin(), items->end(), [](const Item& i) {
      return Type(i) == 12 && i.value.size() == 11 && i.value[10] == 'a';
    });
    ASSERT_NE(ref, items->end());
    const uint64_t parent = DecodeBE64(ref->key.data() + 10);
    Item x;
    x.key = ref->key;
    x.key[9] = 13;
    EncodeBE64(x.key.data() + 10, fs::ExtrefHash(parent, "a"));
    x.value = fs::EncodeInodeExtrefs({{parent, DecodeLE64(ref->value.data()), "a"}});
    items->push_back(x);
    std::sort(items->begin(), items->end(),
              [](const Item& l, const Item& r) { return l.key < r.key; });
  }));
  ExpectFinding("has name \"a\" in directory ");
}

TEST_F(CheckOrphanTest, MountDeletesTheOrphan) {
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("files"));
    EXPECT_EQ(sv->files().StatInode(orphan_).status().code(), absl::StatusCode::kNotFound);
    ASSERT_OK_AND_ASSIGN(std::vector<uint64_t> orphans, sv->files().Orphans());
    EXPECT_TRUE(orphans.empty());
    ASSERT_OK(store->Close());
  }
  testing::ExpectCheckClean(&dev_);
}

// Leases: a subvolume with a lease holding two keys is clean; a lost
// record, a lost key, a key attached twice and a bad TTL are each found.
class CheckLeaseTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(SubvolumeInfo info, store->CreateSubvolume("leases"));
    tree_ = info.id;
    ASSERT_OK_AND_ASSIGN(auto sv, store->OpenSubvolume("leases"));
    ASSERT_OK_AND_ASSIGN(int64_t id, sv->LeaseGrant(60, 7));
    ASSERT_EQ(id, 7);
    ASSERT_OK(sv->LeaseGrant(60, 8).status());
    ASSERT_OK(sv->PutItemWithLease("a", "1", 7).status());
    ASSERT_OK(sv->PutItemWithLease("b", "2", 7).status());
    ASSERT_OK(store->Close());
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev_));
    for (const NodeInfo& n : nodes) {
      if (n.tree == tree_ && n.level == 0) leaf_ = n.bytenr;
    }
    ASSERT_NE(leaf_, 0u);
  }
  void ExpectFinding(absl::string_view needle) {
    ASSERT_OK_AND_ASSIGN(CheckReport r, Check(&dev_));
    std::string all = absl::StrJoin(r.problems, "\n");
    EXPECT_NE(all.find(std::string(needle)), std::string::npos) << all;
  }
  static bool IsRecord(const Item& it, uint8_t id) {
    return it.key.size() == 9 && it.key[0] == 'L' && static_cast<uint8_t>(it.key[8]) == id;
  }

  MemDevice dev_{64ull << 20};
  uint64_t tree_ = 0;
  uint64_t leaf_ = 0;
};

TEST_F(CheckLeaseTest, AttachmentWithoutRecord) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (auto it = items->begin(); it != items->end(); ++it) {
      if (IsRecord(*it, 7)) {
        items->erase(it);
        return;
      }
    }
  }));
  ExpectFinding("attached to lease 7 which has no record");
}

TEST_F(CheckLeaseTest, AttachedKeyMissing) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (auto it = items->begin(); it != items->end(); ++it) {
      if (it->key == "ka") {
        items->erase(it);
        return;
      }
    }
  }));
  ExpectFinding("key 'a' attached to lease 7 does not exist");
}

TEST_F(CheckLeaseTest, KeyAttachedTwice) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (size_t i = 0; i < items->size(); ++i) {
      if (IsRecord((*items)[i], 8)) {
        Item extra{(*items)[i].key + "a", std::string("\x02\0\0\0\0\0\0\0", 8)};
        items->insert(items->begin() + static_cast<std::ptrdiff_t>(i) + 1, extra);
        return;
      }
    }
  }));
  ExpectFinding("key 'a' attached to leases 7 and 8");
}

TEST_F(CheckLeaseTest, BadTtl) {
  ASSERT_OK(RewriteNode(&dev_, leaf_, [](std::vector<Item>* items) {
    for (Item& it : *items) {
      if (IsRecord(it, 8)) it.value.replace(8, 8, std::string(8, '\0'));
    }
  }));
  ExpectFinding("ttl 0 out of range");
}

// A subvolume written before the KV history (no 'h' items at all): check
// is clean; reads below the revision at mount are OUT_OF_RANGE COMPACTED
// (not DATA_LOSS); the history starts at the first change after it and
// survives a remount; check stays clean throughout.
TEST(CheckHistoryTest, SubvolumeFromBeforeTheHistory) {
  MemDevice dev(64ull << 20);
  ASSERT_OK(Store::Mkfs(&dev, testing::TestMkfs(4096)));
  uint64_t first = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
    ASSERT_OK_AND_ASSIGN(first, sv->PutItem("a", "1"));
    ASSERT_OK(sv->PutItem("b", "2").status());
    ASSERT_OK(sv->PutItem("a", "3").status());
    ASSERT_OK(store->Close());
  }
  // What an older version wrote: the same items without any history item.
  ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev));
  uint64_t leaf = 0;
  for (const NodeInfo& n : nodes) {
    if (n.tree == format::kDefaultTreeId && n.level == 0) leaf = n.bytenr;
  }
  ASSERT_NE(leaf, 0u);
  ASSERT_OK(RewriteNode(&dev, leaf, [](std::vector<Item>* items) {
    items->erase(std::remove_if(items->begin(), items->end(),
                                [](const Item& i) { return !i.key.empty() && i.key[0] == 'h'; }),
                 items->end());
  }));
  testing::ExpectCheckClean(&dev);
  uint64_t mounted = 0, later = 0;
  {
    ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
    ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
    ASSERT_OK_AND_ASSIGN(KeyValue a, sv->GetItem("a", 0, &mounted));
    EXPECT_EQ(a.value, "3");
    EXPECT_EQ(sv->GetItemAt("a", first).status().code(), absl::StatusCode::kOutOfRange);
    ASSERT_OK_AND_ASSIGN(KeyValue at, sv->GetItemAt("a", mounted));
    EXPECT_EQ(at.value, "3");
    ASSERT_OK_AND_ASSIGN(later, sv->PutItem("a", "4"));
    ASSERT_OK_AND_ASSIGN(KeyValue before, sv->GetItemAt("a", later - 1));
    EXPECT_EQ(before.value, "3");
    ASSERT_OK(store->Close());
  }
  testing::ExpectCheckClean(&dev);
  ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev, testing::TestOptions()));
  ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
  ASSERT_OK_AND_ASSIGN(KeyValue again, sv->GetItemAt("a", later - 1));
  EXPECT_EQ(again.value, "3");
  // Never compacted: the history starts at the first change after the
  // upgrade.
  ASSERT_OK_AND_ASSIGN(uint64_t floor, sv->CompactRevision());
  EXPECT_EQ(floor, later - 1);
  ASSERT_OK(store->Close());
}

// File events (docs/format.md "File events"): a watched subvolume's
// events and info check clean; a stray event, an unknown type and an event
// past the sealed revision are each found.
class CheckFileEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_OK(Store::Mkfs(&dev_, testing::TestMkfs(4096)));
    {
      ASSERT_OK_AND_ASSIGN(auto store, Store::Open(&dev_, testing::TestOptions()));
      ASSERT_OK_AND_ASSIGN(auto sv, store->DefaultSubvolume());
      ASSERT_OK(sv->StartFileEvents().status());
      Files f = sv->files();
      ASSERT_OK_AND_ASSIGN(FileStat st, f.Create("/a"));
      ASSERT_OK(f.Write(st.ino, 0, "x"));
      ASSERT_OK(f.Rename("/a", "/b"));
      ASSERT_OK(store->Close());
    }
    testing::ExpectCheckClean(&dev_);
    ASSERT_OK_AND_ASSIGN(std::vector<NodeInfo> nodes, ListNodes(&dev_));
    for (const NodeInfo& n : nodes) {
      if (n.tree == format::kDefaultTreeId && n.level == 0) leaf_ = n.bytenr;
    }
    ASSERT_NE(leaf_, 0u);
  }
  void Rewrite(const std::function<void(std::vector<Item>*, size_t)>& fn) {
    ASSERT_OK(RewriteNode(&dev_, leaf_, [&](std::vector<Item>* items) {
      for (size_t i = 0; i < items->size(); ++i) {
        const Item& it = (*items)[i];
        // The second event: revision 2, seq 0.
        if (it.key.size() == 10 && it.key[0] == 'e' && it.key[7] == 2) return fn(items, i);
      }
    }));
  }
  void ExpectFinding(absl::string_view needle) {
    ASSERT_OK_AND_ASSIGN(CheckReport r, Check(&dev_));
    std::string all = absl::StrJoin(r.problems, "\n");
    EXPECT_NE(all.find(std::string(needle)), std::string::npos) << all;
  }
  MemDevice dev_{64ull << 20};
  uint64_t leaf_ = 0;
};

TEST_F(CheckFileEventsTest, StrayEvent) {
  Rewrite([](std::vector<Item>* items, size_t i) {
    Item extra = (*items)[i];
    extra.key[9] = 2;  // seq 2 after seq 0: seq 1 missing
    items->insert(items->begin() + static_cast<std::ptrdiff_t>(i) + 1, extra);
  });
  ExpectFinding("has event 2 where 1 was due");
}

TEST_F(CheckFileEventsTest, UnknownType) {
  Rewrite([](std::vector<Item>* items, size_t i) { (*items)[i].value[0] = 99; });
  ExpectFinding("unknown type 99");
}

TEST_F(CheckFileEventsTest, EventPastTheSealedRevision) {
  Rewrite([](std::vector<Item>* items, size_t i) {
    Item extra = (*items)[i];
    extra.key[6] = 1;  // revision 2 + 256
    items->push_back(extra);
    std::sort(items->begin(), items->end(),
              [](const Item& a, const Item& b) { return a.key < b.key; });
  });
  ExpectFinding("past the sealed revision");
}

}  // namespace
}  // namespace cowkv
