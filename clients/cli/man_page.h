// The man(7) text of cowkv's pages, rendered from the CLI11 command tree
// (man.cc writes them): roff that `groff -man -ww` renders without a
// warning.
#ifndef COWKV_CLIENTS_CLI_MAN_PAGE_H_
#define COWKV_CLIENTS_CLI_MAN_PAGE_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/string_view.h"

namespace cowkv {
namespace cli {

// Text made safe for roff: backslashes, and a '.' or '\'' starting a line.
std::string RoffEscape(absl::string_view text);

// cowkv(1): synopsis, description, global options, the commands (each
// pointing at its page), environment, exit status.
std::string RootPage(const CLI::App* root);

// cowkv-COMMAND(1): the synopsis of the command (or of each of its
// subcommands, at any depth), then each one's arguments and options.
std::string CommandPage(const CLI::App* cmd);

// cowkvd(8) from `cowkvd --help` as CLI11 prints it: the description line,
// then "Options:" with one entry per option (names, type, REQUIRED, the
// description, continued on lines indented past the names column).
std::string CowkvdPage(absl::string_view help);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_MAN_PAGE_H_
