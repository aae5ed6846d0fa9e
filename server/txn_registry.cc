// Interactive transaction handles with leases; see txn_registry.h.
#include "server/txn_registry.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/status_mapping.h"

namespace cowkv {
namespace server {

absl::StatusOr<TxnRegistry::Begun> TxnRegistry::Add(const std::string& peer,
                                                    const std::string& connection,
                                                    std::unique_ptr<KvTransaction> txn,
                                                    absl::Duration lease, absl::Time now) {
  auto e = std::make_shared<Entry>();
  e->peer = peer;
  e->connection = connection;
  e->lease = lease;
  Begun out;
  out.read_revision = txn->read_revision();
  out.lease = lease;
  KvTransaction* raw = txn.get();
  {
    // Not yet published: nobody else can hold it. Taken before mu_ (lock order).
    absl::MutexLock el(&e->mu);
    e->txn = std::move(txn);
  }
  {
    absl::MutexLock l(&mu_);
    if (static_cast<int>(entries_.size()) >= limits_.total) {
      raw->Abort();
      return WithServerReason(absl::ResourceExhaustedError(
                                  absl::StrCat("too many open transactions on the server (limit ",
                                               limits_.total, "): commit or abort some first")),
                              "TOO_MANY_TRANSACTIONS");
    }
    int& mine = open_per_peer_[peer];
    if (mine >= limits_.per_peer) {
      if (mine == 0) open_per_peer_.erase(peer);
      raw->Abort();
      return WithServerReason(absl::ResourceExhaustedError(absl::StrCat(
                                  "too many open transactions for client ", peer, " (limit ",
                                  limits_.per_peer, "): commit or abort some first")),
                              "TOO_MANY_TRANSACTIONS");
    }
    ++mine;
    do {
      out.handle = absl::Uniform<uint64_t>(rng_);
    } while (out.handle == 0 || entries_.contains(out.handle) || expired_.contains(out.handle));
    e->deadline = now + lease;
    entries_[out.handle] = e;
    peaks_.total = std::max<uint64_t>(peaks_.total, entries_.size());
    peaks_.per_client = std::max<uint64_t>(peaks_.per_client, mine);
  }
  return out;
}

absl::Status TxnRegistry::MissingLocked(uint64_t handle) const {
  if (closed_.contains(handle)) {
    return absl::AbortedError(absl::StrCat(
        "transaction ", handle, " aborted: the connection that began it closed; start again"));
  }
  if (expired_.contains(handle)) {
    return absl::AbortedError(absl::StrCat(
        "transaction ", handle, " expired: unused for longer than its lease; start again"));
  }
  return absl::NotFoundError(absl::StrCat(
      "no open transaction with handle ", handle, " (finished, or never begun)"));
}

void TxnRegistry::RemoveLocked(uint64_t handle, const Entry& e, bool expired) {
  entries_.erase(handle);
  auto it = open_per_peer_.find(e.peer);
  if (it != open_per_peer_.end() && --it->second <= 0) open_per_peer_.erase(it);
  if (!expired) return;
  ++expired_total_;
  expired_.insert(handle);
  expired_order_.push_back(handle);
  if (expired_order_.size() > kRememberExpired) {
    closed_.erase(expired_order_.front());
    expired_.erase(expired_order_.front());
    expired_order_.pop_front();
  }
}

absl::StatusOr<std::shared_ptr<TxnRegistry::Entry>> TxnRegistry::Lookup(uint64_t handle,
                                                                         absl::Time now,
                                                                         bool remove) {
  std::shared_ptr<Entry> e;
  bool expired = false;
  {
    absl::MutexLock l(&mu_);
    auto it = entries_.find(handle);
    if (it == entries_.end()) return MissingLocked(handle);
    e = it->second;
    if (now > e->deadline) {
      expired = true;
      RemoveLocked(handle, *e, /*expired=*/true);
    } else if (remove) {
      RemoveLocked(handle, *e, /*expired=*/false);
    } else {
      e->deadline = now + e->lease;
    }
  }
  if (expired) {
    {
      absl::MutexLock el(&e->mu);
      if (!e->finished) {
        e->finished = true;
        e->txn->Abort();
      }
    }
    absl::MutexLock l(&mu_);
    return MissingLocked(handle);
  }
  return e;
}

absl::Status TxnRegistry::With(uint64_t handle, absl::Time now,
                               const std::function<absl::Status(KvTransaction&)>& fn) {
  absl::StatusOr<std::shared_ptr<Entry>> e = Lookup(handle, now, /*remove=*/false);
  if (!e.ok()) return e.status();
  absl::MutexLock el(&(*e)->mu);
  if ((*e)->finished) {
    return absl::NotFoundError(absl::StrCat("transaction ", handle, " finished meanwhile"));
  }
  return fn(*(*e)->txn);
}

absl::StatusOr<uint64_t> TxnRegistry::Commit(uint64_t handle, Durability durability,
                                             absl::Time now) {
  absl::StatusOr<std::shared_ptr<Entry>> e = Lookup(handle, now, /*remove=*/true);
  if (!e.ok()) return e.status();
  absl::MutexLock el(&(*e)->mu);
  if ((*e)->finished) {
    return absl::NotFoundError(absl::StrCat("transaction ", handle, " finished meanwhile"));
  }
  (*e)->finished = true;
  return (*e)->txn->Commit(durability);
}

absl::Status TxnRegistry::Abort(uint64_t handle, absl::Time now) {
  absl::StatusOr<std::shared_ptr<Entry>> e = Lookup(handle, now, /*remove=*/true);
  if (!e.ok()) return e.status();
  absl::MutexLock el(&(*e)->mu);
  if (!(*e)->finished) {
    (*e)->finished = true;
    (*e)->txn->Abort();
  }
  return absl::OkStatus();
}

void TxnRegistry::ExpireIdle(absl::Time now) {
  ExpireWhere([now](const Entry& e) { return now > e.deadline; });
}

void TxnRegistry::ExpireClosed(const std::function<bool(const std::string&)>& is_open) {
  // The connections are asked once each, outside mu_.
  std::vector<std::string> connections;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [handle, e] : entries_) connections.push_back(e->connection);
  }
  absl::flat_hash_set<std::string> gone;
  for (const std::string& c : connections) {
    if (!gone.contains(c) && !is_open(c)) gone.insert(c);
  }
  if (gone.empty()) return;
  ExpireWhere([&](const Entry& e) { return gone.contains(e.connection); }, /*closed=*/true);
}

