// `cowkv lease grant|revoke|keep-alive|timetolive|list` (service Lease) and
// `cowkv lock NAME -- COMMAND...`, a lock built from a lease and a Txn as
// etcd's concurrency package builds its Mutex (docs/cli.md "Leases and
// locks"):
//
//   cowkv lease grant [-s NAME] [--id ID] TTL   "lease ID granted with TTL(60s)"
//   cowkv lease revoke [-s NAME] ID             "lease ID revoked"
//   cowkv lease keep-alive [-s NAME] [--once] ID  one line per keep-alive
//   cowkv lease timetolive [-s NAME] [--keys] ID
//   cowkv lease list [-s NAME]
//   cowkv lock [-s NAME] [--ttl 60] NAME -- COMMAND [ARG...]
//
// Lease ids are printed and read in decimal.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cli/commands.h"
#include "clients/cli/kv_commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"
#include "cowkv/v1/kv.grpc.pb.h"
#include "cowkv/v1/lease.grpc.pb.h"

extern char** environ;

namespace cowkv {
namespace cli {

namespace {

struct LeaseArgs {
  std::string subvolume = "default";
  int64_t ttl = 0;
  int64_t id = 0;
  bool keys = false;
  bool once = false;
  std::string durability;
  // lock
  std::string name;
  std::vector<std::string> command;
};

void AddSubvolume(CLI::App* cmd, LeaseArgs* a) {
  cmd->add_option("-s,--subvolume", a->subvolume, "Subvolume name")->capture_default_str();
}

int RunGrant(const LeaseArgs& a, const Globals& g) {
  constexpr char kOp[] = "lease grant";
  absl::StatusOr<v1::Durability> d = ParseDurability(a.durability);
  if (!d.ok()) return Fail(kOp, d.status().message(), kExitUsage);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  auto stub = v1::Lease::NewStub(conn->channel());
  v1::LeaseGrantRequest req;
  req.set_subvolume(a.subvolume);
  req.set_ttl(a.ttl);
  req.set_id(a.id);
  req.set_durability(*d);
  v1::LeaseGrantResponse resp;
  grpc::Status s = Call(*conn, *stub, &v1::Lease::Stub::Grant, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    j["id"] = resp.id();
    j["ttl"] = resp.ttl();
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat("lease ", resp.id(), " granted with TTL(", resp.ttl(), "s)\n"));
}

int RunRevoke(const LeaseArgs& a, const Globals& g) {
  constexpr char kOp[] = "lease revoke";
  absl::StatusOr<v1::Durability> d = ParseDurability(a.durability);
  if (!d.ok()) return Fail(kOp, d.status().message(), kExitUsage);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  auto stub = v1::Lease::NewStub(conn->channel());
  v1::LeaseRevokeRequest req;
  req.set_subvolume(a.subvolume);
  req.set_id(a.id);
  req.set_durability(*d);
  v1::LeaseRevokeResponse resp;
  grpc::Status s = Call(*conn, *stub, &v1::Lease::Stub::Revoke, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    j["id"] = a.id;
    j["revision"] = resp.revision();
    return Emit(kOp, DumpJson(j));
  }
  return Emit(kOp, absl::StrCat("lease ", a.id, " revoked\n"));
}

// Keeps `id` alive on one stream until `stop` is notified or the lease is
// gone; each answer goes to `on_ttl` (0 = gone). Returns the stream's end.
grpc::Status KeepAliveLoop(Connection& conn, v1::Lease::Stub& stub, const std::string& subvolume,
                           int64_t id, bool once, absl::Notification* stop,
                           const std::function<void(int64_t)>& on_ttl) {
  grpc::ClientContext ctx;
  conn.Authorize(&ctx);  // a stream: no overall deadline
  auto stream = stub.KeepAlive(&ctx);
  v1::LeaseKeepAliveRequest req;
  req.set_subvolume(subvolume);
  req.set_id(id);
  for (;;) {
    v1::LeaseKeepAliveResponse resp;
    if (!stream->Write(req) || !stream->Read(&resp)) break;
    on_ttl(resp.ttl());
    if (resp.ttl() <= 0 || once) break;
    // As etcd's client: again after a third of the TTL.
    const absl::Duration wait = absl::Milliseconds(std::max<int64_t>(resp.ttl() * 1000 / 3, 100));
    if (stop != nullptr ? stop->WaitForNotificationWithTimeout(wait)
                        : (absl::SleepFor(wait), false)) {
      break;
    }
  }
  stream->WritesDone();
  return stream->Finish();
}

int RunKeepAlive(const LeaseArgs& a, const Globals& g) {
  constexpr char kOp[] = "lease keep-alive";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  auto stub = v1::Lease::NewStub(conn->channel());
  bool gone = false;
  grpc::Status s =
      KeepAliveLoop(*conn, *stub, a.subvolume, a.id, a.once, nullptr, [&](int64_t ttl) {
        gone = ttl <= 0;
        if (g.json) {
          Json j = JsonObject();
          j["id"] = a.id;
          j["ttl"] = ttl;
          (void)Emit(kOp, DumpJson(j));
        } else if (!gone) {
          (void)Emit(kOp, absl::StrCat("lease ", a.id, " keepalived with TTL(", ttl, ")\n"));
        }
      });
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (gone) return Fail(kOp, absl::StrCat("lease ", a.id, " expired or revoked"), kExitNotFound);
  return kExitOk;
}

int RunTimeToLive(const LeaseArgs& a, const Globals& g) {
  constexpr char kOp[] = "lease timetolive";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  auto stub = v1::Lease::NewStub(conn->channel());
  v1::LeaseTimeToLiveRequest req;
  req.set_subvolume(a.subvolume);
  req.set_id(a.id);
  req.set_keys(a.keys);
  v1::LeaseTimeToLiveResponse resp;
  grpc::Status s = Call(*conn, *stub, &v1::Lease::Stub::TimeToLive, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    j["id"] = resp.id();
    j["ttl"] = resp.ttl();
    j["granted_ttl"] = resp.granted_ttl();
    if (a.keys) {
      Json keys = Json::array();
      for (const std::string& k : resp.keys()) keys.push_back(EscapeBytes(k));
      j["keys"] = keys;
    }
    return Emit(kOp, DumpJson(j));
  }
  std::string out = absl::StrCat("lease ", resp.id(), " granted with TTL(", resp.granted_ttl(),
                                 "s), remaining(", resp.ttl(), "s)");
  if (a.keys) {
    std::vector<std::string> keys;
    for (const std::string& k : resp.keys()) keys.push_back(EscapeBytes(k));
    absl::StrAppend(&out, ", attached keys([", absl::StrJoin(keys, " "), "])");
  }
  return Emit(kOp, out + "\n");
}

int RunList(const LeaseArgs& a, const Globals& g) {
  constexpr char kOp[] = "lease list";
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  auto stub = v1::Lease::NewStub(conn->channel());
  v1::LeaseLeasesRequest req;
  req.set_subvolume(a.subvolume);
  v1::LeaseLeasesResponse resp;
  grpc::Status s = Call(*conn, *stub, &v1::Lease::Stub::Leases, req, &resp);
  if (!s.ok()) return RpcFail(kOp, s, g);
  if (g.json) {
    Json j = JsonObject();
    Json ids = Json::array();
    for (int64_t id : resp.ids()) ids.push_back(id);
    j["ids"] = ids;
    return Emit(kOp, DumpJson(j));
  }
  std::string out = absl::StrCat("found ", resp.ids_size(), " leases\n");
  for (int64_t id : resp.ids()) absl::StrAppend(&out, id, "\n");
  return Emit(kOp, out);
}

// ---- cowkv lock -------------------------------------------------------------------

// Runs `argv` and returns its exit code (128 + signal if killed).
int RunChild(const std::vector<std::string>& argv, std::string* error) {
  std::vector<char*> args;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int err = posix_spawnp(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (err != 0) {
    *error = absl::StrCat("cannot run ", argv[0], ": ", std::strerror(err));
    return -1;
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// etcd's concurrency.Mutex without watch: the key NAME/<lease id>, created
// in a Txn with the lease if absent; its create revision orders the
// waiters; the holder is the one whose key has the lowest create revision.
// A waiter polls (Range of the prefix) with backoff, 50 ms doubling to 1 s,
// until no key of the prefix is older than its own.
int RunLock(const LeaseArgs& a, const Globals& g) {
  constexpr char kOp[] = "lock";
  if (a.command.empty())
    return Fail(kOp, "no command given (cowkv lock NAME -- COMMAND...)", kExitUsage);
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  auto lease = v1::Lease::NewStub(conn->channel());
  v1::LeaseGrantRequest grant;
  grant.set_subvolume(a.subvolume);
  grant.set_ttl(a.ttl);
  v1::LeaseGrantResponse granted;
  grpc::Status s = Call(*conn, *lease, &v1::Lease::Stub::Grant, grant, &granted);
  if (!s.ok()) return RpcFail(kOp, s, g);
  const int64_t id = granted.id();
  absl::Notification stop;
  std::atomic<bool> lost{false};
  std::thread keeper([&] {
    (void)KeepAliveLoop(*conn, *lease, a.subvolume, id, false, &stop,
                        [&](int64_t ttl) { lost = lost || ttl <= 0; });
  });
  auto finish = [&](int code) {
    stop.Notify();
    keeper.join();
    v1::LeaseRevokeRequest revoke;  // deletes the lock key with the lease
    revoke.set_subvolume(a.subvolume);
    revoke.set_id(id);
    v1::LeaseRevokeResponse revoked;
    (void)Call(*conn, *lease, &v1::Lease::Stub::Revoke, revoke, &revoked);
    return code;
  };
  const std::string prefix = a.name + "/";
  const std::string key = absl::StrCat(prefix, id);
  v1::TxnRequest txn;
  txn.set_subvolume(a.subvolume);
  v1::Compare* c = txn.add_compare();
  c->set_key(key);
  c->set_target(v1::Compare::TARGET_CREATE_REVISION);
  c->set_op(v1::Compare::OP_EQUAL);
  c->set_number(0);
  v1::PutOp* put = txn.add_success()->mutable_put();
  put->set_key(key);
  put->set_lease(id);
  v1::RangeOp* get = txn.add_failure()->mutable_range();
  get->set_start(key);
  get->set_end(key + std::string(1, '\0'));
  v1::TxnResponse txn_resp;
  s = Call(*conn, conn->kv(), &v1::KV::Stub::Txn, txn, &txn_resp);
  if (!s.ok()) return finish(RpcFail(kOp, s, g));
  uint64_t mine = txn_resp.revision();
  if (!txn_resp.succeeded() && txn_resp.responses_size() == 1 &&
      txn_resp.responses(0).range().kvs_size() == 1) {
    mine = txn_resp.responses(0).range().kvs(0).create_revision();
  }
  absl::Duration backoff = absl::Milliseconds(50);
  for (;;) {
    v1::RangeRequest range;
    range.set_subvolume(a.subvolume);
    range.set_prefix(prefix);
    range.set_keys_only(true);
    v1::RangeResponse got;
    s = Call(*conn, conn->kv(), &v1::KV::Stub::Range, range, &got);
    if (!s.ok()) return finish(RpcFail(kOp, s, g));
    bool older = false;
    for (const v1::KeyValue& kv : got.kvs()) older = older || kv.create_revision() < mine;
    if (!older && got.next_page_token().empty()) break;
    if (lost)
      return finish(Fail(kOp, absl::StrCat("lease ", id, " lost while waiting"), kExitConflict));
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
  std::string error;
  const int code = RunChild(a.command, &error);
  if (code < 0) return finish(Fail(kOp, error));
  if (lost)
    return finish(
        Fail(kOp, absl::StrCat("lease ", id, " was lost while the command ran"), kExitConflict));
  return finish(code);
}

}  // namespace

RunFn AddLease(CLI::App* app, const GlobalsPtr& g) {
  CommandGroup group(app, "lease", "Grant, keep alive and revoke leases (online)");
  auto a = std::make_shared<LeaseArgs>();
  CLI::App* grant =
      group.Add("grant", "Grant a lease of TTL seconds", [a, g] { return RunGrant(*a, *g); });
  AddSubvolume(grant, a.get());
  grant->add_option("TTL", a->ttl, "Seconds")->required();
  grant->add_option("--id", a->id, "The lease id to use (default: the server picks)");
  AddDurabilityOption(grant, &a->durability);
  CLI::App* revoke = group.Add("revoke", "Revoke a lease and delete its keys",
                               [a, g] { return RunRevoke(*a, *g); });
  AddSubvolume(revoke, a.get());
  revoke->add_option("ID", a->id, "Lease id")->required();
  AddDurabilityOption(revoke, &a->durability);
  CLI::App* keep = group.Add("keep-alive", "Keep a lease alive until it is gone (or --once)",
                             [a, g] { return RunKeepAlive(*a, *g); });
  AddSubvolume(keep, a.get());
  keep->add_option("ID", a->id, "Lease id")->required();
  keep->add_flag("--once", a->once, "One keep-alive, then exit");
  CLI::App* ttl = group.Add("timetolive", "A lease's TTLs (and --keys)",
                            [a, g] { return RunTimeToLive(*a, *g); });
  AddSubvolume(ttl, a.get());
  ttl->add_option("ID", a->id, "Lease id")->required();
  ttl->add_flag("--keys", a->keys, "Also list the attached keys");
  CLI::App* list = group.Add("list", "List the leases", [a, g] { return RunList(*a, *g); });
  AddSubvolume(list, a.get());
  return group.Runner();
}

RunFn AddLock(CLI::App* app, const GlobalsPtr& g) {
  auto a = std::make_shared<LeaseArgs>();
  a->ttl = 60;
  CLI::App* lock = app->add_subcommand(
      "lock", "Run a command holding a lock (a lease + Txn, as etcd's concurrency.Mutex)");
  AddSubvolume(lock, a.get());
  lock->add_option("--ttl", a->ttl, "The lock's lease TTL in seconds")->capture_default_str();
  lock->add_option("NAME", a->name, "The lock's name (a key prefix)")->required();
  lock->add_option("COMMAND", a->command, "The command and its arguments (after --)")->required();
  return [a, g] { return RunLock(*a, *g); };
}

}  // namespace cli
}  // namespace cowkv
