// Log replay at mount (btrfs's btrfs_recover_log_trees): KV and file
// entries applied in log order, data extents claimed before the first tree
// write, replaced references dropped after the last entry, then the file
// tree's fixups (link counts, sizes, orphaned names).
#include <algorithm>
#include <chrono>
#include <random>
#include <set>
#include <thread>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "engine/base/check.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/fs/fs_events.h"
#include "engine/fs/fs_ops.h"
#include "engine/lease/lease_item.h"
#include "engine/store/fs_backend_impl.h"
#include "engine/store/store_impl.h"

namespace cowkv {

// History entries a sync logged in their base form (kv/history_item.h)
// get their prev item back from the tree the chain extends: read before
// replay writes anything, so the tree still is that generation's.
absl::Status StoreImpl::ExpandHistoryEntries(std::vector<log::LogEntry>* entries) {
  for (log::LogEntry& e : *entries) {
    if (!kv::IsHistoryBaseForm(e.key, e.value)) continue;
    Tree* tree = txn_->fs_tree(e.subvol);
    if (tree == nullptr) continue;  // the subvolume is gone (ReplayEntry skips it too)
    absl::StatusOr<std::string> base = tree->Get(kv::TreeKey(e.key.substr(kv::kHistoryKeyHeader)));
    if (!base.ok() && !absl::IsNotFound(base.status())) return base.status();
    COWKV_ASSIGN_OR_RETURN(e.value,
                           kv::HistoryEntryFromBase(e.key, e.value, base.ok() ? &*base : nullptr));
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::ReplayLog(log::Recovered& r) {
  COWKV_RETURN_IF_ERROR(ExpandHistoryEntries(&r.entries));
  COWKV_RETURN_IF_ERROR(txn_->ClaimLogBlocks(r.blocks));
  log_->Adopt(r.blocks);
  // A data extent an entry points at is either committed already (a file
  // extent trimmed or cloned in the logged transaction) or was written
  // after the superblock's generation, so its extent tree calls it free:
  // take those out of free space before the first tree write could
  // allocate one.
  std::set<uint64_t> claimed, seen;
  for (const log::Recovered::Entry& e : r.entries) {
    format::DataRef d;
    if (txn_->fs_tree(e.subvol) == nullptr || !format::LeafDataRef(e.key, e.value, &d) ||
        !seen.insert(d.bytenr).second) {
      continue;
    }
    COWKV_ASSIGN_OR_RETURN(bool committed, txn_->DataExtentCommitted(d));
    if (committed) continue;
    COWKV_RETURN_IF_ERROR(txn_->ClaimDataExtent(d));
    claimed.insert(d.bytenr);
  }
  std::map<uint64_t, fs::ReplayNotes> notes;
  // The references replaced items held are dropped after every entry is
  // applied: an extent a later entry points at again (a file extent
  // overwritten, then trimmed or cloned back in by a later sync) must not
  // reach zero references, and be freed, in between.
  std::vector<std::pair<uint64_t, format::DataRef>> drops;
  for (const log::Recovered::Entry& e : r.entries) {
    COWKV_RETURN_IF_ERROR(ReplayEntry(e, &claimed, &notes, &drops));
  }
  for (const auto& [subvol, d] : drops) txn_->AddDataRef(subvol, d, -1, false);
  COWKV_RETURN_IF_ERROR(FixupFsReplay(notes));
  replayed_entries_ = r.entries.size();
  return absl::OkStatus();
}

absl::Status StoreImpl::ReplayEntry(const log::LogEntry& e, std::set<uint64_t>* claimed,
                                    std::map<uint64_t, fs::ReplayNotes>* notes,
                                    std::vector<std::pair<uint64_t, format::DataRef>>* drops) {
  Tree* tree = txn_->fs_tree(e.subvol);
  if (tree == nullptr) return absl::OkStatus();  // the subvolume is gone
  fs::FsKey fk;
  if (fs::DecodeFsKey(e.key, &fk)) {
    COWKV_RETURN_IF_ERROR(NoteFsReplay(tree, e, &(*notes)[e.subvol]));
  } else if (kv::IsHistoryTreeKey(e.key)) {
    if (!e.value.empty() && e.key == kv::HistoryInfoKey()) {
      COWKV_RETURN_IF_ERROR(kv::DecodeHistoryInfo(e.value).status());
    } else if (!e.value.empty()) {
      COWKV_RETURN_IF_ERROR(kv::DecodeHistoryEntry(e.key, e.value).status());
    }
  } else if (fs::IsFileEventTreeKey(e.key)) {
    // Only the info is ever logged (a span closed by an unrecorded write).
    if (e.key != fs::FileEventInfoKey()) {
      CorruptionSite site;
      site.what = "log entry";
      site.owner = e.subvol;
      return COWKV_CORRUPTION(site, "a file event in the log (only its info is logged)", "", "");
    }
    if (!e.value.empty()) COWKV_RETURN_IF_ERROR(fs::DecodeFileEventInfo(e.value).status());
  } else if (lease::IsLeaseTreeKey(e.key)) {
    if (!e.value.empty()) COWKV_RETURN_IF_ERROR(lease::DecodeLeaseItem(e.key, e.value).status());
  } else if (!kv::IsKvTreeKey(e.key)) {
    CorruptionSite site;
    site.what = "log entry";
    site.owner = e.subvol;
    return COWKV_CORRUPTION(site, "unknown key type", "", "");
  } else if (!e.value.empty()) {
    COWKV_RETURN_IF_ERROR(kv::DecodeItem(e.key, e.value).status());
  }
  kv::KvOp op{e.key, std::nullopt, {}, {}, std::nullopt};
  if (!e.value.empty()) {
    op.item = e.value;
    format::LeafDataRef(e.key, e.value, &op.new_data);
  }
  absl::StatusOr<std::string> old = tree->Get(e.key);
  if (!old.ok() && !absl::IsNotFound(old.status())) return old.status();
  if (old.ok()) format::LeafDataRef(e.key, *old, &op.old_data);
  if (!old.ok() && !op.item) return absl::OkStatus();
  COWKV_RETURN_IF_ERROR(txn_->ReserveForWrite(
      tree, op.item ? TxnManager::WriteKind::kInsert : TxnManager::WriteKind::kDelete));
  // The first entry naming a claimed extent takes its allocation; a later
  // one (the same item logged by two syncs, a split extent) only another
  // reference.
  const bool first = op.new_data.len != 0 && claimed->erase(op.new_data.bytenr) > 0;
  COWKV_RETURN_IF_ERROR(op.item ? tree->Put(op.tree_key, *op.item) : tree->Delete(op.tree_key));
  if (op.old_data.len != 0 && op.new_data.len != 0 && op.old_data.bytenr == op.new_data.bytenr &&
      !first) {
    return absl::OkStatus();  // the same extent before and after (a trimmed file extent)
  }
  if (op.new_data.len != 0) txn_->AddDataRef(e.subvol, op.new_data, +1, first);
  if (op.old_data.len != 0 &&
      options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kEagerReplayDrops) {
    txn_->AddDataRef(e.subvol, op.old_data, -1, false);
  } else if (op.old_data.len != 0) {
    drops->push_back({e.subvol, op.old_data});
  }
  return absl::OkStatus();
}

// Replay of file-namespace log entries: `notes` collects what the fix-up
// must look at; INODE_REF and INODE_EXTREF entries remember the names they
// drop.
absl::Status StoreImpl::NoteFsReplay(Tree* tree, const log::LogEntry& e, fs::ReplayNotes* notes) {
  fs::FsKey k;
  fs::DecodeFsKey(e.key, &k);
  if (!e.value.empty()) {
    absl::Status v = fs::ValidateItem(k, e.value);
    if (!v.ok()) return WithContext(v, "log entry");  // counted where it was found
  }
  if (k.type == fs::kOrphanItem) {
    // The orphaned inode is fixed like any touched inode (deleted if it
    // has no names); the item itself is the mount's orphan cleanup's.
    notes->inodes.insert(k.offset);
    return absl::OkStatus();
  }
  notes->inodes.insert(k.objectid);
  if (k.type == fs::kInodeItem && !e.value.empty()) notes->full_inodes.insert(k.objectid);
  if (k.type == fs::kDirItem || k.type == fs::kDirIndex) notes->dir_keys.insert(e.key);
  if (k.type != fs::kInodeRef && k.type != fs::kInodeExtref) return absl::OkStatus();
  notes->logged_refs[k.objectid].insert({k.type, k.offset});
  absl::StatusOr<std::string> old = tree->Get(e.key);
  if (!absl::IsNotFound(old.status())) COWKV_RETURN_IF_ERROR(old.status());
  // Both sides as (parent, name): an INODE_REF's names are all in the
  // key's directory; an extended ref's each carry theirs.
  std::vector<std::pair<uint64_t, fs::InodeRef>> before, after;
  auto decode = [&](absl::string_view v, std::vector<std::pair<uint64_t, fs::InodeRef>>* out) {
    if (k.type == fs::kInodeRef) {
      COWKV_ASSIGN_OR_RETURN(std::vector<fs::InodeRef> rs, fs::DecodeInodeRefs(v, k.objectid));
      for (fs::InodeRef& r : rs) out->push_back({k.offset, std::move(r)});
      return absl::OkStatus();
    }
    COWKV_ASSIGN_OR_RETURN(std::vector<fs::InodeExtref> xs,
                           fs::DecodeInodeExtrefs(v, k.objectid, k.offset));
    for (fs::InodeExtref& x : xs) {
      out->push_back({x.parent, fs::InodeRef{x.index, std::move(x.name), true}});
    }
    return absl::OkStatus();
  };
  if (old.ok()) COWKV_RETURN_IF_ERROR(decode(*old, &before));
  if (!e.value.empty()) COWKV_RETURN_IF_ERROR(decode(e.value, &after));
  if (k.type == fs::kInodeRef) notes->ref_dirs.insert(k.offset);
  for (const auto& side : {&before, &after}) {
    for (const auto& [parent, r] : *side) notes->ref_dirs.insert(parent);
  }
  for (const auto& [parent, r] : before) {
    const bool kept = std::any_of(after.begin(), after.end(), [&](const auto& a) {
      return a.first == parent && a.second.name == r.name && a.second.index == r.index;
    });
    if (!kept) notes->lost_names[{k.objectid, parent}].push_back(r);
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::FixupFsReplay(std::map<uint64_t, fs::ReplayNotes>& notes) {
  for (auto& [subvol, n] : notes) {
    Tree* tree = txn_->fs_tree(subvol);
    if (tree == nullptr) continue;
    FsBackendImpl be(this, subvol, tree);
    std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
    fs::FsOps ops(&be, st.get(), fs_options_);
    ops.BeginWrite();
    COWKV_RETURN_IF_ERROR(ops.ReplayFixup(n));
    COWKV_RETURN_IF_ERROR(CloseFileEventSpanAfterReplay(subvol, tree));
  }
  return absl::OkStatus();
}

absl::Status StoreImpl::CleanupOrphansLocked() {
  for (uint64_t subvol : txn_->TreeIds(/*dropping=*/false)) {
    Tree* tree = txn_->fs_tree(subvol);
    if (tree == nullptr || txn_->IsReadOnly(subvol) || subvols_->IsPartialReceive(subvol)) {
      continue;
    }
    FsBackendImpl be(this, subvol, tree);
    std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
    fs::FsOps ops(&be, st.get(), fs_options_);
    ops.BeginWrite();
    COWKV_RETURN_IF_ERROR(ops.CleanupOrphans().status());
  }
  return absl::OkStatus();
}

}  // namespace cowkv
