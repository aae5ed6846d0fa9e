// Shared by the `cowkv fs` commands: fs.cc (names and attributes) and
// fs_data.cc (data: put, cat, clone, fiemap).
#ifndef COWKV_CLIENTS_CLI_FS_COMMANDS_H_
#define COWKV_CLIENTS_CLI_FS_COMMANDS_H_

#include <cstdint>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/strings/string_view.h"
#include "clients/cli/commands.h"
#include "clients/cli/online.h"

namespace cowkv {
namespace cli {

// Adds -s/--subvolume NAME (default "default") to an fs command.
void AddFsSubvolumeOption(CLI::App* cmd, std::string* subvolume);

// Adds an option that takes a byte count ("4096", "64K", "1M"; ParseSize).
CLI::Option* AddSizeOption(CLI::App* cmd, const std::string& name,
                           std::string* value, const std::string& help);

// Adds --mode OCTAL (permission bits, at most 07777).
CLI::Option* AddModeOption(CLI::App* cmd, std::string* mode,
                           const std::string& default_mode);

// The value of a mode option (validated by the parser; "" = 0, the
// server's default).
uint32_t ModeValue(const std::string& text);

// The value of a size option (validated by the parser; "" = 0).
uint64_t SizeValue(const std::string& text);

// Files.Stat of a path.
grpc::Status StatPath(Connection& conn, const std::string& subvolume,
                      const std::string& path, v1::FileStat* st);

// "dir" + "/" + "name" without doubling the slash.
std::string JoinPath(absl::string_view dir, absl::string_view name);

// The last component of a path ("" for "/").
std::string BaseName(absl::string_view path);

// Declares fs put, cat, clone and fiemap. (fs_data.cc)
void AddFsData(CommandGroup* group, const GlobalsPtr& g);

// Declares fs fallocate. (fs_prealloc.cc)
void AddFsPrealloc(CommandGroup* group, const GlobalsPtr& g);

// Declares fs tmpfile. (fs_tmpfile.cc)
void AddFsTmpfile(CommandGroup* group, const GlobalsPtr& g);

// Declares fs chmod, chown, touch, setfattr and getfattr. (fs_attr.cc)
void AddFsAttr(CommandGroup* group, const GlobalsPtr& g);

// Declares fs watch. (fs_watch.cc)
void AddFsWatch(CommandGroup* group, const GlobalsPtr& g);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_FS_COMMANDS_H_
