// Goal: the KV path keeps its durability contract (store.h, Durability)
// after a power cut at any flush, for every workload of a bounded space
// (CrashMonkey's ACE, for keys instead of files): every acknowledged
// durable write, Txn or transaction is there with its value and
// revisions, a transaction is all or nothing, async writes survive as a
// prefix of the commit order, and the image passes `check`.
//
// Method: a workload is a sequence of up to --max_ops operations on a base
// image (keys a and b put, committed and closed; c absent), from this
// catalog, each durable (kDurable) or async (kAsync):
//   put a | b | c            (a new key or an overwrite, inline value)
//   put-large b              (8 KiB: a data extent)
//   del k                    (every key present)
//   delrange [a,c) | [b,+inf) (a Txn of one delete-range; may change nothing)
//   txn holds | fails        (a Txn comparing a's mod revision: success
//                            puts b and deletes [c,+inf), failure puts c
//                            and deletes a)
//   ktxn                     (a KvTransaction: get b, put a, delete b,
//                            commit)
//   ktxn-range               (a KvTransaction: range over all, put-large c,
//                            delete [a,b), commit)
//   commit                   (Store::Commit, an engine commit; no
//                            durability of its own: everything before it
//                            is durable once it returns)
//   put-lease a | b | c      (a put attaching the key to lease 1, while it
//                            exists; any other put or delete detaches)
//   revoke                   (Revoke of lease 1, while it exists: its keys
//                            deleted in one revision, or none and no
//                            revision)
//   grant                    (Grant of lease 1 again, once revoked)
// The base also holds lease 1 with a attached; the model and the judged
// state include whether lease 1 exists and which keys it holds.
// A workload runs on the base image once without a cut: the in-memory
// model (MState) must match the live store after every op, and the run
// counts the flushes N the ops reach; power then fails after the last op
// (the close's commit never lands). Then for every k in 1..N and each loss
// mode (drop all, keep all, torn, random subset; one seed each) the
// workload runs again with the device dying at its k-th flush; the op that
// fails there is "in flight" and no later op runs. The image is mounted
// (log replay; the random-subset cuts also crash the replay's first or
// second flush once) and judged: its keys with value, create and mod
// revision and version, and its store revision, must equal the model
// after some prefix of the ops issued that holds every op acknowledged as
// durable (also one that changed nothing: its answer reflects the ops
// before it, so they are durable once it returns); the in-flight op may
// or may not be there. Then `check` must be clean.
//
// The default run takes a seeded sample (--seed, --samples); the manual
// target kv_gen_test_full enumerates the whole space (--full), sharded by
// workload index. --only='<workload>' replays one workload (as printed).
// PlantedBugsAreCaught feeds the oracle wrong input (a cut durable op
// claimed acknowledged; an acknowledged write dropped from the model) and
// requires the generator to report it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cowkv/device.h"
#include "cowkv/store.h"
#include "engine/io/fault_device.h"
#include "engine/testing/crash_harness.h"
#include "engine/testing/store_fixture.h"
#include "engine/testing/test_flags.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace kvgen {
namespace {

using Mode = FaultDevice::LossMode;
constexpr uint64_t kDeviceBytes = 16ull << 20;
constexpr size_t kLargeValue = 8192;

uint64_t MaxOps() { return testing::Flags().max_ops ? testing::Flags().max_ops : 3; }

// ---- Operations and the model -----------------------------------------------------

enum class Kind {
  kPut,
  kPutLarge,
  kDelete,
  kDeleteRange,
  kTxn,
  kKvTxn,
  kKvTxnRange,
  kCommit,
  kPutLease,
  kRevoke,
  kGrant
};
constexpr int64_t kLease = 1;
constexpr int64_t kLeaseTtl = 1000000;  // never expires during a run

struct Op {
  Kind kind = Kind::kPut;
  std::string key;     // kPut, kPutLarge, kDelete; kDeleteRange: start
  std::string end;     // kDeleteRange: exclusive end, "" = through the last key
  bool equal = true;   // kTxn: compare a's mod revision == number (else !=)
  uint64_t number = 0;  // kTxn: the mod revision compared with
  bool durable = false;

