// The whole `cowkv` command line: the CLI11 app with every command, the
// global options, parsing with CLI11's outcomes mapped to exit codes, and
// running the chosen command. main.cc is only Parse() then Run();
// cli_unit_test.cc drives Parse() directly.
#ifndef COWKV_CLIENTS_CLI_APP_H_
#define COWKV_CLIENTS_CLI_APP_H_

#include <map>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"

namespace cowkv {
namespace cli {

// The first argument that names the command: skips options and the values
// of the global options that take one (--server ADDR, --token-file FILE,
// --timeout SECONDS). Null when there is none.
const char* FirstCommandWord(int argc, const char* const* argv);

class Cli {
 public:
  Cli();
  Cli(const Cli&) = delete;
  Cli& operator=(const Cli&) = delete;

  // Parses the command line. Returns -1 when a command was chosen (Run()
  // runs it); otherwise the exit code to exit with: 0 after --help or
  // --version (printed on stdout), 2 after a usage error (one stderr line).
  int Parse(int argc, const char* const* argv);

  // Runs the chosen command and returns its exit code.
  int Run();

  const Globals& globals() const { return *globals_; }
  // The chosen command, words joined by spaces ("kv get", "mkfs").
  std::string chosen() const;

 private:
  // A command group given no command or an unknown one: the message naming
  // the group's commands; empty for any other error.
  std::string GroupError(int argc, const char* const* argv);
  int UsageError(const CLI::ParseError& e, const char* word, int argc,
                 const char* const* argv);

  CLI::App app_;
  std::shared_ptr<Globals> globals_;
  std::map<std::string, RunFn> commands_;
};

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_APP_H_
