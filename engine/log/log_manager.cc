#include "engine/log/log_manager.h"

#include <algorithm>
#include <random>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"
#include "engine/log/log_format.h"

namespace cowkv {
namespace log {

namespace {
constexpr uint64_t kLogCacheBytes = 8ull << 20;

uint64_t NewNonce() {
  static std::mt19937_64 rng([] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }());
  uint64_t n;
  do {
    n = rng();
  } while (n == 0);
  return n;
}
}  // namespace

LogManager::LogManager(TxnManager* txn, uint64_t max_pending_keys)
    : txn_(txn), max_pending_keys_(max_pending_keys) {
  ResetChain(0, 0);
  broken_ = true;  // until a chain is set up
}

LogManager::~LogManager() = default;

void LogManager::ResetChain(uint64_t base, uint64_t nonce) {
  auto cache =
      std::make_unique<NodeCache>(txn_->device(), txn_->superblock().fsid, txn_->nodesize(),
                                  txn_->superblock().sectorsize, kLogCacheBytes);
  {
    absl::MutexLock nl(&notes_mu_);
    pending_.clear();
    pending_keys_ = 0;
    fs_subvols_.clear();
    inline_fs_keys_.clear();
    fs_trees_.clear();
    full_ = false;
  }
  absl::MutexLock l(&chain_mu_);  // a FinishSync of the old chain sees it whole
  cache_ = std::move(cache);
  base_ = base;
  nonce_ = nonce;
  next_root_ = 0;
  seq_ = 0;
  broken_ = false;
  ++stats_.chains;
}

absl::Status LogManager::ContinueChain(const format::Superblock& sb) {
  ResetChain(sb.generation, sb.log_nonce);
  if (sb.log_root == 0) {
    broken_ = true;
    return absl::OkStatus();
  }
  COWKV_RETURN_IF_ERROR(txn_->ClaimLogBlocks({sb.log_root}));
  next_root_ = sb.log_root;
  chain_blocks_.push_back(sb.log_root);
  return absl::OkStatus();
}

LogAnchor LogManager::StartChain(uint64_t base, std::vector<uint64_t>* retired) {
  retired->insert(retired->end(), chain_blocks_.begin(), chain_blocks_.end());
  chain_blocks_.clear();
  ResetChain(base, NewNonce());
  absl::StatusOr<uint64_t> first = txn_->AllocLogBlock();
  if (!first.ok()) {
    broken_ = true;  // durable commits use engine commits until the next chain
    return LogAnchor{};
  }
  chain_blocks_.push_back(*first);
  next_root_ = *first;
  return LogAnchor{next_root_, nonce_};
}

void LogManager::NoteChange(uint64_t subvol, absl::string_view tree_key) {
  absl::MutexLock l(&notes_mu_);
  if (full_ || broken_) return;
  if (!tree_key.empty() && tree_key[0] == format::kFsKeyPrefix) fs_subvols_.insert(subvol);
  if (pending_[subvol].emplace(tree_key).second && ++pending_keys_ > max_pending_keys_) {
    full_ = true;
    pending_.clear();
    pending_keys_ = 0;
  }
}

absl::StatusOr<bool> LogManager::Contains(uint64_t subvol, absl::string_view tree_key) {
  absl::MutexLock l(&notes_mu_);
  if (fs_subvols_.count(subvol) == 0) return false;
  auto p = pending_.find(subvol);
  if (p != pending_.end() && p->second.count(tree_key) > 0) return true;
  auto in = inline_fs_keys_.find(subvol);
  if (in != inline_fs_keys_.end() && in->second.count(tree_key) > 0) return true;
  for (auto it = fs_trees_.rbegin(); it != fs_trees_.rend(); ++it) {
    if (it->subvol != subvol) continue;
    ++lookups_;
    Tree tree(format::kLogTreeOwner, RootRef{it->bytenr, it->generation, it->level}, cache_.get(),
              nullptr);
    absl::StatusOr<std::string> v = tree.Get(tree_key);
    if (v.ok()) return true;
    if (!absl::IsNotFound(v.status())) return v.status();
  }
  return false;
}

absl::StatusOr<uint64_t> LogManager::AllocTreeBlock(uint64_t, uint8_t) {
  COWKV_ASSIGN_OR_RETURN(uint64_t b, txn_->AllocLogBlock());
  chain_blocks_.push_back(b);
  return b;
}

absl::Status LogManager::FreeTreeBlock(uint64_t, const Node& node) {
  // Written nodes stay allocated with the chain (an older root block may
  // still point at them); a node never written is simply not written.
  if (node.dirty.load(std::memory_order_relaxed)) cache_->Discard(node.bytenr);
  return absl::OkStatus();
}

absl::StatusOr<bool> LogManager::ShouldDescendForDrop(uint64_t, format::ChildPtr, int) {
  return absl::InternalError("log trees are never dropped");
}
absl::Status LogManager::DropChild(uint64_t, const Node&, int) {
  return absl::InternalError("log trees are never dropped");
}
absl::Status LogManager::DropRoot(uint64_t, const Node&) {
  return absl::InternalError("log trees are never dropped");
}

absl::StatusOr<std::vector<LogEntry>> LogManager::CollectPending() {
  std::vector<LogEntry> out;
  out.reserve(pending_keys_);
  for (auto& [subvol, keys] : pending_) {
    Tree* fs = txn_->fs_tree(subvol);
    if (fs == nullptr) continue;  // deleted since; nothing to replay
    std::vector<std::string> sorted(keys.begin(), keys.end());
    std::sort(sorted.begin(), sorted.end());
    for (std::string& key : sorted) {
      absl::StatusOr<std::string> v = fs->Get(key);
      if (!v.ok() && !absl::IsNotFound(v.status())) return v.status();
      if (v.ok() && log_form_) log_form_(subvol, key, &*v);
      out.push_back({subvol, std::move(key), v.ok() ? *std::move(v) : std::string()});
    }
  }
  return out;
}

absl::Status LogManager::BuildTrees(const std::vector<LogEntry>& entries, LogRootBlock* root) {
  std::unique_ptr<Tree> tree;
  for (size_t i = 0; i < entries.size(); ++i) {
    const LogEntry& e = entries[i];
    // CollectPending groups entries by subvolume: one log tree each.
    COWKV_DCHECK(i == 0 || entries[i - 1].subvol <= e.subvol);
    if (tree == nullptr) {
      COWKV_ASSIGN_OR_RETURN(tree, Tree::CreateEmpty(format::kLogTreeOwner, cache_.get(), this));
    }
    COWKV_RETURN_IF_ERROR(tree->Put(e.key, e.value));
    if (i + 1 == entries.size() || entries[i + 1].subvol != e.subvol) {
      if (root->trees.size() == MaxLogTrees(txn_->superblock().sectorsize)) {
        return absl::ResourceExhaustedError("more logged subvolumes than a log root block lists");
      }
      root->trees.push_back(
          {e.subvol, tree->root().bytenr, tree->root().generation, tree->root().level});
      tree.reset();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<LogManager::SyncBatch>> LogManager::PrepareSync(uint64_t revision) {
  // Under the store's exclusive barrier: no writer notes meanwhile; the
  // lock is for the members' sake (and orders before the space locks the
  // block allocations below take).
  absl::MutexLock l(&notes_mu_);
  if (NeedsFullCommitLocked()) return absl::FailedPreconditionError("log needs a full commit");
  if (pending_keys_ == 0) return std::unique_ptr<SyncBatch>();
  COWKV_DCHECK(next_root_ != 0);  // a live chain knows where its next link goes
  LogRootBlock root;
  absl::StatusOr<std::vector<LogEntry>> entries = CollectPending();
  absl::Status s = entries.status();
  if (s.ok()) {
    size_t bytes = 0;
    for (const LogEntry& e : *entries) bytes += InlineSize(e);
    if (bytes <= MaxInlineBytes(txn_->superblock().sectorsize)) {
      for (const LogEntry& e : *entries) {
        if (e.key[0] == format::kFsKeyPrefix) inline_fs_keys_[e.subvol].insert(e.key);
      }
      root.entries = *std::move(entries);
    } else {
      s = BuildTrees(*entries, &root);
      if (s.ok()) {
        for (const LogTreeRef& t : root.trees) {
          if (fs_subvols_.count(t.subvol)) fs_trees_.push_back(t);
        }
      }
    }
  }
  absl::StatusOr<uint64_t> next = s.ok() ? AllocTreeBlock(0, 0) : absl::StatusOr<uint64_t>(s);
  if (!next.ok()) {
    broken_ = true;
    return next.status();
  }
  root.fsid = txn_->superblock().fsid;
  root.bytenr = next_root_;
  root.nonce = nonce_;
  root.base_generation = base_;
  root.seq = seq_;
  root.next = *next;
  root.revision = revision;
  auto b = std::make_unique<SyncBatch>();
  b->nonce = nonce_;
  b->base = base_;
  b->revision = revision;
  b->keys = pending_keys_;
  b->inline_entries = !root.entries.empty();
  b->nodes = cache_->SealDirty();
  b->root_bytenr = next_root_;
  b->root_block = EncodeLogRoot(root, txn_->superblock().sectorsize);
  b->fsid = root.fsid;
  next_root_ = *next;
  ++seq_;
  pending_.clear();
  pending_keys_ = 0;
  return b;
}

absl::Status LogManager::WriteSync(const SyncBatch& b) {
  BlockDevice* dev = txn_->device();
  uint64_t bytes = 0;
  COWKV_RETURN_IF_ERROR(WriteNodes(dev, b.nodes, b.fsid, txn_->nodesize(), &bytes));
  COWKV_RETURN_IF_ERROR(dev->WriteAt(b.root_bytenr, b.root_block.data(), b.root_block.size()));
  return dev->Flush();
}

void LogManager::FinishSync(const SyncBatch& b, const absl::Status& written) {
  absl::MutexLock l(&chain_mu_);
  if (written.ok()) {
    // Counted even when a commit retired the chain meanwhile: the sync was
    // written and flushed all the same (the store's latency histogram
    // counts it too).
    ++stats_.syncs;
    stats_.inline_syncs += b.inline_entries;
    stats_.synced_keys += b.keys;
    stats_.sync_bytes += b.nodes.size() * txn_->nodesize() + b.root_block.size();
  }
  if (b.nonce != nonce_) return;  // the chain was retired meanwhile
  COWKV_DCHECK(b.base == base_);
  if (!written.ok()) {
    broken_ = true;
    return;
  }
  cache_->MarkWritten(b.nodes);
}

LogStats LogManager::Stats() const {
  uint64_t lookups;
  {
    absl::MutexLock nl(&notes_mu_);
    lookups = lookups_;
  }
  absl::MutexLock l(&chain_mu_);
  LogStats s = stats_;
  s.lookups = lookups;
  s.chain_blocks = chain_blocks_.size();
  return s;
}

// ---- Recovery ---------------------------------------------------------------

namespace {

// Reads every item and node of one log tree.
absl::Status ReadLogTree(NodeCache* cache, const LogTreeRef& ref, Recovered* out) {
  Tree tree(format::kLogTreeOwner, RootRef{ref.bytenr, ref.generation, ref.level}, cache, nullptr);
  std::vector<NodeRef> stack;
  COWKV_ASSIGN_OR_RETURN(NodeRef root, tree.ReadRoot());
  stack.push_back(std::move(root));
  while (!stack.empty()) {
    NodeRef n = std::move(stack.back());
    stack.pop_back();
    out->blocks.push_back(n->bytenr);
    if (n->leaf()) {
      for (int i = 0; i < n->nritems(); ++i) {
        out->entries.push_back({ref.subvol, std::string(n->key(i)), std::string(n->value(i))});
      }
      continue;
    }
    for (int i = n->nritems() - 1; i >= 0; --i) {
      COWKV_ASSIGN_OR_RETURN(NodeRef c, tree.ReadChild(*n, i));
      stack.push_back(std::move(c));
    }
  }
  return absl::OkStatus();
}

absl::Status ReadLogTrees(BlockDevice* device, const format::Superblock& sb,
                          const LogRootBlock& root, Recovered* out) {
  NodeCache cache(device, sb.fsid, sb.nodesize, sb.sectorsize, kLogCacheBytes);
  for (const LogTreeRef& t : root.trees) COWKV_RETURN_IF_ERROR(ReadLogTree(&cache, t, out));
  return absl::OkStatus();
}

// A sync's data extents were written before its flush: if a link's root
// block survived a cut flush but its data did not, the data's checksum
// (kept in the item) says so.
absl::Status VerifyData(BlockDevice* device, const std::vector<LogEntry>& entries, size_t from) {
  std::string buf;
  for (size_t i = from; i < entries.size(); ++i) {
    format::DataRef d;
    if (!format::LeafDataRef(entries[i].key, entries[i].value, &d)) continue;
    // Written so that no sum can wrap: a checksummed block may still carry
    // a malformed entry (a buggy writer), and resize() must not be asked for
    // 2^63 bytes.
    const uint64_t size = device->Size();
    CorruptionSite site;
    site.what = "logged data extent";
    site.bytenr = d.bytenr;
    if (d.len > size || d.bytenr > size - d.len || d.value_len > d.len) {
      return COWKV_CORRUPTION(site, "out of range",
                              absl::StrCat(d.len, " bytes, value ", d.value_len),
                              absl::StrCat("inside a device of ", size, " bytes"));
    }
    buf.resize(d.value_len);
    COWKV_RETURN_IF_ERROR(device->ReadAt(d.bytenr, buf.data(), buf.size()));
    const uint32_t crc = Crc32c(buf.data(), buf.size());
    if (crc != d.crc) {
      return COWKV_CORRUPTION(site, "does not hold its value (checksum mismatch)",
                              absl::StrCat(absl::Hex(crc)), absl::StrCat(absl::Hex(d.crc)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Recovered> LogManager::Recover(BlockDevice* device, const format::Superblock& sb) {
  Recovered out;
  if (sb.log_root == 0) return out;
  std::vector<LogRootBlock> chain;
  LogRootExpect e{sb.fsid, sb.log_root, sb.log_nonce, sb.generation, 0, device->Size(),
                  sb.nodesize};
  std::string buf(sb.sectorsize, '\0');
  std::vector<uint64_t> root_blocks;
  for (;;) {
    root_blocks.push_back(e.bytenr);
    if (e.bytenr + sb.sectorsize > device->Size()) break;
    COWKV_RETURN_IF_ERROR(device->ReadAt(e.bytenr, buf.data(), buf.size()));
    LogRootBlock b;
    // The end of the chain: never written, torn or stale. Expected, so
    // probed (not counted as corruption).
    if (!ProbeLogRoot(buf, e, &b, nullptr)) break;
    e.bytenr = b.next;
    ++e.seq;
    chain.push_back(std::move(b));
  }
  // Replay every link in order. A link's log trees and data were written
  // with it, before its flush: only the last link can have torn trees or
  // data (a later link exists only after a flush covered the earlier one),
  // and then that sync was never acknowledged.
  for (size_t i = 0; i < chain.size(); ++i) {
    const LogRootBlock& root = chain[i];
    const size_t mark = out.entries.size(), blocks_mark = out.blocks.size();
    out.entries.insert(out.entries.end(), root.entries.begin(), root.entries.end());
    absl::Status s = ReadLogTrees(device, sb, root, &out);
    if (s.ok()) s = VerifyData(device, out.entries, mark);
    if (!s.ok() && absl::IsDataLoss(s) && i + 1 == chain.size()) {
      out.entries.resize(mark);
      out.blocks.resize(blocks_mark);
      chain.pop_back();
      break;
    }
    if (!s.ok()) {
      // WithContext keeps the reason (a corruption stays one).
      return WithContext(s,
                         absl::StrCat("replaying log link ", i, " of generation ", sb.generation));
    }
    out.revision = root.revision;
  }
  out.root_blocks = chain.size();
  out.blocks.insert(out.blocks.end(), root_blocks.begin(), root_blocks.end());
  return out;
}

}  // namespace log
}  // namespace cowkv
