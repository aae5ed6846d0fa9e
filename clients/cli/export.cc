// `cowkv export --dir DIR` and `cowkv import --dir DIR` (issue 19): every
// subvolume and snapshot of a store as send streams in a directory, to
// move a store to another device (of another size) or another machine.
//
// export: takes a read-only snapshot NAME@export-<UTC time> of each
// writable subvolume (its stream recreates it), then groups the read-only
// subvolumes by snapshot lineage (the engine's: the chain of parent_ids,
// deleted ones included) and sends each group oldest first (by creation
// generation): the first in full, each next as a difference from the one
// before, so shared data is sent once per lineage. Streams go to
// DIR/NNNNNN.stream, the order to DIR/export.json (written last: a
// directory without it is an unfinished export that import refuses). The
// export snapshots are deleted from the source at the end. The default
// subvolume is exported only if it holds anything (see import).
//
// import: checks every file's size, SHA-256 and header and the order
// (each stream's parent earlier) and that no name is taken on the target,
// then receives the streams in order under their names; then recreates
// each writable subvolume as a writable snapshot of its export snapshot
// and deletes the export snapshots. A failure deletes what it made. The
// target's default subvolume can be neither replaced nor renamed, so a
// non-empty exported default arrives as `default@imported` (writable).
//
// Carried: names, read-only flags, every file and KV item with its
// revisions (digests equal). Not carried (as send): the KV history and
// leases; nor ids, uuids (received ones record the sender's), parent_id
// links, generations and creation times.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/backup.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"
#include "clients/cli/stream_files.h"
#include "cowkv/status_macros.h"

