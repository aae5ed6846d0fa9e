// `cowkv mount`: one subvolume's file tree served through FUSE (libfuse3's
// low-level API), in process over the engine. The device is opened and
// locked exclusively, as cowkvd does, so a mount and a server never share a
// device.
//
//   MountOptions o;  o.device = "/var/lib/cowkv.img"; o.subvolume = "default";
//   o.mountpoint = "/mnt/c";  return RunMount(o);  // until unmounted
//
// The low-level API knows files by inode, as the engine does: every FUSE
// call maps to one engine call by inode (LookupAt, CreateAt, RenameAt, ...),
// with no path cache to keep in step. FUSE's root inode (1) is the
// subvolume's root directory (256); every other inode number is the
// engine's own, so numbers and generations are stable across remounts.
// docs/mount.md has the whole mapping and what is not supported.
#ifndef COWKV_CLIENTS_CLI_FUSE_FS_H_
#define COWKV_CLIENTS_CLI_FUSE_FS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cowkv {
namespace cli {

struct MountOptions {
  std::string device;
  std::string subvolume = "default";
  std::string mountpoint;
  bool foreground = false;  // else: detach once mounted (errors before that are reported)
  bool read_only = false;
  bool debug = false;                     // libfuse's request log on stderr (foreground)
  unsigned max_threads = 8;               // FUSE worker threads
  double attr_timeout_s = 1.0;            // the kernel's attribute and entry cache
  std::vector<std::string> fuse_options;  // extra -o options for libfuse
};

// Opens the device, mounts the subvolume at the mountpoint and serves it
// until it is unmounted (fusermount3 -u) or the process gets SIGINT,
// SIGTERM or SIGHUP; then commits and closes the store. Returns the exit code
// (commands.h); failures print one "cowkv: mount: ..." line.
int RunMount(const MountOptions& options);

// The errno for an engine status: its reason's POSIX name (errors.h), else
// one by status code (EIO for DATA_LOSS and anything unexpected).
int ErrnoOf(const absl::Status& status);

}  // namespace cli
}  // namespace cowkv

#endif  // COWKV_CLIENTS_CLI_FUSE_FS_H_
