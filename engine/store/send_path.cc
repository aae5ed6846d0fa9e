// Send and the subvolume digest: engine/send's Sender and Digester over
// read-only trees, in pieces, with the shared barrier held for each piece
// and released between them (a slow reader of the stream never holds up a
// commit). A snapshot is read without its tree lock: a read-only tree has
// no writer, and the one thing that can change it — deletion and the
// cleaner — needs the exclusive barrier; each piece first checks that the
// trees are still the ones the send started with.
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/status.h"
#include "engine/send/digest.h"
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
};

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

absl::StatusOr<SendReport> StoreImpl::Send(const SendOptions& o, const SendSink& sink) {
  COWKV_RETURN_IF_ERROR(CheckOpen());
  SendPlan plan;
  {
    absl::ReaderMutexLock l(&mu_);
    COWKV_ASSIGN_OR_RETURN(plan, PlanSend(o));
  }
  DeviceReader reader(device_);
  send::Sender sender(plan.snapshot_tree, plan.parent_tree, plan.header, &reader);
  if (options_.test_hooks.planted_bug == Options::TestHooks::PlantedBug::kSendSkipsChangedSubtree) {
    sender.TEST_diff().TEST_set_skip_any_pointer_at_level(1);
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
      COWKV_ASSIGN_OR_RETURN(done, sender.Fill(&out, piece));
    }
    if (!out.empty()) COWKV_RETURN_IF_ERROR(sink(out));
  }
  const send::SendStats st = sender.stats();
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
