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
#ifndef COWKV_ENGINE_IO_BLOCK_DEVICE_H_
#define COWKV_ENGINE_IO_BLOCK_DEVICE_H_

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

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

}  // namespace cowkv

#endif  // COWKV_ENGINE_IO_BLOCK_DEVICE_H_
