#include "engine/txn/txn_manager.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cowkv/errors.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/refs/extent_tree.h"

namespace cowkv {

using format::Key17;
using format::Superblock;

namespace {

// Candidates newest first: checksum-valid copies whose root node verifies.
std::vector<Superblock> SuperblockCandidates(BlockDevice* device, std::string* notes) {
  std::vector<Superblock> out;
  for (uint64_t off : format::kSuperblockOffsets) {
    if (off + format::kSuperblockSize > device->Size()) continue;
    std::string buf(format::kSuperblockSize, '\0');
    absl::Status s = device->ReadAt(off, buf.data(), buf.size());
    absl::StatusOr<Superblock> sb =
        s.ok() ? format::DecodeSuperblock(buf, off) : absl::StatusOr<Superblock>(s);
    if (!sb.ok()) {
      if (notes) absl::StrAppend(notes, "; superblock at ", off, ": ", sb.status().message());
      continue;
    }
    if (sb->total_bytes > device->Size()) {
      if (notes) absl::StrAppend(notes, "; superblock at ", off, ": device smaller than recorded size");
      continue;
    }
    std::string node(sb->nodesize, '\0');
    format::NodeHeader h;
    std::vector<format::Item> items;
    s = device->ReadAt(sb->root, node.data(), node.size());
    if (s.ok()) {
      s = format::DecodeNode(node, sb->fsid, sb->nodesize, sb->sectorsize,
                             {sb->root, sb->root_generation, format::kRootTreeId, sb->root_level},
                             &h, &items);
    }
    if (!s.ok()) {
      if (notes) absl::StrAppend(notes, "; superblock at ", off, " (generation ", sb->generation,
                                 "): root node: ", s.message());
      continue;
    }
    out.push_back(*sb);
  }
  std::stable_sort(out.begin(), out.end(), [](const Superblock& a, const Superblock& b) {
    return a.generation > b.generation;
  });
  return out;
}

}  // namespace

absl::StatusOr<Superblock> ReadBestSuperblock(BlockDevice* device, std::string* notes) {
  std::vector<Superblock> c = SuperblockCandidates(device, notes);
  if (c.empty()) {
    // Each rejected copy was reported (and counted) where it was decoded;
    // this sums them up for the caller, with the notes: the same class,
    // not a second count. The message is what an operator pointing a tool
    // at the wrong file reads first ("no valid cowkv superblock found").
    return WithReason(
        absl::DataLossError(absl::StrCat("no valid cowkv superblock found", notes ? *notes : "")),
        ErrorReason::kCorruption);
  }
  return c.front();
}

TxnManager::TxnManager(BlockDevice* device, const Superblock& sb, uint64_t cache_bytes)
    : device_(device),
      cache_(std::make_unique<NodeCache>(device, sb.fsid, sb.nodesize, sb.sectorsize, cache_bytes)),
      sb_(sb),
      free_(sb.sectorsize) {}

TxnManager::~TxnManager() = default;

absl::Status TxnManager::Mkfs(BlockDevice* device, uint32_t nodesize, uint32_t sectorsize,
                              const std::string& fsid,
                              const std::function<absl::Status(TxnManager*)>& populate) {
  if (!format::ValidNodesize(nodesize)) {
    return absl::InvalidArgumentError(
        absl::StrCat("nodesize ", nodesize, " is not a power of two in [4096, 65536]"));
  }
  if (sectorsize < 512 || sectorsize > nodesize || (sectorsize & (sectorsize - 1)) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad sectorsize ", sectorsize));
  }
  if (device->Size() < kMinDeviceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device of ", device->Size(), " bytes is below the minimum of ", kMinDeviceBytes));
  }
  if (fsid.size() != format::kFsidSize) return absl::InvalidArgumentError("fsid must be 16 bytes");
  // Stale copies of an older filesystem must never win the mount.
  std::string zero(format::kSuperblockSize, '\0');
  for (uint64_t off : format::kSuperblockOffsets) {
    if (off + zero.size() <= device->Size())
      COWKV_RETURN_IF_ERROR(device->WriteAt(off, zero.data(), zero.size()));
  }
  COWKV_RETURN_IF_ERROR(device->Flush());
  Superblock sb;
  sb.fsid = fsid;
  sb.nodesize = nodesize;
  sb.sectorsize = sectorsize;
  sb.total_bytes = device->Size();
  sb.next_tree_id = format::kFirstFreeTreeId;
  std::unique_ptr<TxnManager> m(new TxnManager(device, sb, 64ull << 20));
  m->generation_ = 1;
  m->next_tree_id_ = format::kFirstFreeTreeId;
  {
    absl::MutexLock l(&m->space_mu_);  // mkfs: alone, but the members say so
    m->AddDeviceFreeSpaceLocked();
  }
  COWKV_ASSIGN_OR_RETURN(m->root_tree_,
                         Tree::CreateEmpty(format::kRootTreeId, m->cache(), m.get()));
  COWKV_ASSIGN_OR_RETURN(m->extent_tree_,
                         Tree::CreateEmpty(format::kExtentTreeId, m->cache(), m.get()));
  FsRoot& def = m->fs_roots_[format::kDefaultTreeId];
  COWKV_ASSIGN_OR_RETURN(def.tree, Tree::CreateEmpty(format::kDefaultTreeId, m->cache(), m.get()));
  def.dirty = true;
  if (populate) COWKV_RETURN_IF_ERROR(populate(m.get()));
  return m->Commit();
}

absl::StatusOr<std::unique_ptr<TxnManager>> TxnManager::Mount(BlockDevice* device,
                                                              uint64_t cache_bytes) {
  std::string notes;
  std::vector<Superblock> candidates = SuperblockCandidates(device, &notes);
  for (const Superblock& sb : candidates) {
    std::unique_ptr<TxnManager> m(new TxnManager(device, sb, cache_bytes));
    absl::Status s = m->LoadTrees();
    if (s.ok()) s = m->RebuildFreeSpace();
    if (s.ok()) {
      m->generation_ = sb.generation + 1;
      m->next_tree_id_ = std::max<uint64_t>(sb.next_tree_id, format::kFirstFreeTreeId);
      m->revision_ = sb.revision;
      int fresh = 0;
      for (const Superblock& c : candidates) fresh += c.generation == sb.generation;
      m->superblocks_need_rewrite_ = fresh < format::MirrorCount(device->Size());
      std::string primary(format::kSuperblockSize, '\0');
      COWKV_RETURN_IF_ERROR(
          device->ReadAt(format::kSuperblockOffsets[0], primary.data(), primary.size()));
      {
        absl::MutexLock l(&m->owned_mu_);
        m->primary_ = std::move(primary);
      }
      return m;
    }
    if (!absl::IsDataLoss(s)) return s;
    absl::StrAppend(&notes, "; generation ", sb.generation, ": ", s.message());
  }
  CorruptionSite site;
  site.what = "superblock";
  return COWKV_CORRUPTION(
      site, absl::StrCat("cannot mount: no superblock with a valid tree", notes), "", "");
}

absl::Status TxnManager::LoadTrees() {
  root_tree_ = std::make_unique<Tree>(
      format::kRootTreeId, RootRef{sb_.root, sb_.root_generation, sb_.root_level}, cache_.get(),
      this);
  TreeIterator it(root_tree_.get());
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    Key17 k;
    if (!format::DecodeKey17(it.key(), &k)) continue;
    if (k.type != format::kRootItem) continue;
    COWKV_ASSIGN_OR_RETURN(format::RootItem ri, format::DecodeRootItem(it.value(), k.objectid));
    // Ids are never reused (CreateTree and CloneTree assert it): every tree
    // the root tree lists was created below the superblock's next_tree_id.
    if (k.objectid >= std::max<uint64_t>(sb_.next_tree_id, format::kFirstFreeTreeId)) {
      CorruptionSite site;
      site.what = "root tree";
      site.owner = k.objectid;
      return COWKV_CORRUPTION(site, "tree id at or above the superblock's next_tree_id",
                              absl::StrCat(k.objectid), absl::StrCat("<", sb_.next_tree_id));
    }
    auto tree = std::make_unique<Tree>(k.objectid, RootRef{ri.bytenr, ri.generation, ri.level},
                                       cache_.get(), this);
    COWKV_RETURN_IF_ERROR(tree->ReadRoot().status());
    if (k.objectid == format::kExtentTreeId) {
      extent_tree_ = std::move(tree);
    } else {
      FsRoot& r = fs_roots_[k.objectid];
      r.tree = std::move(tree);
      r.item = ri;
    }
  }
  COWKV_RETURN_IF_ERROR(it.status());
  if (extent_tree_ == nullptr || fs_roots_.count(format::kDefaultTreeId) == 0) {
    CorruptionSite site;
    site.what = "root tree";
    site.bytenr = sb_.root;
    site.owner = format::kRootTreeId;
    return COWKV_CORRUPTION(site, "lacks the extent tree or default tree root item", "", "");
  }
  return absl::OkStatus();
}

