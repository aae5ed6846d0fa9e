// The public classes (engine/include/cowkv): Store, Subvolume, Files,
// Transaction and KvTransaction forward to StoreImpl; nothing here touches
// a lock or a tree.
#include <algorithm>
#include <chrono>
#include <limits>
#include <memory>
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
#include "absl/time/time.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/base/check.h"
#include "engine/base/crc32c.h"
#include "engine/base/status.h"
#include "engine/format/layout.h"
#include "engine/fs/fs_ops.h"
#include "engine/store/store_impl.h"

namespace cowkv {

Transaction::~Transaction() { End(); }

absl::Status Transaction::Put(absl::string_view key, absl::string_view value) {
  if (ended_) return absl::FailedPreconditionError("transaction handle already ended");
  return store_->HandlePut(key, value);
}

absl::Status Transaction::Delete(absl::string_view key) {
  if (ended_) return absl::FailedPreconditionError("transaction handle already ended");
  return store_->HandleDelete(key);
}

absl::StatusOr<std::string> Transaction::Get(absl::string_view key) {
  COWKV_ASSIGN_OR_RETURN(KeyValue kv, store_->GetItem(format::kDefaultTreeId, key));
  return std::move(kv.value);
}

void Transaction::End() {
  if (ended_) return;
  ended_ = true;
  store_->EndHandle();
}

Store::Store(std::unique_ptr<StoreImpl> impl) : impl_(std::move(impl)) {}

Store::~Store() = default;

absl::Status Store::Mkfs(BlockDevice* device, const MkfsOptions& options) {
  std::string fsid = options.fsid;
  if (fsid.empty()) {
    std::random_device rd;
    std::mt19937_64 rng((static_cast<uint64_t>(rd()) << 32) ^ rd());
    fsid.resize(format::kFsidSize);
    for (char& c : fsid) c = static_cast<char>(rng());
  }
  return TxnManager::Mkfs(device, options.nodesize, options.sectorsize, fsid,
                          &Subvolumes::NameDefault);
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(BlockDevice* device, const Options& options) {
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<TxnManager> txn,
                         TxnManager::Mount(device, options.node_cache_bytes));
  auto impl = std::make_unique<StoreImpl>(device, nullptr, options, std::move(txn));
  COWKV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(const std::string& path,
                                                   const Options& options) {
  FileDeviceOptions fo;
  fo.read_only = options.read_only;
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<FileDevice> dev, FileDevice::Open(path, fo));
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<TxnManager> txn,
                         TxnManager::Mount(dev.get(), options.node_cache_bytes));
  BlockDevice* raw = dev.get();
  auto impl = std::make_unique<StoreImpl>(raw, std::move(dev), options, std::move(txn));
  COWKV_RETURN_IF_ERROR(impl->Init());
  return std::unique_ptr<Store>(new Store(std::move(impl)));
}

absl::Status Store::Close() { return impl_->Close(); }

absl::Status Store::Put(absl::string_view key, absl::string_view value, Durability d) {
  return impl_->Put(format::kDefaultTreeId, key, value, d).status();
}

absl::StatusOr<std::string> Store::Get(absl::string_view key) {
  return impl_->GetValue(format::kDefaultTreeId, key);
}

absl::Status Store::Delete(absl::string_view key, Durability d) {
  return impl_->Delete(format::kDefaultTreeId, key, d).status();
}

absl::StatusOr<std::unique_ptr<Subvolume>> Store::DefaultSubvolume() {
  return impl_->OpenSubvolume("default");
}

std::unique_ptr<Iterator> Store::NewIterator() {
  return impl_->NewIterator(format::kDefaultTreeId);
}

absl::StatusOr<SubvolumeInfo> Store::CreateSubvolume(absl::string_view name) {
  return impl_->CreateSubvolume(name);
}

absl::StatusOr<SubvolumeInfo> Store::CreateSnapshot(absl::string_view source,
                                                    absl::string_view name, bool read_only) {
  return impl_->CreateSnapshot(source, name, read_only);
}

absl::Status Store::RenameSubvolume(absl::string_view name, absl::string_view new_name) {
  return impl_->RenameSubvolume(name, new_name);
}

absl::Status Store::DeleteSubvolume(absl::string_view name) { return impl_->DeleteSubvolume(name); }

absl::Status Store::DropDeletedSubvolumes(uint64_t max_steps) {
  return impl_->DropDeletedSubvolumes(max_steps);
}

absl::StatusOr<SubvolumeInfo> Store::ShowSubvolume(absl::string_view name) {
  return impl_->ShowSubvolume(name);
}

std::vector<SubvolumeInfo> Store::ListSubvolumes() { return impl_->ListSubvolumes(); }

