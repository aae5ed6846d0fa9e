#include "engine/subvol/subvolumes.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "engine/base/check.h"
#include "engine/base/status.h"
#include "engine/format/items.h"
#include "engine/format/layout.h"

namespace cowkv {

using format::Key17;

namespace {
std::string InfoKey(uint64_t id) {
  return format::EncodeKey17(Key17{id, format::kSubvolInfo, 0});
}
uint64_t NowMs() { return static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())); }
}  // namespace

std::string SubvolUuid(absl::string_view fsid, uint64_t id) {
  std::string out(fsid.substr(0, 16));
  out.resize(16, '\0');
  for (int i = 0; i < 8; ++i) out[8 + i] ^= static_cast<char>(id >> (56 - 8 * i));
  return out;
}

absl::Status ValidateSubvolName(absl::string_view name) {
  if (name.empty() || name.size() > format::kMaxSubvolNameSize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "subvolume name must be 1..", format::kMaxSubvolNameSize, " bytes, got ", name.size()));
  }
  if (name.find('/') != absl::string_view::npos || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("subvolume name must not contain '/' or NUL");
  }
  return absl::OkStatus();
}

absl::Status Subvolumes::NameDefault(TxnManager* txn) {
  format::SubvolInfoItem si{0, NowMs(), txn->generation(), "default"};
  return txn->PutRootTreeItem(InfoKey(format::kDefaultTreeId), format::EncodeSubvolInfo(si));
}

absl::Status Subvolumes::Load() {
  live_.clear();
  by_name_.clear();
  partial_.clear();
  std::vector<uint64_t> live_ids = txn_->TreeIds(/*dropping=*/false);
  for (uint64_t id : live_ids) {
    COWKV_ASSIGN_OR_RETURN(format::RootItem ri, txn_->TreeRootItem(id));
    if (ri.flags & format::kRootFlagReceiving) {
      // A receive that never finished (a crash): nothing of it is visible.
      // The store resumes it or drops it (StoreImpl::Init).
      partial_.insert(id);
      continue;
    }
    live_[id];
  }
  COWKV_RETURN_IF_ERROR(txn_->ScanRootTree(
      format::kSubvolInfo, [&](uint64_t id, absl::string_view value) -> absl::Status {
        auto it = live_.find(id);
        if (it == live_.end()) {
          CorruptionSite site;
          site.what = "subvolume info";
          site.owner = id;
          return COWKV_CORRUPTION(site, "no live root item for the subvolume", "", "");
        }
        COWKV_ASSIGN_OR_RETURN(format::SubvolInfoItem si, format::DecodeSubvolInfo(value, id));
        it->second = Entry{si.name, si.parent_id,     si.ctime_ms,
                           si.ogen, si.received_uuid, si.received_generation};
        return absl::OkStatus();
      }));
  for (auto& [id, e] : live_) {
    if (e.name.empty()) e.name = absl::StrCat("subvol-", id);
    auto [other, inserted] = by_name_.emplace(e.name, id);
    if (!inserted) {
      CorruptionSite site;
      site.what = "subvolume info";
      site.owner = id;
      return COWKV_CORRUPTION(
          site, absl::StrCat("name '", e.name, "' is taken by subvolume ", other->second), "", "");
    }
  }
  DCheckNames();
  return absl::OkStatus();
}

// Every live subvolume has exactly one name and every name one subvolume.
void Subvolumes::DCheckNames() const { COWKV_DCHECK(by_name_.size() == live_.size()); }

void Subvolumes::AddLive(uint64_t id, Entry e) {
  // Ids are never reused (TxnManager hands out each once), and a name is
  // checked free (CheckNewName) before any change is made.
  COWKV_CHECK(id >= format::kFirstFreeTreeId);
  COWKV_CHECK(live_.count(id) == 0);
  const bool named = by_name_.emplace(e.name, id).second;
  COWKV_CHECK(named);
  live_[id] = std::move(e);
  DCheckNames();
}

