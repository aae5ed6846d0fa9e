// cowkvd: the cowkv server.
//
//   cowkvd --device PATH [--create-size 1G] [--mkfs | --read-only]
//          [--listen 127.0.0.1:7420] [--metrics-listen 127.0.0.1:7421]
//          [--tls-cert FILE --tls-key FILE] [--auth-token-file FILE]
//          [--commit-interval-ms N] [--async-default] [--max-txn-ops N]
//          [--log-format text|json] [--log-level info] [--slow-op-ms 1000]
//
// Binds loopback unless told otherwise. Creates and formats the device file
// if it is absent; never formats an existing device unless --mkfs. Refuses
// to serve a device another cowkvd holds. SIGINT/SIGTERM: drain in-flight
// calls, commit, exit 0.
//
// Exit codes: 0 clean stop; 1 the server could not start or its final
// commit failed; 2 usage error (CLI11's own codes are mapped to 2).
#include <malloc.h>
#include <signal.h>

#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "build_info/build_info.h"
#include "cowkv/status_macros.h"
#include "server/limits.h"
#include "server/log.h"
#include "server/server.h"

namespace cowkv {
namespace server {
namespace {

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// Usage errors go to stderr as a sentence (the log is not set up yet);
// failures after that are "start_failed" / "stop_failed" events.
int Fail(absl::string_view what, absl::string_view why, int code = kExitFailure) {
  std::cerr << "cowkvd: " << what << ": " << why << std::endl;
  return code;
}

int FailEvent(absl::string_view event, absl::string_view why) {
  Log(LogLevel::kError, event, why);
  return kExitFailure;
}

// "1G", "512M", "4096", "64MiB": powers of 1024.
absl::StatusOr<uint64_t> ParseSize(absl::string_view text) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  for (absl::string_view suffix : {"IB", "B"}) {
    if (t.size() > suffix.size() && absl::EndsWith(t, suffix)) t.resize(t.size() - suffix.size());
  }
  int shift = 0;
  if (!t.empty() && !absl::ascii_isdigit(t.back())) {
    const std::string units = "KMGTPE";
    const size_t u = units.find(t.back());
    if (u == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "'"));
    shift = 10 * static_cast<int>(u + 1);
    t.pop_back();
  }
  uint64_t n = 0;
  if (!absl::SimpleAtoi(t, &n) || (shift > 0 && n > (UINT64_MAX >> shift))) {
    return absl::InvalidArgumentError(absl::StrCat("bad size '", text, "'"));
  }
  return n << shift;
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

struct Flags {
  std::string device;
  std::string create_size = "1G";
  bool mkfs = false;
  bool read_only = false;
  std::string listen = "127.0.0.1:7420";
  std::string metrics_listen = "127.0.0.1:7421";
  std::string tls_cert, tls_key, token_file, client_ca;
  uint64_t commit_interval_ms = 30000;
  bool async_default = false;
  size_t max_txn_ops = kDefaultMaxTxnOps;
  int max_txns_per_client = kMaxOpenTxnsPerPeer;
  int max_txns = kMaxOpenTxnsTotal;
  int max_open_files_per_client = kMaxOpenFilesPerPeer;
  int max_open_files = kMaxOpenFilesTotal;
  std::string max_inflight_bytes = "1G";
  bool insecure_listen = false;
  int max_threads = kDefaultMaxThreads;
  int max_calls_per_client = kDefaultMaxCallsPerClient;
  int max_waiting_writes = kDefaultMaxWaitingWrites;
  std::string log_format = "text";
  std::string log_level = "info";
  uint64_t slow_op_ms = 1000;
  // A read replica (follower.h).
  std::string follow;
  std::vector<std::string> follow_subvolumes;
  double follow_interval_s = 5;
  std::string follow_token_file, follow_tls_ca;
};

void DeclareFlags(CLI::App& app, Flags& f) {
  app.add_option("--device", f.device, "Device or image file to serve (created if absent)")->required();
  app.add_option("--create-size", f.create_size, "Size of a new device file (default 1G)");
  app.add_flag("--mkfs", f.mkfs, "Format the device even if it exists (destroys its contents)");
  app.add_flag("--read-only", f.read_only,
               "Serve an existing device read-only (opened O_RDONLY, locked shared): reads work, "
               "every write is FAILED_PRECONDITION (EROFS)");
  app.add_option("--listen", f.listen, "gRPC address host:port (default 127.0.0.1:7420)");
  app.add_option("--metrics-listen", f.metrics_listen,
                 "Prometheus /metrics address host:port; empty = off (default 127.0.0.1:7421)");
  app.add_option("--tls-cert", f.tls_cert, "PEM certificate chain (with --tls-key)");
  app.add_option("--tls-key", f.tls_key, "PEM private key (with --tls-cert)");
  app.add_option("--client-ca", f.client_ca,
                 "PEM CA: require client certificates it signed (mTLS; with --tls-cert)");
  app.add_option("--auth-token-file", f.token_file,
                 "Bearer tokens every call must send: one per line, TOKEN [read|write|admin "
                 "[SUBVOLUME,...]] (docs/api.md, \"Access\")");
  app.add_option("--commit-interval-ms", f.commit_interval_ms,
                 "Engine commit interval (default 30000; 0 = none)");
  app.add_flag("--async-default", f.async_default,
               "Acknowledge DURABILITY_DEFAULT writes before they are durable");
  app.add_option("--max-txn-ops", f.max_txn_ops,
                 absl::StrCat("Ops per Txn branch and compares per Txn (default ",
                              kDefaultMaxTxnOps, ", at most ", kMaxTxnOps, ")"));
  app.add_option("--max-txns-per-client", f.max_txns_per_client,
                 absl::StrCat("Open interactive transactions per client address (default ",
                              kMaxOpenTxnsPerPeer, ")"));
  app.add_flag("--insecure-listen", f.insecure_listen,
               "Allow --listen/--metrics-listen beyond loopback without TLS and a token");
  app.add_option("--max-inflight-bytes", f.max_inflight_bytes,
                 "Response bytes all running calls may hold at once; more wait, then RESOURCE_EXHAUSTED "
                 "(default 1G)");
  app.add_option("--max-threads", f.max_threads,
                 absl::StrCat("gRPC threads, one per running call; calls past it are refused (default ",
                              kDefaultMaxThreads, ")"));
  app.add_option("--log-format", f.log_format,
                 "Log lines as text (key=value) or json (default text)");
  app.add_option("--log-level", f.log_level,
                 "Lowest level logged: debug, info, warn, error, off (default info)");
  app.add_option("--slow-op-ms", f.slow_op_ms,
                 "Log commits and log syncs slower than this (default 1000; 0 = never)");
  app.add_option("--max-calls-per-client", f.max_calls_per_client,
                 absl::StrCat("Calls one client address may have in flight, unread responses "
                              "included (default ",
                              kDefaultMaxCallsPerClient, ")"));
  app.add_option("--max-waiting-writes", f.max_waiting_writes,
                 absl::StrCat("Durable writes that may wait for their sync at once, server-wide "
                              "(they hold no thread; default ",
                              kDefaultMaxWaitingWrites, ")"));
  app.add_option("--max-txns", f.max_txns,
                 absl::StrCat("Open interactive transactions in all (default ", kMaxOpenTxnsTotal, ")"));
  app.add_option("--max-open-files-per-client", f.max_open_files_per_client,
                 absl::StrCat("Open file handles (Files.Open) per client address (default ",
                              kMaxOpenFilesPerPeer, ")"));
  app.add_option("--max-open-files", f.max_open_files,
                 absl::StrCat("Open file handles in all (default ", kMaxOpenFilesTotal, ")"));
  app.add_option("--follow", f.follow,
                 "Be a read replica of the cowkvd at host:port (docs/design.md \"Read replicas\")");
  app.add_option("--follow-subvolume", f.follow_subvolumes,
                 "Subvolume(s) to replicate (NAME[,NAME...]); readers find each under its name")
      ->delimiter(',');
  app.add_option("--follow-interval", f.follow_interval_s,
                 "Seconds between pulls from the primary (default 5)");
  app.add_option("--follow-token-file", f.follow_token_file,
                 "Bearer token for the primary (a token with read and admin access there)");
  app.add_option("--follow-tls-ca", f.follow_tls_ca,
                 "Connect to the primary with TLS, verified by this PEM CA");
}

// Whether host:port names this machine only (127.0.0.0/8, ::1, localhost).
bool IsLoopback(absl::string_view listen) {
  absl::string_view host = listen.substr(0, listen.rfind(':'));
  if (absl::ConsumePrefix(&host, "[")) absl::ConsumeSuffix(&host, "]");
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

// The TLS files and the token file, read into `o`.
absl::Status ReadSecurityFiles(const Flags& f, ServerOptions& o) {
  if (f.tls_cert.empty() != f.tls_key.empty()) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  }
  if (!f.tls_cert.empty()) {
    COWKV_ASSIGN_OR_RETURN(o.tls_cert_pem, ReadFile(f.tls_cert));
    COWKV_ASSIGN_OR_RETURN(o.tls_key_pem, ReadFile(f.tls_key));
  }
  if (!f.client_ca.empty()) {
    if (f.tls_cert.empty()) return absl::InvalidArgumentError("--client-ca needs --tls-cert and --tls-key");
    COWKV_ASSIGN_OR_RETURN(o.client_ca_pem, ReadFile(f.client_ca));
  }
  if (!f.token_file.empty()) {
    COWKV_ASSIGN_OR_RETURN(std::string text, ReadFile(f.token_file));
    absl::StatusOr<TokenTable> tokens = TokenTable::Parse(text);
    if (!tokens.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--auth-token-file ", f.token_file, ": ", tokens.status().message()));
    }
    o.tokens = *std::move(tokens);
  }
  return absl::OkStatus();
}

// --follow and its companions, into o.follow.
absl::Status FollowOptionsOf(const Flags& f, ServerOptions& o) {
  const bool any =
      !f.follow_subvolumes.empty() || !f.follow_token_file.empty() || !f.follow_tls_ca.empty();
  if (f.follow.empty()) {
    if (any) return absl::InvalidArgumentError("--follow-* options need --follow ADDR");
    return absl::OkStatus();
  }
  if (f.follow_subvolumes.empty()) {
    return absl::InvalidArgumentError("--follow needs --follow-subvolume NAME[,NAME...]");
  }
  if (f.read_only) return absl::InvalidArgumentError("--follow writes replicas: not --read-only");
  if (!(f.follow_interval_s >= 0.05 && f.follow_interval_s <= 86400)) {
    return absl::InvalidArgumentError("--follow-interval: from 0.05 to 86400 seconds");
  }
  for (const std::string& n : f.follow_subvolumes) {
    if (n.empty() || n.size() > 200 || n.find('/') != std::string::npos ||
        n.find(kFollowSuffix) != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--follow-subvolume '", n, "': 1..200 bytes, no '/' and no '", kFollowSuffix, "'"));
    }
  }
  o.follow.primary = f.follow;
  o.follow.subvolumes = f.follow_subvolumes;
  o.follow.interval = absl::Seconds(f.follow_interval_s);
  if (!f.follow_token_file.empty()) {
    COWKV_ASSIGN_OR_RETURN(std::string token, ReadFile(f.follow_token_file));
    o.follow.token = std::string(absl::StripAsciiWhitespace(token));
  }
  if (!f.follow_tls_ca.empty()) {
    COWKV_ASSIGN_OR_RETURN(o.follow.tls_ca_pem, ReadFile(f.follow_tls_ca));
  }
  return absl::OkStatus();
}

absl::StatusOr<ServerOptions> ToOptions(const Flags& f) {
  ServerOptions o;
  o.device.path = f.device;
  absl::StatusOr<uint64_t> size = ParseSize(f.create_size);
  if (!size.ok())
    return absl::InvalidArgumentError(absl::StrCat("--create-size: ", size.status().message()));
  o.device.create_size = *size;
  o.device.mkfs = f.mkfs;
  o.device.read_only = f.read_only;
  o.engine.read_only = f.read_only;
  o.listen = f.listen;
  o.metrics_listen = f.metrics_listen;
  COWKV_RETURN_IF_ERROR(ReadSecurityFiles(f, o));
  if (f.max_txn_ops == 0 || f.max_txn_ops > kMaxTxnOps) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-txn-ops: from 1 to ", kMaxTxnOps, ", not ", f.max_txn_ops));
  }
  o.limits.max_txn_ops = f.max_txn_ops;
  if (f.max_txns_per_client < 1 || f.max_txns < f.max_txns_per_client) {
    return absl::InvalidArgumentError(
        "--max-txns-per-client: at least 1, and --max-txns at least as many");
  }
  o.max_txns_per_peer = f.max_txns_per_client;
  absl::StatusOr<uint64_t> inflight = ParseSize(f.max_inflight_bytes);
  if (!inflight.ok() || *inflight < (64u << 20)) {
    return absl::InvalidArgumentError("--max-inflight-bytes: a size of at least 64M");
  }
  o.limits.inflight_bytes = *inflight;
  if (f.max_threads < 16) return absl::InvalidArgumentError("--max-threads: at least 16");
  o.limits.max_threads = f.max_threads;
  if (f.max_calls_per_client < 1)
    return absl::InvalidArgumentError("--max-calls-per-client: at least 1");
  o.limits.max_calls_per_client = f.max_calls_per_client;
  if (f.max_waiting_writes < 1) {
    return absl::InvalidArgumentError("--max-waiting-writes: at least 1");
  }
  o.limits.max_waiting_writes = f.max_waiting_writes;
  o.max_txns_total = f.max_txns;
  if (f.max_open_files_per_client < 1 || f.max_open_files < f.max_open_files_per_client) {
    return absl::InvalidArgumentError(
        "--max-open-files-per-client: at least 1, and --max-open-files at least as many");
  }
  o.max_files_per_peer = f.max_open_files_per_client;
  o.max_files_total = f.max_open_files;
  // Beyond loopback, anyone on the network could read and write
  // everything (and /metrics has no authentication at all).
  if (!f.insecure_listen) {
    if (!IsLoopback(f.listen) && (o.tls_cert_pem.empty() || o.tokens.empty())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--listen ", f.listen, " is reachable beyond this machine without TLS and a token: "
          "anyone there could read and change every key and file; give --tls-cert/--tls-key "
          "and --auth-token-file, or --insecure-listen to accept that"));
    }
    if (!f.metrics_listen.empty() && !IsLoopback(f.metrics_listen)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--metrics-listen ", f.metrics_listen, " is reachable beyond this machine and /metrics "
          "has no authentication; bind it to 127.0.0.1, or give --insecure-listen"));
    }
  }
  COWKV_RETURN_IF_ERROR(FollowOptionsOf(f, o));
  o.engine.commit_interval_ms = f.commit_interval_ms;
  o.engine.slow_op_ms = f.slow_op_ms;
  if (f.async_default) o.engine.default_durability = Durability::kAsync;
  return o;
}

