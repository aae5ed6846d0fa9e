// `cowkv mount --device PATH [SUBVOLUME] MOUNTPOINT`: see fuse_fs.h.
#include <memory>
#include <string>

#include "absl/strings/str_split.h"
#include "clients/cli/commands.h"
#include "clients/cli/fuse_fs.h"

namespace cowkv {
namespace cli {

RunFn AddMount(CLI::App* app) {
  auto o = std::make_shared<MountOptions>();
  auto words = std::make_shared<std::vector<std::string>>();
  auto fuse_opts = std::make_shared<std::string>();
  CLI::App* cmd = app->add_subcommand(
      "mount",
      "Mount a subvolume's file tree with FUSE, the device opened here (exclusively, as "
      "cowkvd does); unmount with fusermount3 -u MOUNTPOINT");
  cmd->add_option("--device", o->device, "Block device or image file")->required();
  cmd->add_option("WORDS", *words, "[SUBVOLUME] MOUNTPOINT (SUBVOLUME: default \"default\")")
      ->required()
      ->expected(1, 2);
  cmd->add_flag("-f,--foreground", o->foreground, "Stay in the foreground until unmounted");
  cmd->add_flag("-r,--read-only", o->read_only, "Mount read-only (the device opened shared)");
  cmd->add_flag("--debug", o->debug, "Log every FUSE request on stderr (with --foreground)");
  cmd->add_option("--threads", o->max_threads, "FUSE worker threads")->capture_default_str();
  cmd->add_option("--attr-timeout", o->attr_timeout_s,
                  "Seconds the kernel caches attributes and names")
      ->capture_default_str();
  cmd->add_option("-o", *fuse_opts, "More FUSE mount options, comma-separated (allow_other, ...)");
  return [o, words, fuse_opts] {
    MountOptions m = *o;
    if (words->size() == 2) {
      m.subvolume = (*words)[0];
      m.mountpoint = (*words)[1];
    } else {
      m.mountpoint = (*words)[0];
    }
    if (!fuse_opts->empty()) {
      for (absl::string_view x : absl::StrSplit(*fuse_opts, ',', absl::SkipEmpty()))
        m.fuse_options.emplace_back(x);
    }
    if (m.max_threads == 0 || m.max_threads > 256)
      return Fail("mount", "--threads must be 1..256", kExitUsage);
    if (!(m.attr_timeout_s >= 0 && m.attr_timeout_s <= 3600))
      return Fail("mount", "--attr-timeout must be 0..3600 seconds", kExitUsage);
    return RunMount(m);
  };
}

}  // namespace cli
}  // namespace cowkv