absl::StatusOr<std::vector<SubvolumeInfo>> Store::ListSubvolumes(
    const SubvolumeListOptions& options) {
  return impl_->ListSubvolumes(options);
}

absl::StatusOr<std::vector<uint64_t>> Store::SyncDeletedSubvolumes(
    const SubvolumeSyncOptions& options) {
  return impl_->SyncDeletedSubvolumes(options);
}

absl::StatusOr<std::unique_ptr<Subvolume>> Store::OpenSubvolume(absl::string_view name) {
  return impl_->OpenSubvolume(name);
}

absl::Status Subvolume::Put(absl::string_view key, absl::string_view value, Durability d) {
  return store_->Put(id_, key, value, d).status();
}

absl::StatusOr<uint64_t> Subvolume::PutItem(absl::string_view key, absl::string_view value,
                                            Durability d) {
  return store_->Put(id_, key, value, d);
}

absl::StatusOr<std::string> Subvolume::Get(absl::string_view key) {
  return store_->GetValue(id_, key);
}

absl::StatusOr<KeyValue> Subvolume::GetItem(absl::string_view key, uint64_t max_value_load,
                                            uint64_t* revision) {
  return store_->GetItem(id_, key, max_value_load, revision);
}

absl::Status Subvolume::Delete(absl::string_view key, Durability d) {
  return store_->Delete(id_, key, d).status();
}

absl::StatusOr<uint64_t> Subvolume::DeleteItem(absl::string_view key, Durability d) {
  return store_->Delete(id_, key, d);
}

absl::StatusOr<RangeResult> Subvolume::Range(const RangeRequest& req) {
  return store_->Range(id_, req);
}

absl::StatusOr<KeyValue> Subvolume::GetItemAt(absl::string_view key, uint64_t revision,
                                              uint64_t max_value_load) {
  return store_->GetItemAt(id_, key, revision == 0 ? kv::KvSpace::kLatest : revision,
                           max_value_load);
}

absl::StatusOr<uint64_t> Subvolume::CompactRevision() { return store_->CompactRevision(id_); }

absl::Status Subvolume::Compact(uint64_t revision, Durability d) {
  return store_->Compact(id_, revision, d);
}

std::unique_ptr<Iterator> Subvolume::NewIterator() { return store_->NewIterator(id_); }

absl::StatusOr<TxnResponse> Subvolume::Txn(const TxnRequest& req) { return store_->Txn(id_, req); }

void Subvolume::PutItemThen(absl::string_view key, absl::string_view value, Durability d,
                            RevisionDone done) {
  uint64_t point = 0;
  absl::StatusOr<uint64_t> rev = store_->Put(id_, key, value, d, &point);
  if (!rev.ok()) {
    done(rev.status());
    return;
  }
  store_->AfterDurable(point, [rev = *rev, done = std::move(done)](const absl::Status& s) {
    done(s.ok() ? absl::StatusOr<uint64_t>(rev) : s);
  });
}

void Subvolume::DeleteItemThen(absl::string_view key, Durability d, RevisionDone done) {
  uint64_t point = 0;
  absl::StatusOr<uint64_t> rev = store_->Delete(id_, key, d, &point);
  // A missing key is NOT_FOUND once what the delete saw is durable (as
  // DeleteItem answers); other errors at once.
  if (!rev.ok() && !absl::IsNotFound(rev.status())) {
    done(rev.status());
    return;
  }
  store_->AfterDurable(point,
                       [rev = std::move(rev), done = std::move(done)](const absl::Status& s) {
                         done(s.ok() ? rev : absl::StatusOr<uint64_t>(s));
                       });
}

void Subvolume::TxnThen(const TxnRequest& req, TxnDone done) {
  uint64_t point = 0;
  absl::StatusOr<TxnResponse> resp = store_->Txn(id_, req, &point);
  if (!resp.ok()) {
    done(resp.status());
    return;
  }
  // Shared, not copied: the callback type must be copyable, a response may
  // hold ranges of values.
  auto held = std::make_shared<TxnResponse>(*std::move(resp));
  store_->AfterDurable(point, [held, done = std::move(done)](const absl::Status& s) {
    if (!s.ok()) {
      done(s);
      return;
    }
    done(std::move(*held));
  });
}

absl::StatusOr<std::unique_ptr<KvTransaction>> Subvolume::BeginTransaction() {
  return store_->BeginTransaction(id_);
}

absl::StatusOr<std::unique_ptr<Transaction>> Store::Begin() { return impl_->Begin(); }

absl::Status Store::Commit() { return impl_->Commit(CommitTrigger::kExplicit); }

StoreStats Store::Stats() { return impl_->Stats(); }

