// `cowkv fs ...`: the file tree of a subvolume (service Files). This file has
// the commands on names and attributes; fs_data.cc those that move data.
//
//   cowkv fs ls    [-l] [PATH]                 names (dirs end in '/'); -l a table
//   cowkv fs stat  PATH                        stat(1)-like
//   cowkv fs mkdir [-p] [--mode 0755] PATH...
//   cowkv fs mv    [--no-replace | --exchange] FROM TO
//   cowkv fs ln    [--symbolic] EXISTING NEW   hard link; or symlink NEW -> EXISTING
//   cowkv fs rm    PATH...                     files and symlinks
//   cowkv fs rmdir PATH...                     empty directories
//   cowkv fs fsync [--data] [--range OFF:LEN] PATH
//
// Every one takes -s/--subvolume NAME (default "default"). Paths are
// '/'-separated from the subvolume's root; symlinks are never followed.
// Failures carry the server's POSIX name: "cowkv: fs rmdir: ENOTEMPTY: ...".
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/cli/fs_commands.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {

void AddFsSubvolumeOption(CLI::App* cmd, std::string* subvolume) {
  cmd->add_option("-s,--subvolume", *subvolume,
                  "Subvolume (or snapshot) name")
      ->capture_default_str();
}

CLI::Option* AddSizeOption(CLI::App* cmd, const std::string& name,
                           std::string* value, const std::string& help) {
  return cmd->add_option(name, *value, help)
      ->type_name("BYTES")
      ->check(CLI::Validator(
          [](std::string& text) {
            absl::StatusOr<uint64_t> v = ParseSize(text);
            return v.ok() ? std::string() : std::string(v.status().message());
          },
          "BYTES"));
}

CLI::Option* AddModeOption(CLI::App* cmd, std::string* mode,
                           const std::string& default_mode) {
  return cmd
      ->add_option("--mode", *mode,
                   absl::StrCat("Permission bits, octal (default ",
                                default_mode, ")"))
      ->type_name("OCTAL")
      ->check(CLI::Validator(
          [](std::string& text) {
            const bool octal = !text.empty() && text.size() <= 5 &&
                               text.find_first_not_of("01234567") ==
                                   std::string::npos &&
                               std::stoul(text, nullptr, 8) <= 07777;
            return octal ? std::string()
                         : "'" + text + "' is not octal permission bits";
          },
          "OCTAL"));
}

uint32_t ModeValue(const std::string& text) {
  return text.empty() ? 0 : static_cast<uint32_t>(std::stoul(text, nullptr, 8));
}

uint64_t SizeValue(const std::string& text) {
  if (text.empty()) return 0;
  absl::StatusOr<uint64_t> v = ParseSize(text);
  return v.ok() ? *v : 0;
}

grpc::Status StatPath(Connection& conn, const std::string& subvolume,
                      const std::string& path, v1::FileStat* st) {
  v1::StatRequest req;
  req.set_subvolume(subvolume);
  req.set_path(path);
  return Call(conn, conn.files(), &v1::Files::Stub::Stat, req, st);
}

std::string JoinPath(absl::string_view dir, absl::string_view name) {
  if (!dir.empty() && dir.back() == '/') return absl::StrCat(dir, name);
  return absl::StrCat(dir, "/", name);
}

std::string BaseName(absl::string_view path) {
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  const size_t slash = path.rfind('/');
  return std::string(slash == absl::string_view::npos ? path
                                                      : path.substr(slash + 1));
}

namespace {

struct FsArgs {
  std::string subvolume = "default";
  std::vector<std::string> paths;
  std::string from, to;
  std::string mode;
  bool long_format = false, parents = false, symbolic = false;
  bool no_replace = false, exchange = false, data_only = false;
  std::string range;  // fsync --range OFF:LEN
};

// Prints {"__header", key: value} for --json; nothing for people.
int EmitResult(absl::string_view op, const Globals& g, const char* key,
               const Json& value) {
  if (!g.json) return kExitOk;
  Json j = JsonObject();
  j[key] = value;
  return Emit(op, DumpJson(j));
}

// ls.

struct Entry {
  std::string name;
  std::string path;
  v1::FileStat st;
  std::string target;  // symlinks, with -l
};

grpc::Status ListDir(Connection& conn, const FsArgs& a, const std::string& dir,
                     std::vector<Entry>* out) {
  v1::ReadDirRequest req;
  req.set_subvolume(a.subvolume);
  req.set_path(dir);
  for (;;) {
    v1::ReadDirResponse resp;
    grpc::Status s =
        Call(conn, conn.files(), &v1::Files::Stub::ReadDir, req, &resp);
    if (!s.ok()) return s;
    for (const v1::DirEntry& e : resp.entries()) {
      Entry entry{e.name(), JoinPath(dir, e.name()), {}, ""};
      entry.st.set_ino(e.ino());
      entry.st.set_kind(e.kind());
      out->push_back(std::move(entry));
    }
    if (!resp.more()) return grpc::Status::OK;
    req.set_cookie(resp.next_cookie());
  }
}

grpc::Status FillLong(Connection& conn, const FsArgs& a, Entry* e) {
  v1::StatRequest req;
  req.set_subvolume(a.subvolume);
  req.set_ino(e->st.ino());
  grpc::Status s = Call(conn, conn.files(), &v1::Files::Stub::Stat, req, &e->st);
  if (!s.ok() || e->st.kind() != v1::FILE_KIND_SYMLINK) return s;
  v1::ReadLinkRequest rl;
  rl.set_subvolume(a.subvolume);
  rl.set_path(e->path);
  v1::ReadLinkResponse target;
  s = Call(conn, conn.files(), &v1::Files::Stub::ReadLink, rl, &target);
  e->target = target.target();
  return s;
}

std::string LsText(const std::vector<Entry>& entries, bool long_format) {
  if (!long_format) {
    std::string out;
    for (const Entry& e : entries) {
      absl::StrAppend(&out, EscapeBytes(e.name),
                      e.st.kind() == v1::FILE_KIND_DIRECTORY ? "/" : "", "\n");
    }
    return out;
  }
  Table t({"MODE", "LINKS>", "SIZE>", "MODIFIED", "NAME"});
  for (const Entry& e : entries) {
    std::string name = EscapeBytes(e.name);
    if (!e.target.empty()) absl::StrAppend(&name, " -> ", EscapeBytes(e.target));
    t.Add({ModeString(e.st.kind(), e.st.mode()), absl::StrCat(e.st.nlink()),
           absl::StrCat(e.st.size()),
           FormatUnixNs(e.st.mtime_ns()).substr(0, 19), name});
  }
  return t.Render();
}

Json LsJson(const std::string& path, const std::vector<Entry>& entries,
            bool long_format) {
  Json j = JsonObject();
  j["path"] = path;
  j["entries"] = Json::array();
  for (const Entry& e : entries) {
    Json one = Json::object();
    one["name"] = e.name;
    one["ino"] = e.st.ino();
    one["kind"] = KindShort(e.st.kind());
    if (long_format) {
      one["stat"] = StatJson(e.st);
      if (!e.target.empty()) one["target"] = e.target;
    }
    j["entries"].push_back(one);
  }
  return j;
}

int RunLs(const FsArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs ls";
  const std::string path = a.paths.empty() ? "/" : a.paths.front();
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::FileStat st;
  grpc::Status s = StatPath(*conn, a.subvolume, path, &st);
  std::vector<Entry> entries;
  if (s.ok() && st.kind() == v1::FILE_KIND_DIRECTORY) {
    s = ListDir(*conn, a, path, &entries);
  } else if (s.ok()) {
    entries.push_back(Entry{path, path, st, ""});
  }
  for (size_t i = 0; s.ok() && a.long_format && i < entries.size(); ++i) {
    s = FillLong(*conn, a, &entries[i]);
  }
  if (!s.ok()) return RpcFail(kOp, s, g);
  return Emit(kOp, g.json ? DumpJson(LsJson(path, entries, a.long_format))
                          : LsText(entries, a.long_format));
}

// stat.

int RunStat(const FsArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs stat";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  Entry e{a.paths.front(), a.paths.front(), {}, ""};
  grpc::Status s = StatPath(*conn, a.subvolume, e.path, &e.st);
  if (s.ok()) s = FillLong(*conn, a, &e);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (!g.json) return Emit(kOp, StatText(e.path, e.st, e.target));
  Json j = JsonObject();
  j["path"] = e.path;
  j.update(StatJson(e.st));
  if (!e.target.empty()) j["target"] = e.target;
  return Emit(kOp, DumpJson(j));
}

// mkdir.

grpc::Status MakeDir(Connection& conn, const FsArgs& a, const std::string& path,
                     uint32_t mode, bool exist_ok) {
  v1::MkdirRequest req;
  req.set_subvolume(a.subvolume);
  req.set_path(path);
  req.set_mode(mode);
  v1::FileStat st;
  grpc::Status s = Call(conn, conn.files(), &v1::Files::Stub::Mkdir, req, &st);
  if (s.error_code() != grpc::StatusCode::ALREADY_EXISTS || !exist_ok) return s;
  grpc::Status again = StatPath(conn, a.subvolume, path, &st);
  if (!again.ok() || st.kind() != v1::FILE_KIND_DIRECTORY) return s;
  return grpc::Status::OK;
}

grpc::Status MakeDirs(Connection& conn, const FsArgs& a, const std::string& path,
                      uint32_t mode) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    prefix = JoinPath(prefix, part);
    grpc::Status s = MakeDir(conn, a, prefix, mode, true);
    if (!s.ok()) return s;
  }
  return grpc::Status::OK;
}