void TxnManager::AddDeviceFreeSpaceLocked() {
  const uint64_t size = device_->Size();
  uint64_t start = format::kReservedHead;
  for (int i = 1; i < format::kNumSuperblockMirrors; ++i) {
    uint64_t off = format::kSuperblockOffsets[i];
    if (off >= size) break;
    if (off > start) free_.AddFree(start, off - start);
    start = std::min(size, off + format::kMirrorReserve);
  }
  if (size > start) free_.AddFree(start, size - start);
}

absl::Status TxnManager::RebuildFreeSpace() {
  absl::MutexLock l(&space_mu_);  // mount: alone, but the members say so
  AddDeviceFreeSpaceLocked();
  bytes_used_ = 0;
  nodes_per_tree_.clear();
  TreeIterator it(extent_tree_.get());
  for (it.SeekToFirst(); it.Valid(); it.Next()) {
    Key17 k;
    CorruptionSite site;
    site.what = "extent tree";
    if (!format::DecodeKey17(it.key(), &k)) {
      return COWKV_CORRUPTION(site, "a key of another size", absl::StrCat(it.key().size()),
                              absl::StrCat(format::kKeySize17));
    }
    if (k.type == format::kExtentItem) {
      // Every extent is allocated on a sector boundary, and freeing one
      // asserts it (FreeSpace): refuse here what would crash there.
      if (k.objectid % sb_.sectorsize != 0 || k.offset % sb_.sectorsize != 0 || k.offset == 0) {
        return absl::DataLossError(absl::StrCat("extent [", k.objectid, ", +", k.offset,
                                                ") is empty or not sector-aligned"));
      }
      if (!free_.RemoveFree(k.objectid, k.offset)) {
        site.bytenr = k.objectid;
        return COWKV_CORRUPTION(site, "extent overlaps another extent or reserved space",
                                absl::StrCat("[", k.objectid, ", +", k.offset, ")"), "");
      }
      bytes_used_ += k.offset;
    } else if (k.type == format::kTreeBlockRef) {
      ++nodes_per_tree_[k.offset];
    }
  }
  return it.status();
}


