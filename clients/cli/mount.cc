// `cowkv mount --device PATH [SUBVOLUME] MOUNTPOINT`: opens and locks the
// device as cowkvd does, mounts the subvolume's file tree with FUSE
// (mount/fuse_fs.h) and serves it until unmounted. Without --foreground it
// detaches only once the mount is up, so every failure before that reaches
// the terminal with its exit code.
#include <errno.h>
#include <fcntl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "clients/cli/commands.h"
#include "clients/cli/fs_signature.h"
#include "cowkv/device.h"
#include "cowkv/options.h"
#include "cowkv/store.h"
#include "mount/fuse_fs.h"

namespace cowkv {
namespace cli {

namespace {

constexpr char kOp[] = "mount";
constexpr char kMounted[] = "mounted";

struct MountArgs {
  std::string device;
  std::string subvolume = "default";
  mount::MountConfig config;
  bool foreground = false;
};

// Writes all of `s` to `fd` (the pipe to the waiting parent).
void WriteAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Opens, mounts and serves in this process. `ready_fd` (or -1) is told
// kMounted once the mount is up, or the failure. Returns the exit code.
int Serve(const MountArgs& a, int ready_fd) {
  auto fail = [&](const std::string& why, int code) {
    if (ready_fd < 0) return Fail(kOp, why, code);
    WriteAll(ready_fd, why);
    close(ready_fd);
    return code;
  };
  FileDeviceOptions dopt;
  dopt.read_only = a.config.read_only;
  absl::StatusOr<std::unique_ptr<FileDevice>> dev = FileDevice::Open(a.device, dopt);
  if (!dev.ok()) return fail(std::string(dev.status().message()), OpenExitCode(dev.status()));
  if (!HasCowkvSignature(dev->get())) {
    return fail(absl::StrCat(a.device, ": no cowkv filesystem found (run cowkv mkfs)"),
                kExitFailure);
  }
  Options eopt;
  eopt.read_only = a.config.read_only;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(dev->get(), eopt);
  if (!store.ok())
    return fail(absl::StrCat(a.device, ": ", store.status().message()), kExitFailure);
  absl::StatusOr<std::unique_ptr<Subvolume>> sv = (*store)->OpenSubvolume(a.subvolume);
  if (!sv.ok()) return fail(std::string(sv.status().message()), kExitFailure);
  absl::StatusOr<std::unique_ptr<mount::FuseMount>> m =
      mount::FuseMount::Mount(store->get(), (*sv)->files(), a.config);
  if (!m.ok()) {
    return fail(std::string(m.status().message()),
                absl::IsInvalidArgument(m.status()) ? kExitUsage : kExitFailure);
  }
  if (ready_fd >= 0) {
    WriteAll(ready_fd, kMounted);
    close(ready_fd);
  }
  const absl::Status served = (*m)->Serve(/*signals=*/true);
  (void)(*m)->Unmount();
  // Everything written is committed before the device is let go.
  const absl::Status closed = (*store)->Close();
  if (!closed.ok()) return Fail(kOp, absl::StrCat("closing the store: ", closed.message()));
  if (!served.ok()) return Fail(kOp, served.message());
  return kExitOk;
}

int RunMount(const MountArgs& a) {
  if (a.foreground) return Serve(a, -1);
  // The child does everything (the engine's threads start after the fork)
  // and tells the parent through a pipe when the mount is up.
  int p[2];
  if (pipe(p) != 0) return Fail(kOp, absl::StrCat("pipe: ", strerror(errno)));
  const pid_t pid = fork();
  if (pid < 0) return Fail(kOp, absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    close(p[0]);
    setsid();
    const int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
      dup2(null, STDIN_FILENO);
      dup2(null, STDOUT_FILENO);
      dup2(null, STDERR_FILENO);
      if (null > STDERR_FILENO) close(null);
    }
    _exit(Serve(a, p[1]));
  }
  close(p[1]);
  std::string msg;
  char buf[512];
  for (;;) {
    const ssize_t n = read(p[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    msg.append(buf, static_cast<size_t>(n));
  }
  close(p[0]);
  if (msg == kMounted) return kExitOk;
  int status = 0;
  waitpid(pid, &status, 0);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : kExitFailure;
  if (msg.empty()) msg = "the mount process ended before the mount was up";
  return Fail(kOp, msg, code == kExitOk ? kExitFailure : code);
}

}  // namespace

RunFn AddMount(CLI::App* app) {
  auto a = std::make_shared<MountArgs>();
  auto words = std::make_shared<std::vector<std::string>>();
  auto fuse_opts = std::make_shared<std::string>();
  CLI::App* cmd = app->add_subcommand(
      "mount",
      "Mount a subvolume's file tree with FUSE, the device opened here (exclusively, as "
      "cowkvd does); unmount with fusermount3 -u MOUNTPOINT");
  cmd->add_option("--device", a->device, "Block device or image file")->required();
  cmd->add_option("WORDS", *words, "[SUBVOLUME] MOUNTPOINT (SUBVOLUME: default \"default\")")
      ->required()
      ->expected(1, 2);
  cmd->add_flag("-f,--foreground", a->foreground, "Stay in the foreground until unmounted");
  cmd->add_flag("-r,--read-only", a->config.read_only,
                "Mount read-only (the device opened shared)");
  cmd->add_flag("--debug", a->config.debug, "Log every FUSE request on stderr (with --foreground)");
  cmd->add_option("--threads", a->config.max_threads, "FUSE worker threads")->capture_default_str();
  cmd->add_option("--attr-timeout", a->config.attr_timeout_s,
                  "Seconds the kernel caches attributes and names")
      ->capture_default_str();
  cmd->add_option("-o", *fuse_opts, "More FUSE mount options, comma-separated (allow_other, ...)");
  return [a, words, fuse_opts] {
    MountArgs m = *a;
    if (words->size() == 2) {
      m.subvolume = (*words)[0];
      m.config.mountpoint = (*words)[1];
    } else {
      m.config.mountpoint = (*words)[0];
    }
    m.config.fsname = absl::StrCat("cowkv:", m.subvolume);
    for (absl::string_view x : absl::StrSplit(*fuse_opts, ',', absl::SkipEmpty()))
      m.config.fuse_options.emplace_back(x);
    if (m.config.max_threads == 0 || m.config.max_threads > 256)
      return Fail(kOp, "--threads must be 1..256", kExitUsage);
    if (!(m.config.attr_timeout_s >= 0 && m.config.attr_timeout_s <= 3600))
      return Fail(kOp, "--attr-timeout must be 0..3600 seconds", kExitUsage);
    return RunMount(m);
  };
}

}  // namespace cli
}  // namespace cowkv
