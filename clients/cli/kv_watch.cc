// `cowkv kv watch`: prints a key's (or a range's) changes as they become
// durable, like `etcdctl watch` (docs/cli.md "Online commands"):
//
//   cowkv kv watch [-s NAME] [--prefix] [--rev N] [--prev-kv]
//                  [--max-events N] KEY [RANGE_END]
//
// Each event prints its type, then (with --prev-kv, when there was one) the
// key and value before, then the key and value (empty for a DELETE), one
// per line, as etcdctl's simple format; --json prints one object per
// event. It runs until interrupted, --max-events events were printed, or
// the server ends the watcher (compacted start, deleted subvolume, slow
// reader, server stop): then the reason on stderr and a non-zero exit.
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "clients/cli/kv_commands.h"
#include "clients/cli/online.h"
#include "clients/cli/output.h"

namespace cowkv {
namespace cli {

namespace {

struct WatchArgs {
  std::string subvolume = "default";
  std::string key, range_end;
  bool prefix = false, prev_kv = false;
  uint64_t rev = 0;
  uint64_t max_events = 0;
};

// KEY + 1 in its last byte that is not 0xff (etcd's GetPrefixRangeEnd);
// "\0" (every key) for a key of 0xff bytes only.
std::string PrefixEnd(const std::string& key) {
  std::string end = key;
  while (!end.empty() && static_cast<unsigned char>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return std::string(1, '\0');
  end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
  return end;
}

std::string EventText(const v1::WatchEvent& e) {
  std::string out = e.type() == v1::WatchEvent::PUT ? "PUT\n" : "DELETE\n";
  if (e.has_prev_kv()) {
    absl::StrAppend(&out, EscapeBytes(e.prev_kv().key()), "\n", EscapeBytes(e.prev_kv().value()),
                    "\n");
  }
  absl::StrAppend(&out, EscapeBytes(e.kv().key()), "\n", EscapeBytes(e.kv().value()), "\n");
  return out;
}

std::string EventJson(const v1::WatchEvent& e, const v1::WatchResponse& r) {
  Json j = JsonObject();
  j["type"] = e.type() == v1::WatchEvent::PUT ? "PUT" : "DELETE";
  j["watch_id"] = r.watch_id();
  j["revision"] = e.kv().mod_revision();
  j["kv"] = KeyValueJson(e.kv(), false);
  if (e.has_prev_kv()) j["prev_kv"] = KeyValueJson(e.prev_kv(), false);
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);  // one line
}

int RunWatch(const WatchArgs& a, const Globals& g) {
  constexpr char kOp[] = "kv watch";
  if (a.prefix && !a.range_end.empty()) {
    return Fail(kOp, "--prefix and RANGE_END are exclusive", kExitUsage);
  }
  int rc = 0;
  auto conn = Connect(kOp, g, &rc);
  if (!conn) return rc;
  grpc::ClientContext ctx;
  conn->Authorize(&ctx);  // a stream: no overall deadline
  auto stream = conn->kv().Watch(&ctx);
  v1::WatchRequest req;
  v1::WatchCreateRequest* c = req.mutable_create_request();
  c->set_subvolume(a.subvolume);
  c->set_key(a.key);
  c->set_range_end(a.prefix ? PrefixEnd(a.key) : a.range_end);
  c->set_start_revision(a.rev);
  c->set_prev_kv(a.prev_kv);
  uint64_t printed = 0;
  v1::WatchResponse r;
  if (stream->Write(req)) {
    while (stream->Read(&r)) {
      if (r.canceled()) return WatchCanceled(kOp, r);
      for (const v1::WatchEvent& e : r.events()) {
        rc = Emit(kOp, g.json ? EventJson(e, r) + "\n" : EventText(e));
        if (rc != kExitOk) return rc;
        ++printed;
      }
      if (a.max_events != 0 && printed >= a.max_events) {
        ctx.TryCancel();
        return kExitOk;
      }
    }
  }
  const grpc::Status s = stream->Finish();
  return s.ok() ? kExitOk : RpcFail(kOp, s, g);
}

}  // namespace

int WatchCanceled(const char* op, const v1::WatchResponse& r) {
  std::string why =
      absl::StrCat(v1::WatchCancelCode_Name(r.cancel_code()), ": ", r.cancel_reason());
  if (r.compact_revision() != 0) {
    absl::StrAppend(&why, " (oldest revision served: ", r.compact_revision(), ")");
  }
  const auto code = static_cast<grpc::StatusCode>(r.error_code());
  return Fail(op, why, r.error_code() != 0 ? ExitCodeFor(code) : kExitFailure);
}

void AddKvWatch(CommandGroup* group, const GlobalsPtr& g) {
  auto a = std::make_shared<WatchArgs>();
  CLI::App* w = group->Add("watch", "Print the changes of a key or range as they happen",
                           [a, g] { return RunWatch(*a, *g); });
  w->add_option("-s,--subvolume", a->subvolume, "Subvolume name")->capture_default_str();
  w->add_option("KEY", a->key, "The key (the prefix with --prefix)")->required();
  w->add_option("RANGE_END", a->range_end, "Watch [KEY, RANGE_END) instead of one key");
  w->add_flag("--prefix", a->prefix, "Watch every key starting with KEY");
  w->add_option("--rev", a->rev, "Start at this revision, from the history (0 = from now)");
  w->add_flag("--prev-kv", a->prev_kv, "Print the key and value before each change too");
  w->add_option("--max-events", a->max_events, "Exit after N events (0 = run until stopped)");
}

}  // namespace cli
}  // namespace cowkv