absl::StatusOr<SendReport> Store::Send(const SendOptions& options, const SendSink& sink) {
  return impl_->Send(options, sink);
}

absl::StatusOr<std::unique_ptr<ReceiveStream>> Store::Receive(const ReceiveOptions& options) {
  return impl_->Receive(options);
}

absl::StatusOr<SubvolumeDigest> Store::DigestSubvolume(absl::string_view name) {
  return impl_->DigestSubvolume(name);
}

absl::Status Store::ReplaceSubvolume(absl::string_view name, absl::string_view target) {
  return impl_->ReplaceSubvolume(name, target);
}

absl::StatusOr<SendOptions> Store::ResumeSendOptions(absl::string_view token) {
  return impl_->ResumeSendOptions(token);
}

absl::StatusOr<std::vector<PartialReceive>> Store::PartialReceives() {
  return impl_->PartialReceives();
}

absl::Status Store::AbortPartialReceive(absl::string_view name) {
  return impl_->AbortPartialReceive(name);
}

uint32_t Store::nodesize() const { return impl_->nodesize(); }

size_t Store::max_value_size() const { return impl_->max_value_size(); }

namespace {

bool Retryable(const absl::Status& s) { return absl::IsAborted(s) || absl::IsOutOfRange(s); }

}  // namespace

KvTransaction::KvTransaction(StoreImpl* store, std::unique_ptr<KvTxnState> state)
    : store_(store), state_(std::move(state)) {}
KvTransaction::~KvTransaction() { Abort(); }
uint64_t KvTransaction::read_revision() const { return state_->read_revision; }

absl::StatusOr<KeyValue> KvTransaction::Get(absl::string_view key) {
  return store_->TxnGet(state_.get(), key);
}

absl::StatusOr<RangeResult> KvTransaction::Range(const RangeRequest& req) {
  return store_->TxnRange(state_.get(), req);
}

absl::Status KvTransaction::Put(absl::string_view key, absl::string_view value) {
  COWKV_RETURN_IF_ERROR(state_->CheckActive());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  COWKV_RETURN_IF_ERROR(kv::ValidateValue(value));
  kv::BufferPut(&state_->ws, key, value);
  return absl::OkStatus();
}

absl::Status KvTransaction::Delete(absl::string_view key) {
  COWKV_RETURN_IF_ERROR(state_->CheckActive());
  COWKV_RETURN_IF_ERROR(kv::ValidateKey(key));
  kv::BufferDelete(&state_->ws, key);
  return absl::OkStatus();
}

absl::Status KvTransaction::DeleteRange(absl::string_view start, absl::string_view end) {
  COWKV_RETURN_IF_ERROR(state_->CheckActive());
  if (start.size() > kMaxKeySize || end.size() > kMaxKeySize + 1) {
    return absl::InvalidArgumentError("delete-range bound longer than the largest key");
  }
  BufferDeleteRange(&state_->ws, start, end);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> KvTransaction::Commit(Durability d) {
  return store_->TxnCommit(state_.get(), d);
}

void KvTransaction::Abort() { store_->TxnFinish(state_.get()); }

absl::Duration TxnRetryWait(int k, uint64_t random) {
  if (k < 1) return absl::ZeroDuration();
  const int64_t d_us = std::min<int64_t>(1000000, int64_t{10000} << std::min(k - 1, 10));
  const int64_t half = d_us / 2;
  return absl::Microseconds(half + static_cast<int64_t>(random % static_cast<uint64_t>(half + 1)));
}

absl::Status Subvolume::RunInTransaction(const std::function<absl::Status(KvTransaction&)>& fn,
                                         Durability durability, int max_attempts) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  absl::Status last;
  for (int attempt = 0; attempt < std::max(1, max_attempts); ++attempt) {
    if (attempt > 0) absl::SleepFor(TxnRetryWait(attempt, rng()));
    COWKV_ASSIGN_OR_RETURN(std::unique_ptr<KvTransaction> tx, BeginTransaction());
    last = fn(*tx);
    if (last.ok()) last = tx->Commit(durability).status();
    if (last.ok() || !Retryable(last)) return last;
  }
  return WithContext(last, absl::StrCat("gave up after ", max_attempts, " attempts"));
}