absl::StatusOr<uint64_t> TxnManager::AllocTreeBlock(uint64_t owner, uint8_t level) {
  COWKV_DCHECK(level < format::kMaxLevel);
  absl::MutexLock l(&space_mu_);
  absl::StatusOr<uint64_t> bytenr = free_.Allocate(sb_.nodesize, sb_.nodesize);
  if (!bytenr.ok()) {
    ++enospc_errors_;
    return bytenr.status();
  }
  COWKV_DCHECK(*bytenr >= format::kReservedHead);
  refs_.Add(*bytenr, sb_.nodesize, level, {format::kTreeBlockRef, owner}, +1, true,
            generation_);
  bytes_used_ += sb_.nodesize;
  ++nodes_per_tree_[owner];
  return bytenr;
}

void TxnManager::DropTreeRefLocked(uint64_t tree_id, const Node& node) {
  refs_.Add(node.bytenr, sb_.nodesize, node.level, {format::kTreeBlockRef, tree_id}, -1, false,
            generation_);
  --nodes_per_tree_[tree_id];
}

absl::Status TxnManager::FreeTreeBlock(uint64_t tree_id, const Node& node) {
  absl::MutexLock l(&space_mu_);
  DropTreeRefLocked(tree_id, node);
  if (refs_.DropIfCancelled(node.bytenr)) {
    // Allocated and freed in this transaction, never written: free at once.
    free_.FreeNow(node.bytenr, sb_.nodesize);
    COWKV_CHECK(bytes_used_ >= sb_.nodesize);
    bytes_used_ -= sb_.nodesize;
    cache_->Discard(node.bytenr);
  }
  return absl::OkStatus();
}

void TxnManager::OnExtentFreed(uint64_t bytenr, uint64_t num_bytes) {
  absl::MutexLock l(&space_mu_);
  // The committed tree may still point here until this commit is durable.
  free_.Pin(bytenr, num_bytes);
  // bytes_used_ is the sum of the extent items' lengths (mount adds them,
  // allocations add theirs): freeing one cannot take it below zero.
  COWKV_CHECK(bytes_used_ >= num_bytes);
  bytes_used_ -= num_bytes;
  cache_->Discard(bytenr);
}

uint64_t TxnManager::CommitReserveNodesLocked(uint64_t extra_heads) const {
  const uint64_t heads = refs_.num_heads() + extra_heads;
  const uint64_t per_head = 2 * (extent_tree_->height() + 2);
  const uint64_t roots = (fs_roots_.size() + 2) * 2 * (root_tree_->height() + 2);
  auto it = nodes_per_tree_.find(format::kExtentTreeId);
  const uint64_t ext_nodes = it == nodes_per_tree_.end() ? 0 : std::max<int64_t>(0, it->second);
  // Bound (a): every head CoWs and splits its own extent-tree path.
  const uint64_t a = (heads + roots) * per_head;
  // Bound (b): the whole final extent tree, at >= 1/4 fill, dirty twice over.
  const uint64_t grow = (heads + roots) * kExtentTreeBytesPerHead * 8 /
                        format::NodeCapacity(sb_.nodesize);
  const uint64_t b = 2 * (ext_nodes + grow + 2) + per_head;
  return std::min(a, b) + roots + 2 * format::kMaxLevel;
}