absl::Status Subvolumes::CheckNewName(absl::string_view name) const {
  COWKV_RETURN_IF_ERROR(ValidateSubvolName(name));
  if (by_name_.find(name) != by_name_.end()) {
    return absl::AlreadyExistsError(absl::StrCat("subvolume '", name, "' already exists"));
  }
  return absl::OkStatus();
}

absl::Status Subvolumes::PutInfo(uint64_t id, const Entry& e) {
  format::SubvolInfoItem si{e.parent_id, e.ctime_ms,      e.ogen,
                            e.name,      e.received_uuid, e.received_generation};
  return txn_->PutRootTreeItem(InfoKey(id), format::EncodeSubvolInfo(si));
}

absl::StatusOr<uint64_t> Subvolumes::Create(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckNewName(name));
  COWKV_RETURN_IF_ERROR(txn_->ReserveRootTreeWrites(2));
  COWKV_ASSIGN_OR_RETURN(uint64_t id, txn_->CreateTree());
  Entry e{std::string(name), 0, NowMs(), txn_->generation(), "", 0};
  COWKV_RETURN_IF_ERROR(PutInfo(id, e));
  AddLive(id, std::move(e));
  return id;
}

absl::StatusOr<uint64_t> Subvolumes::Snapshot(uint64_t source_id, absl::string_view name,
                                              bool read_only) {
  COWKV_RETURN_IF_ERROR(CheckNewName(name));
  if (live_.count(source_id) == 0) return absl::NotFoundError(absl::StrCat("no subvolume ", source_id));
  COWKV_RETURN_IF_ERROR(txn_->ReserveRootTreeWrites(3));
  COWKV_ASSIGN_OR_RETURN(uint64_t id, txn_->CloneTree(source_id, read_only));
  COWKV_CHECK(id > source_id);  // a snapshot is newer than its source
  Entry e{std::string(name), source_id, NowMs(), txn_->generation(), "", 0};
  COWKV_RETURN_IF_ERROR(PutInfo(id, e));
  AddLive(id, std::move(e));
  return id;
}

absl::StatusOr<uint64_t> Subvolumes::BeginReceive(uint64_t parent_id) {
  if (parent_id != 0 && live_.count(parent_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no subvolume ", parent_id));
  }
  COWKV_RETURN_IF_ERROR(txn_->ReserveRootTreeWrites(2));
  COWKV_ASSIGN_OR_RETURN(uint64_t id,
                         parent_id != 0 ? txn_->CloneTree(parent_id, false) : txn_->CreateTree());
  COWKV_RETURN_IF_ERROR(txn_->SetTreeFlags(id, format::kRootFlagReceiving, 0));
  partial_.insert(id);
  return id;
}

absl::Status Subvolumes::AdoptReceived(uint64_t id, absl::string_view name, uint64_t parent_id,
                                       absl::string_view received_uuid,
                                       uint64_t received_generation) {
  COWKV_RETURN_IF_ERROR(CheckNewName(name));
  COWKV_CHECK(live_.count(id) == 0 && partial_.count(id) == 1);
  COWKV_RETURN_IF_ERROR(txn_->ReserveRootTreeWrites(2));
  COWKV_RETURN_IF_ERROR(
      txn_->SetTreeFlags(id, format::kRootFlagReadOnly, format::kRootFlagReceiving));
  partial_.erase(id);
  Entry e{std::string(name),          parent_id,          NowMs(), txn_->generation(),
          std::string(received_uuid), received_generation};
  COWKV_RETURN_IF_ERROR(PutInfo(id, e));
  AddLive(id, std::move(e));
  return absl::OkStatus();
}

absl::Status Subvolumes::AbortReceive(uint64_t id) {
  COWKV_CHECK(live_.count(id) == 0);
  COWKV_RETURN_IF_ERROR(txn_->MarkTreeDropping(id));
  partial_.erase(id);
  return absl::OkStatus();
}

absl::Status Subvolumes::Rename(uint64_t id, absl::string_view new_name) {
  if (id == format::kDefaultTreeId && new_name != "default") {
    // Requests that name no subvolume mean "default": renaming it would
    // point them at nothing, or at whatever took the name next.
    return absl::FailedPreconditionError("the default subvolume cannot be renamed");
  }
  auto it = live_.find(id);
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("no subvolume ", id));
  if (it->second.name == new_name) return absl::OkStatus();
  COWKV_RETURN_IF_ERROR(CheckNewName(new_name));
  COWKV_RETURN_IF_ERROR(txn_->ReserveRootTreeWrites(1));
  Entry e = it->second;
  e.name = std::string(new_name);
  COWKV_RETURN_IF_ERROR(PutInfo(id, e));
  const size_t dropped = by_name_.erase(it->second.name);
  COWKV_CHECK(dropped == 1);
  const bool named = by_name_.emplace(e.name, id).second;
  COWKV_CHECK(named);
  it->second = std::move(e);
  DCheckNames();
  return absl::OkStatus();
}

