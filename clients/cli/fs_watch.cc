// `cowkv fs watch`: prints the changes of the file tree under a path as
// they become durable, like `inotifywait -m` (docs/cli.md "Online
// commands"; docs/design.md "File watch"):
//
//   cowkv fs watch [-s NAME] [--rev N] [--max-events N] [--json] PATH_PREFIX
//
// One line per event: the path, the event (CREATE, MKDIR, SYMLINK, LINK,
// UNLINK, RMDIR, RENAME, EXCHANGE, MODIFY, ATTRIB, XATTR) and for RENAME
// and EXCHANGE the other path; --json prints one object per event
// (revision, type, ino, path, new_path, paths_lost). It runs until
// interrupted, --max-events events were printed, or the server ends the
// watcher (a start before what is recorded, deleted subvolume, slow
// reader, server stop): then the reason on stderr and a non-zero exit.
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "clients/cli/fs_commands.h"
#include "clients/cli/kv_commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {

namespace {

struct FsWatchArgs {
  std::string subvolume = "default";
  std::string prefix;
  uint64_t rev = 0;
  uint64_t max_events = 0;
};

std::string TypeName(const v1::FileWatchEvent& e) {
  return v1::FileWatchEvent::Type_Name(e.type());
}

std::string EventText(const v1::FileWatchEvent& e) {
  if (e.paths_lost()) return absl::StrCat("? ", TypeName(e), " (paths too long to record)\n");
  const std::string path = e.path().empty() ? "/" : e.path();
  return absl::StrCat(EscapeBytes(path), " ", TypeName(e), e.new_path().empty() ? "" : " ",
                      EscapeBytes(e.new_path()), "\n");
}

std::string EventJson(const v1::FileWatchEvent& e, const v1::WatchResponse& r) {
  Json j = JsonObject();
  j["type"] = TypeName(e);
  j["watch_id"] = r.watch_id();
  j["revision"] = e.revision();
  j["ino"] = e.ino();
  j["path"] = e.path();
  if (!e.new_path().empty()) j["new_path"] = e.new_path();
  if (e.paths_lost()) j["paths_lost"] = true;
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);  // one line
}

int RunFsWatch(const FsWatchArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs watch";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  grpc::ClientContext ctx;
  conn->Authorize(&ctx);  // a stream: no overall deadline
  auto stream = conn->kv().Watch(&ctx);
  v1::WatchRequest req;
  v1::WatchCreateRequest* c = req.mutable_create_request();
  c->set_subvolume(a.subvolume);
  c->mutable_files()->set_prefix(a.prefix);
  c->set_start_revision(a.rev);
  uint64_t printed = 0;
  v1::WatchResponse r;
  if (stream->Write(req)) {
    while (stream->Read(&r)) {
      if (r.canceled()) return WatchCanceled(kOp, r);
      for (const v1::FileWatchEvent& e : r.file_events()) {
        rc = Emit(kOp, g.json ? EventJson(e, r) + "\n" : EventText(e));
        if (rc != kExitOk) return rc;
        if (a.max_events != 0 && ++printed >= a.max_events) {
          ctx.TryCancel();
          return kExitOk;
        }
      }
    }
  }
  const grpc::Status s = stream->Finish();
  return s.ok() ? kExitOk : RpcFail(kOp, s, g);
}

}  // namespace

void AddFsWatch(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<FsWatchArgs>();
  CLI::App* w = group->Add("watch", "Print the changes of the file tree under a path",
                           [a, g] { return RunFsWatch(*a, *g); });
  AddFsSubvolumeOption(w, &a->subvolume);
  w->add_option("PATH_PREFIX", a->prefix, "The path watched, and everything below it")->required();
  w->add_option("--rev", a->rev, "Start at this revision, from the recorded events (0 = from now)");
  w->add_option("--max-events", a->max_events, "Exit after N events (0 = run until stopped)");
}

}  // namespace cli
}  // namespace cowkv
