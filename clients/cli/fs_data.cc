// `cowkv fs put|cat|clone|fiemap`: the commands that move or map file data.
//
//   cowkv fs put    [--mode 0644] LOCAL REMOTE   LOCAL '-' = stdin; streamed
//   cowkv fs cat    [--offset N] [--length N] PATH...
//   cowkv fs clone  [--src-offset N] [--dst-offset N] [--length N] SRC DST
//   cowkv fs fiemap [--offset N] [--length N] PATH      like `filefrag -v`
//
// `put` creates REMOTE (or REMOTE/basename(LOCAL) when REMOTE is a
// directory) or truncates it, and streams LOCAL in 1 MiB chunks through one
// Files.Write call; each chunk is atomic, the whole upload is not. `cat`
// streams Files.Read to stdout. `clone` creates DST if absent and makes it
// share SRC's extents (reflink; length 0 = to SRC's end).
#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "clients/cli/fs_commands.h"
#include "clients/cli/output.h"
#include "clients/cli/progress.h"

namespace cowkv {
namespace cli {
namespace {

constexpr size_t kChunk = 1 << 20;

struct DataArgs {
  std::string subvolume = "default";
  std::vector<std::string> paths;
  std::string local, remote, mode;
  std::string offset, length, src_offset, dst_offset;
};

// put.

// Where `put` writes: REMOTE, or REMOTE/basename(LOCAL) for a directory.
grpc::Status Destination(Connection& conn, const DataArgs& a, std::string* out) {
  *out = a.remote;
  v1::FileStat st;
  grpc::Status s = StatPath(conn, a.subvolume, a.remote, &st);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return grpc::Status::OK;
  if (!s.ok() || st.kind() != v1::FILE_KIND_DIRECTORY) return s;
  if (a.local == "-") {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "EISDIR: " + a.remote + " is a directory; name the "
                        "file to write stdin to");
  }
  *out = JoinPath(a.remote, BaseName(a.local));
  return grpc::Status::OK;
}

// Streams `in` into the file; *local_error is set if reading `in` failed.
grpc::Status Upload(Connection& conn, const DataArgs& a, const std::string& path, std::FILE* in,
                    v1::WriteResponse* resp, bool* local_error, Progress* progress) {
  grpc::ClientContext context;
  conn.Prepare(&context, /*stream=*/true);
  std::unique_ptr<grpc::ClientWriter<v1::WriteRequest>> writer =
      conn.files().Write(&context, resp);
  v1::WriteRequest msg;
  msg.set_subvolume(a.subvolume);
  msg.set_path(path);
  msg.set_create(true);
  msg.set_truncate(true);
  msg.set_mode(ModeValue(a.mode));
  std::string buf(kChunk, '\0');
  bool first = true;
  for (;;) {
    const size_t n = std::fread(buf.data(), 1, buf.size(), in);
    if (n == 0 && !first) break;
    msg.set_data(buf.data(), n);
    if (!writer->Write(msg)) break;  // the server ended the call: see Finish
    progress->Add(n);
    msg.Clear();
    first = false;
    if (n < buf.size()) break;
  }
  *local_error = std::ferror(in) != 0;
  if (*local_error) context.TryCancel();
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  progress->Finish();
  return s;
}

int RunPut(const DataArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs put";
  std::FILE* in = a.local == "-" ? stdin : std::fopen(a.local.c_str(), "rb");
  if (in == nullptr) {
    return Fail(kOp, absl::StrCat("cannot open ", a.local, ": ",
                                  std::strerror(errno)));
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  std::string path;
  grpc::Status s = conn ? Destination(*conn, a, &path) : grpc::Status::OK;
  v1::WriteResponse resp;
  bool local_error = false;
  struct stat st;
  const uint64_t total = fstat(fileno(in), &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : 0;
  Progress progress(kOp, total, ProgressWanted(g, /*stdout_is_data=*/false), ProgressDelay());
  if (conn && s.ok()) s = Upload(*conn, a, path, in, &resp, &local_error, &progress);
  if (in != stdin) std::fclose(in);
  if (!conn) return rc;
  if (local_error) return Fail(kOp, absl::StrCat("error reading ", a.local));
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["path"] = path;
  j["bytes_written"] = resp.bytes_written();
  j["stat"] = StatJson(resp.stat());
  return Emit(kOp, DumpJson(j));
}

// cat.

// The bytes `cat` of `path` will print, for the progress line (0: unknown).
uint64_t CatTotal(Connection& conn, const DataArgs& a, const std::string& path) {
  v1::FileStat st;
  if (!StatPath(conn, a.subvolume, path, &st).ok()) return 0;
  const uint64_t offset = SizeValue(a.offset), length = SizeValue(a.length);
  const uint64_t total = st.size() > offset ? st.size() - offset : 0;
  return length > 0 && length < total ? length : total;
}

int CatOne(Connection& conn, const DataArgs& a, const std::string& path) {
  constexpr char kOp[] = "fs cat";
  const bool wanted = ProgressWanted(conn.globals(), /*stdout_is_data=*/true);
  Progress progress(kOp, wanted ? CatTotal(conn, a, path) : 0, wanted, ProgressDelay());
  grpc::ClientContext context;
  conn.Prepare(&context, /*stream=*/true);
  v1::ReadRequest req;
  req.set_subvolume(a.subvolume);
  req.set_path(path);
  req.set_offset(SizeValue(a.offset));
  req.set_length(SizeValue(a.length));
  std::unique_ptr<grpc::ClientReader<v1::ReadResponse>> reader =
      conn.files().Read(&context, req);
  v1::ReadResponse m;
  while (reader->Read(&m)) {
    progress.Add(m.data().size());
    if (Emit(kOp, m.data()) != kExitOk) {
      context.TryCancel();
      reader->Finish();
      return kExitFailure;
    }
  }
  grpc::Status s = reader->Finish();
  progress.Finish();
  return s.ok() ? kExitOk : RpcFail(kOp, s, conn.globals());
}

int RunCat(const DataArgs& a, const Globals& g) {
  int rc = 0;
  auto conn = Connect("fs cat", g, &rc);
  if (!conn) return rc;
  for (const std::string& path : a.paths) {
    if ((rc = CatOne(*conn, a, path)) != kExitOk) return rc;
  }
  return kExitOk;
}

// clone.

// Creates `path` as an empty file unless it exists.
grpc::Status EnsureFile(Connection& conn, const DataArgs& a,
                        const std::string& path) {
  v1::CreateFileRequest req;
  req.set_subvolume(a.subvolume);
  req.set_path(path);
  v1::FileStat st;
  grpc::Status s = Call(conn, conn.files(), &v1::Files::Stub::Create, req, &st);
  if (s.error_code() == grpc::StatusCode::ALREADY_EXISTS) return grpc::Status::OK;
  return s;
}

int RunClone(const DataArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs clone";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::FileStat src;
  grpc::Status s = StatPath(*conn, a.subvolume, a.local, &src);
  if (s.ok()) s = EnsureFile(*conn, a, a.remote);
  v1::CloneRequest req;
  req.set_subvolume(a.subvolume);
  req.set_src_path(a.local);
  req.set_dst_path(a.remote);
  req.set_src_offset(SizeValue(a.src_offset));
  req.set_dst_offset(SizeValue(a.dst_offset));
  req.set_length(SizeValue(a.length));
  v1::CloneResponse resp;
  if (s.ok()) s = Call(*conn, conn->files(), &v1::Files::Stub::Clone, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j["src"] = a.local;
  j["dst"] = a.remote;
  return Emit(kOp, DumpJson(j));
}

// fiemap.

grpc::Status AllExtents(Connection& conn, const DataArgs& a,
                        std::vector<v1::FiemapExtent>* out) {
  uint64_t offset = SizeValue(a.offset);
  const uint64_t length = SizeValue(a.length);
  const uint64_t end = length == 0 ? 0 : offset + length;  // 0 = EOF
  for (;;) {
    v1::FiemapRequest req;
    req.set_subvolume(a.subvolume);
    req.set_path(a.paths.front());
    req.set_offset(offset);
    req.set_length(end == 0 ? 0 : end - offset);
    v1::FiemapResponse resp;
    grpc::Status s = Call(conn, conn.files(), &v1::Files::Stub::Fiemap, req, &resp);
    if (!s.ok()) return s;
    out->insert(out->end(), resp.extents().begin(), resp.extents().end());
    if (!resp.more() || resp.extents().empty()) return grpc::Status::OK;
    offset = out->back().logical() + out->back().length();
    if (end != 0 && offset >= end) return grpc::Status::OK;
  }
}

int RunFiemap(const DataArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs fiemap";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  const std::string& path = a.paths.front();
  v1::FileStat st;
  std::vector<v1::FiemapExtent> extents;
  grpc::Status s = StatPath(*conn, a.subvolume, path, &st);
  if (s.ok()) s = AllExtents(*conn, a, &extents);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return Emit(kOp, FormatFiemap(path, st.size(), extents));
  Json j = JsonObject();
  j["path"] = path;
  j["size"] = st.size();
  j["extents"] = Json::array();
  for (const v1::FiemapExtent& e : extents) j["extents"].push_back(ExtentJson(e));
  return Emit(kOp, DumpJson(j));
}

CLI::App* AddDataCommand(CommandGroup* group, const std::string& name,
                         const std::string& help, RunFn run,
                         const std::shared_ptr<DataArgs>& a) {
  CLI::App* cmd = group->Add(name, help, std::move(run));
  AddFsSubvolumeOption(cmd, &a->subvolume);
  return cmd;
}

}  // namespace

void AddFsData(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<DataArgs>();
  CLI::App* put = AddDataCommand(group, "put", "Upload a local file (- = stdin)",
                                 [a, g] { return RunPut(*a, *g); }, a);
  AddModeOption(put, &a->mode, "0644");
  put->add_option("LOCAL", a->local, "Local file, or - for stdin")->required();
  put->add_option("REMOTE", a->remote, "Path in the subvolume")->required();
  CLI::App* cat = AddDataCommand(group, "cat", "Print files (raw bytes)",
                                 [a, g] { return RunCat(*a, *g); }, a);
  AddSizeOption(cat, "--offset", &a->offset, "Start at this byte");
  AddSizeOption(cat, "--length", &a->length, "At most this many bytes");
  cat->add_option("PATH", a->paths, "Paths")->required();
  CLI::App* clone = AddDataCommand(
      group, "clone", "Reflink SRC's extents into DST (no data is copied)",
      [a, g] { return RunClone(*a, *g); }, a);
  AddSizeOption(clone, "--src-offset", &a->src_offset, "First byte of SRC");
  AddSizeOption(clone, "--dst-offset", &a->dst_offset, "Where it lands in DST");
  AddSizeOption(clone, "--length", &a->length, "Bytes (0 = to SRC's end)");
  clone->add_option("SRC", a->local, "Source file")->required();
  clone->add_option("DST", a->remote, "Destination (created if absent)")->required();
  CLI::App* fiemap = AddDataCommand(
      group, "fiemap", "Print a file's extents like filefrag -v",
      [a, g] { return RunFiemap(*a, *g); }, a);
  AddSizeOption(fiemap, "--offset", &a->offset, "First byte");
  AddSizeOption(fiemap, "--length", &a->length, "Bytes (0 = to EOF)");
  fiemap->add_option("PATH", a->paths, "Path")->required()->expected(1);
}

}  // namespace cli
}  // namespace cowkv
