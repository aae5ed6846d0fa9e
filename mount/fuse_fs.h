// `cowkv mount`'s file system: one subvolume's file tree served through
// FUSE (libfuse3's low-level API) over the engine, in the process that
// opened the store. The CLI (clients/cli/mount.cc) opens and locks the
// device and runs it; tests mount a store of their own.
//
//   MountConfig c;  c.mountpoint = "/mnt/c";  c.fsname = "cowkv:default";
//   COWKV_ASSIGN_OR_RETURN(std::unique_ptr<FuseMount> m,
//                          FuseMount::Mount(store, subvolume->files(), c));
//   m->Serve(/*signals=*/true);  // until unmounted (fusermount3 -u) or signalled
//
// The low-level API knows files by inode, as the engine does: every FUSE
// call maps to one engine call by inode (LookupAt, CreateAt, RenameAt, ...),
// with no path cache to keep in step. FUSE's root inode (1) is the
// subvolume's root directory (256); every other inode number is the
// engine's own, so numbers and generations are stable across remounts.
// docs/mount.md has the whole mapping and what is not supported.
#ifndef COWKV_MOUNT_FUSE_FS_H_
#define COWKV_MOUNT_FUSE_FS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cowkv/files.h"
#include "cowkv/store.h"

namespace cowkv {
namespace mount {

struct MountConfig {
  std::string mountpoint;
  std::string fsname = "cowkv";  // what mount(8) and df show as the source
  bool read_only = false;
  bool debug = false;                     // libfuse's request log on stderr
  unsigned max_threads = 8;               // FUSE worker threads
  double attr_timeout_s = 1.0;            // the kernel's attribute and entry cache
  std::vector<std::string> fuse_options;  // extra -o options for libfuse
};

class FuseMount {
 public:
  // Mounts `files` (of a subvolume of `store`, which must outlive the
  // mount) at config.mountpoint. Requests are served once Serve runs.
  static absl::StatusOr<std::unique_ptr<FuseMount>> Mount(Store* store, Files files,
                                                          const MountConfig& config);
  ~FuseMount();  // Unmount()
  FuseMount(const FuseMount&) = delete;
  FuseMount& operator=(const FuseMount&) = delete;

  // Serves requests on up to max_threads threads until the mount goes
  // away (fusermount3 -u, umount) or, with `signals`, the process gets
  // SIGINT, SIGTERM or SIGHUP.
  absl::Status Serve(bool signals);
  // Serve(false) on a thread of its own, for a process that uses the mount
  // itself (tests); returns at once.
  void ServeInBackground();
  // Unmounts and waits for the serving threads. Idempotent.
  absl::Status Unmount();

 private:
  struct State;
  explicit FuseMount(std::unique_ptr<State> st);
  std::unique_ptr<State> st_;
};

// The errno for an engine status: its reason's POSIX name (errors.h), else
// one by status code (EIO for DATA_LOSS and anything unexpected).
int ErrnoOf(const absl::Status& status);

}  // namespace mount
}  // namespace cowkv

#endif  // COWKV_MOUNT_FUSE_FS_H_
