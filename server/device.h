// LockedDevice: the device file cowkvd serves, created if absent, locked
// against a second server, formatted only when that is safe.
//
//   absl::StatusOr<std::unique_ptr<LockedDevice>> d = LockedDevice::Open(opts);
//   Store::Open((*d)->device(), options)  // the Store borrows the device
//
// Rules (docs/api.md "Starting the server"):
//  1. An absent path is created with `create_size` bytes, reserved with
//     posix_fallocate and then zero-filled through the device, so no block
//     is sparse or unwritten: on ext4/xfs a first write into an unwritten
//     extent adds a metadata update to the next flush, doubling durable
//     write latency. A new file is always formatted.
//  2. An existing device is never formatted unless `mkfs` is set. Without
//     it, a device with no cowkv superblock is FAILED_PRECONDITION.
//  3. The device is locked with flock(LOCK_EX | LOCK_NB) on its own file
//     descriptor for the LockedDevice's lifetime; a second server on the
//     same path fails with FAILED_PRECONDITION ("in use"). Every tool that
//     opens a device through FileDevice takes the same lock (shared for
//     read-only opens), so `cowkv mkfs`, `check` and `dump-tree` refuse a
//     served device. The lock is advisory: a program that ignores it is
//     caught at the next log sync or commit, which finds the primary
//     superblock changed and stops writing (TxnManager::CheckDeviceOwned).
//
// Thread safety: the object is immutable after Open; device() is
// thread-safe like every BlockDevice.
#ifndef COWKV_SERVER_DEVICE_H_
#define COWKV_SERVER_DEVICE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "cowkv/device.h"

namespace cowkv {
namespace server {

struct DeviceOptions {
  std::string path;
  uint64_t create_size = 1ull << 30;  // for an absent path
  bool mkfs = false;                  // format even an existing device
  // cowkvd --read-only: the file opened O_RDONLY and locked shared (beside
  // `cowkv check` and other read-only tools, never beside a writer); never
  // created or formatted (NOT_FOUND / FAILED_PRECONDITION instead).
  bool read_only = false;
};

class LockedDevice {
 public:
  static absl::StatusOr<std::unique_ptr<LockedDevice>> Open(const DeviceOptions& options);
  ~LockedDevice();  // releases the lock
  LockedDevice(const LockedDevice&) = delete;
  LockedDevice& operator=(const LockedDevice&) = delete;

  FileDevice* device() const { return device_.get(); }
  bool created() const { return created_; }
  bool formatted() const { return formatted_; }

 private:
  static absl::StatusOr<std::unique_ptr<LockedDevice>> OpenReadOnly(const DeviceOptions& options);
  LockedDevice(int lock_fd, std::unique_ptr<FileDevice> device, bool created, bool formatted)
      : lock_fd_(lock_fd), device_(std::move(device)), created_(created), formatted_(formatted) {}

  // Constant after construction.
  const int lock_fd_;
  const std::unique_ptr<FileDevice> device_;
  const bool created_;
  const bool formatted_;
};

}  // namespace server
}  // namespace cowkv

#endif  // COWKV_SERVER_DEVICE_H_
