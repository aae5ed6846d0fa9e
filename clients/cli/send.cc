// `cowkv send`, `cowkv receive` and `cowkv subvolume digest` (issue 19),
// btrfs send/receive's shape:
//
//   cowkv send [-p PARENT] SNAPSHOT [-f FILE]     stream to FILE (default stdout)
//   cowkv send -t TOKEN [-f FILE]                 the rest of an interrupted stream
//   cowkv receive [NAME] [-f FILE] [--dry-run]    stream from FILE (default stdin)
//   cowkv receive -s [NAME] [-f FILE]             resumable (ZFS's receive -s)
//   cowkv receive --resume-token NAME             a partial receive's token
//   cowkv receive --list-partial | --abort NAME   partial receives: list, drop
//   cowkv subvolume digest NAME                   SHA-256 of its content
//
// Both stream through one call with bounded memory: send writes each
// Subvolumes.Send message to the output as it arrives, receive reads the
// input in 1 MiB pieces into one Subvolumes.Receive call. Statistics go to
// stderr (send's stdout is the stream) or, with --json, receive's and
// digest's stdout. A failed receive leaves no subvolume (the server's
// guarantee) unless it was resumable: then what arrived is kept as a
// partial receive, whose token `send -t` turns into the rest of the stream
// (docs/design.md "Resumable receive"). A failed send leaves a partial
// FILE, which receive refuses (or, resumable, keeps up to where it ends).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"
#include "clients/cli/stream_io.h"

