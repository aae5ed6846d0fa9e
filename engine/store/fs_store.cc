// The file namespace on the engine: StoreImpl's FsBackend, the write path
// (space, the throttler), fsync through the log, and the Files facade.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/fs/fs_ops.h"
#include "engine/store/store_impl.h"

namespace cowkv {

static_assert(kRootInode == fs::kRootDirIno);
static_assert(kFiemapExtentLast == fs::kFiemapLast && kFiemapExtentShared == fs::kFiemapShared &&
              kFiemapExtentInline == fs::kFiemapInline &&
              kFiemapExtentNotAligned == fs::kFiemapNotAligned);
static_assert(kRenameNoReplace == fs::kRenameNoReplace && kRenameExchange == fs::kRenameExchange);

// One subvolume's items, data and log as the fs layer sees them. Lives for
// one operation, under the tree lock the caller holds.
class StoreImpl::FsBackendImpl : public fs::FsBackend {
 public:
  FsBackendImpl(StoreImpl* s, uint64_t subvol, Tree* tree) : s_(s), subvol_(subvol), tree_(tree) {}

  uint64_t subvol() const override { return subvol_; }
  uint64_t generation() const override { return s_->txn_->generation(); }
  bool read_only() const override { return s_->txn_->IsReadOnly(subvol_); }
  size_t max_value_size() const override { return tree_->max_value_size(); }

  absl::StatusOr<std::optional<std::string>> Get(absl::string_view key) override {
    return tree_->Lookup(key);
  }

  absl::Status Scan(absl::string_view start, absl::string_view end, bool reverse,
                    const ScanFn& fn) override {
    TreeIterator it(tree_);
    if (!reverse) {
      for (it.Seek(start); it.Valid() && it.key() < end; it.Next()) {
        if (!fn(it.key(), it.value())) break;
      }
      return it.status();
    }
    it.SeekForPrev(end);
    if (it.Valid() && it.key() == end) it.Prev();
    for (; it.Valid() && it.key() >= start; it.Prev()) {
      if (!fn(it.key(), it.value())) break;
    }
    return it.status();
  }

  absl::Status ScanWithPath(absl::string_view start, absl::string_view end,
                            const PathScanFn& fn) override {
    TreeIterator it(tree_);
    std::vector<fs::PathNode> path;
    for (it.Seek(start); it.Valid() && it.key() < end; it.Next()) {
      // Rebuilt only when the iterator moved to another leaf.
      const auto [leaf, leaf_gen] = it.PathNode(0);
      if (path.empty() || path[0].bytenr != leaf || path[0].generation != leaf_gen ||
          path.size() != static_cast<size_t>(it.path_levels())) {
        path.clear();
        for (int lv = 0; lv < it.path_levels(); ++lv) {
          path.push_back({it.PathNode(lv).first, it.PathNode(lv).second});
        }
      }
      if (!fn(it.key(), it.value(), path)) break;
    }
    return it.status();
  }

  absl::Status Apply(const std::vector<fs::FsWrite>& writes) override;

  absl::StatusOr<format::DataRef> WriteData(absl::string_view data) override {
    COWKV_ASSIGN_OR_RETURN(format::DataRef d, s_->txn_->AllocDataExtent(data.size()));
    std::string buf(data);
    buf.resize(d.len, '\0');
    d.value_len = d.len;
    d.crc = Crc32c(buf.data(), buf.size());
    absl::Status w = s_->device_->WriteAt(d.bytenr, buf.data(), buf.size());
    if (!w.ok()) {
      s_->txn_->ReleaseUnusedData(d);
      return w;
    }
    return d;
  }
  void ReleaseData(const format::DataRef& d) override { s_->txn_->ReleaseUnusedData(d); }

