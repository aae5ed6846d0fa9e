// Lessor; see lessor.h.
#include "engine/lease/lessor.h"

#include <algorithm>
#include <limits>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "cowkv/errors.h"
#include "cowkv/limits.h"
#include "cowkv/status_macros.h"
#include "engine/base/status.h"
#include "engine/kv/kv_item.h"
#include "engine/lease/lease_item.h"

namespace cowkv {
namespace lease {

absl::Status LeaseNotFound(int64_t id) {
  return WithReason(absl::NotFoundError(absl::StrCat("lease ", id, " not found")),
                    ErrorReason::kLeaseNotFound);
}

Lessor::Lessor(std::function<int64_t()> now_ms, bool bug_keep_attachment)
    : now_ms_(std::move(now_ms)),
      bug_keep_attachment_(bug_keep_attachment),
      rng_(static_cast<uint64_t>(now_ms_()) ^ 0x6c65617365ull) {}

int64_t Lessor::Deadline(int64_t ttl_seconds) const {
  // ttl <= kMaxLeaseTtlSeconds: ttl * 1000 stays far from overflow.
  return now_ms_() + ttl_seconds * 1000;
}

absl::Status Lessor::Load(uint64_t subvol, Tree* tree, bool frozen) {
  absl::MutexLock l(&mu_);
  return LoadLocked(subvol, tree, frozen);
}

absl::Status Lessor::LoadLocked(uint64_t subvol, Tree* tree, bool frozen) {
  if (subvols_.contains(subvol)) return absl::OkStatus();
  SubvolLeases s;
  s.frozen = frozen;
  TreeIterator it(tree);
  for (it.Seek(std::string(1, kLeasePrefix)); it.Valid() && IsLeaseTreeKey(it.key()); it.Next()) {
    COWKV_ASSIGN_OR_RETURN(LeaseItem item, DecodeLeaseItem(it.key(), it.value()));
    if (item.record) {
      Lease& lease = s.leases[item.id];
      lease.ttl = item.ttl_seconds;
      lease.deadline = frozen ? std::numeric_limits<int64_t>::max() : Deadline(item.ttl_seconds);
      continue;
    }
    auto lease = s.leases.find(item.id);
    if (lease == s.leases.end()) {
      return WithReason(
          absl::DataLossError(absl::StrCat("lease attachment of key '",
                                           absl::CHexEscape(item.user_key.substr(0, 64)),
                                           "' to lease ", item.id, " without its lease record")),
          ErrorReason::kCorruption);
    }
    if (!s.attached.emplace(item.user_key, item.id).second) {
      return WithReason(
          absl::DataLossError(absl::StrCat("key '", absl::CHexEscape(item.user_key.substr(0, 64)),
                                           "' attached to two leases")),
          ErrorReason::kCorruption);
    }
    lease->second.keys.insert(item.user_key);
  }
  COWKV_RETURN_IF_ERROR(it.status());
  subvols_.emplace(subvol, std::move(s));
  return absl::OkStatus();
}

bool Lessor::PutNeedsApply(uint64_t subvol, absl::string_view key) {
  // Every put asks: the common answer (a loaded subvolume with no key
  // attached) without the lock.
  if (clear_subvol_.load(std::memory_order_acquire) == subvol + 1) return false;
  absl::MutexLock l(&mu_);
  auto s = subvols_.find(subvol);
  if (s == subvols_.end()) return true;
  if (s->second.attached.empty()) {
    clear_subvol_.store(subvol + 1, std::memory_order_release);
    return false;
  }
  if (bug_keep_attachment_) return false;
  return s->second.attached.contains(key);
}

bool Lessor::IsLoaded(uint64_t subvol) {
  absl::MutexLock l(&mu_);
  return subvols_.contains(subvol);
}

void Lessor::Forget(uint64_t subvol) {
  absl::MutexLock l(&mu_);
  clear_subvol_.store(0, std::memory_order_release);
  subvols_.erase(subvol);
}

absl::StatusOr<Lessor::SubvolLeases*> Lessor::Find(uint64_t subvol) {
  auto s = subvols_.find(subvol);
  if (s == subvols_.end()) {
    return absl::FailedPreconditionError(
        absl::StrCat("leases of subvolume ", subvol, " not loaded"));
  }
  return &s->second;
}

absl::Status Lessor::Plan(uint64_t subvol, Tree* tree, const kv::KvWriteSet& ws,
                          const std::vector<kv::KvOp>& ops, std::vector<kv::KvOp>* extra) {
  absl::MutexLock l(&mu_);
  pending_.clear();
  pending_subvol_ = subvol;
  COWKV_RETURN_IF_ERROR(LoadLocked(subvol, tree, false));
  SubvolLeases& s = subvols_[subvol];
  // The common case: nothing leased here and nothing to lease.
  if (s.attached.empty() && ws.leases.empty() && ws.revoke_lease == 0) return absl::OkStatus();
  const uint64_t revoke = ws.revoke_lease;
  if (revoke != 0 && s.leases.count(revoke) == 0)
    return LeaseNotFound(static_cast<int64_t>(revoke));
  // Keys each lease gains (+) or loses (-), to check the bounds first.
  std::map<uint64_t, int64_t> delta;
  int64_t total = 0;
  for (const kv::KvOp& op : ops) {
    const absl::string_view uk = kv::UserKey(op.tree_key);
    auto cur = s.attached.find(uk);
    const uint64_t old_id = cur == s.attached.end() ? 0 : cur->second;
    uint64_t new_id = 0;
    if (op.item.has_value()) {
      auto want = ws.leases.find(std::string(uk));
      if (want != ws.leases.end()) new_id = want->second;
      if (new_id != 0 && (s.leases.count(new_id) == 0 || new_id == revoke)) {
        return LeaseNotFound(static_cast<int64_t>(new_id));
      }
      if (new_id == 0 && bug_keep_attachment_) new_id = old_id;
    }
    if (old_id == new_id) continue;
    if (old_id != 0) {
      extra->push_back(kv::KvOp{AttachmentKey(old_id, uk), std::nullopt, {}, {}});
      pending_.push_back(Change{Change::Kind::kDetach, old_id, std::string(uk), 0});
      --delta[old_id];
      --total;
    }
    if (new_id != 0) {
      extra->push_back(kv::KvOp{AttachmentKey(new_id, uk), EncodeAttachment(), {}, {}});
      pending_.push_back(Change{Change::Kind::kAttach, new_id, std::string(uk), 0});
      ++delta[new_id];
      ++total;
    }
  }
  for (const auto& [id, d] : delta) {
    if (d > 0 && s.leases[id].keys.size() + static_cast<size_t>(d) > kMaxKeysPerLease) {
      return LimitError(
          absl::StrCat("lease ", id, " would hold more than ", kMaxKeysPerLease, " keys"));
    }
  }
  if (total > 0 && s.attached.size() + static_cast<size_t>(total) > kMaxLeasedKeysPerSubvolume) {
    return LimitError(absl::StrCat("subvolume would hold more than ", kMaxLeasedKeysPerSubvolume,
                                   " keys attached to leases"));
  }
  if (revoke != 0) {
    // Attachments the ops above did not drop (keys a revoke found gone).
    std::set<std::string> dropped;
    for (const Change& c : pending_) {
      if (c.kind == Change::Kind::kDetach && c.id == revoke) dropped.insert(c.key);
    }
    for (const std::string& k : s.leases[revoke].keys) {
      if (dropped.count(k) == 0) {
        extra->push_back(kv::KvOp{AttachmentKey(revoke, k), std::nullopt, {}, {}});
      }
    }
    extra->push_back(kv::KvOp{RecordKey(revoke), std::nullopt, {}, {}});
    pending_.push_back(Change{Change::Kind::kRemove, revoke, "", 0});
  }
  return absl::OkStatus();
}

void Lessor::Applied(uint64_t subvol, uint64_t /*revision*/) {
  absl::MutexLock l(&mu_);
  if (pending_.empty() || pending_subvol_ != subvol) {
    pending_.clear();
    return;
  }
  SubvolLeases& s = subvols_[subvol];
  clear_subvol_.store(0, std::memory_order_release);  // keys may be attached now
  for (const Change& c : pending_) {
    switch (c.kind) {
      case Change::Kind::kAttach:
        s.attached[c.key] = c.id;
        s.leases[c.id].keys.insert(c.key);
        break;
      case Change::Kind::kDetach:
        s.attached.erase(c.key);
        s.leases[c.id].keys.erase(c.key);
        break;
      case Change::Kind::kGrant: {
        Lease& lease = s.leases[c.id];
        lease.ttl = c.ttl;
        lease.deadline = Deadline(c.ttl);
        break;
      }
      case Change::Kind::kRemove: {
        auto it = s.leases.find(c.id);
        if (it == s.leases.end()) break;
        for (const std::string& k : it->second.keys) s.attached.erase(k);
        s.leases.erase(it);
        break;
      }
    }
  }
  pending_.clear();
}

absl::StatusOr<int64_t> Lessor::PlanGrant(uint64_t subvol, int64_t ttl_seconds, int64_t id,
                                          std::vector<kv::KvOp>* ops) {
  COWKV_RETURN_IF_ERROR(ValidateTtl(ttl_seconds));
  COWKV_RETURN_IF_ERROR(ValidateId(id));
  absl::MutexLock l(&mu_);
  pending_.clear();
  pending_subvol_ = subvol;
  COWKV_ASSIGN_OR_RETURN(SubvolLeases * s, Find(subvol));
  if (s->leases.size() >= kMaxLeasesPerSubvolume) {
    return LimitError(
        absl::StrCat("subvolume holds ", kMaxLeasesPerSubvolume, " leases, the most it may"));
  }
  if (id == 0) {
    do {
      id = static_cast<int64_t>(rng_() >> 1);
    } while (id == 0 || s->leases.count(static_cast<uint64_t>(id)) > 0);
  } else if (s->leases.count(static_cast<uint64_t>(id)) > 0) {
    return absl::AlreadyExistsError(absl::StrCat("lease ", id, " already exists"));
  }
  ops->push_back(kv::KvOp{RecordKey(static_cast<uint64_t>(id)), EncodeRecord(ttl_seconds), {}, {}});
  pending_.push_back(Change{Change::Kind::kGrant, static_cast<uint64_t>(id), "", ttl_seconds});
  return id;
}

absl::StatusOr<std::vector<std::string>> Lessor::Keys(uint64_t subvol, int64_t id) {
  absl::MutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(SubvolLeases * s, Find(subvol));
  auto it = s->leases.find(static_cast<uint64_t>(id));
  if (id <= 0 || it == s->leases.end()) return LeaseNotFound(id);
  return std::vector<std::string>(it->second.keys.begin(), it->second.keys.end());
}

absl::StatusOr<int64_t> Lessor::KeepAlive(uint64_t subvol, int64_t id) {
  absl::MutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(SubvolLeases * s, Find(subvol));
  auto it = s->leases.find(static_cast<uint64_t>(id));
  if (id <= 0 || it == s->leases.end()) return LeaseNotFound(id);
  if (s->frozen) {
    return WithReason(absl::FailedPreconditionError(absl::StrCat(
                          "lease ", id, " is in a read-only snapshot: it cannot be kept alive")),
                      ErrorReason::kReadOnlySnapshot);
  }
  // etcd: a lease whose deadline passed is gone even before it is revoked.
  if (it->second.deadline <= now_ms_()) return LeaseNotFound(id);
  it->second.deadline = Deadline(it->second.ttl);
  return it->second.ttl;
}

absl::StatusOr<LeaseInfo> Lessor::Info(uint64_t subvol, int64_t id, bool keys) {
  absl::MutexLock l(&mu_);
  COWKV_ASSIGN_OR_RETURN(SubvolLeases * s, Find(subvol));
  auto it = s->leases.find(static_cast<uint64_t>(id));
  if (id <= 0 || it == s->leases.end()) return LeaseNotFound(id);
  LeaseInfo info;
  info.id = id;
  info.granted_ttl = it->second.ttl;
  if (s->frozen) {
    info.ttl = it->second.ttl;
  } else {
    const int64_t left = it->second.deadline - now_ms_();
    info.ttl = left <= 0 ? 0 : (left + 999) / 1000;
  }
  if (keys) info.keys.assign(it->second.keys.begin(), it->second.keys.end());
  return info;
}

std::vector<int64_t> Lessor::Ids(uint64_t subvol) {
  absl::MutexLock l(&mu_);
  std::vector<int64_t> ids;
  auto s = subvols_.find(subvol);
  if (s == subvols_.end()) return ids;
  for (const auto& [id, lease] : s->second.leases) ids.push_back(static_cast<int64_t>(id));
  return ids;
}

bool Lessor::IsExpired(uint64_t subvol, int64_t id) {
  absl::MutexLock l(&mu_);
  auto s = subvols_.find(subvol);
  if (s == subvols_.end()) return false;
  auto it = s->second.leases.find(static_cast<uint64_t>(id));
  return it != s->second.leases.end() && it->second.deadline <= now_ms_();
}

std::vector<std::pair<uint64_t, int64_t>> Lessor::Expired(size_t max) {
  absl::MutexLock l(&mu_);
  const int64_t now = now_ms_();
  std::vector<std::pair<int64_t, std::pair<uint64_t, int64_t>>> due;
  for (const auto& [subvol, s] : subvols_) {
    if (s.frozen) continue;
    for (const auto& [id, lease] : s.leases) {
      if (lease.deadline <= now)
        due.push_back({lease.deadline, {subvol, static_cast<int64_t>(id)}});
    }
  }
  std::sort(due.begin(), due.end());
  std::vector<std::pair<uint64_t, int64_t>> out;
  for (size_t i = 0; i < due.size() && i < max; ++i) out.push_back(due[i].second);
  return out;
}

uint64_t Lessor::leases() {
  absl::MutexLock l(&mu_);
  uint64_t n = 0;
  for (const auto& [subvol, s] : subvols_) n += s.leases.size();
  return n;
}

uint64_t Lessor::attached_keys() {
  absl::MutexLock l(&mu_);
  uint64_t n = 0;
  for (const auto& [subvol, s] : subvols_) n += s.attached.size();
  return n;
}

}  // namespace lease
}  // namespace cowkv
