// `cowkv dump-tree [--tree ID] PATH`
//
// Prints the superblock and the nodes and items of one tree (or all, the
// default) of the committed state on PATH, opened read-only: the library
// form is cowkv::DumpTree. Like btrfs inspect-internal dump-tree, it reads
// whatever it can and says where a node could not be read.
#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "clients/cli/commands.h"
#include "cowkv/device.h"
#include "cowkv/store.h"

namespace cowkv {
namespace cli {
namespace {

constexpr char kOp[] = "dump-tree";

struct DumpTreeArgs {
  std::string path;
  uint64_t tree = 0;  // 0 = every tree
};

int RunDumpTree(const DumpTreeArgs& a) {
  FileDeviceOptions options;
  options.read_only = true;
  absl::StatusOr<std::unique_ptr<FileDevice>> dev =
      FileDevice::Open(a.path, options);
  if (!dev.ok()) return Fail(kOp, dev.status().message(), OpenExitCode(dev.status()));
  absl::Status s = DumpTree(dev->get(), a.tree, std::cout);
  if (!s.ok()) return Fail(kOp, absl::StrCat(a.path, ": ", s.message()));
  std::cout.flush();
  if (!std::cout) return Fail(kOp, "error writing to stdout");
  return kExitOk;
}

}  // namespace

RunFn AddDumpTree(CLI::App* app) {
  auto args = std::make_shared<DumpTreeArgs>();
  CLI::App* cmd = app->add_subcommand(
      "dump-tree", "Print the superblock and tree nodes of a cowkv filesystem");
  cmd->add_option("PATH", args->path, "Block device or image file")
      ->required();
  cmd->add_option("-t,--tree", args->tree,
                  "Only the tree with this id (0 = every tree)")
      ->type_name("ID")
      ->capture_default_str();
  return [args] { return RunDumpTree(*args); };
}

}  // namespace cli
}  // namespace cowkv
