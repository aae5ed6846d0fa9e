// Send and the subvolume digest: engine/send's Sender and Digester over
// read-only trees, in pieces, with the shared barrier held for each piece
// and released between them (a slow reader of the stream never holds up a
// commit). A snapshot is read without its tree lock: a read-only tree has
// no writer, and the one thing that can change it — deletion and the
// cleaner — needs the exclusive barrier; each piece first checks that the
// trees are still the ones the send started with.
#include <optional>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/send/digest.h"
#include "engine/send/resume_token.h"
#include "engine/send/sender.h"
#include "engine/store/store_impl.h"

namespace cowkv {

namespace {

class DeviceReader : public send::DataReader {
 public:
  explicit DeviceReader(BlockDevice* dev) : dev_(dev) {}
  absl::Status ReadAt(uint64_t bytenr, char* buf, size_t n) override {
    if (bytenr + n > dev_->Size() || bytenr + n < bytenr) {
      CorruptionSite site;
      site.what = "data extent";
      site.bytenr = bytenr;
      return COWKV_CORRUPTION(site, "extent past the end of the device", absl::StrCat(bytenr + n),
                              absl::StrCat(dev_->Size()));
    }
    return dev_->ReadAt(bytenr, buf, n);
  }

 private:
  BlockDevice* const dev_;
};

send::Uuid ToUuid(absl::string_view bytes) {
  send::Uuid u{};
  for (size_t i = 0; i < u.size() && i < bytes.size(); ++i) u[i] = static_cast<uint8_t>(bytes[i]);
  return u;
}

// What a stream calls a subvolume: the identity it was received with, if
// it was received (so a chain of relays keeps one identity), else its own.
std::pair<std::string, uint64_t> StreamIdentity(const SubvolInfo& s) {
  if (!s.received_uuid.empty()) return {s.received_uuid, s.received_generation};
  return {s.uuid, s.generation};
}

// `id` and its snapshot sources, as far as they are live (plus the first
// one that is not).
std::set<uint64_t> Lineage(const Subvolumes& subvols, uint64_t id) {
  std::set<uint64_t> out;
  for (int hops = 0; id != 0 && hops < 100000 && out.insert(id).second; ++hops) {
    absl::StatusOr<SubvolInfo> info = subvols.Get(id);
    if (!info.ok()) break;
    id = info->parent_id;
  }
  return out;
}

}  // namespace

struct StoreImpl::SendPlan {
  uint64_t snapshot = 0, parent = 0;
  Tree* snapshot_tree = nullptr;
  Tree* parent_tree = nullptr;
  send::StreamHeader header;
  std::optional<send::ResumePoint> resume;
};

namespace {
// The read-only subvolume whose stream identity is (uuid, gen), if any.
std::optional<SubvolInfo> ByIdentity(const Subvolumes& subvols, const send::Uuid& uuid,
                                     uint64_t gen) {
  const std::string want(reinterpret_cast<const char*>(uuid.data()), uuid.size());
  for (const SubvolInfo& s : subvols.List()) {
    if ((s.flags & format::kRootFlagReadOnly) && StreamIdentity(s) == std::make_pair(want, gen)) {
      return s;
    }
  }
  return std::nullopt;
}
}  // namespace

absl::Status StoreImpl::PlanResumedSend(const SendOptions& o, SendPlan* p) {
  COWKV_ASSIGN_OR_RETURN(send::ResumePoint t, send::ParseResumeToken(o.resume_token));
  std::optional<SubvolInfo> snap = ByIdentity(*subvols_, t.uuid, t.stransid);
  if (!snap.has_value() || (!o.snapshot.empty() && snap->name != o.snapshot)) {
    return send::ResumeMismatch(
        absl::StrCat("the token's snapshot (generation ", t.stransid, ") is not ",
                     o.snapshot.empty() ? "a read-only subvolume here" : o.snapshot),
        true);
  }
  std::optional<SubvolInfo> parent;
  if (t.parent_stransid != 0) {
    parent = ByIdentity(*subvols_, t.parent_uuid, t.parent_stransid);
    if (!parent.has_value() || (!o.parent.empty() && parent->name != o.parent)) {
      return send::ResumeMismatch("the token's parent snapshot is not here", true);
    }
  } else if (!o.parent.empty()) {
    return send::ResumeMismatch("the token is of a full stream, not one against a parent", false);
  }
  SendOptions named = o;
  named.snapshot = snap->name;
  named.parent = parent.has_value() ? parent->name : "";
  named.resume_token.clear();
  COWKV_ASSIGN_OR_RETURN(*p, PlanSend(named));
  p->resume = std::move(t);
  return absl::OkStatus();
}

absl::StatusOr<StoreImpl::SendPlan> StoreImpl::PlanSend(const SendOptions& o) {
  SendPlan p;
  COWKV_ASSIGN_OR_RETURN(p.snapshot, subvols_->Lookup(o.snapshot));
  COWKV_ASSIGN_OR_RETURN(SubvolInfo snap, subvols_->Get(p.snapshot));
  if (!(snap.flags & format::kRootFlagReadOnly)) {
    return absl::FailedPreconditionError(
        absl::StrCat("send: '", o.snapshot,
                     "' is writable; send a read-only snapshot of it "
                     "(cowkv subvolume snapshot -r)"));
  }
  COWKV_ASSIGN_OR_RETURN(p.snapshot_tree, TreeFor(p.snapshot));
  p.header.nodesize = txn_->superblock().nodesize;
  p.header.sectorsize = txn_->superblock().sectorsize;
  const auto [uuid, gen] = StreamIdentity(snap);
  p.header.uuid = ToUuid(uuid);
  p.header.stransid = gen;
  p.header.ctime_ms = snap.ctime_ms;
  p.header.name = snap.name;
  if (o.parent.empty()) return p;
  COWKV_ASSIGN_OR_RETURN(p.parent, subvols_->Lookup(o.parent));
  COWKV_ASSIGN_OR_RETURN(SubvolInfo parent, subvols_->Get(p.parent));
  if (!(parent.flags & format::kRootFlagReadOnly)) {
    return absl::FailedPreconditionError(
        absl::StrCat("send: parent '", o.parent, "' is writable; it must be a read-only snapshot"));
  }
  const std::set<uint64_t> a = Lineage(*subvols_, p.snapshot);
  const std::set<uint64_t> b = Lineage(*subvols_, p.parent);
  bool related = false;
  for (uint64_t id : a) related = related || b.count(id) != 0;
  if (!related) {
    return absl::FailedPreconditionError(absl::StrCat("send: '", o.snapshot, "' and parent '",
                                                      o.parent, "' share no snapshot lineage"));
  }
  COWKV_ASSIGN_OR_RETURN(p.parent_tree, TreeFor(p.parent));
  const auto [puuid, pgen] = StreamIdentity(parent);
  p.header.parent_uuid = ToUuid(puuid);
  p.header.parent_stransid = pgen;
  return p;
}

absl::StatusOr<SendOptions> StoreImpl::ResumeSendOptions(absl::string_view token) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  SendOptions o;
  o.resume_token = std::string(token);
  absl::ReaderMutexLock l(&mu_);
  SendPlan p;
  COWKV_RETURN_IF_ERROR(PlanResumedSend(o, &p));
  COWKV_ASSIGN_OR_RETURN(SubvolInfo snap, subvols_->Get(p.snapshot));
  o.snapshot = snap.name;
  if (p.parent != 0) {
    COWKV_ASSIGN_OR_RETURN(SubvolInfo parent, subvols_->Get(p.parent));
    o.parent = parent.name;
  }
  return o;
}