void LogStart(const ServerOptions& o, const Flags& f) {
  Log(LogLevel::kInfo, "start", absl::StrCat("cowkvd ", kCowkvVersion, " starting"))
      .Str("version", kCowkvVersion)
      .Str("api", kApiVersion)
      .Str("commit", GitCommit())
      .Str("build", BuildType())
      .Str("device", o.device.path)
      .Bool("mkfs", o.device.mkfs)
      .Str("listen", o.listen)
      .Str("metrics_listen", o.metrics_listen)
      .Bool("tls", !o.tls_cert_pem.empty())
      .Bool("client_certs", !o.client_ca_pem.empty())
      .Bool("auth", !o.tokens.empty())
      .Num("tokens", static_cast<uint64_t>(o.tokens.size()))
      .Str("durability_default", f.async_default ? "async" : "durable")
      .Num("commit_interval_ms", f.commit_interval_ms)
      .Num("max_txn_ops", static_cast<uint64_t>(f.max_txn_ops))
      .Num("max_txns_per_client", static_cast<uint64_t>(f.max_txns_per_client))
      .Num("max_txns", static_cast<uint64_t>(f.max_txns))
      .Num("max_open_files_per_client", static_cast<uint64_t>(f.max_open_files_per_client))
      .Num("max_open_files", static_cast<uint64_t>(f.max_open_files))
      .Num("max_inflight_bytes", o.limits.inflight_bytes)
      .Num("max_threads", static_cast<uint64_t>(f.max_threads))
      .Num("max_calls_per_client", static_cast<uint64_t>(f.max_calls_per_client))
      .Num("max_waiting_writes", static_cast<uint64_t>(f.max_waiting_writes))
      .Num("slow_op_ms", f.slow_op_ms);
}