int RunMkdir(const FsArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs mkdir";
  const uint32_t mode = ModeValue(a.mode);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  for (const std::string& path : a.paths) {
    grpc::Status s = a.parents ? MakeDirs(*conn, a, path, mode)
                               : MakeDir(*conn, a, path, mode, false);
    if (!s.ok()) return RpcFail(kOp, s, g);
  }
  return EmitResult(kOp, g, "created", a.paths);
}

// mv, ln, rm, rmdir, fsync.

int RunMv(const FsArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs mv";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::RenameRequest req;
  req.set_subvolume(a.subvolume);
  req.set_from(a.from);
  req.set_to(a.to);
  req.set_flags(a.no_replace ? v1::RENAME_FLAG_NOREPLACE
                : a.exchange ? v1::RENAME_FLAG_EXCHANGE
                             : v1::RENAME_FLAG_NONE);
  v1::RenameResponse resp;
  grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::Rename, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  return EmitResult(kOp, g, "renamed", {{"from", a.from}, {"to", a.to}});
}

int RunLn(const FsArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs ln";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::FileStat st;
  grpc::Status s;
  if (a.symbolic) {
    v1::SymlinkRequest req;
    req.set_subvolume(a.subvolume);
    req.set_target(a.from);
    req.set_path(a.to);
    s = Call(*conn, conn->files(), &v1::Files::Stub::Symlink, req, &st);
  } else {
    v1::LinkRequest req;
    req.set_subvolume(a.subvolume);
    req.set_existing(a.from);
    req.set_new_path(a.to);
    s = Call(*conn, conn->files(), &v1::Files::Stub::Link, req, &st);
  }
  if (!s.ok()) return RpcFail(kOp, s, g);
  return EmitResult(kOp, g, "stat", StatJson(st));
}