  std::string Describe() const {
    std::string s;
    switch (kind) {
      case Kind::kPut: s = "put " + key; break;
      case Kind::kPutLarge: s = "put-large " + key; break;
      case Kind::kDelete: s = "del " + key; break;
      case Kind::kDeleteRange:
        s = absl::StrCat("delrange [", key, ",", end.empty() ? "+inf" : end, ")");
        break;
      case Kind::kTxn: s = absl::StrCat("txn a.mod", equal ? "==" : "!=", number); break;
      case Kind::kKvTxn: s = "ktxn"; break;
      case Kind::kKvTxnRange: s = "ktxn-range"; break;
      case Kind::kCommit: return "commit";
      case Kind::kPutLease:
        s = "put-lease " + key;
        break;
      case Kind::kRevoke:
        s = "revoke";
        break;
      case Kind::kGrant:
        s = "grant";
        break;
    }
    return s + (durable ? " D" : " A");
  }
};

struct Workload {
  std::vector<Op> ops;
  std::string Describe() const {
    std::vector<std::string> d;
    for (const Op& o : ops) d.push_back(o.Describe());
    return absl::StrJoin(d, "; ");
  }
};

// Values name their key and the op that wrote them, so every state of a
// workload is distinct.
std::string SmallValue(const std::string& key, size_t position) {
  return absl::StrCat(key, "@", position);
}
std::string LargeValue(const std::string& key, size_t position) {
  std::string v(kLargeValue, static_cast<char>('A' + position % 26));
  const std::string tag = absl::StrCat(key, "@", position, "      ").substr(0, key.size() + 8);
  v.replace(0, tag.size(), tag);
  return v;
}

struct Item {
  std::string value;
  uint64_t create = 0;
  uint64_t mod = 0;
  uint64_t version = 0;
  bool operator==(const Item& o) const {
    return value == o.value && create == o.create && mod == o.mod && version == o.version;
  }
};

struct MState {
  std::map<std::string, Item> kv;
  uint64_t revision = 0;
  bool lease = false;              // lease 1 exists
  std::set<std::string> attached;  // its keys

  bool operator==(const MState& o) const {
    return revision == o.revision && kv == o.kv && lease == o.lease && attached == o.attached;
  }
  bool Has(const std::string& k) const { return kv.count(k) > 0; }
  uint64_t ModRevision(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? 0 : it->second.mod;
  }
  std::string Describe() const {
    std::vector<std::string> d;
    for (const auto& [k, it] : kv) {
      const std::string v = it.value.size() <= 16 ? it.value
                                                  : absl::StrCat(it.value.substr(0, 6), "..(",
                                                                 it.value.size(), " B)");
      d.push_back(absl::StrCat(k, "=", v, " c", it.create, " m", it.mod, " v", it.version));
    }
    return absl::StrCat("{", absl::StrJoin(d, ", "), "} rev ", revision,
                        lease ? absl::StrCat(" lease{", absl::StrJoin(attached, ","), "}") : "");
  }