namespace cowkv {
namespace cli {
namespace {

constexpr size_t kReceivePiece = 1 << 20;

int CheckNames(absl::string_view op, const std::vector<std::string>& names) {
  for (const std::string& n : names) {
    std::string problem = SubvolumeNameProblem(n);
    if (!problem.empty()) return Fail(op, problem, kExitInvalidArgument);
  }
  return kExitOk;
}

struct SendArgs {
  std::string snapshot, parent, file, name;
  bool dry_run = false;
  std::string token;  // send -t
  bool resumable = false;
  std::string token_of, abort;  // receive --resume-token NAME, --abort NAME
  bool list_partial = false;
};

// Opens FILE for the stream (or stdout / stdin for "" and "-").
std::FILE* OpenStream(const std::string& file, bool write) {
  if (file.empty() || file == "-") return write ? stdout : stdin;
  return std::fopen(file.c_str(), write ? "wb" : "rb");
}

int RunSend(const SendArgs& a, const Globals& g) {
  constexpr char kOp[] = "send";
  if (a.token.empty() || !a.snapshot.empty()) {
    if (a.token.empty() && a.snapshot.empty()) {
      return Fail(kOp, "SNAPSHOT (or -t TOKEN) is required", kExitInvalidArgument);
    }
    if (int rc = CheckNames(kOp, {a.snapshot}); rc != kExitOk) return rc;
  }
  if (!a.parent.empty()) {
    if (int rc = CheckNames(kOp, {a.parent}); rc != kExitOk) return rc;
  }
  std::FILE* out = OpenStream(a.file, true);
  if (out == nullptr) return Fail(kOp, absl::StrCat(a.file, ": ", std::strerror(errno)));
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::SendStats stats;
  bool write_failed = false;
  grpc::Status s = SendToSink(
      *conn, a.snapshot, a.parent,
      [out](absl::string_view b) { return std::fwrite(b.data(), 1, b.size(), out) == b.size(); },
      &stats, &write_failed, a.token);
  const bool flushed = std::fflush(out) == 0 && !write_failed;
  if (out != stdout) std::fclose(out);
  if (!flushed)
    return Fail(kOp, absl::StrCat(a.file.empty() ? "stdout" : a.file, ": write failed"));
  if (!s.ok()) return RpcFail(kOp, s, g);
  std::fprintf(stderr,
               "At subvol %s: %llu records, %llu bytes (%llu items, %llu deletes, %llu clones, "
               "%llu data bytes; %llu nodes read, %llu shared subtrees skipped)\n",
               a.snapshot.empty() ? "(resumed)" : a.snapshot.c_str(),
               static_cast<unsigned long long>(stats.records()),
               static_cast<unsigned long long>(stats.bytes()),
               static_cast<unsigned long long>(stats.items()),
               static_cast<unsigned long long>(stats.deletes()),
               static_cast<unsigned long long>(stats.clones()),
               static_cast<unsigned long long>(stats.data_bytes()),
               static_cast<unsigned long long>(stats.nodes_read()),
               static_cast<unsigned long long>(stats.subtrees_skipped()));
  return kExitOk;
}

int ReceiveDone(const SendArgs& a, const Globals& g, const v1::ReceiveResponse& r) {
  constexpr char kOp[] = "receive";
  if (g.json) {
    Json j = JsonObject();
    j["name"] = r.name();
    j["id"] = r.id();
    j["dry_run"] = a.dry_run;
    j["incremental"] = r.incremental();
    j["parent"] = r.parent();
    j["records"] = r.records();
    j["bytes"] = r.bytes();
    j["items"] = r.items();
    j["deletes"] = r.deletes();
    j["clones"] = r.clones();
    j["data_bytes"] = r.data_bytes();
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp,
              absl::StrCat(a.dry_run ? "Stream checked for " : "At subvol ", EscapeBytes(r.name()),
                           r.incremental()
                               ? absl::StrCat(" (incremental on '", EscapeBytes(r.parent()), "')")
                               : std::string(" (full)"),
                           ": ", r.records(), " records, ", r.bytes(), " bytes\n"));
}

int RunReceive(const SendArgs& a, const Globals& g) {
  constexpr char kOp[] = "receive";
  if (!a.name.empty()) {
    if (int rc = CheckNames(kOp, {a.name}); rc != kExitOk) return rc;
  }
  std::FILE* in = OpenStream(a.file, false);
  if (in == nullptr) return Fail(kOp, absl::StrCat(a.file, ": ", std::strerror(errno)));
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) {
    if (in != stdin) std::fclose(in);
    return rc;
  }
  v1::ReceiveResponse resp;
  bool read_failed = false;
  grpc::Status s = ReceiveFromFile(*conn, in, a.name, a.dry_run, &resp, &read_failed, a.resumable);
  if (in != stdin) std::fclose(in);
  if (read_failed)
    return Fail(kOp, absl::StrCat(a.file.empty() ? "stdin" : a.file, ": read failed"));
  if (!s.ok()) return RpcFail(kOp, s, g);
  return ReceiveDone(a, g, resp);
}

// --list-partial, --resume-token NAME, --abort NAME.
int RunPartial(const SendArgs& a, const Globals& g) {
  constexpr char kOp[] = "receive";
  const std::string& name = a.abort.empty() ? a.token_of : a.abort;
  if (!name.empty()) {
    if (int rc = CheckNames(kOp, {name}); rc != kExitOk) return rc;
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  grpc::ClientContext context;
  conn->Prepare(&context);
  if (!a.abort.empty()) {
    v1::AbortReceiveRequest req;
    req.set_name(a.abort);
    v1::AbortReceiveResponse resp;
    grpc::Status s = conn->subvolumes().AbortReceive(&context, req, &resp);
    if (!s.ok()) return RpcFail(kOp, s, g);
    return g.json ? Emit(kOp, "{}\n") : kExitOk;
  }
  v1::PartialReceivesResponse resp;
  grpc::Status s =
      conn->subvolumes().PartialReceives(&context, v1::PartialReceivesRequest(), &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  Json list = Json::array();
  std::string text;
  for (const v1::PartialReceive& p : resp.partial()) {
    if (!a.token_of.empty() && p.name() != a.token_of) continue;
    Json j = JsonObject();
    j["name"] = p.name();
    j["token"] = p.token();
    j["records"] = p.records();
    j["bytes"] = p.bytes();
    j["uuid"] = p.uuid();
    j["generation"] = p.generation();
    j["parent_uuid"] = p.parent_uuid();
    j["in_use"] = p.in_use();
    list.push_back(j);
    absl::StrAppend(&text,
                    a.token_of.empty() ? absl::StrCat(EscapeBytes(p.name()), "  ", p.records(),
                                                      " records  ", p.bytes(), " bytes  ")
                                       : "",
                    p.token(), "\n");
  }
  if (!a.token_of.empty() && list.empty()) {
    return Fail(kOp, absl::StrCat("no partial receive '", EscapeBytes(a.token_of), "'"),
                kExitNotFound);
  }
  if (g.json) {
    Json out = JsonObject();
    out["partial_receives"] = list;
    return Emit(kOp, DumpJson(out));
  }
  return Emit(kOp, text);
}

}  // namespace

grpc::Status SendToSink(Connection& conn, const std::string& snapshot, const std::string& parent,
                        const ChunkSink& sink, v1::SendStats* stats, bool* sink_failed,
                        const std::string& resume_token) {
  grpc::ClientContext context;
  conn.Prepare(&context, /*stream=*/true);
  v1::SendRequest req;
  req.set_snapshot(snapshot);
  req.set_parent(parent);
  req.set_resume_token(resume_token);
  std::unique_ptr<grpc::ClientReader<v1::SendResponse>> reader =
      conn.subvolumes().Send(&context, req);
  v1::SendResponse m;
  *sink_failed = false;
  while (reader->Read(&m)) {
    if (m.has_stats()) *stats = m.stats();
    if (m.chunk().empty() || *sink_failed) continue;
    if (!sink(m.chunk())) {
      *sink_failed = true;
      context.TryCancel();
    }
  }
  return reader->Finish();
}

grpc::Status ReceiveFromFile(Connection& conn, std::FILE* in, const std::string& name, bool dry_run,
                             v1::ReceiveResponse* resp, bool* read_failed, bool resumable) {
  grpc::ClientContext context;
  conn.Prepare(&context, /*stream=*/true);
  std::unique_ptr<grpc::ClientWriter<v1::ReceiveRequest>> writer =
      conn.subvolumes().Receive(&context, resp);
  v1::ReceiveRequest msg;
  msg.set_name(name);
  msg.set_dry_run(dry_run);
  msg.set_resumable(resumable);
  std::string buf(kReceivePiece, '\0');
  for (bool first = true;; first = false) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), in);
    if (n == 0 && !first) break;
    msg.set_chunk(buf.data(), n);
    if (!writer->Write(msg)) break;  // the server ended the call: see Finish
    msg.Clear();
  }
  // A local read error must not look like a stream that ended: the server
  // would then refuse it as truncated, but the caller says why.
  *read_failed = std::ferror(in) != 0;
  if (*read_failed) context.TryCancel();
  writer->WritesDone();
  return writer->Finish();
}

