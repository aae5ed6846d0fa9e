// cowkv: the command-line tool. Dispatch and error mapping only; each
// subcommand lives in its own .cc (see commands.h).
//
//   cowkv [--help] [--version] <command> [options] <args>
//
// CLI11 reports its own outcomes as exceptions with exit codes of its own
// (105 validation, 106 required, 109 extras, ...): every one of those is a
// usage error here (exit 2, one stderr line); --help and --version exit 0.
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "clients/cli/commands.h"

namespace cowkv {
namespace cli {

std::string OneLine(absl::string_view text) {
  std::string out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (!out.empty()) out += out.back() == ':' ? " " : "; ";
    absl::StrAppend(&out, line);
  }
  return out;
}

int Fail(absl::string_view operation, absl::string_view reason,
         int exit_code) {
  std::cout.flush();
  std::cerr << "cowkv: " << operation << ": " << OneLine(reason) << std::endl;
  return exit_code;
}

namespace {

// The first argument that is not an option names the command: global options
// take no values, so nothing else can sit before it.
const char* FirstCommandWord(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] != '-') return argv[i];
  }
  return nullptr;
}

int Main(int argc, char** argv) {
  CLI::App app(
      "cowkv: a copy-on-write B+tree key-value store with btrfs semantics.\n"
      "Offline commands work on an unmounted device or image file.",
      "cowkv");
  app.set_version_flag("--version", absl::StrCat("cowkv ", kVersion),
                       "Print the version and exit");
  app.require_subcommand(1);
  std::map<std::string, RunFn> commands;
  for (RunFn (*add)(CLI::App*) : {AddMkfs, AddCheck, AddDumpTree}) {
    RunFn run = add(&app);
    commands[app.get_subcommands([](CLI::App*) { return true; }).back()
                 ->get_name()] = std::move(run);
  }

  const char* word = FirstCommandWord(argc, argv);
  if (word != nullptr && commands.count(word) == 0) {
    return Fail("usage",
                absl::StrCat("unknown command '", word,
                             "' (commands: mkfs, check, dump-tree; see "
                             "'cowkv --help')"),
                kExitUsage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == static_cast<int>(CLI::ExitCodes::Success)) {
      return app.exit(e);  // --help, --version: print to stdout, exit 0
    }
    std::vector<CLI::App*> chosen = app.get_subcommands();
    if (word == nullptr) {
      // CLI11 reports the missing command before an unknown global option.
      return Fail("usage",
                  argc > 1 ? absl::StrCat("unknown option '", argv[1], "'")
                           : "no command given (see 'cowkv --help')",
                  kExitUsage);
    }
    return Fail(chosen.empty() ? "usage" : chosen.front()->get_name(),
                e.what(), kExitUsage);
  }
  const std::string name = app.get_subcommands().front()->get_name();
  try {
    return commands[name]();
  } catch (const std::exception& e) {
    return Fail(name, e.what());
  }
}

}  // namespace
}  // namespace cli
}  // namespace cowkv

int main(int argc, char** argv) { return cowkv::cli::Main(argc, argv); }
