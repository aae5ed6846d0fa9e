// MemDevice: a std::string image guarded by one mutex (see mem_device.h).
#include <cstring>

#include "absl/strings/str_cat.h"
#include "cowkv/device.h"
#include "engine/base/check.h"
#include "engine/base/status.h"

namespace cowkv {
namespace {

// OUT_OF_RANGE unless [offset, offset + n) lies inside a device of `size`
// bytes. Written so that offset + n cannot overflow.
absl::Status CheckRange(const char* op, uint64_t offset, size_t n,
                        uint64_t size) {
  if (offset > size || n > size - offset) {
    return absl::OutOfRangeError(absl::StrCat(op, " past end of memory device: offset=",
                                              offset, " len=", n, " size=", size));
  }
  return absl::OkStatus();
}

}  // namespace

MemDevice::MemDevice(uint64_t size) : size_(size), data_(size, '\0') {}

absl::Status MemDevice::ReadAt(uint64_t offset, void* buf, size_t n) {
  COWKV_RETURN_IF_ERROR(CheckRange("read", offset, n, size_));
  absl::MutexLock lock(&mu_);
  if (n > 0) std::memcpy(buf, data_.data() + offset, n);
  return absl::OkStatus();
}

absl::Status MemDevice::WriteAt(uint64_t offset, const void* buf, size_t n) {
  COWKV_RETURN_IF_ERROR(CheckRange("write", offset, n, size_));
  absl::MutexLock lock(&mu_);
  if (n > 0) std::memcpy(&data_[offset], buf, n);
  ++writes_;
  return absl::OkStatus();
}

absl::Status MemDevice::Flush() {
  absl::MutexLock lock(&mu_);
  ++flushes_;
  return absl::OkStatus();
}

std::string MemDevice::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return data_;
}

void MemDevice::Restore(const std::string& image) {
  COWKV_CHECK(image.size() == size_);
  absl::MutexLock lock(&mu_);
  data_ = image;
}

uint64_t MemDevice::flushes() const {
  absl::MutexLock lock(&mu_);
  return flushes_;
}

uint64_t MemDevice::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

}  // namespace cowkv