namespace {

FileStat ToStat(const fs::Attr& a) {
  FileStat s;
  s.ino = a.ino;
  switch (a.type()) {
    case fs::FileType::kDirectory:
      s.kind = FileKind::kDirectory;
      break;
    case fs::FileType::kSymlink:
      s.kind = FileKind::kSymlink;
      break;
    default:
      s.kind = FileKind::kRegular;
      break;
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
absl::StatusOr<FileStat> CreateAs(StoreImpl* s, uint64_t subvol, const fs::Place& place,
                                  fs::FileType type, uint32_t mode, absl::string_view target) {
  FileStat st;
  COWKV_RETURN_IF_ERROR(s->FsWrite(subvol, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.Create(place, type, mode, target));
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

absl::StatusOr<std::string> Files::ReadLinkInode(uint64_t ino) {
  std::string out;
  COWKV_RETURN_IF_ERROR(store_->FsRead(subvol_, [&](fs::FsOps& o) {
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

absl::StatusOr<FileStat> Files::MkdirAt(uint64_t dir, absl::string_view name, uint32_t mode) {
  return CreateAs(store_, subvol_, fs::Place::At(dir, name), fs::FileType::kDirectory, mode, {});
}

absl::StatusOr<FileStat> Files::CreateAt(uint64_t dir, absl::string_view name, uint32_t mode) {
  return CreateAs(store_, subvol_, fs::Place::At(dir, name), fs::FileType::kRegular, mode, {});
}

absl::StatusOr<FileStat> Files::SymlinkAt(absl::string_view target, uint64_t dir,
                                          absl::string_view name) {
  return CreateAs(store_, subvol_, fs::Place::At(dir, name), fs::FileType::kSymlink, 0777, target);
}

absl::Status Files::UnlinkAt(uint64_t dir, absl::string_view name) {
  return store_->FsWrite(subvol_,
                         [&](fs::FsOps& o) { return o.Unlink(fs::Place::At(dir, name), false); });
}

absl::Status Files::RmdirAt(uint64_t dir, absl::string_view name) {
  return store_->FsWrite(subvol_,
                         [&](fs::FsOps& o) { return o.Unlink(fs::Place::At(dir, name), true); });
}

absl::Status Files::RenameAt(uint64_t from_dir, absl::string_view from_name, uint64_t to_dir,
                             absl::string_view to_name, uint32_t flags) {
  return store_->FsWrite(subvol_, [&](fs::FsOps& o) {
    return o.Rename(fs::Place::At(from_dir, from_name), fs::Place::At(to_dir, to_name), flags);
  });
}

absl::StatusOr<FileStat> Files::LinkAt(uint64_t ino, uint64_t dir, absl::string_view name) {
  FileStat st;
  COWKV_RETURN_IF_ERROR(store_->FsWrite(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.LinkInode(ino, fs::Place::At(dir, name)));
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

absl::Status Files::Fallocate(uint64_t ino, uint32_t mode, uint64_t offset, uint64_t length) {
  return store_->FsWrite(subvol_,
                         [&](fs::FsOps& o) { return o.Fallocate(ino, mode, offset, length); });
}

absl::Status Files::Clone(uint64_t src, uint64_t src_offset, uint64_t dst, uint64_t dst_offset,
                          uint64_t length) {
  return store_->FsWrite(
      subvol_, [&](fs::FsOps& o) { return o.Clone(src, src_offset, dst, dst_offset, length); });
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

absl::Status Files::SetXattr(uint64_t ino, absl::string_view name, absl::string_view value,
                             uint32_t flags) {
  return store_->FsWrite(subvol_,
                         [&](fs::FsOps& o) { return o.SetXattr(ino, name, value, flags); });
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

absl::StatusOr<FileStat> Files::SetAttr(uint64_t ino, const SetAttrSpec& spec) {
  fs::AttrChange c;
  c.mode = spec.mode;
  c.uid = spec.uid;
  c.gid = spec.gid;
  if (spec.atime) c.atime = fs::AttrTime{spec.atime->now, spec.atime->ns};
  if (spec.mtime) c.mtime = fs::AttrTime{spec.mtime->now, spec.mtime->ns};
  c.size = spec.size;
  FileStat st;
  COWKV_RETURN_IF_ERROR(store_->FsWrite(subvol_, [&](fs::FsOps& o) {
    COWKV_ASSIGN_OR_RETURN(fs::Attr a, o.SetAttr(ino, c));
    st = ToStat(a);
    return absl::OkStatus();
  }));
  return st;
}

absl::Status Files::FsyncRange(uint64_t ino, uint64_t offset, uint64_t length, bool datasync) {
  constexpr uint64_t kMax = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (offset > kMax || length > kMax - offset) {
    return PosixError(ErrorReason::kEINVAL, absl::StrCat("fsync range: offset ", offset,
                                                         " + length ", length, " overflows"));
  }
  // The whole inode (docs/api.md): the log holds an inode's items, not
  // byte ranges, and what a write changed is its extent items.
  return store_->FsFsync(subvol_, ino, datasync);
}

}  // namespace cowkv
