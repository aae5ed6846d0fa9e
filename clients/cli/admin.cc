// `cowkv stats`, `cowkv sync` and `cowkv check` without PATH (service Admin).
//
//   cowkv stats    every engine and server counter, one per line
//   cowkv sync     one engine commit: everything written before survives a crash
//   cowkv check    online read-only verification of the committed state; exit 1
//                  (and one stderr line "found N problems") when it finds any
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

int RunStats(const Globals& g) {
  constexpr char kOp[] = "stats";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::StatsResponse resp;
  grpc::Status s = Call(*conn, conn->admin(), &v1::Admin::Stub::Stats,
                        v1::StatsRequest(), &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  const Json fields = ScalarFieldsJson(resp);
  if (g.json) {
    Json j = JsonObject();
    j.update(fields);
    return Emit(kOp, DumpJson(j));
  }
  Table t({"COUNTER", "VALUE>"});
  for (const auto& item : fields.items()) {
    t.Add({item.key(), item.value().dump()});
  }
  return Emit(kOp, t.Render());
}

int RunSync(const Globals& g) {
  constexpr char kOp[] = "sync";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::SyncResponse resp;
  grpc::Status s = Call(*conn, conn->admin(), &v1::Admin::Stub::Sync,
                        v1::SyncRequest(), &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["generation"] = resp.generation();
  return Emit(kOp, DumpJson(j));
}

std::string Problems(size_t n) {
  return absl::StrCat("found ", n, n == 1 ? " problem" : " problems");
}

std::string CheckText(const Globals& g, const v1::CheckResponse& r) {
  std::string out = absl::StrCat("Checking filesystem on cowkvd at ",
                                 g.server, " (fsid ", r.fsid(), ")\n");
  for (const std::string& p : r.problems()) {
    absl::StrAppend(&out, "ERROR: ", OneLine(p), "\n");
  }
  absl::StrAppend(&out, "generation:     ", r.generation(), "\n",
                  "trees:          ", r.trees(), "\n",
                  "nodes:          ", r.nodes(), "\n",
                  "items:          ", r.items(), "\n",
                  "extents:        ", r.extents(), "\n",
                  "used bytes:     ", r.used_bytes(), "\n",
                  r.ok() ? "no problems found" : Problems(r.problems_size()),
                  "\n");
  return out;
}

}  // namespace

int RunOnlineCheck(const Globals& g, bool json) {
  constexpr char kOp[] = "check";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::CheckResponse resp;
  grpc::ClientContext context;
  conn->Prepare(&context, /*stream=*/true);  // a long call: no default deadline
  grpc::Status s = conn->admin().Check(&context, v1::CheckRequest(), &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (json) {
    Json j = JsonObject();
    j["server"] = g.server;
    j.update(ScalarFieldsJson(resp));
    j["problems"] = Json(std::vector<std::string>(resp.problems().begin(),
                                                  resp.problems().end()));
    rc = Emit(kOp, DumpJson(j));
  } else {
    rc = Emit(kOp, CheckText(g, resp));
  }
  if (rc != kExitOk || resp.ok()) return rc;
  return Fail(kOp, absl::StrCat("cowkvd at ", g.server, ": ",
                                Problems(resp.problems_size())));
}

RunFn AddStats(CLI::App* app, const GlobalsPtr& g) {
  app->add_subcommand("stats", "Print every engine and server counter (online)");
  return [g] { return RunStats(*g); };
}

RunFn AddSync(CLI::App* app, const GlobalsPtr& g) {
  app->add_subcommand("sync",
                      "Commit: everything written so far survives a crash "
                      "(online)");
  return [g] { return RunSync(*g); };
}

}  // namespace cli
}  // namespace cowkv