  // Corrupt bytes are reported through CorruptionError, as every other
  // read of the device does: one message shape, and counted in
  // corruptions_detected (the KV value path, LoadValue, does the same).
  absl::StatusOr<std::string> ReadData(const format::DataRef& d) override {
    CorruptionSite site;
    site.what = "data extent";
    site.bytenr = d.bytenr;
    site.owner = subvol_;
    if (d.bytenr + d.value_len > s_->device_->Size() || d.value_len > d.len) {
      return COWKV_CORRUPTION(site, "extent past the end of the device",
                              absl::StrCat(d.bytenr + d.value_len),
                              absl::StrCat(s_->device_->Size()));
    }
    std::string buf(d.value_len, '\0');
    COWKV_RETURN_IF_ERROR(s_->device_->ReadAt(d.bytenr, buf.data(), buf.size()));
    const uint32_t crc = Crc32c(buf.data(), buf.size());
    if (crc != d.crc) {
      return COWKV_CORRUPTION(site, absl::StrCat("checksum mismatch over ", d.value_len, " bytes"),
                              absl::StrCat(crc), absl::StrCat(d.crc));
    }
    return buf;
  }

  void NoteLog(absl::string_view key) override { s_->log_->NoteChange(subvol_, key); }
  absl::StatusOr<bool> LogContains(absl::string_view key) override {
    return s_->log_->Contains(subvol_, key);
  }
  bool LogHasFsEntries() override { return s_->log_->HasFsEntries(subvol_); }

  // With the fiemap path cache (seed 002), the extent-tree leaf of the last
  // lookup is kept for the next: fiemap asks about extents in file order,
  // which for a file written sequentially is disk order too.
  absl::StatusOr<uint64_t> DataExtentRefs(uint64_t bytenr, uint64_t len) override {
    return s_->txn_->DataExtentRefs(
        bytenr, len, s_->options_.fiemap_path_cache ? &extent_hint_ : nullptr);
  }
  absl::StatusOr<bool> TreeBlockShared(const fs::PathNode& n) override {
    return s_->txn_->TreeBlockShared(subvol_, n.bytenr, n.generation);
  }
  uint64_t snapshot_epoch() const override {
    return s_->snapshot_epoch_.load(std::memory_order_acquire);
  }
  uint64_t drop_epoch() const override { return s_->drop_epoch_.load(std::memory_order_acquire); }

 private:
  struct ApplyPlan;
  // Adds one write to `plan` (sizes checked, old value looked up if needed).
  absl::Status PlanWrite(const fs::FsWrite& w, ApplyPlan* plan);