absl::Status TxnManager::ReserveForWrite(Tree* tree, WriteKind kind, uint64_t count,
                                         uint64_t bytes, uint64_t delete_nodes) {
  // extent_mu_: the extent tree's height (CommitReserveNodesLocked) does
  // not move under a concurrent delayed-ref batch.
  absl::MutexLock el(&extent_mu_);
  absl::MutexLock l(&space_mu_);
  if (!fatal_.ok()) return fatal_;
  // Inserts leave room for deletes, so a full store can always shrink.
  constexpr uint64_t kDeleteMarginNodes = 64;
  uint64_t op = tree->WorstCaseNodesPerOp() * count;
  if (bytes > 0) {
    // A batch cannot CoW more nodes than exist (every allocated byte could
    // be a node), and its splits add at most one node per half node of new
    // bytes at each level.
    const uint64_t existing = bytes_used_ / sb_.nodesize + 1;
    const uint64_t added =
        (2 * bytes / sb_.nodesize + 1) * static_cast<uint64_t>(tree->height() + 1) * 2;
    op = std::min(op, existing + added + tree->WorstCaseNodesPerOp());
  }
  if (kind == WriteKind::kDelete && delete_nodes > 0) op = std::min(op, delete_nodes);
  uint64_t extra_heads = 2 * op;
  // CoW of a node shared with a snapshot queues a ref for each of its
  // children: up to a full internal node's worth per level on the path.
  // Inserts reserve for it; deletes rely on the margin inserts leave, so a
  // full store can still delete (see docs/design.md, "Space reservation").
  auto sv = fs_roots_.find(tree->id());
  if (kind == WriteKind::kInsert && sv != fs_roots_.end() && sv->second.item.last_snapshot > 0) {
    const uint64_t max_fanout =
        format::NodeCapacity(sb_.nodesize) / (format::kSlotSize + 1 + format::kChildPtrSize);
    extra_heads += std::min(static_cast<uint64_t>(tree->height()) * count, op) * max_fanout;
  }
  const uint64_t commit_nodes = CommitReserveNodesLocked(extra_heads);
  uint64_t need = op + commit_nodes;
  if (kind == WriteKind::kInsert) need += kDeleteMarginNodes;
  const uint64_t need_bytes = need * sb_.nodesize;
  // Other file writers' outstanding reservations count as used.
  auto mine = reserved_bytes_.find(tree->id());
  const uint64_t others =
      reserved_bytes_total_ - (mine == reserved_bytes_.end() ? 0 : mine->second);
  const uint64_t free_bytes = free_.free_bytes() > others ? free_.free_bytes() - others : 0;
  if (free_bytes < need_bytes) {
    ++enospc_errors_;
    return NoSpaceError(absl::StrCat(
        "a write needs up to ", need_bytes, " bytes of metadata space (commit included); ",
        free_bytes, " bytes free, ", free_.pinned_bytes(), " bytes pinned until the next commit",
        others > 0 ? absl::StrCat(", ", others, " bytes reserved by other writers") : ""));
  }
  // What this write may still take: its nodes and its heads' share of the
  // commit (the commit's base share is counted once, by every check).
  if (mine != reserved_bytes_.end()) {
    const uint64_t hold = (op + commit_nodes - CommitReserveNodesLocked(0)) * sb_.nodesize;
    if (hold > mine->second) {
      reserved_bytes_total_ += hold - mine->second;
      mine->second = hold;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> TxnManager::BeginWrite(uint64_t tree_id) {
  absl::MutexLock l(&space_mu_);
  if (!fatal_.ok()) return fatal_;
  // One writer per tree at a time (its subvolume's tree lock).
  COWKV_CHECK(reserved_bytes_.emplace(tree_id, 0).second);
  return refs_.num_heads();
}

TxnManager::RefCounts TxnManager::EndWrite(uint64_t tree_id) {
  absl::MutexLock l(&space_mu_);
  auto it = reserved_bytes_.find(tree_id);
  COWKV_CHECK(it != reserved_bytes_.end());  // BeginWrite's
  COWKV_CHECK(reserved_bytes_total_ >= it->second);
  reserved_bytes_total_ -= it->second;
  reserved_bytes_.erase(it);
  return RefCounts{refs_.num_heads(), refs_.updates_since_commit()};
}

absl::StatusOr<uint64_t> TxnManager::AllocLogBlock() {
  absl::MutexLock el(&extent_mu_);
  absl::MutexLock l(&space_mu_);
  if (!fatal_.ok()) return fatal_;
  const uint64_t keep = (CommitReserveNodesLocked(0) + 64) * sb_.nodesize + reserved_bytes_total_;
  if (free_.free_bytes() < keep + sb_.nodesize) {
    return NoSpaceError(absl::StrCat("no space for a log block: ", free_.free_bytes(),
                                     " bytes free, the next commit may need ", keep));
  }
  return free_.Allocate(sb_.nodesize, sb_.nodesize);
}

absl::StatusOr<format::DataRef> TxnManager::AllocDataExtent(uint64_t len) {
  absl::MutexLock el(&extent_mu_);
  absl::MutexLock l(&space_mu_);
  if (!fatal_.ok()) return fatal_;
  const uint64_t ss = sb_.sectorsize;
  const uint64_t rounded = (len + ss - 1) / ss * ss;
  const uint64_t keep = DataReserveBytesLocked();
  if (free_.free_bytes() < keep + rounded) {
    ++enospc_errors_;
    return NoSpaceError(absl::StrCat("a ", rounded, "-byte data extent does not fit: ",
                                     free_.free_bytes(), " bytes free, the commit may need ",
                                     keep, ", ", free_.pinned_bytes(),
                                     " bytes pinned until the next commit"));
  }
  absl::StatusOr<uint64_t> b = free_.Allocate(rounded, ss);
  if (!b.ok()) {
    ++enospc_errors_;
    return b.status();
  }
  return format::DataRef{*b, rounded};
}

void TxnManager::ReleaseUnusedData(const format::DataRef& d) {
  absl::MutexLock l(&space_mu_);
  free_.FreeNow(d.bytenr, d.len);
}

void TxnManager::AddDataRef(uint64_t tree_id, const format::DataRef& d, int64_t delta,
                            bool new_alloc) {
  absl::MutexLock l(&space_mu_);
  refs_.Add(d.bytenr, d.len, 0, {format::kExtentDataRef, tree_id}, delta, new_alloc, generation_);
  if (new_alloc) bytes_used_ += d.len;
  if (delta < 0 && refs_.DropIfCancelled(d.bytenr)) {
    // Referenced and dropped in this transaction. Not free at once: a log
    // sync may have logged the item that points here, and a replay of that
    // log must find the data, so it is pinned until the next commit.
    free_.Pin(d.bytenr, d.len);
    COWKV_CHECK(bytes_used_ >= d.len);  // its new_alloc +1 added d.len
    bytes_used_ -= d.len;
  }
}

absl::Status TxnManager::ClaimDataExtent(const format::DataRef& d) {
  absl::MutexLock l(&space_mu_);
  if (d.bytenr % sb_.sectorsize != 0 || d.len % sb_.sectorsize != 0 ||
      !free_.RemoveFree(d.bytenr, d.len)) {
    CorruptionSite site;
    site.what = "logged data extent";
    site.bytenr = d.bytenr;
    return COWKV_CORRUPTION(site, "a log entry points at it, but it is not free (or misaligned)",
                            absl::StrCat("[", d.bytenr, ", +", d.len, ")"), "");
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TxnManager::DataExtentCommitted(const format::DataRef& d) {
  absl::MutexLock el(&extent_mu_);
  absl::StatusOr<std::string> raw =
      extent_tree_->Get(format::EncodeKey17(Key17{d.bytenr, format::kExtentItem, d.len}));
  if (absl::IsNotFound(raw.status())) return false;
  COWKV_RETURN_IF_ERROR(raw.status());
  return true;
}

namespace {
// The manager whose WithExtentReads this thread is in (nullptr: none).
thread_local const TxnManager* t_extent_reader = nullptr;
}  // namespace

bool TxnManager::InExtentReads() const { return t_extent_reader == this; }

absl::Status TxnManager::WithExtentReads(absl::FunctionRef<absl::Status()> fn) {
  COWKV_CHECK(t_extent_reader == nullptr);
  absl::MutexLock el(&extent_mu_);
  absl::MutexLock l(&space_mu_);
  t_extent_reader = this;
  absl::Status s = fn();
  t_extent_reader = nullptr;
  return s;
}

absl::StatusOr<uint64_t> TxnManager::DataExtentRefs(uint64_t bytenr, uint64_t len,
                                                    Tree::LeafHint* hint) {
  if (InExtentReads()) {
    extent_mu_.AssertHeld();
    space_mu_.AssertHeld();
    return DataExtentRefsLocked(bytenr, len, hint);
  }
  // extent_mu_ first: a delayed-ref batch moves a head into the tree
  // under it, so the head and the item are read as one state.
  absl::MutexLock el(&extent_mu_);
  absl::MutexLock l(&space_mu_);
  return DataExtentRefsLocked(bytenr, len, hint);
}

absl::StatusOr<uint64_t> TxnManager::DataExtentRefsLocked(uint64_t bytenr, uint64_t len,
                                                          Tree::LeafHint* hint) {
  const QueuedHead h = QueuedHeadLocked(bytenr);
  int64_t refs = 0;
  if (!h.must_insert) {
    char key_buf[format::kKeySize17];
    format::EncodeKey17To(key_buf, Key17{bytenr, format::kExtentItem, len});
    const absl::string_view key(key_buf, sizeof(key_buf));
    absl::string_view raw;
    bool found = false;
    std::optional<std::string> copy;
    if (hint != nullptr) {
      absl::StatusOr<absl::string_view> got = extent_tree_->Get(key, hint);
      if (got.ok()) {
        raw = *got;
        found = true;
      } else if (!absl::IsNotFound(got.status())) {
        return got.status();
      }
    } else {
      COWKV_ASSIGN_OR_RETURN(copy, extent_tree_->Lookup(key));
      if (copy.has_value()) {
        raw = *copy;
        found = true;
      }
    }
    if (found) {
      COWKV_ASSIGN_OR_RETURN(format::ExtentItem e, format::DecodeExtentItem(raw, bytenr));
      refs = static_cast<int64_t>(e.refs);
    }
  }
  refs += h.ref_mod;
  return static_cast<uint64_t>(std::max<int64_t>(refs, 0));
}

absl::StatusOr<bool> TxnManager::TreeBlockShared(uint64_t tree_id, uint64_t bytenr,
                                                 uint64_t generation) {
  auto sv = fs_roots_.find(tree_id);
  if (sv == fs_roots_.end() || generation > sv->second.item.last_snapshot) return false;
  if (InExtentReads()) {
    extent_mu_.AssertHeld();
    space_mu_.AssertHeld();
    COWKV_ASSIGN_OR_RETURN(auto info, LookupExtentInfoLocked(bytenr));
    return info.first > 1;
  }
  absl::MutexLock el(&extent_mu_);
  COWKV_ASSIGN_OR_RETURN(auto info, LookupExtentInfo(bytenr));
  return info.first > 1;
}

void TxnManager::FreeLogBlocks(const std::vector<uint64_t>& blocks) {
  absl::MutexLock l(&space_mu_);
  for (uint64_t b : blocks) free_.FreeNow(b, sb_.nodesize);
}

absl::Status TxnManager::ClaimLogBlocks(const std::vector<uint64_t>& blocks) {
  absl::MutexLock l(&space_mu_);
  for (uint64_t b : blocks) {
    if (!free_.RemoveFree(b, sb_.nodesize)) {
      CorruptionSite site;
      site.what = "log block";
      site.bytenr = b;
      return COWKV_CORRUPTION(site, "log block overlaps allocated space", "", "");
    }
  }
  return absl::OkStatus();
}

void TxnManager::SetFatal(const absl::Status& why) {
  absl::MutexLock l(&space_mu_);
  if (fatal_.ok()) {
    fatal_ =
        ReadOnlyStoreError(absl::StrCat("store is read-only after a failed write in generation ",
                                        generation_, " (", why.ToString(), "); reopen to recover"));
  }
}

absl::StatusOr<int> TxnManager::RunDelayedRefBatch(int max_heads) {
  // extent_mu_ over the whole batch: its heads leave refs_ before their
  // items reach the extent tree, and no reader may see that gap.
  absl::MutexLock el(&extent_mu_);
  std::vector<DelayedRefHead> heads;
  {
    absl::MutexLock l(&space_mu_);
    if (!fatal_.ok()) return fatal_;
    heads = refs_.TakeBatch(max_heads);
  }
  absl::Status s = RunDelayedRefs(extent_tree_.get(), heads,
                                  [this](uint64_t b, uint64_t n) { OnExtentFreed(b, n); });
  if (!s.ok()) {
    absl::MutexLock l(&space_mu_);
    fatal_ = ReadOnlyStoreError(absl::StrCat("store is read-only after a failed delayed-ref run (",
                                             s.ToString(), "); reopen to recover"));
    return s;
  }
  return static_cast<int>(heads.size());
}

bool TxnManager::HasChanges() const {
  if (superblocks_need_rewrite_) return true;
  {
    absl::MutexLock l(&space_mu_);
    if (!refs_.empty()) return true;
  }
  if (root_tree_->root_changed() || extent_tree_->root_changed()) return true;
  for (const auto& [id, r] : fs_roots_) {
    if (r.tree->root_changed() || r.dirty) return true;
  }
  return false;
}

absl::Status TxnManager::Commit() {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<CommitBatch> batch, PrepareCommit());
  if (batch == nullptr) return absl::OkStatus();
  absl::Status written = WriteCommit(*batch);
  return FinishCommit(std::move(batch), written);
}

absl::StatusOr<std::unique_ptr<TxnManager::CommitBatch>> TxnManager::PrepareCommit() {
  COWKV_RETURN_IF_ERROR(fatal());
  if (!HasChanges()) return std::unique_ptr<CommitBatch>();
  absl::Status s = UpdateRootItems();
  if (s.ok()) s = RunAllDelayedRefs();
  absl::MutexLock l(&space_mu_);  // alone (the exclusive barrier); the members say so
  if (!s.ok()) {
    fatal_ =
        ReadOnlyStoreError(absl::StrCat("store is read-only after a failed commit of generation ",
                                        generation_, " (", s.ToString(), "); reopen to recover"));
    return s;
  }
  // The sealed state is complete: every ref applied, the extent tree's root
  // item up to date (RunAllDelayedRefs loops until both hold).
  COWKV_DCHECK(refs_.empty());
  COWKV_DCHECK(!extent_tree_->root_changed());
  auto batch = std::make_unique<CommitBatch>();
  batch->generation = generation_;
  batch->nodes = cache_->SealDirty();
  batch->pinned = free_.TakePinned();
  Superblock& sb = batch->sb;
  sb = sb_;
  sb.generation = generation_;
  sb.root = root_tree_->root().bytenr;
  sb.root_generation = root_tree_->root().generation;
  sb.root_level = root_tree_->root().level;
  sb.bytes_used = bytes_used_;
  sb.total_bytes = device_->Size();
  sb.next_tree_id = next_tree_id_;
  sb.log_root = next_log_root_;
  sb.log_nonce = next_log_nonce_;
  sb.revision = revision_;
  root_tree_->ClearRootChanged();
  superblocks_need_rewrite_ = false;
  ++generation_;
  return batch;
}

absl::Status TxnManager::CheckDeviceOwned() {
  // Read into an uninitialised buffer: this runs before every log sync, and
  // zeroing 4 KiB first was a tenth of the engine's work for a lone put.
  std::unique_ptr<char[]> buf(new char[format::kSuperblockSize]);
  COWKV_RETURN_IF_ERROR(
      device_->ReadAt(format::kSuperblockOffsets[0], buf.get(), format::kSuperblockSize));
  const absl::string_view now(buf.get(), format::kSuperblockSize);
  absl::MutexLock l(&owned_mu_);
  // A manager made by Mkfs has read nothing yet: its first commit writes
  // the first superblock.
  if (primary_.empty() || now == primary_ || (!primary_pending_.empty() && now == primary_pending_)) {
    return absl::OkStatus();
  }
  std::string what = "bytes that are not a cowkv superblock";
  absl::StatusOr<Superblock> sb = format::DecodeSuperblock(now, format::kSuperblockOffsets[0]);
  if (sb.ok()) {
    what = sb->fsid != sb_.fsid ? "another filesystem's superblock (a new mkfs?)"
                                : absl::StrCat("a superblock of generation ", sb->generation,
                                               " this store did not write");
  }
  return WithReason(
      absl::FailedPreconditionError(absl::StrCat(
          "the device's primary superblock was overwritten by something other than this store: "
          "it now holds ",
          what,
          "; stopped writing so as not to mix two filesystems (was the device formatted "
          "or opened by another tool while in use?)")),
      ErrorReason::kDeviceChanged);
}

absl::Status TxnManager::WriteCommit(const CommitBatch& batch) {
  COWKV_CHECK(batch.sb.generation == batch.generation);
  for (const NodeRef& n : batch.nodes) COWKV_CHECK(n->generation == batch.generation);
  COWKV_RETURN_IF_ERROR(CheckDeviceOwned());
  COWKV_RETURN_IF_ERROR(WriteNodes(device_, batch.nodes, batch.sb.fsid, batch.sb.nodesize));
  flushes_.fetch_add(1, std::memory_order_relaxed);
  COWKV_RETURN_IF_ERROR(device_->Flush());
  Superblock sb = batch.sb;
  for (int i = 0; i < format::MirrorCount(device_->Size()); ++i) {
    sb.bytenr = format::kSuperblockOffsets[i];
    std::string enc = format::EncodeSuperblock(sb);
    if (i == 0) {
      absl::MutexLock l(&owned_mu_);
      primary_pending_ = enc;
    }
    COWKV_RETURN_IF_ERROR(device_->WriteAt(sb.bytenr, enc.data(), enc.size()));
  }
  flushes_.fetch_add(1, std::memory_order_relaxed);
  return device_->Flush();
}

absl::Status TxnManager::FinishCommit(std::unique_ptr<CommitBatch> batch, absl::Status written) {
  absl::MutexLock l(&space_mu_);
  if (!written.ok()) {
    // The sealed nodes stay in the cache (the device may not hold them), so
    // reads keep working; no write will ever commit again.
    if (fatal_.ok()) {
      fatal_ = ReadOnlyStoreError(
          absl::StrCat("store is read-only after a failed commit of generation ", batch->generation,
                       " (", written.ToString(), "); reopen to recover"));
    }
    return written;
  }
  // Generations only grow: the durable superblock is never replaced by an
  // older one (mount would pick the newest copy anyway).
  COWKV_CHECK(batch->sb.generation > sb_.generation);
  cache_->MarkWritten(batch->nodes);
  free_.Unpin(batch->pinned);
  sb_ = batch->sb;
  sb_.bytenr = format::kSuperblockOffsets[0];
  {
    absl::MutexLock l(&owned_mu_);
    primary_ = format::EncodeSuperblock(sb_);
    primary_pending_.clear();
  }
  ++commits_;
  return absl::OkStatus();
}

namespace {
absl::Status PutRootItem(Tree* root_tree, Tree* tree, format::RootItem ri) {
  std::string key = RootItemKeyFor(tree->id());
  ri.bytenr = tree->root().bytenr;
  ri.generation = tree->root().generation;
  ri.level = tree->root().level;
  tree->ClearRootChanged();
  return root_tree->Put(key, format::EncodeRootItem(ri));
}
}  // namespace

absl::Status TxnManager::UpdateRootItems() {
  for (auto& [id, r] : fs_roots_) {
    if (!r.tree->root_changed() && !r.dirty) continue;
    r.item.bytenr = r.tree->root().bytenr;
    r.item.generation = r.tree->root().generation;
    r.item.level = r.tree->root().level;
    COWKV_RETURN_IF_ERROR(PutRootItem(root_tree_.get(), r.tree.get(), r.item));
    r.dirty = false;
  }
  return absl::OkStatus();
}

absl::Status TxnManager::RunAllDelayedRefs() {
  // Each round can CoW extent-tree leaves that hold the items of nodes the
  // previous round freed, a chain that may walk the extent tree; it ends
  // because a node CoWed once stays dirty, so it is bounded by the tree's
  // size, not by a small constant.
  int64_t limit;
  {
    absl::MutexLock l(&space_mu_);
    auto it = nodes_per_tree_.find(format::kExtentTreeId);
    limit = 2 * (it == nodes_per_tree_.end() ? 0 : it->second) + 1024;
  }
  for (int64_t round = 0;; ++round) {
    COWKV_CHECK_MSG(round < limit, "delayed refs did not converge");
    if (extent_tree_->root_changed()) {
      COWKV_RETURN_IF_ERROR(PutRootItem(root_tree_.get(), extent_tree_.get(), format::RootItem{}));
    }
    std::vector<DelayedRefHead> heads;
    {
      absl::MutexLock l(&space_mu_);
      if (refs_.empty()) return absl::OkStatus();
      heads = refs_.TakeAll();
    }
    COWKV_RETURN_IF_ERROR(RunDelayedRefs(extent_tree_.get(), heads,
                                         [this](uint64_t b, uint64_t n) { OnExtentFreed(b, n); }));
  }
}

TxnStats TxnManager::Stats() {
  absl::MutexLock el(&extent_mu_);
  absl::MutexLock l(&space_mu_);
  TxnStats s;
  s.generation = generation_;
  s.commits = commits_;
  s.device_flushes = flushes_.load(std::memory_order_relaxed);
  s.total_bytes = device_->Size() - format::kReservedHead;
  s.used_bytes = bytes_used_;
  s.free_bytes = free_.free_bytes();
  s.pinned_bytes = free_.pinned_bytes();
  s.free_fragments = free_.fragments();
  s.free_largest_bytes = free_.largest();
  // What AllocateData would grant: whole extents, minus the commit's room.
  const uint64_t keep = DataReserveBytesLocked();
  const uint64_t spare = free_.free_bytes() > keep ? free_.free_bytes() - keep : 0;
  auto usable = [&](uint64_t size) ABSL_EXCLUSIVE_LOCKS_REQUIRED(space_mu_) {
    return std::min(spare / size * size, free_.UsableFor(size, sb_.sectorsize));
  };
  s.usable_for_4k = usable(4096);
  s.usable_for_64k = usable(64 << 10);
  s.usable_for_1m = usable(1 << 20);
  s.usable_for_16m = usable(16 << 20);
  s.enospc_errors = enospc_errors_;
  s.refs = refs_.Stats();
  s.cache = cache_->Stats();
  return s;
}

}  // namespace cowkv
