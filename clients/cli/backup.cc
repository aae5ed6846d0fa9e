// `cowkv backup create|verify|restore` (issue 19): chains of send streams
// in a directory, described by its manifest.json (stream_files.h).
//
//   cowkv backup create SUBVOL --dir DIR [--keep N]
//   cowkv backup verify --dir DIR [--offline]
//   cowkv backup restore --dir DIR [--upto FILE] [--writable] NAME
//
// create: snapshots SUBVOL read-only as SUBVOL@backup-<UTC time>, sends it
// (full the first time, else a difference from the last backup's snapshot)
// to DIR/NNNNNN-full|incr.stream (written as .part, fsynced, renamed, DIR
// fsynced), appends the manifest (replaced atomically), then deletes on the
// server the backup snapshots of this chain older than the newest N (N >= 1:
// the newest is the next parent). Any failure before the manifest is saved
// deletes the new snapshot and the partial file: the chain is unchanged.
//
// verify: every file's size and SHA-256, the chain (each stream a
// difference from the one before), each stream's framing walked locally
// (stream_files.h WalkStreamFile), then a `receive --dry-run` of each on
// the server, which also checks records and that the parent is there; a
// stream whose parent the server does not have is reported as not dry-run.
//
// restore: checks the files and the chain first (nothing is received from
// a broken chain), then receives the streams in order, each intermediate
// one as NAME@restore-<n> and deleted once the next has arrived; the last
// becomes NAME (read-only), or with --writable NAME@base (read-only) plus a
// writable snapshot of it named NAME. A failure deletes what it received.
#include "clients/cli/backup.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"
#include "clients/cli/stream_files.h"
#include "clients/cli/stream_io.h"
#include "cowkv/status_macros.h"

