// The `cowkv` command line: one subcommand per .cc (bbolt's cmd/ layout).
//
// main.cc builds the CLI11 app, calls every Add*() below to declare the
// subcommands, parses, and runs the RunFn of the one the user chose. Each
// RunFn returns the process exit code. Every failure prints exactly one
// stderr line through Fail():
//
//   cowkv: <operation>: <reason>
//
// Exit codes: 0 success; 1 the operation failed (or `check` found
// problems); 2 usage error (bad option, unknown command).
//
// Offline subcommands work on a device directly through the engine facade
// (engine/store.h): mkfs, check, dump-tree. Online ones (subvolume, kv, fs,
// stats, sync) will talk to the server and join this table later.
#ifndef COWKV_CLIENTS_CLI_COMMANDS_H_
#define COWKV_CLIENTS_CLI_COMMANDS_H_

#include <cstdint>
#include <functional>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace cli {

inline constexpr char kVersion[] = "0.1.0";

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Runs a parsed subcommand; returns the exit code.
using RunFn = std::function<int()>;

// Each declares its subcommand and options on `app` and returns the function
// that runs it with the parsed values.
RunFn AddMkfs(CLI::App* app);       // mkfs.cc
RunFn AddCheck(CLI::App* app);      // check.cc
RunFn AddDumpTree(CLI::App* app);   // dump_tree.cc

// Prints "cowkv: <operation>: <reason>" on stderr, the reason folded onto one
// line, and returns `exit_code`. (main.cc)
int Fail(absl::string_view operation, absl::string_view reason,
         int exit_code = kExitFailure);

// Folds a possibly multi-line engine message onto one line ("a:\nb\nc" ->
// "a: b; c"). (main.cc)
std::string OneLine(absl::string_view text);

// Parses a byte count: digits with an optional K/M/G/T/P/E suffix (powers of
// 1024, case-insensitive, optionally followed by "iB" or "B"), e.g. "1G",
// "512M", "4096". INVALID_ARGUMENT on anything else or on overflow. (mkfs.cc)
absl::StatusOr<uint64_t> ParseSize(absl::string_view text);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_COMMANDS_H_
