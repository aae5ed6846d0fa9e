// FaultDevice: wraps a BlockDevice and lies about it, for crash and error tests.
//
// Fault model (what a test can make happen; nothing else ever happens):
//  1. Power loss. Every WriteAt since the last completed Flush() is "pending".
//     PowerLoss(mode) resolves each pending write against the image as it was
//     at the last completed flush, then resets the pending list:
//       kDropAll    every pending write is lost;
//       kKeepAll    every pending write reached the media;
//       kRandomSubset each pending write independently kept or dropped;
//       kTorn       like kRandomSubset, and each kept write may be torn: only
//                   a random subset of its 512-byte sectors reached the media.
//     Choices come from a PRNG seeded by the caller, so a failure replays.
//     After PowerLoss the device behaves normally again (a "reboot").
//  2. Injected errors. FailAfter(op, n, code, persistent) makes the n-th next
//     call of `op` (1 = the very next one) fail with `code` (EIO → INTERNAL,
//     ENOSPC → RESOURCE_EXHAUSTED) without touching the media; if `persistent`
//     every later call of that op fails too, until ClearFaults().
//  3. Flush-point crash. CrashAtFlush(k): the k-th next Flush() does not
//     happen; instead the device is "dead": that Flush and every later call
//     fail with UNAVAILABLE until PowerLoss() is called. This is how tests cut
//     power at every flush point of a workload.
//
// Writes are applied to the wrapped device immediately (reads see them, as a
// page cache would); the pending list keeps the pre-write bytes so power loss
// can roll them back. Thread-safe.
//
// Details the model above leaves open, as implemented:
//  - Only a WriteAt that returned OK is pending; one refused by an injected
//    fault, a dead device or the wrapped device (e.g. OUT_OF_RANGE) is not.
//  - Every Flush() on a live device counts toward CrashAtFlush, checked
//    before FailAfter; calls refused because the device is dead count toward
//    nothing. A failed Flush leaves the pending list as it was.
//  - PowerLoss() revives the device and disarms CrashAtFlush, but FailAfter
//    faults stay until ClearFaults(). ClearFaults() does not revive a dead
//    device.
//  - kTorn: a kept write is torn with probability 1/2, and a torn write keeps
//    each of its sectors with probability 1/2. Sectors are aligned to device
//    offsets (multiples of 512), as on a disk, so a write starting mid-sector
//    tears at the next sector boundary.
#ifndef COWKV_ENGINE_IO_FAULT_DEVICE_H_
#define COWKV_ENGINE_IO_FAULT_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "cowkv/device.h"

namespace cowkv {

class FaultDevice : public BlockDevice {
 public:
  enum class Op { kRead, kWrite, kFlush };
  enum class LossMode { kDropAll, kKeepAll, kRandomSubset, kTorn };

  // `base` is borrowed and must outlive this device.
  explicit FaultDevice(BlockDevice* base);
  FaultDevice(const FaultDevice&) = delete;
  FaultDevice& operator=(const FaultDevice&) = delete;

  absl::Status ReadAt(uint64_t offset, void* buf, size_t n) override;
  absl::Status WriteAt(uint64_t offset, const void* buf, size_t n) override;
  absl::Status Flush() override;
  uint64_t Size() const override;

  void FailAfter(Op op, uint64_t n, absl::StatusCode code, bool persistent);
  void CrashAtFlush(uint64_t k);
  void ClearFaults();

  // Simulates power loss followed by a reboot (see the fault model above).
  void PowerLoss(LossMode mode, uint64_t seed);

  bool dead() const;
  uint64_t flushes() const;         // completed flushes
  uint64_t pending_writes() const;  // writes since the last completed flush

 private:
  struct Pending {
    uint64_t offset;
    std::string before;  // media bytes before the write
    std::string after;   // bytes written
  };
  struct Fault {
    uint64_t countdown = 0;  // 0 = inactive
    absl::StatusCode code = absl::StatusCode::kOk;
    bool persistent = false;
    bool firing = false;
  };
  absl::Status MaybeFailLocked(Op op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  BlockDevice* const base_;
  mutable absl::Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  Fault faults_[3] ABSL_GUARDED_BY(mu_);
  uint64_t crash_at_flush_ ABSL_GUARDED_BY(mu_) = 0;
  bool dead_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t flushes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_IO_FAULT_DEVICE_H_