template <typename Request, typename Response>
int RemoveEach(const char* op, const FsArgs& a, const Globals& g,
               grpc::Status (v1::Files::Stub::*method)(grpc::ClientContext*,
                                                      const Request&,
                                                      Response*)) {
  int rc = 0;
  auto conn = Connect(op, g, &rc);
  if (!conn) return rc;
  for (const std::string& path : a.paths) {
    Request req;
    req.set_subvolume(a.subvolume);
    req.set_path(path);
    Response resp;
    grpc::Status s = Call(*conn, conn->files(), method, req, &resp);
    if (!s.ok()) return RpcFail(op, s, g);
  }
  return EmitResult(op, g, "removed", a.paths);
}

int RunFsync(const FsArgs& a, const Globals& g) {
  constexpr char kOp[] = "fs fsync";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  v1::FsyncRequest req;
  req.set_subvolume(a.subvolume);
  req.set_path(a.paths.front());
  req.set_datasync(a.data_only);
  if (!a.range.empty()) {
    // OFF:LEN, each a byte count (ParseSize: "4096", "64K"); LEN 0 = to EOF.
    const size_t colon = a.range.find(':');
    absl::StatusOr<uint64_t> off = ParseSize(a.range.substr(0, colon));
    absl::StatusOr<uint64_t> len = colon == std::string::npos
                                       ? absl::StatusOr<uint64_t>(0)
                                       : ParseSize(a.range.substr(colon + 1));
    if (!off.ok() || !len.ok()) {
      return Fail(kOp, absl::StrCat("--range: '", a.range, "' is not OFF:LEN"), kExitUsage);
    }
    req.set_offset(*off);
    req.set_length(*len);
  }
  v1::FsyncResponse resp;
  grpc::Status s = Call(*conn, conn->files(), &v1::Files::Stub::Fsync, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  return EmitResult(kOp, g, "synced", a.paths.front());
}

// Declarations.

CLI::App* AddFsCommand(CommandGroup* group, const std::string& name,
                       const std::string& help, RunFn run,
                       const std::shared_ptr<FsArgs>& a) {
  CLI::App* cmd = group->Add(name, help, std::move(run));
  AddFsSubvolumeOption(cmd, &a->subvolume);
  return cmd;
}

void AddNameCommands(CommandGroup* group, const std::shared_ptr<FsArgs>& a,
                     const GlobalsPtr& g) {
  CLI::App* mv = AddFsCommand(group, "mv", "Rename (move) a file or directory",
                              [a, g] { return RunMv(*a, *g); }, a);
  CLI::Option* nr = mv->add_flag("--no-replace", a->no_replace,
                                 "Fail if TO exists (RENAME_NOREPLACE)");
  mv->add_flag("--exchange", a->exchange,
               "Swap FROM and TO, which must both exist (RENAME_EXCHANGE)")
      ->excludes(nr);
  mv->add_option("FROM", a->from, "Existing path")->required();
  mv->add_option("TO", a->to, "New path")->required();
  CLI::App* ln = AddFsCommand(group, "ln", "Make a hard link (or --symbolic a symlink)",
                              [a, g] { return RunLn(*a, *g); }, a);
  ln->add_flag("--symbolic", a->symbolic,
               "Make NEW a symlink holding EXISTING (never followed)");
  ln->add_option("EXISTING", a->from, "Existing file (the symlink target with --symbolic)")
      ->required();
  ln->add_option("NEW", a->to, "The new name")->required();
  AddFsCommand(group, "rm", "Remove files or symlinks",
               [a, g] { return RemoveEach("fs rm", *a, *g, &v1::Files::Stub::Unlink); }, a)
      ->add_option("PATH", a->paths, "Paths")->required();
  AddFsCommand(group, "rmdir", "Remove empty directories",
               [a, g] { return RemoveEach("fs rmdir", *a, *g, &v1::Files::Stub::Rmdir); }, a)
      ->add_option("PATH", a->paths, "Paths")->required();
}

}  // namespace

