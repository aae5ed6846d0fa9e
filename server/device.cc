// Device creation, locking and formatting; see device.h.
#include "server/device.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cowkv/status_macros.h"
#include "cowkv/store.h"

namespace cowkv {
namespace server {
namespace {

absl::Status ErrnoError(absl::string_view what, absl::string_view path, int err) {
  const std::string msg = absl::StrCat(what, " ", path, ": ", std::strerror(err));
  switch (err) {
    case ENOENT: return absl::NotFoundError(msg);
    case ENOSPC: case EDQUOT: case EFBIG: return absl::ResourceExhaustedError(msg);
    case EACCES: case EPERM: case EROFS: return absl::PermissionDeniedError(msg);
    case EISDIR: case EINVAL: return absl::InvalidArgumentError(msg);
    default: return absl::InternalError(msg);
  }
}

// Opens `path` read-write, creating it when absent. `*created` tells which.
absl::StatusOr<int> OpenOrCreate(const std::string& path, bool* created) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    int fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
    if (fd >= 0) {
      *created = false;
      return fd;
    }
    if (errno != ENOENT) return ErrnoError("open", path, errno);
    fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      *created = true;
      return fd;
    }
    if (errno != EEXIST) return ErrnoError("create", path, errno);
    // Someone created it between the two opens: open it as existing.
  }
  return absl::InternalError(absl::StrCat("open ", path, ": created and removed concurrently"));
}

// Rule 1: reserve, then write zeros over every byte through the device.
absl::Status Fill(int fd, const std::string& path, uint64_t size) {
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(size));
  if (err != 0) return ErrnoError("allocate", path, err);
  FileDeviceOptions o;
  o.lock = false;  // the caller holds it
  COWKV_ASSIGN_OR_RETURN(std::unique_ptr<FileDevice> dev, FileDevice::Open(path, o));
  const std::vector<char> zeros(1u << 20, 0);
  for (uint64_t off = 0; off < size; off += zeros.size()) {
    const size_t n = size - off < zeros.size() ? size - off : zeros.size();
    COWKV_RETURN_IF_ERROR(dev->WriteAt(off, zeros.data(), n));
  }
  return dev->Flush();
}

}  // namespace

absl::StatusOr<std::unique_ptr<LockedDevice>> LockedDevice::Open(const DeviceOptions& options) {
  if (options.path.empty()) return absl::InvalidArgumentError("--device: a path is required");
  if (options.read_only) return OpenReadOnly(options);
  bool created = false;
  COWKV_ASSIGN_OR_RETURN(int fd, OpenOrCreate(options.path, &created));
  auto fail = [&](absl::Status s) {
    if (created) ::unlink(options.path.c_str());
    ::close(fd);
    return s;
  };
  absl::Status locked = LockDevice(fd, options.path, /*shared=*/false);
  if (!locked.ok()) return fail(locked);
  if (created) {
    if (options.create_size < kMinDeviceBytes) {
      return fail(absl::InvalidArgumentError(absl::StrCat(
          "--create-size: at least ", kMinDeviceBytes, " bytes, not ", options.create_size)));
    }
    absl::Status filled = Fill(fd, options.path, options.create_size);
    if (!filled.ok()) return fail(filled);
  }
  FileDeviceOptions o;
  o.lock = false;  // held on fd
  absl::StatusOr<std::unique_ptr<FileDevice>> dev = FileDevice::Open(options.path, o);
  if (!dev.ok()) return fail(dev.status());
  const bool format = created || options.mkfs;
  if (format) {
    absl::Status s = Store::Mkfs(dev->get(), MkfsOptions{});
    if (!s.ok()) return fail(s);
  } else if (!HasCowkvSignature(dev->get())) {
    return fail(absl::FailedPreconditionError(absl::StrCat(
        "device ", options.path, " holds no cowkv filesystem; start with --mkfs to format it "
        "(this destroys what it holds)")));
  }
  return std::unique_ptr<LockedDevice>(
      new LockedDevice(fd, std::move(*dev), created, format));
}

absl::StatusOr<std::unique_ptr<LockedDevice>> LockedDevice::OpenReadOnly(
    const DeviceOptions& options) {
  if (options.mkfs) {
    return absl::InvalidArgumentError(
        "--mkfs and --read-only: a read-only device is never formatted");
  }
  const int fd = ::open(options.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("device ", options.path, " does not exist (--read-only never creates one)"));
    }
    return ErrnoError("open", options.path, errno);
  }
  absl::Status locked = LockDevice(fd, options.path, /*shared=*/true);
  if (!locked.ok()) {
    ::close(fd);
    return locked;
  }
  FileDeviceOptions o;
  o.read_only = true;
  o.lock = false;  // held on fd
  absl::StatusOr<std::unique_ptr<FileDevice>> dev = FileDevice::Open(options.path, o);
  if (!dev.ok() || !HasCowkvSignature(dev->get())) {
    ::close(fd);
    return dev.ok() ? absl::FailedPreconditionError(
                          absl::StrCat("device ", options.path, " holds no cowkv filesystem"))
                    : dev.status();
  }
  return std::unique_ptr<LockedDevice>(new LockedDevice(fd, std::move(*dev), false, false));
}

LockedDevice::~LockedDevice() {
  // Closing the descriptor releases the flock.
  ::close(lock_fd_);
}

}  // namespace server
}  // namespace cowkv