  StoreImpl* const s_;
  const uint64_t subvol_;
  Tree* const tree_;
  Tree::LeafHint extent_hint_;
};

// What applying a batch will do: its tree writes in order, the data
// references they add and drop, and what to reserve for them.
struct StoreImpl::FsBackendImpl::ApplyPlan {
  struct Ref {
    format::DataRef d;
    bool first;
  };
  struct Step {
    const fs::FsWrite* w;
    bool may_be_absent;  // an unread delete: absent means nothing to do
  };
  std::vector<Ref> plus, minus;
  std::vector<Step> steps;
  // The reservation: a batch that only deletes or shrinks items cannot
  // grow the tree (a full store can always unlink); its worst case is one
  // path per leaf it touches — an fs operation's items are clustered by
  // inode, so count the inodes plus the leaves their bytes can span.
  bool shrinks = true;
  uint64_t bytes = 0;
  absl::InlinedVector<uint64_t, 8> inodes;
};

absl::Status StoreImpl::FsBackendImpl::PlanWrite(const fs::FsWrite& w, ApplyPlan* plan) {
  const std::optional<std::string>& value = *w.value;
  if (value.has_value()) {
    absl::Status v = tree_->ValidatePut(w.key, *value);
    if (!v.ok()) {
      return PosixError(
          ErrorReason::kEINVAL,
          absl::StrCat("an item of ", value->size(), " bytes does not fit in a node (at most ",
                       tree_->max_value_size(), ")"));
    }
  }
  fs::FsKey k;
  const bool fs_key = fs::DecodeFsKey(w.key, &k);
  if (fs_key && std::find(plan->inodes.begin(), plan->inodes.end(), k.objectid) ==
                    plan->inodes.end()) {
    plan->inodes.push_back(k.objectid);
  }
  if (fs_key && k.type != fs::kExtentData && w.old == nullptr) {
    // An item the operation did not read, which cannot hold a data
    // reference: no need to read it first. A delete shrinks the tree
    // either way (an absent key is simply nothing to delete); a put is
    // reserved as an insert over an old item of the largest size.
    if (value.has_value()) {
      plan->shrinks = false;
      plan->bytes += w.key.size() + std::max(value->size(), tree_->max_value_size()) + 16;
    } else {
      plan->bytes += w.key.size() + 16;
    }
    plan->steps.push_back({&w, !value.has_value()});
    return absl::OkStatus();
  }
  std::optional<std::string> fetched;
  const std::optional<std::string>* old = w.old;
  if (old == nullptr) {
    COWKV_ASSIGN_OR_RETURN(fetched, Get(w.key));
    old = &fetched;
  }
  if (!old->has_value() && !value.has_value()) return absl::OkStatus();
  format::DataRef d;
  if (old->has_value() && format::LeafDataRef(w.key, **old, &d)) plan->minus.push_back({d, false});
  if (value.has_value() && format::LeafDataRef(w.key, *value, &d)) {
    plan->plus.push_back({d, w.first_ref});
  }
  plan->shrinks = plan->shrinks &&
                  (!value.has_value() || (old->has_value() && value->size() <= (*old)->size()));
  plan->bytes += w.key.size() +
                 std::max(old->has_value() ? (*old)->size() : 0, value ? value->size() : 0) + 16;
  plan->steps.push_back({&w, false});
  return absl::OkStatus();
}

// The item writes first (space for all of them reserved up front), then
// the data references: every +1 before any -1, so an extent that one item
// lets go of and another takes (a trimmed extent, a clone) never touches
// zero on the way.
absl::Status StoreImpl::FsBackendImpl::Apply(const std::vector<fs::FsWrite>& writes) {
  ApplyPlan plan;
  plan.steps.reserve(writes.size());
  for (const fs::FsWrite& w : writes) COWKV_RETURN_IF_ERROR(PlanWrite(w, &plan));
  if (plan.steps.empty()) return absl::OkStatus();
  const uint64_t leaves = plan.inodes.size() + plan.bytes / (s_->nodesize_ / 4) + 1;
  COWKV_RETURN_IF_ERROR(s_->txn_->ReserveForWrite(
      tree_, plan.shrinks ? TxnManager::WriteKind::kDelete : TxnManager::WriteKind::kInsert,
      std::min<uint64_t>(plan.steps.size(), leaves), plan.bytes));
  for (const ApplyPlan::Step& t : plan.steps) {
    const fs::FsWrite* w = t.w;
    // Deletes skip Tree::Delete's probe descent: the item was just read,
    // or (unread) is one the namespace holds, so a miss is rare (a damaged
    // tree) and costs only a needlessly CoWed path, within the reservation.
    absl::Status st = w->value->has_value() ? tree_->Put(w->key, **w->value)
                                            : tree_->DeletePresent(w->key);
    if (t.may_be_absent && absl::IsNotFound(st)) continue;  // nothing was changed
    if (!st.ok()) {
      s_->txn_->SetFatal(st);  // half applied in memory: this generation must not commit
      return st;
    }
  }
  for (const ApplyPlan::Ref& r : plan.plus) s_->txn_->AddDataRef(subvol_, r.d, +1, r.first);
  for (const ApplyPlan::Ref& r : plan.minus) s_->txn_->AddDataRef(subvol_, r.d, -1, false);
  return absl::OkStatus();
}

std::shared_ptr<fs::FsState> StoreImpl::FsStateFor(uint64_t subvol) {
  absl::MutexLock l(&fs_mu_);
  std::shared_ptr<fs::FsState>& st = fs_states_[subvol];
  if (st == nullptr) st = std::make_shared<fs::FsState>(options_.inode_cache_entries);
  return st;
}

void StoreImpl::ForgetFsState(uint64_t subvol) {
  absl::MutexLock l(&fs_mu_);
  fs_states_.erase(subvol);
}

fs::FsOptions StoreImpl::FsOptionsFromStore() const {
  fs::FsOptions o;
  o.dir_index_offset = options_.fs_dir_index_offset;
  o.precise_logged_check = options_.fs_precise_logged_check;
  o.fiemap_path_cache = options_.fiemap_path_cache;
  o.inode_cache_entries = options_.inode_cache_entries;
  o.bug_no_full_commit = options_.planted_bug == Options::PlantedBug::kNoFullCommit;
  o.bug_item_counts_as_names = options_.planted_bug == Options::PlantedBug::kItemCountsAsNames;
  o.bug_replay_drops_new_name = options_.planted_bug == Options::PlantedBug::kReplayDropsNewName;
  o.bug_late_inode_counter = options_.planted_bug == Options::PlantedBug::kLateInodeCounter;
  return o;
}

absl::Status StoreImpl::FsRead(uint64_t subvol, const std::function<absl::Status(fs::FsOps&)>& fn) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);  // kept alive if the subvolume goes
  absl::ReaderMutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
  FsBackendImpl be(this, subvol, tree);
  fs::FsOps ops(&be, st.get(), fs_options_);
  return fn(ops);
}