int Serve(const ServerOptions& options, const Flags& flags, const sigset_t& signals) {
  LogStart(options, flags);
  absl::StatusOr<std::unique_ptr<Server>> server = Server::Start(options);
  if (!server.ok()) return FailEvent("start_failed", server.status().ToString());
  // The sentence keeps "(port N)": scripts and tests read the bound port from it.
  std::string msg = absl::StrCat("serving ", options.device.path,
                                 (*server)->device_created() ? " (created and formatted)" : "",
                                 " on ", options.listen, " (port ", (*server)->port(), ")");
  if (!options.metrics_listen.empty()) {
    absl::StrAppend(&msg, ", metrics on ", options.metrics_listen, " (port ",
                    (*server)->metrics_port(), ")");
  }
  Log(LogLevel::kInfo, "serving", msg)
      .Num("port", static_cast<uint64_t>((*server)->port()))
      .Num("metrics_port", static_cast<uint64_t>((*server)->metrics_port()));
  int sig = 0;
  sigwait(&signals, &sig);
  Log(LogLevel::kInfo, "stopping", absl::StrCat(strsignal(sig), ": draining and committing"))
      .Str("signal", strsignal(sig));
  const absl::Time stop_start = absl::Now();
  absl::Status stopped = (*server)->Stop();
  if (!stopped.ok()) return FailEvent("stop_failed", stopped.ToString());
  Log(LogLevel::kInfo, "stopped", "stopped cleanly")
      .Num("ms", absl::ToDoubleMilliseconds(absl::Now() - stop_start));
  return 0;
}