namespace cowkv {
namespace cli {

int StatusFail(absl::string_view op, const absl::Status& s) {
  int rc = kExitFailure;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      rc = kExitInvalidArgument;
      break;
    case absl::StatusCode::kNotFound:
      rc = kExitNotFound;
      break;
    case absl::StatusCode::kAlreadyExists:
      rc = kExitExists;
      break;
    case absl::StatusCode::kFailedPrecondition:
      rc = kExitPrecondition;
      break;
    case absl::StatusCode::kDataLoss:
      rc = kExitDataLoss;
      break;
    default:
      break;
  }
  return Fail(op, s.message(), rc);
}

uint64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string UtcStamp(uint64_t unix_ms) {
  const std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%S", &tm);
  return absl::StrFormat("%s.%03dZ", buf, static_cast<int>(unix_ms % 1000));
}

absl::Status EnsureDir(const std::string& dir) {
  // mkdir -p: each ancestor, then DIR.
  for (size_t slash = dir.find('/', 1);; slash = dir.find('/', slash + 1)) {
    const std::string part = dir.substr(0, slash);
    if (::mkdir(part.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(absl::StrCat(part, ": ", std::strerror(errno)));
    }
    if (slash == std::string::npos) return absl::OkStatus();
  }
}

grpc::Status DeleteSubvolume(Connection& conn, const std::string& name) {
  v1::DeleteSubvolumeRequest req;
  req.set_name(name);
  v1::DeleteSubvolumeResponse resp;
  return Call(conn, conn.subvolumes(), &v1::Subvolumes::Stub::Delete, req, &resp);
}

grpc::Status SnapshotSubvolume(Connection& conn, const std::string& source, const std::string& name,
                               bool read_only, v1::SubvolumeInfo* info) {
  v1::SnapshotRequest req;
  req.set_source(source);
  req.set_name(name);
  req.set_read_only(read_only);
  return Call(conn, conn.subvolumes(), &v1::Subvolumes::Stub::Snapshot, req, info);
}

absl::StatusOr<StreamEntry> SendToDir(Connection& conn, const std::string& snapshot,
                                      const std::string& parent, const std::string& dir,
                                      const std::string& file, grpc::Status* rpc) {
  const std::string path = absl::StrCat(dir, "/", file);
  const std::string part = absl::StrCat(path, ".part");
  std::FILE* out = std::fopen(part.c_str(), "wb");
  if (out == nullptr) return absl::UnavailableError(absl::StrCat(part, ": ", std::strerror(errno)));
  Sha256 sha;
  StreamEntry e;
  v1::SendStats stats;
  bool write_failed = false;
  *rpc = SendToSink(
      conn, snapshot, parent,
      [&](absl::string_view b) {
        sha.Update(b);
        e.bytes += b.size();
        return std::fwrite(b.data(), 1, b.size(), out) == b.size();
      },
      &stats, &write_failed);
  // A local failure (write, fsync, rename) is reported as such, even
  // though it also cancelled the call.
  absl::Status s = write_failed ? absl::UnavailableError(absl::StrCat(part, ": write failed"))
                                : absl::OkStatus();
  if (s.ok() && rpc->ok()) s = SyncFile(out, part);
  if (std::fclose(out) != 0 && s.ok()) s = absl::UnavailableError(absl::StrCat(part, ": close"));
  if (s.ok() && rpc->ok() && std::rename(part.c_str(), path.c_str()) != 0) {
    s = absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
  }
  if (s.ok() && rpc->ok()) s = SyncDir(dir);
  if (!s.ok()) {
    std::remove(part.c_str());
    std::remove(path.c_str());
    *rpc = grpc::Status::OK;
    return s;
  }
  if (!rpc->ok()) {
    std::remove(part.c_str());
    return absl::CancelledError("send failed");  // the call's status is in *rpc
  }
  absl::StatusOr<StreamHeaderInfo> h = ReadStreamHeader(path);
  if (!h.ok()) return h.status();
  e.file = file;
  e.snapshot = snapshot;
  e.uuid = h->uuid;
  e.stransid = h->stransid;
  e.parent_uuid = h->parent_uuid;
  e.parent_stransid = h->parent_stransid;
  e.sha256 = sha.FinishHex();
  e.time_unix_ms = NowUnixMs();
  return e;
}

grpc::Status ReceiveFileAs(Connection& conn, const std::string& path, const std::string& name,
                           v1::ReceiveResponse* resp) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat(path, ": ", std::strerror(errno)));
  }
  bool read_failed = false;
  grpc::Status s = ReceiveFromFile(conn, in, name, false, resp, &read_failed);
  std::fclose(in);
  if (read_failed)
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, absl::StrCat(path, ": read failed"));
  if (!s.ok()) return grpc::Status(s.error_code(), absl::StrCat(path, ": ", s.error_message()));
  return s;
}

namespace {

struct BackupArgs {
  std::string subvolume, dir, upto, name;
  int keep = 1;
  bool offline = false;
  bool writable = false;
};

// One `backup create` per directory at a time: an flock on DIR/.lock, held
// until the command ends (the kernel drops it if the process dies).
class DirLock {
 public:
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  absl::Status Take(const std::string& dir) {
    const std::string path = absl::StrCat(dir, "/.lock");
    fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(dir, " is in use by another `cowkv backup create`"));
    }
    return absl::OkStatus();
  }

 private:
  int fd_ = -1;
};

// The last backup's snapshot must still be on the server, unchanged: it is
// the parent of the next stream.
int CheckParentOnServer(Connection& conn, const StreamEntry& last, const Globals& g) {
  constexpr char kOp[] = "backup create";
  v1::ShowSubvolumeRequest req;
  req.set_name(last.snapshot);
  v1::SubvolumeInfo info;
  grpc::Status s = Call(conn, conn.subvolumes(), &v1::Subvolumes::Stub::Show, req, &info);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    return Fail(kOp,
                absl::StrCat("the last backup's snapshot '", last.snapshot,
                             "' is not on the server: an incremental backup needs it; start a "
                             "new chain in another directory"),
                kExitPrecondition);
  }
  if (!s.ok()) return RpcFail(kOp, s, g);
  const bool same =
      info.read_only() && (info.uuid() == last.uuid || info.received_uuid() == last.uuid);
  if (!same) {
    return Fail(kOp,
                absl::StrCat("'", last.snapshot, "' on the server is not the snapshot of ",
                             last.file, " (uuid ", last.uuid,
                             "): start a new chain in another "
                             "directory"),
                kExitPrecondition);
  }
  return kExitOk;
}