absl::Status StoreImpl::FsWrite(uint64_t subvol,
                                const std::function<absl::Status(fs::FsOps&)>& fn) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  if (options_.read_only) return PosixError(ErrorReason::kEROFS, "store is opened read-only");
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  for (int attempt = 0;; ++attempt) {
    absl::Status s;
    ThrottleSample sample;
    {
      absl::WriterMutexLock l(&mu_);
      COWKV_RETURN_IF_ERROR(txn_->fatal());
      absl::StatusOr<Tree*> tree = WritableTree(subvol);
      if (!tree.ok()) {
        // A read-only snapshot: EROFS first in the message, the reason kept.
        return absl::IsFailedPrecondition(tree.status())
                   ? WithReason(absl::FailedPreconditionError(
                                    absl::StrCat("EROFS: ", tree.status().message())),
                                ReasonOf(tree.status()))
                   : tree.status();
      }
      FsBackendImpl be(this, subvol, *tree);
      fs::FsOps ops(&be, st.get(), fs_options_);
      ops.BeginWrite();
      const uint64_t heads_before = txn_->pending_ref_heads();
      s = fn(ops);
      if (s.ok()) sample = PayDelayedRefsLocked(heads_before);
    }
    if (absl::IsResourceExhausted(s) && attempt == 0) {
      // Space freed in this generation is pinned until it commits.
      COWKV_RETURN_IF_ERROR(Commit(CommitTrigger::kSpace));
      continue;
    }
    if (absl::IsResourceExhausted(s) && !absl::StartsWith(s.message(), "ENOSPC")) {
      return PosixError(ErrorReason::kENOSPC, s.message());
    }
    if (s.ok()) Throttle(sample);
    return s;
  }
}

absl::Status StoreImpl::FsFsync(uint64_t subvol, uint64_t ino, bool datasync) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  std::shared_ptr<fs::FsState> st = FsStateFor(subvol);
  uint64_t point;
  bool logged = false;
  {
    absl::WriterMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(txn_->fatal());
    COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(subvol));
    FsBackendImpl be(this, subvol, tree);
    fs::FsOps ops(&be, st.get(), fs_options_);
    if (options_.read_only || txn_->IsReadOnly(subvol)) {
      return ops.Stat(ino).status();  // nothing there that is not committed
    }
    ops.BeginWrite();
    COWKV_ASSIGN_OR_RETURN(logged, ops.LogForFsync(ino, datasync));
    point = ++durable_seq_;
  }
  // A name the fsync depends on was removed or moved in this transaction:
  // the log cannot carry it, the engine commit makes everything durable.
  if (!logged) return Commit(CommitTrigger::kFsync);
  return WaitDurable(point);
}