absl::StatusOr<SendReport> StoreImpl::Send(const SendOptions& o, const SendSink& sink) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  SendPlan plan;
  {
    absl::ReaderMutexLock l(&mu_);
    if (o.resume_token.empty()) {
      COWKV_ASSIGN_OR_RETURN(plan, PlanSend(o));
    } else {
      COWKV_RETURN_IF_ERROR(PlanResumedSend(o, &plan));
    }
  }
  DeviceReader reader(device_);
  std::optional<send::Sender> sender;
  if (plan.resume.has_value()) {
    sender.emplace(plan.snapshot_tree, plan.parent_tree, plan.header, &reader, *plan.resume);
    if (options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kResumeSkipsOneItem) {
      sender->TEST_skip_items(1);
    }
  } else {
    sender.emplace(plan.snapshot_tree, plan.parent_tree, plan.header, &reader);
  }
  if (options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kSendSkipsChangedSubtree) {
    sender->TEST_diff().TEST_set_skip_any_pointer_at_level(1);
  }
  const size_t piece = std::max<size_t>(o.piece_bytes, 4096);
  for (bool done = false; !done;) {
    std::string out;
    {
      absl::ReaderMutexLock l(&mu_);
      COWKV_RETURN_IF_ERROR(CheckOpen());
      if (txn_->fs_tree(plan.snapshot) != plan.snapshot_tree ||
          (plan.parent != 0 && txn_->fs_tree(plan.parent) != plan.parent_tree)) {
        return absl::NotFoundError("send: a subvolume being sent was deleted");
      }
      COWKV_ASSIGN_OR_RETURN(done, sender->Fill(&out, piece));
    }
    if (!out.empty()) COWKV_RETURN_IF_ERROR(sink(out));
  }
  const send::SendStats st = sender->stats();
  SendReport r;
  r.records = st.records;
  r.bytes = st.bytes;
  r.items = st.items;
  r.deletes = st.deletes;
  r.clones = st.clones;
  r.data_bytes = st.data_bytes;
  r.nodes_read = st.nodes_read;
  r.subtrees_skipped = st.subtrees_skipped;
  return r;
}

absl::StatusOr<SubvolumeDigest> StoreImpl::DigestSubvolume(absl::string_view name) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  DeviceReader reader(device_);
  send::Digester d;
  uint64_t id = 0;
  for (bool done = false; !done;) {
    absl::ReaderMutexLock l(&mu_);
    COWKV_RETURN_IF_ERROR(CheckOpen());
    COWKV_ASSIGN_OR_RETURN(uint64_t now, subvols_->Lookup(name));
    if (id != 0 && now != id) return absl::NotFoundError("digest: the subvolume was replaced");
    id = now;
    COWKV_ASSIGN_OR_RETURN(Tree * tree, TreeFor(id));
    absl::ReaderMutexLock tl(TreeLock(id));
    COWKV_ASSIGN_OR_RETURN(done, d.Step(tree, &reader, 4096));
  }
  SubvolumeDigest out;
  out.sha256_hex = d.Hex();
  out.items = d.items();
  out.data_bytes = d.data_bytes();
  return out;
}

}  // namespace cowkv
