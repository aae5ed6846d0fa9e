// The `cowkv` command line: one subcommand (or group) per .cc (bbolt's cmd/
// layout).
//
// app.cc builds the CLI11 app, calls every Add*() below to declare the
// subcommands, parses, and runs the RunFn of the one the user chose. Each
// RunFn returns the process exit code. Every failure prints exactly one
// stderr line through Fail():
//
//   cowkv: <operation>: <reason>
//
// Exit codes (docs/cli.md has the table): 0 success; 1 the operation failed
// (or `check` found problems, or a local file could not be read); 2 usage
// error (bad option, unknown command); 3..12 one per class of gRPC status
// of an online command (online.h).
//
// Offline subcommands work on a device directly through the engine facade
// (engine/include/cowkv/store.h): mkfs, check PATH, dump-tree, mount. Online ones talk to cowkvd
// (--server): subvolume, kv, fs, stats, sync, check without PATH, bench.
#ifndef COWKV_CLIENTS_CLI_COMMANDS_H_
#define COWKV_CLIENTS_CLI_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace cli {

inline constexpr char kVersion[] = "0.1.0";  // = build_info's kCowkvVersion

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
// An offline tool's device is in use (a cowkvd or another tool holds its
// lock): the failed-precondition class of online.h's table.
inline constexpr int kExitInUse = 6;
// The exit code for a failed device open: kExitInUse when it was refused
// for being in use, else kExitFailure.
inline int OpenExitCode(const absl::Status& s) {
  return s.code() == absl::StatusCode::kFailedPrecondition ? kExitInUse : kExitFailure;
}

struct Globals;  // online.h
using GlobalsPtr = std::shared_ptr<const Globals>;

// Runs a parsed subcommand; returns the exit code.
using RunFn = std::function<int()>;

// Each declares its subcommand and options on `app` and returns the function
// that runs it with the parsed values.
RunFn AddMkfs(CLI::App* app);                           // mkfs.cc
RunFn AddCheck(CLI::App* app, const GlobalsPtr& g);     // check.cc (+ admin.cc online)
RunFn AddDumpTree(CLI::App* app);                       // dump_tree.cc
RunFn AddSubvolume(CLI::App* app, const GlobalsPtr& g); // subvolume.cc
RunFn AddKv(CLI::App* app, const GlobalsPtr& g);        // kv.cc, kv_txn.cc
RunFn AddFs(CLI::App* app, const GlobalsPtr& g);        // fs.cc, fs_data.cc
RunFn AddStats(CLI::App* app, const GlobalsPtr& g);     // admin.cc
RunFn AddSync(CLI::App* app, const GlobalsPtr& g);      // admin.cc
RunFn AddVersion(CLI::App* app, const GlobalsPtr& g);   // admin.cc
RunFn AddStatus(CLI::App* app, const GlobalsPtr& g);    // admin.cc
RunFn AddBench(CLI::App* app, const GlobalsPtr& g);     // bench.cc
RunFn AddMount(CLI::App* app);                          // mount.cc, fuse_fs.cc
RunFn AddLease(CLI::App* app, const GlobalsPtr& g);     // lease.cc
RunFn AddLock(CLI::App* app, const GlobalsPtr& g);      // lease.cc
RunFn AddSend(CLI::App* app, const GlobalsPtr& g);      // send.cc
RunFn AddReceive(CLI::App* app, const GlobalsPtr& g);   // send.cc
RunFn AddBackup(CLI::App* app, const GlobalsPtr& g);    // backup.cc
RunFn AddExport(CLI::App* app, const GlobalsPtr& g);    // export.cc
RunFn AddImport(CLI::App* app, const GlobalsPtr& g);    // export.cc
// `cowkv subvolume digest NAME` (send.cc).
int RunSubvolumeDigest(const std::string& name, const Globals& g);
RunFn AddCompletion(CLI::App* app);                     // completion.cc
RunFn AddMan(CLI::App* app);                            // man.cc

// `cowkv check` without PATH: Admin.Check on the server. (admin.cc)
int RunOnlineCheck(const Globals& g, bool json);

// A command with subcommands ("kv get", "kv put", ...): declares each and
// runs the one chosen.
class CommandGroup {
 public:
  CommandGroup(CLI::App* parent, const std::string& name,
               const std::string& description);
  // Declares a subcommand; `run` runs it if the user chose it.
  CLI::App* Add(const std::string& name, const std::string& description,
                RunFn run);
  // Runs the chosen subcommand.
  RunFn Runner() const;
  CLI::App* app() const { return app_; }

 private:
  CLI::App* app_;
  std::shared_ptr<std::map<std::string, RunFn>> runs_;
};

// Prints "cowkv: <operation>: <reason>" on stderr, the reason folded onto one
// line, and returns `exit_code`. (app.cc)
int Fail(absl::string_view operation, absl::string_view reason,
         int exit_code = kExitFailure);

// Folds a possibly multi-line engine message onto one line ("a:\nb\nc" ->
// "a: b; c"). (app.cc)
std::string OneLine(absl::string_view text);

// Writes `text` to stdout and flushes; kExitOk, or Fail(op, ...) if stdout
// cannot be written. (app.cc)
int Emit(absl::string_view op, absl::string_view text);

// Parses a byte count: digits with an optional K/M/G/T/P/E suffix (powers of
// 1024, case-insensitive, optionally followed by "iB" or "B"), e.g. "1G",
// "512M", "4096". INVALID_ARGUMENT on anything else or on overflow. (mkfs.cc)
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_COMMANDS_H_