// Replay of file-namespace log entries: `notes` collects what the fix-up
// must look at; INODE_REF entries remember the names they drop.
absl::Status StoreImpl::NoteFsReplay(Tree* tree, const log::LogEntry& e,
                                     fs::ReplayNotes* notes) {
  fs::FsKey k;
  fs::DecodeFsKey(e.key, &k);
  if (!e.value.empty()) {
    absl::Status v = fs::ValidateItem(k, e.value);
    if (!v.ok()) return absl::DataLossError(absl::StrCat("log entry: ", v.message()));
  }
  notes->inodes.insert(k.objectid);
  if (k.type == fs::kInodeItem && !e.value.empty()) notes->full_inodes.insert(k.objectid);
  if (k.type == fs::kDirItem || k.type == fs::kDirIndex) notes->dir_keys.insert(e.key);
  if (k.type != fs::kInodeRef) return absl::OkStatus();
  notes->logged_refs[k.objectid].insert(k.offset);
  absl::StatusOr<std::string> old = tree->Get(e.key);
  if (absl::IsNotFound(old.status())) return absl::OkStatus();
  COWKV_RETURN_IF_ERROR(old.status());
  COWKV_ASSIGN_OR_RETURN(std::vector<fs::InodeRef> before, fs::DecodeInodeRefs(*old, k.objectid));
  std::vector<fs::InodeRef> after;
  if (!e.value.empty()) {
    COWKV_ASSIGN_OR_RETURN(after, fs::DecodeInodeRefs(e.value, k.objectid));
  }
  auto& lost = notes->lost_names[{k.objectid, k.offset}];
  for (const fs::InodeRef& r : before) {
    bool kept = std::any_of(after.begin(), after.end(), [&](const fs::InodeRef& a) {
      return a.name == r.name && a.index == r.index;
    });
    if (!kept) lost.push_back(r);
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
  }
  return absl::OkStatus();
}

// ---- Files --------------------------------------------------------------------------

namespace {

FileStat ToStat(const fs::Attr& a) {
  FileStat s;
  s.ino = a.ino;
  switch (a.type()) {
    case fs::FileType::kDirectory: s.kind = FileKind::kDirectory; break;
    case fs::FileType::kSymlink: s.kind = FileKind::kSymlink; break;
    default: s.kind = FileKind::kRegular; break;
  }
  s.mode = a.item.mode & 07777;
  s.nlink = a.item.nlink;
  s.size = a.item.size;
  s.bytes = a.item.nbytes;
  s.uid = a.item.uid;
  s.gid = a.item.gid;
  s.atime_ns = a.item.atime_ns;
  s.mtime_ns = a.item.mtime_ns;
  s.ctime_ns = a.item.ctime_ns;
  s.btime_ns = a.item.otime_ns;
  s.generation = a.item.generation;
  s.transid = a.item.transid;
  return s;
}

FileKind ToKind(fs::FileType t) {
  if (t == fs::FileType::kDirectory) return FileKind::kDirectory;
  if (t == fs::FileType::kSymlink) return FileKind::kSymlink;
  return FileKind::kRegular;
}

ReadDirResult ToReadDir(const std::vector<fs::ReadDirEntry>& es, uint64_t cookie, bool more) {
  ReadDirResult r;
  r.more = more;
  r.next_cookie = cookie;
  for (const fs::ReadDirEntry& e : es) {
    r.entries.push_back({e.name, e.ino, ToKind(e.type), e.index});
    r.next_cookie = e.index + 1;
  }
  return r;
}

}  // namespace

absl::StatusOr<uint64_t> Files::Lookup(absl::string_view path) {
  uint64_t ino = 0;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(ino, o.Lookup(path));
    return absl::OkStatus();
  }));
  return ino;
}

absl::StatusOr<uint64_t> Files::LookupAt(uint64_t dir, absl::string_view name) {
  uint64_t ino = 0;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(ino, o.LookupAt(dir, name));
    return absl::OkStatus();
  }));
  return ino;
}

absl::StatusOr<FileStat> Files::StatInode(uint64_t ino) {
  FileStat st;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.Stat(ino));
    st = ToStat(a);
    return absl::OkStatus();
  }));
  return st;
}

absl::StatusOr<FileStat> Files::Stat(absl::string_view path) {
  FileStat st;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, o.Lookup(path));
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.Stat(ino));
    st = ToStat(a);
    return absl::OkStatus();
  }));
  return st;
}

namespace {
absl::StatusOr<FileStat> CreateAs(StoreImpl* s, uint64_t subvol, absl::string_view path,
                                  fs::FileType type, uint32_t mode, absl::string_view target) {
  FileStat st;
  COWKV_RETURN_IF_ERROR(s->FsWrite(subvol, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.Create(path, type, mode, target));
    st = ToStat(a);
    return absl::OkStatus();
  }));
  return st;
}
}  // namespace