int PruneSnapshots(Connection& conn, const Manifest& m, int keep, const Globals& g) {
  constexpr char kOp[] = "backup create";
  const size_t n = m.streams.size();
  for (size_t i = 0; i + keep < n; ++i) {
    grpc::Status s = DeleteSubvolume(conn, m.streams[i].snapshot);
    if (!s.ok() && s.error_code() != grpc::StatusCode::NOT_FOUND) return RpcFail(kOp, s, g);
  }
  return kExitOk;
}

int CreateDone(const Manifest& m, const StreamEntry& e, const Globals& g) {
  constexpr char kOp[] = "backup create";
  if (g.json) {
    Json j = JsonObject();
    j["subvolume"] = m.subvolume;
    j["stream"] = ManifestToJson(Manifest{"backup", m.subvolume, {e}})["streams"][0];
    j["incremental"] = !e.parent_uuid.empty();
    j["chain_length"] = m.streams.size();
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat("Backup of '", EscapeBytes(m.subvolume), "' as '",
                                EscapeBytes(e.snapshot), "': ", e.file, ", ", e.bytes, " bytes (",
                                e.parent_uuid.empty() ? "full" : "incremental", ")\n"));
}

int RunCreate(const BackupArgs& a, const Globals& g) {
  constexpr char kOp[] = "backup create";
  if (std::string p = SubvolumeNameProblem(a.subvolume); !p.empty()) {
    return Fail(kOp, p, kExitInvalidArgument);
  }
  if (a.keep < 1) return Fail(kOp, "--keep must be at least 1", kExitInvalidArgument);
  if (absl::Status s = EnsureDir(a.dir); !s.ok()) return StatusFail(kOp, s);
  DirLock lock;
  if (absl::Status s = lock.Take(a.dir); !s.ok()) return StatusFail(kOp, s);
  absl::StatusOr<Manifest> m = LoadManifest(a.dir, kBackupManifest);
  if (m.status().code() == absl::StatusCode::kNotFound) m = Manifest{"backup", a.subvolume, {}};
  if (!m.ok()) return StatusFail(kOp, m.status());
  if (m->kind != "backup" || m->subvolume != a.subvolume) {
    return Fail(
        kOp, absl::StrCat(a.dir, " holds backups of '", m->subvolume, "', not '", a.subvolume, "'"),
        kExitPrecondition);
  }
  if (absl::Status s = CheckBackupChain(m->streams); !s.ok()) return StatusFail(kOp, s);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  const std::string parent = m->streams.empty() ? "" : m->streams.back().snapshot;
  if (!parent.empty()) {
    if (int prc = CheckParentOnServer(*conn, m->streams.back(), g); prc != kExitOk) return prc;
  }
  const std::string snap = absl::StrCat(a.subvolume, "@backup-", UtcStamp(NowUnixMs()));
  v1::SubvolumeInfo info;
  grpc::Status s = SnapshotSubvolume(*conn, a.subvolume, snap, true, &info);
  if (!s.ok()) return RpcFail(kOp, s, g);
  const std::string file =
      absl::StrFormat("%06d-%s.stream", m->streams.size() + 1, parent.empty() ? "full" : "incr");
  absl::StatusOr<StreamEntry> e = SendToDir(*conn, snap, parent, a.dir, file, &s);
  absl::Status saved = e.ok() ? absl::OkStatus() : e.status();
  if (e.ok()) {
    m->streams.push_back(*e);
    saved = SaveManifest(a.dir, kBackupManifest, *m);
    if (!saved.ok()) std::remove(absl::StrCat(a.dir, "/", file).c_str());
  }
  if (!saved.ok()) {
    (void)DeleteSubvolume(*conn, snap);  // the chain is as it was
    return s.ok() ? StatusFail(kOp, saved) : RpcFail(kOp, s, g);
  }
  if (int prc = PruneSnapshots(*conn, *m, a.keep, g); prc != kExitOk) return prc;
  return CreateDone(*m, *e, g);
}

