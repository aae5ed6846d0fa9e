// `cowkv stats`, `cowkv sync` and `cowkv check` without PATH (service Admin).
//
//   cowkv stats    every engine and server counter, one per line
//   cowkv sync     one engine commit: everything written before survives a crash
//   cowkv check    online read-only verification of the committed state; exit 1
//                  (and one stderr line "found N problems") when it finds any
#include <string>

#include "absl/strings/str_cat.h"
#include <iostream>

#include "build_info/build_info.h"
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

// `cowkv version`: this client's build, then the server's (when one
// answers; the client's line is printed either way).
int RunVersion(const Globals& g) {
  constexpr char kOp[] = "version";
  Json client = JsonObject();
  client["version"] = kCowkvVersion;
  client["api"] = kApiVersion;
  client["git_commit"] = GitCommit();
  client["build_type"] = BuildType();
  const std::string client_line = absl::StrCat("client: cowkv ", kCowkvVersion, " (", kApiVersion,
                                               ", commit ", GitCommit(), ", ", BuildType(), ")\n");
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) {
    if (!g.json) std::cout << client_line;
    return rc;
  }
  v1::VersionResponse v;
  grpc::Status s = Call(*conn, conn->admin(), &v1::Admin::Stub::Version, v1::VersionRequest(), &v);
  if (!s.ok()) {
    if (!g.json) std::cout << client_line;
    return RpcFail(kOp, s, g);
  }
  if (g.json) {
    Json j = JsonObject();
    j["client"] = client;
    j["server"] = ScalarFieldsJson(v);
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat(client_line, "server: cowkvd ", v.version(), " (", v.api(),
                                ", commit ", v.git_commit(), ", ", v.build_type(), ") grpc ",
                                v.grpc_version(), ", protobuf ", v.protobuf_version(),
                                ", nodesize ", v.nodesize(), "\n"));
}

// `cowkv status`: one line, as `etcdctl endpoint status`.
int RunStatus(const Globals& g) {
  constexpr char kOp[] = "status";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::VersionResponse v;
  grpc::Status s = Call(*conn, conn->admin(), &v1::Admin::Stub::Version, v1::VersionRequest(), &v);
  if (!s.ok()) return RpcFail(kOp, s, g);
  v1::StatsResponse st;
  s = Call(*conn, conn->admin(), &v1::Admin::Stub::Stats, v1::StatsRequest(), &st);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    j["endpoint"] = g.server;
    j["version"] = v.version();
    j["healthy"] = true;
    j["generation"] = st.generation();
    j["revision"] = st.revision();
    j["used_bytes"] = st.used_bytes();
    j["free_bytes"] = st.free_bytes();
    j["total_bytes"] = st.total_bytes();
    j["open_transactions"] = st.server_open_handles();
    if (st.server_replicas_size() > 0) {
      Json list = Json::array();
      for (const v1::ReplicaStatus& r : st.server_replicas()) list.push_back(ScalarFieldsJson(r));
      j["replicas"] = list;
    }
    return Emit(kOp, DumpJson(j));
  }
  std::string text = absl::StrCat(
      g.server, ", ", v.version(), ", healthy, generation ", st.generation(), ", revision ",
      st.revision(), ", used ", st.used_bytes(), " of ", st.total_bytes(), " bytes (free ",
      st.free_bytes(), "), ", st.server_open_handles(), " open transactions\n");
  // A read replica (cowkvd --follow): one line per followed subvolume.
  for (const v1::ReplicaStatus& r : st.server_replicas()) {
    absl::StrAppend(&text, "replica ", EscapeBytes(r.subvolume()), " of ", r.primary(), ": ",
                    r.snapshot().empty() ? std::string("no replica yet")
                                         : absl::StrCat("lag ", absl::SixDigits(r.lag_seconds()),
                                                        " s (", EscapeBytes(r.snapshot()), ")"),
                    ", ", r.pulls(), " pulls, ", r.failures(), " failures, ", r.bytes_received(),
                    " bytes received",
                    r.last_error().empty()
                        ? std::string()
                        : absl::StrCat(", last error: ", OneLine(r.last_error())),
                    "\n");
  }
  return Emit(kOp, text);
}

RunFn AddVersion(CLI::App* app, const GlobalsPtr& g) {
  app->add_subcommand("version", "Print the client's and the server's version and build");
  return [g] { return RunVersion(*g); };
}

RunFn AddStatus(CLI::App* app, const GlobalsPtr& g) {
  app->add_subcommand("status", "One line: server, version, health, generation, revision, space");
  return [g] { return RunStatus(*g); };
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
