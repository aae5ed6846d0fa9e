// `cowkv subvolume create|list|show|rename|delete|snapshot|sync` (btrfs subvolume's
// verbs, over the Subvolumes service).
//
//   cowkv subvolume create NAME
//   cowkv subvolume list [-r] [-s] [--sort=[+|-]FIELD[,...]]
//   cowkv subvolume show NAME
//   cowkv subvolume rename NAME NEW_NAME
//   cowkv subvolume delete NAME...
//   cowkv subvolume snapshot [-r] SOURCE NAME
//   cowkv subvolume sync [ID...]
//
// Names are 1..255 bytes without '/' or NUL ("data@2026-11-22" is fine);
// a bad name is refused before any call (exit 3). Text output follows
// btrfs-progs' wording; --json prints the SubvolumeInfo fields.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

struct SubvolumeArgs {
  std::vector<std::string> names;  // positional NAME(s)
  std::string name;
  std::string new_name;
  bool read_only = false;
  // list
  bool list_read_only = false;
  bool list_snapshots = false;
  std::string sort;
  // sync
  std::vector<uint64_t> ids;
};

// Fails with exit 3 if a name is not one the server could accept.
int CheckNames(absl::string_view op, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    std::string problem = SubvolumeNameProblem(n);
    if (!problem.empty()) return Fail(op, problem, kExitInvalidArgument);
  }
  return kExitOk;
}

int PrintInfo(absl::string_view op, const Globals& g,
              const v1::SubvolumeInfo& info, const std::string& text) {
  if (!g.json) return Emit(op, text);
  Json j = JsonObject();
  j.update(SubvolumeJson(info));
  return Emit(op, DumpJson(j));
}

int RunCreate(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume create";
  if (int rc = CheckNames(kOp, {a.name}); rc != kExitOk) return rc;
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::CreateSubvolumeRequest req;
  req.set_name(a.name);
  v1::SubvolumeInfo info;
  grpc::Status s = Call(*conn, conn->subvolumes(),
                        &v1::Subvolumes::Stub::Create, req, &info);
  if (!s.ok()) return RpcFail(kOp, s, g);
  return PrintInfo(kOp, g, info,
                   absl::StrCat("Create subvolume '", EscapeBytes(a.name),
                                "' (id ", info.id(), ")\n"));
}

int RunList(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume list";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  // The server filters and sorts (and names a bad sort key).
  v1::ListSubvolumesRequest req;
  req.set_read_only(a.list_read_only);
  req.set_snapshots_only(a.list_snapshots);
  if (!a.sort.empty()) req.add_sort(a.sort);
  v1::ListSubvolumesResponse resp;
  grpc::Status s = Call(*conn, conn->subvolumes(), &v1::Subvolumes::Stub::List, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  std::vector<v1::SubvolumeInfo> list(resp.subvolumes().begin(),
                                      resp.subvolumes().end());
  if (!g.json) return Emit(kOp, SubvolumeTable(list));
  Json j = JsonObject();
  j["subvolume-list"] = Json::array();
  for (const v1::SubvolumeInfo& info : list) {
    j["subvolume-list"].push_back(SubvolumeJson(info));
  }
  return Emit(kOp, DumpJson(j));
}

int RunShow(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume show";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::ShowSubvolumeRequest req;
  req.set_name(a.name);
  v1::SubvolumeInfo info;
  grpc::Status s = Call(*conn, conn->subvolumes(), &v1::Subvolumes::Stub::Show,
                        req, &info);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return Emit(kOp, SubvolumeShow(info));
  Json j = JsonObject();
  j.update(SubvolumeJson(info));
  j["snapshots"] = Json::array();
  for (const std::string& snap : info.snapshots()) j["snapshots"].push_back(snap);
  return Emit(kOp, DumpJson(j));
}

int RunRename(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume rename";
  if (int rc = CheckNames(kOp, {a.new_name}); rc != kExitOk) return rc;
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::RenameSubvolumeRequest req;
  req.set_name(a.name);
  req.set_new_name(a.new_name);
  v1::RenameSubvolumeResponse resp;
  grpc::Status s = Call(*conn, conn->subvolumes(),
                        &v1::Subvolumes::Stub::Rename, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) {
    return Emit(kOp, absl::StrCat("Rename subvolume '", EscapeBytes(a.name),
                                  "' to '", EscapeBytes(a.new_name), "'\n"));
  }
  Json j = JsonObject();
  j["name"] = a.name;
  j["new_name"] = a.new_name;
  return Emit(kOp, DumpJson(j));
}

int RunDelete(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume delete";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  Json deleted = Json::array();
  for (const std::string& name : a.names) {
    v1::DeleteSubvolumeRequest req;
    req.set_name(name);
    v1::DeleteSubvolumeResponse resp;
    grpc::Status s = Call(*conn, conn->subvolumes(),
                          &v1::Subvolumes::Stub::Delete, req, &resp);
    if (!s.ok()) return RpcFail(kOp, s, g);
    deleted.push_back(name);
    if (!g.json) {
      rc = Emit(kOp, absl::StrCat("Delete subvolume '", EscapeBytes(name),
                                  "'\n"));
      if (rc != kExitOk) return rc;
    }
  }
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["deleted"] = deleted;
  return Emit(kOp, DumpJson(j));
}

int RunSnapshot(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume snapshot";
  if (int rc = CheckNames(kOp, {a.new_name}); rc != kExitOk) return rc;
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::SnapshotRequest req;
  req.set_source(a.name);
  req.set_name(a.new_name);
  req.set_read_only(a.read_only);
  v1::SubvolumeInfo info;
  grpc::Status s = Call(*conn, conn->subvolumes(),
                        &v1::Subvolumes::Stub::Snapshot, req, &info);
  if (!s.ok()) return RpcFail(kOp, s, g);
  return PrintInfo(
      kOp, g, info,
      absl::StrCat("Create a ", a.read_only ? "readonly " : "",
                   "snapshot of '", EscapeBytes(a.name), "' in '",
                   EscapeBytes(a.new_name), "' (id ", info.id(), ")\n"));
}

int RunSync(const SubvolumeArgs& a, const Globals& g) {
  constexpr char kOp[] = "subvolume sync";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::SyncSubvolumesRequest req;
  for (uint64_t id : a.ids) req.add_ids(id);
  // The server stops a little before the call's deadline, so a timeout
  // comes back with the ids still pending rather than as a bare deadline.
  if (g.timeout_seconds > 0) {
    const double ms = g.timeout_seconds * 1000;
    req.set_timeout_ms(static_cast<uint64_t>(std::max(1.0, ms - std::min(500.0, ms / 10))));
  }
  v1::SyncSubvolumesResponse resp;
  grpc::Status s = Call(*conn, conn->subvolumes(), &v1::Subvolumes::Stub::Sync, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) {
    std::string text;
    for (uint64_t id : resp.synced()) {
      absl::StrAppend(&text, "Subvolume id ", id, " is gone\n");
    }
    return text.empty() ? kExitOk : Emit(kOp, text);
  }
  Json j = JsonObject();
  j["synced"] = Json::array();
  for (uint64_t id : resp.synced()) j["synced"].push_back(id);
  return Emit(kOp, DumpJson(j));
}

}  // namespace