// Checks DIR's manifest, chain and files up to and including `upto` (a
// file name; empty = all). On success *streams holds those entries.
absl::Status CheckBackupDir(const std::string& dir, const std::string& upto,
                            std::vector<StreamEntry>* streams) {
  absl::StatusOr<Manifest> m = LoadManifest(dir, kBackupManifest);
  if (!m.ok()) return m.status();
  if (m->kind != "backup") {
    return absl::FailedPreconditionError(absl::StrCat(dir, " holds an export, not backups"));
  }
  if (m->streams.empty()) return absl::NotFoundError(absl::StrCat(dir, ": no backups"));
  size_t n = m->streams.size();
  if (!upto.empty()) {
    n = 0;
    while (n < m->streams.size() && m->streams[n].file != upto) ++n;
    if (n == m->streams.size()) {
      return absl::NotFoundError(absl::StrCat("no stream '", upto, "' in ", dir));
    }
    ++n;
  }
  streams->assign(m->streams.begin(), m->streams.begin() + n);
  COWKV_RETURN_IF_ERROR(CheckBackupChain(*streams));
  for (const StreamEntry& e : *streams) COWKV_RETURN_IF_ERROR(CheckStreamFile(dir, e));
  return absl::OkStatus();
}

// Dry-runs one stream on the server: "ok", or "parent not here" for an
// incremental stream whose parent the server does not have.
absl::StatusOr<std::string> DryRun(Connection& conn, const std::string& path, const StreamEntry& e,
                                   grpc::Status* rpc) {
  std::FILE* in = std::fopen(path.c_str(), "rb");
  if (in == nullptr) return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(errno)));
  v1::ReceiveResponse resp;
  bool read_failed = false;
  *rpc = ReceiveFromFile(conn, in, "cowkv-backup-verify", true, &resp, &read_failed);
  std::fclose(in);
  if (read_failed) return absl::UnavailableError(absl::StrCat(path, ": read failed"));
  if (rpc->ok()) return std::string("dry run ok");
  if (!e.parent_uuid.empty() && rpc->error_code() == grpc::StatusCode::NOT_FOUND) {
    *rpc = grpc::Status::OK;
    return std::string("parent not on the server: not dry-run");
  }
  return absl::CancelledError("dry run failed");
}

int RunVerify(const BackupArgs& a, const Globals& g) {
  constexpr char kOp[] = "backup verify";
  std::vector<StreamEntry> streams;
  if (absl::Status s = CheckBackupDir(a.dir, "", &streams); !s.ok()) return StatusFail(kOp, s);
  std::unique_ptr<Connection> conn;
  if (!a.offline) {
    int rc = 0;
    conn = Connect(kOp, g, &rc);
    if (!conn) return rc;
  }
  Json list = Json::array();
  std::string text;
  for (const StreamEntry& e : streams) {
    const std::string path = absl::StrCat(a.dir, "/", e.file);
    absl::StatusOr<StreamWalk> w = WalkStreamFile(path);
    if (!w.ok()) return StatusFail(kOp, w.status());
    std::string server = "not asked (--offline)";
    if (conn) {
      grpc::Status rpc;
      absl::StatusOr<std::string> r = DryRun(*conn, path, e, &rpc);
      if (!rpc.ok())
        return RpcFail(
            kOp, grpc::Status(rpc.error_code(), absl::StrCat(e.file, ": ", rpc.error_message())),
            g);
      if (!r.ok()) return StatusFail(kOp, r.status());
      server = *r;
    }
    Json j = Json::object();
    j["file"] = e.file;
    j["records"] = w->records;
    j["bytes"] = w->bytes;
    j["server"] = server;
    list.push_back(j);
    absl::StrAppend(&text, e.file, ": sha256 ok, ", w->records, " records ok, ", server, "\n");
  }
  if (!g.json) return Emit(kOp, absl::StrCat(text, "Chain of ", streams.size(), " streams ok\n"));
  Json j = JsonObject();
  j["streams"] = list;
  j["ok"] = true;
  return Emit(kOp, DumpJson(j));
}