  // Applies `op` (the `position`-th of its workload); returns whether it
  // changed anything (took a revision).
  bool Apply(const Op& op, size_t position);
};

struct Write {
  std::string key;
  std::optional<std::string> value;  // nullopt: delete
};

void DeleteRangeWrites(const MState& s, const std::string& start, const std::string& end,
                       std::vector<Write>* out) {
  for (auto it = s.kv.lower_bound(start); it != s.kv.end(); ++it) {
    if (!end.empty() && it->first >= end) break;
    out->push_back({it->first, std::nullopt});
  }
}

bool TxnHolds(const MState& s, const Op& op) {
  return (s.ModRevision("a") == op.number) == op.equal;
}

// What `op` writes in state `s` (delete-ranges expanded).
std::vector<Write> Writes(const MState& s, const Op& op, size_t position) {
  std::vector<Write> w;
  switch (op.kind) {
    case Kind::kPut: w.push_back({op.key, SmallValue(op.key, position)}); break;
    case Kind::kPutLarge: w.push_back({op.key, LargeValue(op.key, position)}); break;
    case Kind::kDelete: w.push_back({op.key, std::nullopt}); break;
    case Kind::kDeleteRange: DeleteRangeWrites(s, op.key, op.end, &w); break;
    case Kind::kTxn:
      if (TxnHolds(s, op)) {
        w.push_back({"b", SmallValue("b", position)});
        DeleteRangeWrites(s, "c", "", &w);
      } else {
        w.push_back({"c", SmallValue("c", position)});
        w.push_back({"a", std::nullopt});
      }
      break;
    case Kind::kKvTxn:
      w.push_back({"a", SmallValue("a", position)});
      w.push_back({"b", std::nullopt});
      break;
    case Kind::kKvTxnRange:
      w.push_back({"c", LargeValue("c", position)});
      DeleteRangeWrites(s, "a", "b", &w);
      break;
    case Kind::kPutLease:
      w.push_back({op.key, SmallValue(op.key, position)});
      break;
    case Kind::kRevoke:
      for (const std::string& k : s.attached) w.push_back({k, std::nullopt});
      break;
    case Kind::kCommit:
    case Kind::kGrant:
      break;
  }
  return w;
}

bool MState::Apply(const Op& op, size_t position) {
  const std::vector<Write> ws = Writes(*this, op, position);
  bool changed = false;
  for (const Write& w : ws) changed |= w.value.has_value() || Has(w.key);
  // Leases: every write detaches its key; a put-lease attaches it again.
  for (const Write& w : ws) attached.erase(w.key);
  if (op.kind == Kind::kPutLease) attached.insert(op.key);
  if (op.kind == Kind::kRevoke) lease = false;
  if (op.kind == Kind::kGrant) lease = true;
  if (!changed) return false;
  const uint64_t rev = revision + 1;
  for (const Write& w : ws) {
    if (!w.value) {
      kv.erase(w.key);
      continue;
    }
    auto it = kv.find(w.key);
    if (it == kv.end()) {
      kv[w.key] = Item{*w.value, rev, rev, 1};
    } else {
      it->second.value = *w.value;
      it->second.mod = rev;
      ++it->second.version;
    }
  }
  revision = rev;
  return true;
}

// The catalog in state `s` (durability left to the caller).
std::vector<Op> CatalogOps(const MState& s) {
  std::vector<Op> out;
  auto add = [&](Kind k, std::string key = "", std::string end = "") {
    Op o;
    o.kind = k;
    o.key = std::move(key);
    o.end = std::move(end);
    out.push_back(o);
  };
  for (const char* k : {"a", "b", "c"}) add(Kind::kPut, k);
  add(Kind::kPutLarge, "b");
  for (const char* k : {"a", "b", "c"}) {
    if (s.Has(k)) add(Kind::kDelete, k);
  }
  add(Kind::kDeleteRange, "a", "c");
  add(Kind::kDeleteRange, "b", "");
  for (bool equal : {true, false}) {
    Op o;
    o.kind = Kind::kTxn;
    o.equal = equal;
    o.number = s.ModRevision("a");
    out.push_back(o);
  }
  add(Kind::kKvTxn);
  add(Kind::kKvTxnRange);
  add(Kind::kCommit);
  if (s.lease) {
    for (const char* k : {"a", "b", "c"}) add(Kind::kPutLease, k);
    add(Kind::kRevoke);
  } else {
    add(Kind::kGrant);
  }
  return out;
}

// ---- The engine side --------------------------------------------------------------

TxnOp PutOp(const std::string& key, std::string value) {
  TxnOp t;
  t.type = TxnOp::Type::kPut;
  t.key = key;
  t.value = std::move(value);
  return t;
}
TxnOp DeleteOp(const std::string& key) {
  TxnOp t;
  t.type = TxnOp::Type::kDelete;
  t.key = key;
  return t;
}
TxnOp DeleteRangeOp(const std::string& start, const std::string& end) {
  TxnOp t;
  t.type = TxnOp::Type::kDeleteRange;
  t.key = start;
  t.end = end;
  return t;
}

absl::Status ApplyEngine(Store* store, Subvolume* sv, const Op& op, size_t position) {
  const Durability d = op.durable ? Durability::kDurable : Durability::kAsync;
  switch (op.kind) {
    case Kind::kPut: return sv->Put(op.key, SmallValue(op.key, position), d);
    case Kind::kPutLarge: return sv->Put(op.key, LargeValue(op.key, position), d);
    case Kind::kDelete: return sv->Delete(op.key, d);
    case Kind::kDeleteRange: {
      TxnRequest req;
      req.success.push_back(DeleteRangeOp(op.key, op.end));
      req.durability = d;
      return sv->Txn(req).status();
    }
    case Kind::kTxn: {
      TxnRequest req;
      Compare c;
      c.key = "a";
      c.target = Compare::Target::kModRevision;
      c.op = op.equal ? Compare::Op::kEqual : Compare::Op::kNotEqual;
      c.number = op.number;
      req.compare.push_back(c);
      req.success = {PutOp("b", SmallValue("b", position)), DeleteRangeOp("c", "")};
      req.failure = {PutOp("c", SmallValue("c", position)), DeleteOp("a")};
      req.durability = d;
      absl::StatusOr<TxnResponse> r = sv->Txn(req);
      if (!r.ok()) return r.status();
      if (r->succeeded != op.equal) {
        return absl::InternalError(
            absl::StrCat("txn took the ", r->succeeded ? "success" : "failure", " branch"));
      }
      return absl::OkStatus();
    }
    case Kind::kKvTxn: {
      absl::StatusOr<std::unique_ptr<KvTransaction>> tx = sv->BeginTransaction();
      if (!tx.ok()) return tx.status();
      absl::StatusOr<KeyValue> read = (*tx)->Get("b");
      if (!read.ok() && !absl::IsNotFound(read.status())) return read.status();
      if (absl::Status s = (*tx)->Put("a", SmallValue("a", position)); !s.ok()) return s;
      if (absl::Status s = (*tx)->Delete("b"); !s.ok()) return s;
      return (*tx)->Commit(d).status();
    }
    case Kind::kKvTxnRange: {
      absl::StatusOr<std::unique_ptr<KvTransaction>> tx = sv->BeginTransaction();
      if (!tx.ok()) return tx.status();
      RangeRequest all;
      absl::StatusOr<RangeResult> read = (*tx)->Range(all);
      if (!read.ok()) return read.status();
      if (absl::Status s = (*tx)->Put("c", LargeValue("c", position)); !s.ok()) return s;
      if (absl::Status s = (*tx)->DeleteRange("a", "b"); !s.ok()) return s;
      return (*tx)->Commit(d).status();
    }
    case Kind::kCommit: return store->Commit();
    case Kind::kPutLease:
      return sv->PutItemWithLease(op.key, SmallValue(op.key, position), kLease, d).status();
    case Kind::kRevoke:
      return sv->LeaseRevoke(kLease, d).status();
    case Kind::kGrant: {
      absl::StatusOr<int64_t> id = sv->LeaseGrant(kLeaseTtl, kLease, d);
      if (id.ok() && *id != kLease) return absl::InternalError("grant ignored the id");
      return id.status();
    }
  }
  return absl::InternalError("unknown op");
}

// The key space as the store shows it (values, revisions, store revision).
absl::StatusOr<MState> Capture(Subvolume* sv) {
  absl::StatusOr<RangeResult> all = sv->Range(RangeRequest{});
  if (!all.ok()) return all.status();
  MState s;
  s.revision = all->revision;
  for (KeyValue& kv : all->kvs) {
    s.kv[kv.key] = Item{std::move(kv.value), kv.create_revision, kv.mod_revision, kv.version};
  }
  absl::StatusOr<std::vector<int64_t>> ids = sv->Leases();
  if (!ids.ok()) return ids.status();
  if (ids->size() > 1 || (ids->size() == 1 && (*ids)[0] != kLease)) {
    return absl::InternalError(absl::StrCat("leases [", absl::StrJoin(*ids, ","), "]"));
  }
  s.lease = !ids->empty();
  if (s.lease) {
    absl::StatusOr<LeaseInfo> info = sv->LeaseTimeToLive(kLease, true);
    if (!info.ok()) return info.status();
    s.attached.insert(info->keys.begin(), info->keys.end());
  }
  return s;
}

// ---- Base image -------------------------------------------------------------------

struct Base {
  std::string image;
  MState model;
};

// a and b put, committed and closed (the close's commit starts a log
// chain, so a run's first durable write is a log sync).
const Base& TheBase() {
  static const Base* base = [] {
    auto* b = new Base;
    MemDevice mem(kDeviceBytes);
    if (!Store::Mkfs(&mem, testing::TestMkfs(4096)).ok()) std::abort();
    {
      auto store = Store::Open(&mem, testing::TestOptions());
      if (!store.ok()) std::abort();
      auto sv = (*store)->DefaultSubvolume();
      if (!sv.ok()) std::abort();
      if (!(*sv)->LeaseGrant(kLeaseTtl, kLease, Durability::kAsync).ok()) std::abort();
      if (!(*sv)->PutItemWithLease("a", "a@setup", kLease, Durability::kAsync).ok()) std::abort();
      if (!(*sv)->Put("b", "b@setup", Durability::kAsync).ok()) std::abort();
      if (!(*store)->Close().ok()) std::abort();
    }
    {
      auto store = Store::Open(&mem, testing::TestOptions());
      if (!store.ok()) std::abort();
      auto sv = (*store)->DefaultSubvolume();
      if (!sv.ok()) std::abort();
      absl::StatusOr<MState> m = Capture(sv->get());
      if (!m.ok() || m->kv.size() != 2 || !m->lease || m->attached.size() != 1) std::abort();
      b->model = *m;
      if (!(*store)->Close().ok()) std::abort();
    }
    b->image = mem.Snapshot();
    return b;
  }();
  return *base;
}

// ---- Runs -------------------------------------------------------------------------

// Wrong oracle input, to show the generator catches it.
enum class Plant {
  kNone,
  kClaimInFlight,   // the durable op cut at its flush is claimed acknowledged
  kDropAckedWrite,  // the first acknowledged durable write is left out of the model
};

// What one run of a workload saw.
struct Outcome {
  std::vector<MState> history;  // [0] = the base; [j] = after op j-1, for the ops issued
  size_t must = 0;  // every allowed prefix holds ops [0, must): the acknowledged durable ones
  bool durable_change = false;  // an op acknowledged as durable changed something
  bool in_flight = false;       // the last op issued failed with the device dead
};

// One run of `w` on `fd` (the base image), which dies at flush cut.at (0:
// never); the engine refusing or misdoing an op on a live device goes to
// `errors`.
Outcome RunOnce(const Workload& w, FaultDevice* fd, const testing::Cut& cut, Plant plant,
                std::vector<std::string>* errors) {
  Outcome o;
  auto store = Store::Open(fd, testing::TestOptions());
  if (!store.ok()) {
    errors->push_back(absl::StrCat("open: ", store.status().ToString()));
    return o;
  }
  absl::StatusOr<std::unique_ptr<Subvolume>> sv = (*store)->DefaultSubvolume();
  if (!sv.ok()) {
    errors->push_back(absl::StrCat("default subvolume: ", sv.status().ToString()));
    return o;
  }
  o.history.push_back(TheBase().model);
  for (size_t i = 0; i < w.ops.size(); ++i) {
    const Op& op = w.ops[i];
    MState next = o.history.back();
    const bool changed = next.Apply(op, i);
    o.history.push_back(next);
    absl::Status s = ApplyEngine(store->get(), sv->get(), op, i);
    if (s.ok()) {
      // An engine commit makes everything before it durable.
      if (op.durable || op.kind == Kind::kCommit) {
        o.must = i + 1;
      }
      if (op.durable && changed) o.durable_change = true;
      if (cut.at == 0) {
        // The dry run: the model must be the store's.
        absl::StatusOr<MState> live = Capture(sv->get());
        if (!live.ok()) {
          errors->push_back(absl::StrCat("op ", i, " (", op.Describe(),
                                         "): read back: ", live.status().ToString()));
          break;
        }
        if (!(*live == next)) {
          errors->push_back(absl::StrCat("op ", i, " (", op.Describe(), "): the store shows ",
                                         live->Describe(), ", the model ", next.Describe()));
          break;
        }
      }
      continue;
    }
    if (!fd->dead()) {
      errors->push_back(
          absl::StrCat("op ", i, " (", op.Describe(), ") failed on a live device: ", s.ToString()));
      break;
    }
    o.in_flight = true;
    if (plant == Plant::kClaimInFlight && op.durable && changed) o.must = i + 1;
    break;
  }
  // Power fails before the close's commit can write a superblock.
  if (!fd->dead()) fd->CrashAtFlush(1);
  (void)(*store)->Close();
  return o;
}

// kDropAckedWrite: the history without the first acknowledged durable op.
void DropAckedWrite(const Workload& w, Outcome* o) {
  if (!o->durable_change) return;
  size_t x = 0;
  while (!(w.ops[x].durable && !(o->history[x + 1] == o->history[x]))) ++x;
  std::vector<MState> h = {o->history[0]};
  for (size_t i = 0; i + 1 < o->history.size(); ++i) {
    MState next = h.back();
    if (i != x) next.Apply(w.ops[i], i);
    h.push_back(next);
  }
  o->history = std::move(h);
}

// The oracle: `got` must equal the model after some prefix j of the ops
// issued with must <= j (see the header).
std::vector<std::string> Judge(const Workload& w, const Outcome& o, const MState& got) {
  const size_t issued = o.history.size() - 1;
  for (size_t j = o.must; j <= issued; ++j) {
    if (o.history[j] == got) return {};
  }
  for (size_t j = 0; j < o.must; ++j) {
    if (o.history[j] == got) {
      return {absl::StrCat("acknowledged durable op ", o.must - 1, " (",
                           w.ops[o.must - 1].Describe(), ") lost: the image holds the state after ",
                           j, " op(s): ", got.Describe())};
    }
  }
  std::vector<std::string> allowed;
  for (size_t j = o.must; j <= issued; ++j) {
    allowed.push_back(absl::StrCat("after ", j, ": ", o.history[j].Describe()));
  }
  const std::string flight =
      o.in_flight ? absl::StrCat("op ", issued - 1, " in flight") : "no op in flight";
  return {absl::StrCat("the image holds ", got.Describe(), ", no allowed prefix state (", flight,
                       "):\n      ", absl::StrJoin(allowed, "\n      "))};
}

struct Stats {
  uint64_t workloads = 0;
  uint64_t images = 0;
  uint64_t bad_images = 0;
  uint64_t violations = 0;   // workloads with at least one bad image (or a run error)
  uint64_t must_images = 0;  // images whose oracle required at least one durable op
  uint64_t replayed = 0;     // mounts that replayed log entries
  std::vector<std::string> reports;
};

// Judges the remounted image of a run (Judge); counts it in `stats`.
void VerifyImage(const Workload& w, Plant plant, Store* store, Outcome o, Stats* stats,
                 std::vector<std::string>* problems) {
  if (plant == Plant::kDropAckedWrite) DropAckedWrite(w, &o);
  if (o.must > 0) ++stats->must_images;
  stats->replayed += store->Stats().log_replayed_entries > 0;
  absl::StatusOr<std::unique_ptr<Subvolume>> sv = store->DefaultSubvolume();
  if (!sv.ok()) {
    problems->push_back(absl::StrCat("default subvolume: ", sv.status().ToString()));
    return;
  }
  absl::StatusOr<MState> got = Capture(sv->get());
  if (!got.ok()) {
    problems->push_back(absl::StrCat("capture: ", got.status().ToString()));
    return;
  }
  for (std::string& p : Judge(w, o, *got)) problems->push_back(std::move(p));
}

// Every cut of one workload: each flush point in the four loss modes, the
// random-subset cuts also crashing the replay's first or second flush, and
// the run without a cut. Returns false when it found a violation.
// `*had_durable` (optional): whether the dry run acknowledged a durable op
// that changed something.
bool RunWorkload(const Workload& w, Plant plant, uint64_t seed, Stats* stats,
                 bool* had_durable = nullptr) {
  ++stats->workloads;
  testing::CrashPlan plan;
  plan.image = &TheBase().image;
  plan.modes = {Mode::kDropAll, Mode::kKeepAll, Mode::kTorn, Mode::kRandomSubset};
  plan.seed = seed;
  plan.k_scale = 7;
  plan.replay_cut = [](uint64_t, uint64_t k, size_t i) -> uint64_t {
    return i == 3 ? 1 + k % 2 : 0;
  };
  plan.judge_uncut = true;
  plan.stop_at_first_failure = false;
  testing::CrashHarness<Outcome> harness(
      std::move(plan),
      [&](FaultDevice* fd, const testing::Cut& c, std::vector<std::string>* errors) {
        return RunOnce(w, fd, c, plant, errors);
      },
      [&](Store* store, const Outcome& run, const Outcome&, std::vector<std::string>* problems) {
        VerifyImage(w, plant, store, run, stats, problems);
      });
  const testing::CrashReport report = harness.Sweep();
  if (had_durable) *had_durable = harness.uncut().durable_change;
  stats->images += report.images;
  stats->bad_images += report.failures.size();
  if (report.ok()) return true;
  ++stats->violations;
  if (stats->reports.size() < 20) {
    stats->reports.push_back(
        absl::StrCat("workload '", w.Describe(), "'\n  ", absl::StrJoin(report.failures, "\n  ")));
  }
  return false;
}

// ---- The generated space ----------------------------------------------------------

// Calls `emit` with every workload of up to `max_ops` ops, in a fixed order.
void Enumerate(uint64_t max_ops, const std::function<void(const Workload&)>& emit) {
  Workload w;
  std::function<void(const MState&)> step = [&](const MState& s) {
    for (const Op& base_op : CatalogOps(s)) {
      for (bool durable : {true, false}) {
        if (base_op.kind == Kind::kCommit && !durable) continue;  // no durability of its own
        Op op = base_op;
        op.durable = durable;
        MState t = s;
        t.Apply(op, w.ops.size());
        w.ops.push_back(op);
        emit(w);
        if (w.ops.size() < max_ops) step(t);
        w.ops.pop_back();
      }
    }
  };
  step(TheBase().model);
}

void PrintStats(const char* what, const Stats& st, double seconds) {
  std::printf("%s: %llu workloads, %llu crash images (%llu requiring a durable op, %llu "
              "replayed a log), %llu violations (%llu workloads), %.1f s\n",
              what, static_cast<unsigned long long>(st.workloads),
              static_cast<unsigned long long>(st.images),
              static_cast<unsigned long long>(st.must_images),
              static_cast<unsigned long long>(st.replayed),
              static_cast<unsigned long long>(st.bad_images),
              static_cast<unsigned long long>(st.violations), seconds);
  for (const std::string& r : st.reports) std::printf("%s\n", r.c_str());
  std::fflush(stdout);
}

// The shard of workload `i`: mixed, so that neighbours (which differ only
// in the last op's durability) land on different shards and shards take
// about the same time.
int ShardOf(uint64_t i) {
  const uint64_t mixed = (i * 0x9E3779B97F4A7C15ull) >> 32;
  return static_cast<int>(mixed % static_cast<uint64_t>(testing::ShardCount()));
}
double Since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The sample (default) or the whole space (--full), this shard's part.
TEST(KvGen, GeneratedWorkloads) {
  const auto start = std::chrono::steady_clock::now();
  uint64_t total = 0;
  Enumerate(MaxOps(), [&](const Workload&) { ++total; });
  testing::WorkloadSample sample(total, MaxOps(), 1500,
                                 testing::Flags().full || !testing::Flags().only.empty());
  const uint64_t seed = sample.seed();
  Stats st;
  uint64_t index = 0;
  Enumerate(MaxOps(), [&](const Workload& w) {
    if (sample.Runs(ShardOf(index++), [&] { return w.Describe(); }))
      RunWorkload(w, Plant::kNone, seed, &st);
  });
  PrintStats(testing::Flags().full ? "full enumeration (this shard)" : "sample (this shard)", st,
             Since(start));
  RecordProperty("workloads", static_cast<int>(st.workloads));
  RecordProperty("images", static_cast<int>(st.images));
  RecordProperty("violations", static_cast<int>(st.bad_images));
  if (st.workloads > 0) {
    EXPECT_GT(st.images, st.workloads) << "no cut inside a workload";
  }
  EXPECT_EQ(st.violations, 0u) << "replay one: --seed=" << seed << " --only='<workload>'";
}

// A few workloads with durable ops, chosen with a fixed seed.
std::vector<Workload> PlantSample(size_t n) {
  std::vector<Workload> all;
  Enumerate(3, [&](const Workload& w) {
    for (const Op& o : w.ops) {
      if (o.durable) {
        all.push_back(w);
        return;
      }
    }
  });
  std::mt19937_64 rng(42);
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::min(n, all.size()));
  return all;
}