RunFn AddSubvolume(CLI::App* app, const GlobalsPtr& g) {
  CommandGroup group(app, "subvolume",
                     "Create, list, show, rename, delete and snapshot "
                     "subvolumes (online)");
  auto a = std::make_shared<SubvolumeArgs>();
  group.Add("create", "Create an empty subvolume",
            [a, g] { return RunCreate(*a, *g); })
      ->add_option("NAME", a->name, "Name (1..255 bytes, no '/')")
      ->required();
  CLI::App* list =
      group.Add("list", "List every subvolume and snapshot", [a, g] { return RunList(*a, *g); });
  list->add_flag("-r,--readonly", a->list_read_only, "Only read-only subvolumes");
  list->add_flag("-s,--snapshots-only", a->list_snapshots, "Only snapshots");
  list->add_option("--sort", a->sort,
                   "Sort by [+|-]FIELD[,...], FIELD one of gen, ogen, rootid, "
                   "path ('-' = descending; default rootid)")
      ->type_name("KEYS");
  group.Add("show", "Show one subvolume", [a, g] { return RunShow(*a, *g); })
      ->add_option("NAME", a->name, "Subvolume name")
      ->required();
  CLI::App* rename = group.Add("rename", "Rename a subvolume",
                               [a, g] { return RunRename(*a, *g); });
  rename->add_option("NAME", a->name, "Current name")->required();
  rename->add_option("NEW_NAME", a->new_name, "New name")->required();
  group.Add("delete", "Delete subvolumes (space is freed in the background)",
            [a, g] { return RunDelete(*a, *g); })
      ->add_option("NAME", a->names, "Subvolume names")
      ->required();
  CLI::App* snap = group.Add("snapshot", "Snapshot SOURCE as NAME (O(1))",
                             [a, g] { return RunSnapshot(*a, *g); });
  snap->add_flag("-r,--read-only", a->read_only,
                 "Make the snapshot read-only (writes to it are refused)");
  snap->add_option("SOURCE", a->name, "Subvolume to snapshot")->required();
  snap->add_option("NAME", a->new_name, "Name of the snapshot")->required();
  group
      .Add("digest", "SHA-256 of a subvolume's files, KV items and data (equal after send/receive)",
           [a, g] { return RunSubvolumeDigest(a->name, *g); })
      ->add_option("NAME", a->name, "Subvolume name")
      ->required();
  group
      .Add("sync",
           "Wait until deleted subvolumes' space is freed (all deleted so "
           "far, or the given ids)",
           [a, g] { return RunSync(*a, *g); })
      ->add_option("ID", a->ids, "Ids of deleted subvolumes");
  return group.Runner();
}

}  // namespace cli
}  // namespace cowkv