int Main(int argc, char** argv) {
  // Debian builds Abseil without NDEBUG, which turns on Mutex deadlock
  // detection: a global graph update on every lock (8 % of a durable put's
  // instructions under callgrind). The tests keep it; the server does not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  CLI::App app("cowkvd: the cowkv gRPC server", "cowkvd");
  Flags flags;
  DeclareFlags(app, flags);
  app.set_version_flag("--version", absl::StrCat("cowkvd ", kCowkvVersion, " (", kApiVersion,
                                                 ", commit ", GitCommit(), ", ", BuildType(), ")"),
                       "Print the version and exit");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) return app.exit(e);
    return Fail("usage", e.what(), kExitUsage);
  }
  absl::StatusOr<ServerOptions> options = ToOptions(flags);
  if (!options.ok()) return Fail("usage", options.status().message(), kExitUsage);
  absl::StatusOr<LogFormat> format = ParseLogFormat(flags.log_format);
  if (!format.ok()) return Fail("usage", format.status().message(), kExitUsage);
  absl::StatusOr<LogLevel> level = ParseLogLevel(flags.log_level);
  if (!level.ok()) return Fail("usage", level.status().message(), kExitUsage);
  InitLogging(*format, *level);
  // Values and pages of up to 16 MiB come and go: serve every allocation of
  // 1 MiB or more from its own mapping, returned to the system when freed
  // (glibc would otherwise raise this threshold up to 32 MiB and keep such
  // buffers in its heap after a burst).
  mallopt(M_MMAP_THRESHOLD, 1 << 20);
  // Block the stop signals in every thread (gRPC's included, which inherit
  // the mask) so that only sigwait() in Serve sees them.
  // Protobuf logs each unparsable request field before any handler (or the
  // token check) runs: at most 10 lines per 10 s.
  InstallProtobufLogLimit(10, absl::Seconds(10));
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  return Serve(*options, flags, signals);
}

}  // namespace
}  // namespace server
}  // namespace cowkv

int main(int argc, char** argv) { return cowkv::server::Main(argc, argv); }