absl::Status Subvolumes::Delete(uint64_t id) {
  if (id == format::kDefaultTreeId) {
    return absl::FailedPreconditionError("the default subvolume cannot be deleted");
  }
  auto it = live_.find(id);
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("no subvolume ", id));
  COWKV_RETURN_IF_ERROR(txn_->MarkTreeDropping(id));
  // Both changes are in this engine transaction: after a crash the
  // subvolume is either whole or nameless and dropping.
  COWKV_RETURN_IF_ERROR(txn_->DeleteRootTreeItem(InfoKey(id)));
  const size_t dropped = by_name_.erase(it->second.name);
  COWKV_CHECK(dropped == 1);
  live_.erase(it);
  DCheckNames();
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Subvolumes::Lookup(absl::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) {
    return absl::NotFoundError(absl::StrCat("no subvolume named '", name, "'"));
  }
  return it->second;
}

absl::StatusOr<SubvolInfo> Subvolumes::Get(uint64_t id) const {
  auto it = live_.find(id);
  if (it == live_.end()) return absl::NotFoundError(absl::StrCat("no subvolume ", id));
  COWKV_ASSIGN_OR_RETURN(format::RootItem ri, txn_->TreeRootItem(id));
  SubvolInfo info;
  info.id = id;
  info.name = it->second.name;
  info.parent_id = it->second.parent_id;
  info.ctime_ms = it->second.ctime_ms;
  info.flags = ri.flags;
  info.last_snapshot = ri.last_snapshot;
  info.generation = ri.generation;
  info.ogen = it->second.ogen;
  info.uuid = SubvolUuid(txn_->superblock().fsid, id);
  if (info.parent_id != 0) info.parent_uuid = SubvolUuid(txn_->superblock().fsid, info.parent_id);
  info.received_uuid = it->second.received_uuid;
  info.received_generation = it->second.received_generation;
  return info;
}

std::vector<SubvolInfo> Subvolumes::List() const {
  std::vector<SubvolInfo> out;
  for (const auto& [id, e] : live_) {
    absl::StatusOr<SubvolInfo> info = Get(id);
    if (info.ok()) out.push_back(*std::move(info));
  }
  return out;
}

std::vector<std::string> Subvolumes::SnapshotNamesOf(uint64_t id) const {
  std::vector<std::string> out;
  for (const auto& [sid, e] : live_) {
    if (e.parent_id == id) out.push_back(e.name);
  }
  return out;
}

absl::StatusOr<int> Subvolumes::CleanDeadRoots(int max_steps) {
  int steps = 0;
  while (steps < max_steps) {
    std::vector<uint64_t> dying = txn_->TreeIds(/*dropping=*/true);
    if (dying.empty()) break;
    const uint64_t id = dying.front();
    COWKV_DCHECK(live_.count(id) == 0);  // a dying tree has lost its name
    bool more = true;
    while (more && steps < max_steps) {
      COWKV_ASSIGN_OR_RETURN(more, txn_->DropTreeStep(id));
      ++steps;
    }
  }
  return steps;
}

}  // namespace cowkv