RunFn AddFs(CLI::App* app, const GlobalsPtr& g) {
  CommandGroup group(app, "fs", "Files and directories of a subvolume (online)");
  auto a = std::make_shared<FsArgs>();
  CLI::App* ls = AddFsCommand(&group, "ls", "List a directory",
                              [a, g] { return RunLs(*a, *g); }, a);
  ls->add_flag("-l", a->long_format, "Long format: mode, links, size, time");
  ls->add_option("PATH", a->paths, "Directory or file (default /)")->expected(0, 1);
  AddFsCommand(&group, "stat", "Show a file's attributes",
               [a, g] { return RunStat(*a, *g); }, a)
      ->add_option("PATH", a->paths, "Path")->required()->expected(1);
  CLI::App* mkdir = AddFsCommand(&group, "mkdir", "Create directories",
                                 [a, g] { return RunMkdir(*a, *g); }, a);
  mkdir->add_flag("-p,--parents", a->parents,
                  "Create missing parents; existing directories are fine");
  AddModeOption(mkdir, &a->mode, "0755");
  mkdir->add_option("PATH", a->paths, "Paths")->required();
  AddNameCommands(&group, a, g);
  CLI::App* fsync = AddFsCommand(&group, "fsync", "Make a file survive a crash",
                                 [a, g] { return RunFsync(*a, *g); }, a);
  fsync->add_flag("--data", a->data_only, "fdatasync: data and size only");
  fsync
      ->add_option("--range", a->range,
                   "Only this byte range must be durable, OFF:LEN (LEN 0 = to EOF); "
                   "the whole file is synced today")
      ->type_name("OFF:LEN");
  fsync->add_option("PATH", a->paths, "Path")->required()->expected(1);
  AddFsData(&group, g);
  AddFsPrealloc(&group, g);
  AddFsTmpfile(&group, g);
  AddFsAttr(&group, g);
  AddFsWatch(&group, g);
  return group.Runner();
}

}  // namespace cli
}  // namespace cowkv