namespace cowkv {
namespace cli {
namespace {

constexpr char kDefault[] = "default";
constexpr char kImportedDefault[] = "default@imported";

struct ExportArgs {
  std::string dir;
};

grpc::Status ListAll(Connection& conn, std::vector<v1::SubvolumeInfo>* out) {
  v1::ListSubvolumesRequest req;
  v1::ListSubvolumesResponse resp;
  grpc::Status s = Call(conn, conn.subvolumes(), &v1::Subvolumes::Stub::List, req, &resp);
  out->assign(resp.subvolumes().begin(), resp.subvolumes().end());
  return s;
}

// The lineage key of each subvolume: the top of its parent_id chain among
// live subvolumes, or the deleted id the chain ends at (the engine's
// lineage rule, engine/store/send_path.cc: two subvolumes share a lineage
// when their chains meet).
uint64_t LineageKey(const std::map<uint64_t, const v1::SubvolumeInfo*>& by_id, uint64_t id) {
  for (size_t hops = 0; hops <= by_id.size(); ++hops) {
    const v1::SubvolumeInfo* s = by_id.at(id);
    if (s->parent_id() == 0) return id;
    if (by_id.count(s->parent_id()) == 0) return s->parent_id();
    id = s->parent_id();
  }
  return id;  // a cycle cannot happen (ids grow); stop anyway
}

// The read-only subvolumes in send order: lineages by their oldest member,
// each oldest first.
std::vector<const v1::SubvolumeInfo*> SendOrder(const std::vector<v1::SubvolumeInfo>& all) {
  std::map<uint64_t, const v1::SubvolumeInfo*> by_id;
  for (const v1::SubvolumeInfo& s : all) by_id[s.id()] = &s;
  std::map<uint64_t, std::vector<const v1::SubvolumeInfo*>> groups;
  for (const v1::SubvolumeInfo& s : all) {
    if (s.read_only()) groups[LineageKey(by_id, s.id())].push_back(&s);
  }
  auto older = [](const v1::SubvolumeInfo* a, const v1::SubvolumeInfo* b) {
    return std::make_pair(a->creation_generation(), a->id()) <
           std::make_pair(b->creation_generation(), b->id());
  };
  std::vector<std::vector<const v1::SubvolumeInfo*>> ordered;
  for (auto& [key, members] : groups) {
    std::sort(members.begin(), members.end(), older);
    ordered.push_back(members);
  }
  std::sort(ordered.begin(), ordered.end(),
            [&](const auto& a, const auto& b) { return older(a.front(), b.front()); });
  std::vector<const v1::SubvolumeInfo*> out;
  for (const auto& g : ordered) out.insert(out.end(), g.begin(), g.end());
  return out;
}

// Whether the default subvolume holds anything (else it is not exported).
grpc::Status DefaultHoldsItems(Connection& conn, bool* holds) {
  v1::DigestSubvolumeRequest req;
  req.set_name(kDefault);
  v1::DigestSubvolumeResponse resp;
  grpc::ClientContext context;
  conn.Prepare(&context, /*stream=*/true);
  grpc::Status s = conn.subvolumes().Digest(&context, req, &resp);
  *holds = resp.items() > 0;
  return s;
}

// Takes NAME@export-STAMP of every writable subvolume to export; fills
// `writable_as` (snapshot name -> the writable name it recreates).
grpc::Status SnapshotWritables(Connection& conn, const std::vector<v1::SubvolumeInfo>& all,
                               std::map<std::string, std::string>* writable_as) {
  const std::string stamp = UtcStamp(NowUnixMs());
  for (const v1::SubvolumeInfo& s : all) {
    if (s.read_only()) continue;
    if (s.name() == kDefault) {
      bool holds = false;
      grpc::Status d = DefaultHoldsItems(conn, &holds);
      if (!d.ok()) return d;
      if (!holds) continue;
    }
    const std::string snap = absl::StrCat(s.name(), "@export-", stamp);
    v1::SubvolumeInfo info;
    grpc::Status st = SnapshotSubvolume(conn, s.name(), snap, true, &info);
    if (!st.ok()) return st;
    (*writable_as)[snap] = s.name();
  }
  return grpc::Status::OK;
}

// Sends every read-only subvolume in SendOrder to DIR. On failure *rpc or
// the returned status says why.
absl::StatusOr<Manifest> SendAll(Connection& conn, const std::string& dir,
                                 const std::map<std::string, std::string>& writable_as,
                                 grpc::Status* rpc) {
  std::vector<v1::SubvolumeInfo> all;
  *rpc = ListAll(conn, &all);
  if (!rpc->ok()) return absl::CancelledError("list failed");
  Manifest m{"export", "", {}};
  std::map<uint64_t, std::string> lineage_last;  // lineage key -> last sent name
  std::map<uint64_t, const v1::SubvolumeInfo*> by_id;
  for (const v1::SubvolumeInfo& s : all) by_id[s.id()] = &s;
  for (const v1::SubvolumeInfo* s : SendOrder(all)) {
    const uint64_t key = LineageKey(by_id, s->id());
    const std::string parent = lineage_last.count(key) ? lineage_last[key] : "";
    const std::string file = absl::StrFormat("%06d.stream", m.streams.size() + 1);
    absl::StatusOr<StreamEntry> e = SendToDir(conn, s->name(), parent, dir, file, rpc);
    if (!e.ok()) return e.status();
    auto w = writable_as.find(s->name());
    if (w != writable_as.end()) e->writable_as = w->second;
    m.streams.push_back(*std::move(e));
    lineage_last[key] = s->name();
  }
  return m;
}

int RunExport(const ExportArgs& a, const Globals& g) {
  constexpr char kOp[] = "export";
  if (absl::Status s = EnsureDir(a.dir); !s.ok()) return StatusFail(kOp, s);
  absl::StatusOr<Manifest> old = LoadManifest(a.dir, kExportManifest);
  if (old.status().code() != absl::StatusCode::kNotFound) {
    return Fail(kOp, absl::StrCat(a.dir, " already holds an export"), kExitExists);
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  std::vector<v1::SubvolumeInfo> all;
  grpc::Status s = ListAll(*conn, &all);
  if (!s.ok()) return RpcFail(kOp, s, g);
  std::map<std::string, std::string> writable_as;
  s = SnapshotWritables(*conn, all, &writable_as);
  absl::StatusOr<Manifest> m = absl::CancelledError("not sent");
  if (s.ok()) m = SendAll(*conn, a.dir, writable_as, &s);
  absl::Status saved = m.ok() ? SaveManifest(a.dir, kExportManifest, *m) : m.status();
  for (const auto& [snap, name] : writable_as) {
    grpc::Status d = DeleteSubvolume(*conn, snap);  // the source is as it was
    if (!d.ok() && s.ok() && saved.ok()) s = d;
  }
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!saved.ok()) return StatusFail(kOp, saved);
  uint64_t bytes = 0;
  for (const StreamEntry& e : m->streams) bytes += e.bytes;
  if (g.json) {
    Json j = ManifestToJson(*m);
    j["bytes"] = bytes;
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat("Exported ", m->streams.size(), " streams (", writable_as.size(),
                                " writable subvolumes), ", bytes, " bytes to ", a.dir, "\n"));
}

// The name a writable subvolume gets on import.
std::string ImportedName(const std::string& writable_as) {
  return writable_as == kDefault ? kImportedDefault : writable_as;
}

// Every name import will make, none taken on the target.
absl::Status CheckNamesFree(const std::vector<v1::SubvolumeInfo>& target, const Manifest& m) {
  std::set<std::string> taken;
  for (const v1::SubvolumeInfo& s : target) taken.insert(s.name());
  for (const StreamEntry& e : m.streams) {
    for (const std::string& n :
         {e.snapshot, e.writable_as.empty() ? "" : ImportedName(e.writable_as)}) {
      if (!n.empty() && taken.count(n)) {
        return absl::AlreadyExistsError(
            absl::StrCat("the target already has a subvolume '", n, "'; import into a new store"));
      }
    }
  }
  return absl::OkStatus();
}

// Receives every stream, then recreates the writable subvolumes and drops
// the export snapshots. On failure deletes everything it made.
grpc::Status ImportAll(Connection& conn, const std::string& dir, const Manifest& m) {
  std::vector<std::string> made;
  grpc::Status s;
  for (const StreamEntry& e : m.streams) {
    v1::ReceiveResponse resp;
    s = ReceiveFileAs(conn, absl::StrCat(dir, "/", e.file), e.snapshot, &resp);
    if (!s.ok()) break;
    made.push_back(e.snapshot);
  }
  for (size_t i = 0; s.ok() && i < m.streams.size(); ++i) {
    const StreamEntry& e = m.streams[i];
    if (e.writable_as.empty()) continue;
    v1::SubvolumeInfo info;
    s = SnapshotSubvolume(conn, e.snapshot, ImportedName(e.writable_as), false, &info);
    if (s.ok()) made.push_back(ImportedName(e.writable_as));
  }
  if (!s.ok()) {
    for (auto it = made.rbegin(); it != made.rend(); ++it) (void)DeleteSubvolume(conn, *it);
    return s;
  }
  for (const StreamEntry& e : m.streams) {
    if (e.writable_as.empty()) continue;
    grpc::Status d = DeleteSubvolume(conn, e.snapshot);
    if (!d.ok()) return d;
  }
  return grpc::Status::OK;
}

absl::StatusOr<Manifest> CheckExportDir(const std::string& dir) {
  absl::StatusOr<Manifest> m = LoadManifest(dir, kExportManifest);
  if (!m.ok()) return m.status();
  if (m->kind != "export") {
    return absl::FailedPreconditionError(absl::StrCat(dir, " holds backups, not an export"));
  }
  COWKV_RETURN_IF_ERROR(CheckExportOrder(m->streams));
  for (const StreamEntry& e : m->streams) COWKV_RETURN_IF_ERROR(CheckStreamFile(dir, e));
  return m;
}

int RunImport(const ExportArgs& a, const Globals& g) {
  constexpr char kOp[] = "import";
  absl::StatusOr<Manifest> m = CheckExportDir(a.dir);
  if (!m.ok()) return StatusFail(kOp, m.status());
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  std::vector<v1::SubvolumeInfo> target;
  grpc::Status s = ListAll(*conn, &target);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (absl::Status c = CheckNamesFree(target, *m); !c.ok()) return StatusFail(kOp, c);
  s = ImportAll(*conn, a.dir, *m);
  if (!s.ok()) return RpcFail(kOp, s, g);
  Json names = Json::array();
  for (const StreamEntry& e : m->streams) {
    names.push_back(e.writable_as.empty() ? e.snapshot : ImportedName(e.writable_as));
  }
  if (g.json) {
    Json j = JsonObject();
    j["subvolumes"] = names;
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat("Imported ", names.size(), " subvolumes from ", a.dir, "\n"));
}

}  // namespace

RunFn AddExport(CLI::App* app, const GlobalsPtr& g) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app->add_subcommand(
      "export", "Send every subvolume and snapshot to DIR (for import into another store)");
  cmd->add_option("--dir", a->dir, "Export directory (made if missing; must hold no export)")
      ->required();
  return [a, g] { return RunExport(*a, *g); };
}

RunFn AddImport(CLI::App* app, const GlobalsPtr& g) {
  auto a = std::make_shared<ExportArgs>();
  CLI::App* cmd = app->add_subcommand("import", "Receive an export from DIR into this (new) store");
  cmd->add_option("--dir", a->dir, "Export directory")->required();
  return [a, g] { return RunImport(*a, *g); };
}

}  // namespace cli
}  // namespace cowkv