// The generator's own test: with the oracle told something false, it must
// report violations, on exactly the workloads where the lie shows (every
// workload whose dry run acknowledged a durable change), and none without.
TEST(KvGen, PlantedBugsAreCaught) {
  if (testing::ShardIndex() != 0) return;  // one shard is enough
  const std::vector<Workload> sample = PlantSample(24);
  ASSERT_EQ(sample.size(), 24u);
  for (Plant plant : {Plant::kNone, Plant::kClaimInFlight, Plant::kDropAckedWrite}) {
    SCOPED_TRACE(absl::StrCat("plant ", static_cast<int>(plant)));
    Stats st;
    size_t eligible = 0, caught = 0;
    for (const Workload& w : sample) {
      bool durable = false;
      const bool clean = RunWorkload(w, plant, 5, &st, &durable);
      eligible += durable;
      caught += !clean;
      if (plant != Plant::kNone) {
        EXPECT_EQ(!clean, durable) << "workload '" << w.Describe() << "' "
                                   << (clean ? "not caught" : "caught without a durable change");
      }
    }
    PrintStats(plant == Plant::kNone            ? "planted: none"
               : plant == Plant::kClaimInFlight ? "planted: cut durable op claimed acknowledged"
                                                : "planted: acknowledged write dropped from model",
               st, 0);
    EXPECT_GT(eligible, sample.size() / 2);
    if (plant == Plant::kNone) {
      EXPECT_EQ(caught, 0u);
    } else {
      EXPECT_EQ(caught, eligible);
      EXPECT_GT(st.bad_images, 0u);
    }
  }
  // One named workload: a durable put of a new key.
  Workload w;
  Op put;
  put.kind = Kind::kPut;
  put.key = "c";
  put.durable = true;
  w.ops.push_back(put);
  for (Plant plant : {Plant::kClaimInFlight, Plant::kDropAckedWrite}) {
    Stats st;
    EXPECT_FALSE(RunWorkload(w, plant, 5, &st)) << "plant " << static_cast<int>(plant);
  }
}

}  // namespace
}  // namespace kvgen
}  // namespace cowkv

COWKV_SELF_SHARDED_TEST_MAIN()
