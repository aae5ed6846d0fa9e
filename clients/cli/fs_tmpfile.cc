// `cowkv fs tmpfile`: publish a file atomically, as O_TMPFILE + linkat do.
//
//   cowkv fs tmpfile [--mode 0644] [--from LOCAL] DIR NAME    data from stdin (or LOCAL)
//
// Creates an unnamed file in DIR (Files.CreateTmpfile: an open handle on
// an orphan), streams the data into it by handle, links it as DIR/NAME
// (Files.Link by handle: linkat with AT_EMPTY_PATH; EEXIST if the name is
// taken), fsyncs it by handle (its data and its new name survive a
// crash), and closes the handle. Readers see either no DIR/NAME or the
// whole file; a failure or a crash before the link leaves nothing behind.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/fs_commands.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {
namespace {

constexpr size_t kChunk = 1 << 20;

struct TmpfileArgs {
  std::string subvolume = "default";
  std::string mode, from = "-", dir, name;
};

// Streams `in` into the open file `handle`; *local_error if reading failed.
grpc::Status UploadByHandle(Connection& conn, uint64_t handle, std::FILE* in,
                            v1::WriteResponse* resp, bool* local_error) {
  grpc::ClientContext context;
  conn.Prepare(&context, /*stream=*/true);
  std::unique_ptr<grpc::ClientWriter<v1::WriteRequest>> writer = conn.files().Write(&context, resp);
  v1::WriteRequest msg;
  msg.set_handle(handle);
  std::string buf(kChunk, '\0');
  for (bool first = true;; first = false) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), in);
    if (n == 0 && !first) break;
    msg.set_data(buf.data(), n);
    if (!writer->Write(msg)) break;  // the server ended the call: see Finish
    msg.Clear();
    if (n < buf.size()) break;
  }
  *local_error = std::ferror(in) != 0;
  if (*local_error) context.TryCancel();
  writer->WritesDone();
  return writer->Finish();
}

// Write, link, fsync; the caller closes the handle whatever happens.
grpc::Status Publish(Connection& conn, const TmpfileArgs& a, uint64_t handle, std::FILE* in,
                     v1::FileStat* st, bool* local_error) {
  v1::WriteResponse wr;
  grpc::Status s = UploadByHandle(conn, handle, in, &wr, local_error);
  if (!s.ok() || *local_error) return s;
  v1::LinkRequest link;
  link.set_subvolume(a.subvolume);
  link.set_handle(handle);
  link.set_new_path(JoinPath(a.dir, a.name));
  s = Call(conn, conn.files(), &v1::Files::Stub::Link, link, st);
  if (!s.ok()) return s;
  v1::FsyncRequest fsync;
  fsync.set_handle(handle);
  v1::FsyncResponse fr;
  return Call(conn, conn.files(), &v1::Files::Stub::Fsync, fsync, &fr);
}

int RunTmpfile(const TmpfileArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs tmpfile";
  if (a.name.empty() || a.name.find('/') != std::string::npos) {
    return Fail(kOp, absl::StrCat("EINVAL: NAME is one path component, not \"", a.name, "\""));
  }
  std::FILE* in = a.from == "-" ? stdin : std::fopen(a.from.c_str(), "rb");
  if (in == nullptr) {
    return Fail(kOp, absl::StrCat("cannot open ", a.from, ": ", std::strerror(errno)));
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) {
    if (in != stdin) std::fclose(in);
    return rc;
  }
  v1::CreateTmpfileRequest req;
  req.set_subvolume(a.subvolume);
  req.set_dir_path(a.dir);
  req.set_mode(ModeValue(a.mode));
  v1::OpenResponse opened;
  grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::CreateTmpfile, req, &opened);
  v1::FileStat st;
  bool local_error = false;
  if (s.ok()) {
    s = Publish(*conn, a, opened.handle(), in, &st, &local_error);
    v1::CloseRequest close;
    close.set_handle(opened.handle());
    v1::CloseResponse closed;
    grpc::Status c = Call(*conn, conn->files(), &v1::Files::Stub::CloseHandle, close, &closed);
    if (s.ok() && !local_error) s = c;
  }
  if (in != stdin) std::fclose(in);
  if (local_error) return Fail(kOp, absl::StrCat("error reading ", a.from));
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["path"] = JoinPath(a.dir, a.name);
  j["stat"] = StatJson(st);
  return Emit(kOp, DumpJson(j));
}

}  // namespace

void AddFsTmpfile(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<TmpfileArgs>();
  CLI::App* cmd = group->Add(
      "tmpfile", "Write stdin to a new unnamed file, then link it as DIR/NAME (O_TMPFILE)",
      [a, g] { return RunTmpfile(*a, *g); });
  AddFsSubvolumeOption(cmd, &a->subvolume);
  AddModeOption(cmd, &a->mode, "0644");
  cmd->add_option("--from", a->from, "Read this local file instead of stdin")
      ->capture_default_str();
  cmd->add_option("DIR", a->dir, "Directory of the new file")->required();
  cmd->add_option("NAME", a->name, "Its name in DIR")->required();
}

}  // namespace cli
}  // namespace cowkv