// Receives `streams` in order; intermediate ones as NAME@restore-<n>, each
// deleted once the next has arrived; the last as `last_name`. On failure,
// deletes what it received and returns the failed call.
grpc::Status ReceiveChain(Connection& conn, const std::string& dir,
                          const std::vector<StreamEntry>& streams, const std::string& name,
                          const std::string& last_name) {
  std::string previous;
  for (size_t i = 0; i < streams.size(); ++i) {
    const std::string as =
        i + 1 == streams.size() ? last_name : absl::StrCat(name, "@restore-", i + 1);
    v1::ReceiveResponse resp;
    grpc::Status s = ReceiveFileAs(conn, absl::StrCat(dir, "/", streams[i].file), as, &resp);
    if (!s.ok()) {
      if (!previous.empty()) (void)DeleteSubvolume(conn, previous);
      return s;
    }
    if (!previous.empty()) {
      grpc::Status d = DeleteSubvolume(conn, previous);
      if (!d.ok()) return d;
    }
    previous = as;
  }
  return grpc::Status::OK;
}

int RunRestore(const BackupArgs& a, const Globals& g) {
  constexpr char kOp[] = "backup restore";
  if (std::string p = SubvolumeNameProblem(a.name); !p.empty()) {
    return Fail(kOp, p, kExitInvalidArgument);
  }
  std::vector<StreamEntry> streams;
  if (absl::Status s = CheckBackupDir(a.dir, a.upto, &streams); !s.ok()) {
    return StatusFail(kOp, s);
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  const std::string base = a.writable ? absl::StrCat(a.name, "@base") : a.name;
  grpc::Status s = ReceiveChain(*conn, a.dir, streams, a.name, base);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (a.writable) {
    v1::SubvolumeInfo info;
    s = SnapshotSubvolume(*conn, base, a.name, false, &info);
    if (!s.ok()) return RpcFail(kOp, s, g);
  }
  const StreamEntry& last = streams.back();
  if (g.json) {
    Json j = JsonObject();
    j["name"] = a.name;
    j["read_only_snapshot"] = base;
    j["writable"] = a.writable;
    j["streams"] = streams.size();
    j["upto"] = last.file;
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp,
              absl::StrCat("Restored ", streams.size(), " streams up to ", last.file, " ('",
                           EscapeBytes(last.snapshot), "') as '", EscapeBytes(base), "'",
                           a.writable ? absl::StrCat(", writable as '", EscapeBytes(a.name), "'")
                                      : std::string(),
                           "\n"));
}

}  // namespace

RunFn AddBackup(CLI::App* app, const GlobalsPtr& g) {
  CommandGroup group(app, "backup",
                     "Chains of send streams in a directory: create, verify, restore (online)");
  auto a = std::make_shared<BackupArgs>();
  CLI::App* create = group.Add("create", "Snapshot SUBVOL read-only and send it to DIR",
                               [a, g] { return RunCreate(*a, *g); });
  create->add_option("SUBVOL", a->subvolume, "Subvolume to back up")->required();
  create->add_option("--dir", a->dir, "Backup directory (made if missing)")->required();
  create->add_option("--keep", a->keep,
                     "Backup snapshots to keep on the server (>= 1; the newest is the next "
                     "parent)");
  CLI::App* verify = group.Add("verify", "Check DIR's files, chain and streams",
                               [a, g] { return RunVerify(*a, *g); });
  verify->add_option("--dir", a->dir, "Backup directory")->required();
  verify->add_flag("--offline", a->offline, "Check the files only; no server dry run");
  CLI::App* restore = group.Add("restore", "Receive DIR's chain into the server as NAME",
                                [a, g] { return RunRestore(*a, *g); });
  restore->add_option("--dir", a->dir, "Backup directory")->required();
  restore->add_option("--upto", a->upto, "Last stream file to restore (default: the newest)");
  restore->add_flag("--writable", a->writable,
                    "Make NAME writable (a snapshot of the read-only NAME@base)");
  restore->add_option("NAME", a->name, "Name of the restored subvolume")->required();
  return group.Runner();
}

}  // namespace cli
}  // namespace cowkv