absl::StatusOr<FileStat> Files::Mkdir(absl::string_view path, uint32_t mode) {
  return CreateAs(store_, subvol_, path, fs::FileType::kDirectory, mode, {});
}
absl::StatusOr<FileStat> Files::Create(absl::string_view path, uint32_t mode) {
  return CreateAs(store_, subvol_, path, fs::FileType::kRegular, mode, {});
}
absl::StatusOr<FileStat> Files::Symlink(absl::string_view target, absl::string_view path) {
  return CreateAs(store_, subvol_, path, fs::FileType::kSymlink, 0777, target);
}

absl::StatusOr<std::string> Files::ReadLink(absl::string_view path) {
  std::string out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(uint64_t ino, o.Lookup(path));
    COWKV_ASSIGN_OR_RETURN(out, o.ReadLink(ino));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status Files::Unlink(absl::string_view path) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.Unlink(path, false); });
}
absl::Status Files::Rmdir(absl::string_view path) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.Unlink(path, true); });
}
absl::Status Files::Rename(absl::string_view from, absl::string_view to, uint32_t flags) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.Rename(from, to, flags); });
}

absl::StatusOr<FileStat> Files::Link(absl::string_view existing, absl::string_view new_path) {
  FileStat st;
  COWKV_RETURN_IF_ERROR(store_->FsWrite(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.Link(existing, new_path));
    st = ToStat(a);
    return absl::OkStatus();
  }));
  return st;
}

absl::StatusOr<ReadDirResult> Files::ReadDirInode(uint64_t dir, uint64_t cookie, uint64_t limit) {
  ReadDirResult r;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    bool more = false;
    COWKV_ASSIGN_OR_RETURN(std::vector<fs::ReadDirEntry> es, o.ReadDir(dir, cookie, limit, &more));
    r = ToReadDir(es, cookie, more);
    return absl::OkStatus();
  }));
  return r;
}

absl::StatusOr<ReadDirResult> Files::ReadDir(absl::string_view path, uint64_t cookie,
                                             uint64_t limit) {
  COWKV_ASSIGN_OR_RETURN(uint64_t dir, Lookup(path));
  return ReadDirInode(dir, cookie, limit);
}

absl::StatusOr<std::string> Files::Read(uint64_t ino, uint64_t offset, uint64_t length) {
  std::string out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(out, o.Read(ino, offset, length));
    return absl::OkStatus();
  }));
  return out;
}

absl::Status Files::Write(uint64_t ino, uint64_t offset, absl::string_view data) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.Write(ino, offset, data); });
}
absl::Status Files::Truncate(uint64_t ino, uint64_t size) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.Truncate(ino, size); });
}
absl::Status Files::Clone(uint64_t src, uint64_t src_offset, uint64_t dst, uint64_t dst_offset,
                          uint64_t length) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) {
    return o.Clone(src, src_offset, dst, dst_offset, length);
  });
}
absl::Status Files::Fsync(uint64_t ino, bool datasync) {
  return store_->FsFsync(subvol_, ino, datasync);
}

absl::StatusOr<std::vector<FiemapExtent>> Files::Fiemap(uint64_t ino, uint64_t offset,
                                                        uint64_t length) {
  std::vector<FiemapExtent> out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(std::vector<fs::FiemapEntry> es, o.Fiemap(ino, offset, length));
    for (const fs::FiemapEntry& e : es) out.push_back({e.logical, e.physical, e.length, e.flags});
    return absl::OkStatus();
  }));
  return out;
}

absl::Status Files::SetXattr(uint64_t ino, absl::string_view name, absl::string_view value) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.SetXattr(ino, name, value); });
}
absl::StatusOr<std::string> Files::GetXattr(uint64_t ino, absl::string_view name) {
  std::string out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(out, o.GetXattr(ino, name));
    return absl::OkStatus();
  }));
  return out;
}
absl::StatusOr<std::vector<std::string>> Files::ListXattrs(uint64_t ino) {
  std::vector<std::string> out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(out, o.ListXattrs(ino));
    return absl::OkStatus();
  }));
  return out;
}
absl::Status Files::RemoveXattr(uint64_t ino, absl::string_view name) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) { return o.RemoveXattr(ino, name); });
}

}  // namespace cowkv