void TxnRegistry::ExpireWhere(const std::function<bool(const Entry&)>& doomed, bool closed) {
  std::vector<std::pair<uint64_t, std::shared_ptr<Entry>>> candidates;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [handle, e] : entries_) {
      if (doomed(*e)) candidates.emplace_back(handle, e);
    }
  }
  for (auto& [handle, e] : candidates) {
    if (!e->mu.TryLock()) continue;  // in use: its call renews the lease (invariant 3)
    bool expire = false;
    {
      absl::MutexLock l(&mu_);  // entry before registry: the lock order
      auto it = entries_.find(handle);
      // Still registered and still doomed (a call may have renewed it meanwhile).
      if (it != entries_.end() && it->second == e && doomed(*e)) {
        RemoveLocked(handle, *e, /*expired=*/true);
        if (closed) closed_.insert(handle);
        expire = true;
      }
    }
    if (expire && !e->finished) {
      e->finished = true;
      e->txn->Abort();
    }
    e->mu.Unlock();
  }
}

void TxnRegistry::AbortAll() {
  std::vector<std::shared_ptr<Entry>> all;
  {
    absl::MutexLock l(&mu_);
    for (auto& [handle, e] : entries_) all.push_back(e);
    entries_.clear();
    open_per_peer_.clear();
  }
  for (const std::shared_ptr<Entry>& e : all) {
    absl::MutexLock el(&e->mu);
    if (!e->finished) {
      e->finished = true;
      e->txn->Abort();
    }
  }
}

uint64_t TxnRegistry::open() const {
  absl::MutexLock l(&mu_);
  return entries_.size();
}

TxnRegistry::Peaks TxnRegistry::peaks() const {
  absl::MutexLock l(&mu_);
  return peaks_;
}

uint64_t TxnRegistry::expired_total() const {
  absl::MutexLock l(&mu_);
  return expired_total_;
}

}  // namespace server
}  // namespace cowkv
