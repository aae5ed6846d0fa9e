// Usage lines and parse-error messages read from the CLI11 command tree, so
// they cannot fall behind the commands: the one-line usage that parse errors
// and the man pages (man.cc) print, and the sentence a parse error becomes.
//
//   cowkv: kv put: missing KEY (usage: cowkv kv put [-s NAME] [--durability
//          default|durable|async] [--lease ID] KEY [VALUE])
//
// Each class of CLI11 error (a value missing after an option, an unknown
// option, an extra argument, an unconvertible or refused value, a missing
// argument or option, an option that needs or excludes another) is told
// apart by its exception type, never by its text.
#ifndef COWKV_CLIENTS_CLI_USAGE_H_
#define COWKV_CLIENTS_CLI_USAGE_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace cli {

// A usage line longer than this shows its optional options as [options].
inline constexpr size_t kUsageWidth = 100;

// "cowkv kv put": the names from the root app down to `cmd`.
std::string CommandPath(const CLI::App* cmd);

// An option as usage shows it: "-s NAME", "--force", "KEY", "PATH...",
// "--durability default|durable|async".
std::string OptionUsage(const CLI::Option* opt);

// The options and arguments of `cmd` a user sees (not hidden, not --help),
// options first, then positionals in order.
std::vector<const CLI::Option*> VisibleOptions(const CLI::App* cmd);

// "cowkv kv put [-s NAME] KEY [VALUE]"; a group "cowkv kv COMMAND". When the
// line is longer than `width`, its optional options become "[options]".
std::string UsageLine(const CLI::App* cmd, size_t width = kUsageWidth);

// The closest long option or command name to `word` (edit distance at most
// 2, or `word` a prefix of exactly one): empty when none is close.
std::string Closest(absl::string_view word, const std::vector<std::string>& names);

// The sentence for a CLI11 parse error raised while parsing `argv` into
// `root`, whose deepest chosen command is `cmd`: what was wrong, then
// "(usage: ...)". Empty when `e` is none of the classes above (the caller
// then prints CLI11's own text).
std::string ParseErrorMessage(const CLI::ParseError& e, CLI::App* root, CLI::App* cmd, int argc,
                              const char* const* argv);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_USAGE_H_
