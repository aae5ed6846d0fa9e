// MemDevice: a BlockDevice in RAM, for tests and benchmarks.
//
// Flush() is a no-op; nothing is lost unless wrapped in a FaultDevice.
// Counters let tests assert how many flushes an operation cost.
#ifndef COWKV_ENGINE_IO_MEM_DEVICE_H_
#define COWKV_ENGINE_IO_MEM_DEVICE_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "engine/io/block_device.h"

namespace cowkv {

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

#endif  // COWKV_ENGINE_IO_MEM_DEVICE_H_
