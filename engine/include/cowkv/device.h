// BlockDevice: the storage seam. Everything cowkv persists goes through it.
//
// A device is a flat byte array of Size() bytes. WriteAt may be reordered,
// dropped or torn by power loss until a later Flush() returns OK; that is the
// whole durability contract the engine relies on (see FaultDevice for the
// exact fault model tests inject). Implementations: FileDevice (a regular file
// or a block device), MemDevice (RAM), FaultDevice (wraps another device and
// simulates power loss and I/O errors).
//
// Thread safety: every implementation is safe for concurrent calls.
#ifndef COWKV_INCLUDE_COWKV_DEVICE_H_
#define COWKV_INCLUDE_COWKV_DEVICE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace cowkv {

class BlockDevice {
 public:
  virtual ~BlockDevice() = default;

  // Reads exactly `n` bytes at `offset` into `buf`. A range past Size() is
  // OUT_OF_RANGE; an I/O error is INTERNAL with the errno text.
  virtual absl::Status ReadAt(uint64_t offset, void* buf, size_t n) = 0;

  // Writes exactly `n` bytes at `offset`. Not durable until Flush() returns.
  // ENOSPC from the underlying file is RESOURCE_EXHAUSTED.
  virtual absl::Status WriteAt(uint64_t offset, const void* buf, size_t n) = 0;

  // Makes every write that completed before this call durable.
  virtual absl::Status Flush() = 0;

  // Device size in bytes; constant for the device's lifetime.
  virtual uint64_t Size() const = 0;
};

// FileDevice: a BlockDevice over a regular file or a block device.
//
// Uses pread/pwrite/fdatasync (the only place in cowkv that calls them). For a
// block device (e.g. a loop device) Size() comes from BLKGETSIZE64; for a
// regular file from its length. With `direct_io` the file is opened O_DIRECT
// and unaligned requests are bounced through an aligned buffer (4096-byte
// alignment), so callers need not align.
//
// Errors, beyond BlockDevice's:
//  - Open: a device locked by another process (FileDeviceOptions::lock) is
//    FAILED_PRECONDITION; a missing path is NOT_FOUND when create_size is 0 or read_only is
//    set (a read-only open never creates); an existing file keeps its size
//    whatever create_size says; anything but a regular file or block device
//    is INVALID_ARGUMENT; with direct_io, a filesystem that refuses O_DIRECT
//    (EINVAL) or a size that is not a multiple of 4096 is INVALID_ARGUMENT
//    (the last partial block could only be written by growing the file).
//  - WriteAt on a read_only device is FAILED_PRECONDITION; a write past
//    Size() is OUT_OF_RANGE and never grows the file.
//  - Once fdatasync fails, every later Flush() returns that first error: the
//    kernel may have dropped the dirty pages, so a retry proving OK would lie.
//    Reopen to recover.
//
// Thread safety: safe for concurrent calls. Concurrent writes to disjoint
// bytes never undo each other, even when O_DIRECT bounces them through a
// read-modify-write of a shared block.
struct FileDeviceOptions {
  bool read_only = false;
  bool direct_io = false;
  // When the path does not exist: create a sparse regular file of this many
  // bytes (0 = refuse with NOT_FOUND).
  uint64_t create_size = 0;
  // flock the device for the object's lifetime, without waiting: shared when
  // read_only, exclusive otherwise, so no tool writes a device another
  // process has open (a server, mkfs, check, dump-tree). A device held by
  // another process is FAILED_PRECONDITION ("in use"). false only where the
  // caller already holds the lock on another descriptor of the same file
  // (cowkvd's LockedDevice): flock locks per open file, so a second lock
  // from the same process would conflict with its own.
  bool lock = true;
};

// Takes the device lock FileDeviceOptions::lock describes on `fd`.
absl::Status LockDevice(int fd, const std::string& path, bool shared);

class FileDevice : public BlockDevice {
 public:
  static absl::StatusOr<std::unique_ptr<FileDevice>> Open(const std::string& path,
                                                          const FileDeviceOptions& options = {});
  ~FileDevice() override;
  FileDevice(const FileDevice&) = delete;
  FileDevice& operator=(const FileDevice&) = delete;

  absl::Status ReadAt(uint64_t offset, void* buf, size_t n) override;
  absl::Status WriteAt(uint64_t offset, const void* buf, size_t n) override;
  absl::Status Flush() override;
  uint64_t Size() const override { return size_; }

  const std::string& path() const { return path_; }
  bool is_block_device() const { return is_block_device_; }

 private:
  FileDevice(std::string path, int fd, uint64_t size, bool is_block_device, bool direct_io,
             bool read_only);

  // OUT_OF_RANGE unless [offset, offset + n) lies inside the device.
  absl::Status CheckRange(const char* op, uint64_t offset, size_t n) const;
  // O_DIRECT paths for requests that are not 4096-aligned in offset, length
  // or buffer address: whole aligned blocks go through a bounce buffer.
  absl::Status BounceRead(uint64_t offset, char* buf, size_t n);
  absl::Status BounceWrite(uint64_t offset, const char* buf, size_t n)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(rmw_mu_);

  // Constant after construction.
  const std::string path_;
  const int fd_;
  const uint64_t size_;
  const bool is_block_device_;
  const bool direct_io_;
  const bool read_only_;

  // With direct_io an unaligned write is a read-modify-write of whole blocks,
  // which would undo a concurrent write to other bytes of the same block.
  // Aligned writes hold rmw_mu_ shared, read-modify-writes hold it exclusive.
  absl::Mutex rmw_mu_;

  // Guarded by flush_mu_. Once fdatasync fails the kernel may have dropped
  // the dirty pages and marked them clean, so a retried fdatasync can succeed
  // without the data being durable; every later Flush repeats the first error.
  absl::Mutex flush_mu_;
  absl::Status flush_error_ ABSL_GUARDED_BY(flush_mu_);
};

// MemDevice: a BlockDevice in RAM (tests, tools, benchmarks).
class MemDevice : public BlockDevice {
 public:
  explicit MemDevice(uint64_t size);
  MemDevice(const MemDevice&) = delete;
  MemDevice& operator=(const MemDevice&) = delete;

  absl::Status ReadAt(uint64_t offset, void* buf, size_t n) override;
  absl::Status WriteAt(uint64_t offset, const void* buf, size_t n) override;
  absl::Status Flush() override;
  uint64_t Size() const override { return size_; }

  // A copy of the whole image (for crash tests that fork a device state).
  std::string Snapshot() const;
  // Replaces the image; `image.size()` must equal Size().
  void Restore(const std::string& image);

  uint64_t flushes() const;
  uint64_t writes() const;

 private:
  const uint64_t size_;
  mutable absl::Mutex mu_;
  std::string data_ ABSL_GUARDED_BY(mu_);
  uint64_t flushes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cowkv

#endif  // COWKV_INCLUDE_COWKV_DEVICE_H_