int RunSubvolumeDigest(const std::string& name, const Globals& g) {
  constexpr char kOp[] = "subvolume digest";
  if (int rc = CheckNames(kOp, {name}); rc != kExitOk) return rc;
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::DigestSubvolumeRequest req;
  req.set_name(name);
  v1::DigestSubvolumeResponse resp;
  grpc::ClientContext context;
  conn->Prepare(&context, /*stream=*/true);  // reads the whole subvolume
  grpc::Status s = conn->subvolumes().Digest(&context, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    j["name"] = name;
    j["sha256"] = resp.sha256();
    j["items"] = resp.items();
    j["data_bytes"] = resp.data_bytes();
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat(resp.sha256(), "  ", EscapeBytes(name), "\n"));
}

RunFn AddSend(CLI::App* app, const GlobalsPtr& g) {
  auto a = std::make_shared<SendArgs>();
  CLI::App* send = app->add_subcommand(
      "send", "Stream a read-only snapshot (or its difference from PARENT) to FILE or stdout");
  send->add_option("-p,--parent", a->parent, "Send only the difference from this older snapshot");
  send->add_option("-f,--file", a->file, "Write the stream to FILE instead of stdout");
  send->add_option("-t,--resume-token", a->token,
                   "Send the rest of the stream a resumable receive stopped in "
                   "(its token: cowkv receive --resume-token NAME at the receiver)");
  send->add_option("SNAPSHOT", a->snapshot, "Read-only snapshot to send");
  return [a, g] { return RunSend(*a, *g); };
}

RunFn AddReceive(CLI::App* app, const GlobalsPtr& g) {
  auto a = std::make_shared<SendArgs>();
  CLI::App* recv = app->add_subcommand(
      "receive", "Make a read-only subvolume from a send stream on FILE or stdin");
  recv->add_option("-f,--file", a->file, "Read the stream from FILE instead of stdin");
  recv->add_flag("--dry-run", a->dry_run, "Check the stream and its parent; write nothing");
  recv->add_flag("-s,--resumable", a->resumable,
                 "If the receive fails or is cut, keep what arrived (resume with send -t)");
  recv->add_option("--resume-token", a->token_of,
                   "Print the resume token of the partial receive NAME")
      ->option_text("NAME");
  recv->add_option("--abort", a->abort, "Drop the partial receive NAME")->option_text("NAME");
  recv->add_flag("--list-partial", a->list_partial, "List the partial receives and their tokens");
  recv->add_option("NAME", a->name, "Name of the new subvolume (default: the sender's)");
  return [a, g] {
    const int modes = !a->token_of.empty() + !a->abort.empty() + a->list_partial;
    if (modes > 1) {
      return Fail("receive", "--resume-token, --abort and --list-partial exclude each other",
                  kExitInvalidArgument);
    }
    if (modes == 1) return RunPartial(*a, *g);
    return RunReceive(*a, *g);
  };
}

}  // namespace cli
}  // namespace cowkv
