// FaultDevice: pending-write journal, countdown faults and flush-point crashes
// (the fault model is in fault_device.h).
//
// Power loss is resolved in two passes, both under mu_:
//   1. undo: restore every pending write's `before` image, newest first, so
//      overlapping writes unwind to the image of the last completed flush;
//   2. redo: walk the pending writes oldest first and re-apply each kept write
//      (or the kept sectors of a torn one), so a later write still wins over
//      an earlier one wherever both were kept.
// The PRNG is consumed in the redo order only, so a seed replays exactly.
#include "engine/io/fault_device.h"

#include <algorithm>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/base/check.h"
#include "engine/base/status.h"

namespace cowkv {
namespace {

// Granularity at which a kept write may be torn (a disk sector). Sector
// boundaries are absolute device offsets, as on a real disk.
constexpr uint64_t kSectorBytes = 512;

const char* OpName(FaultDevice::Op op) {
  switch (op) {
    case FaultDevice::Op::kRead:
      return "read";
    case FaultDevice::Op::kWrite:
      return "write";
    case FaultDevice::Op::kFlush:
      return "flush";
  }
  return "?";
}

// One fair coin from the PRNG. Uses the top bit directly rather than a
// <random> distribution, whose output may differ between library versions.
bool Coin(std::mt19937_64* rng) { return ((*rng)() >> 63) != 0; }

void MustWrite(BlockDevice* base, uint64_t offset, const char* data, size_t n) {
  // The range was accepted when the write was made, so only a broken base
  // device can fail here, and PowerLoss has no way to report it.
  absl::Status s = base->WriteAt(offset, data, n);
  COWKV_CHECK_MSG(s.ok(), "FaultDevice: base device refused a power-loss write");
}

// Re-applies, sector by sector, the part of a write of `after` at `offset`
// that the PRNG says reached the media.
void ApplyTorn(BlockDevice* base, uint64_t offset, const std::string& after,
               std::mt19937_64* rng) {
  const uint64_t end = offset + after.size();
  for (uint64_t pos = offset; pos < end;) {
    const uint64_t sector_end =
        std::min(end, (pos / kSectorBytes + 1) * kSectorBytes);
    if (Coin(rng)) {
      MustWrite(base, pos, after.data() + (pos - offset), sector_end - pos);
    }
    pos = sector_end;
  }
}

}  // namespace

FaultDevice::FaultDevice(BlockDevice* base) : base_(base) {
  COWKV_CHECK(base_ != nullptr);
}

absl::Status FaultDevice::MaybeFailLocked(Op op) {
  mu_.AssertHeld();
  if (dead_) {
    return absl::UnavailableError(
        absl::StrCat("fault device is dead after a crash at a flush (", OpName(op),
                     "); call PowerLoss() to reboot"));
  }
  Fault& f = faults_[static_cast<int>(op)];
  if (f.firing) {
    return absl::Status(f.code,
                        absl::StrCat("injected persistent ", OpName(op), " fault"));
  }
  if (f.countdown == 0) return absl::OkStatus();
  if (--f.countdown > 0) return absl::OkStatus();
  f.firing = f.persistent;
  absl::Status s(f.code, absl::StrCat("injected ", OpName(op), " fault"));
  if (!f.persistent) f = Fault();
  return s;
}

absl::Status FaultDevice::ReadAt(uint64_t offset, void* buf, size_t n) {
  absl::MutexLock lock(&mu_);
  COWKV_RETURN_IF_ERROR(MaybeFailLocked(Op::kRead));
  return base_->ReadAt(offset, buf, n);
}

absl::Status FaultDevice::WriteAt(uint64_t offset, const void* buf, size_t n) {
  absl::MutexLock lock(&mu_);
  COWKV_RETURN_IF_ERROR(MaybeFailLocked(Op::kWrite));
  Pending p;
  p.offset = offset;
  p.before.resize(n);
  // Also rejects a range past Size() before anything changes.
  COWKV_RETURN_IF_ERROR(base_->ReadAt(offset, &p.before[0], n));
  p.after.assign(static_cast<const char*>(buf), n);
  COWKV_RETURN_IF_ERROR(base_->WriteAt(offset, buf, n));
  pending_.push_back(std::move(p));
  return absl::OkStatus();
}

absl::Status FaultDevice::Flush() {
  absl::MutexLock lock(&mu_);
  if (!dead_ && crash_at_flush_ > 0 && --crash_at_flush_ == 0) {
    // Power is cut instead of this flush: nothing pending becomes durable.
    dead_ = true;
  }
  COWKV_RETURN_IF_ERROR(MaybeFailLocked(Op::kFlush));
  COWKV_RETURN_IF_ERROR(base_->Flush());
  pending_.clear();
  ++flushes_;
  return absl::OkStatus();
}

uint64_t FaultDevice::Size() const { return base_->Size(); }

void FaultDevice::FailAfter(Op op, uint64_t n, absl::StatusCode code,
                            bool persistent) {
  COWKV_CHECK(n >= 1);
  COWKV_CHECK(code != absl::StatusCode::kOk);
  absl::MutexLock lock(&mu_);
  Fault& f = faults_[static_cast<int>(op)];
  f.countdown = n;
  f.code = code;
  f.persistent = persistent;
  f.firing = false;
}

void FaultDevice::CrashAtFlush(uint64_t k) {
  COWKV_CHECK(k >= 1);
  absl::MutexLock lock(&mu_);
  crash_at_flush_ = k;
}

void FaultDevice::ClearFaults() {
  absl::MutexLock lock(&mu_);
  for (Fault& f : faults_) f = Fault();
  crash_at_flush_ = 0;
}

void FaultDevice::PowerLoss(LossMode mode, uint64_t seed) {
  absl::MutexLock lock(&mu_);
  std::mt19937_64 rng(seed);
  // Undo, newest first: the media now holds the last flushed image.
  for (auto it = pending_.rbegin(); it != pending_.rend(); ++it) {
    MustWrite(base_, it->offset, it->before.data(), it->before.size());
  }
  // Redo, oldest first, whatever reached the media.
  for (const Pending& p : pending_) {
    bool keep = false;
    bool torn = false;
    switch (mode) {
      case LossMode::kDropAll:
        break;
      case LossMode::kKeepAll:
        keep = true;
        break;
      case LossMode::kRandomSubset:
        keep = Coin(&rng);
        break;
      case LossMode::kTorn:
        keep = Coin(&rng);
        torn = keep && Coin(&rng);
        break;
    }
    if (torn) {
      ApplyTorn(base_, p.offset, p.after, &rng);
    } else if (keep) {
      MustWrite(base_, p.offset, p.after.data(), p.after.size());
    }
  }
  // Reboot: nothing is pending, the device is alive, no crash is armed.
  pending_.clear();
  dead_ = false;
  crash_at_flush_ = 0;
}

bool FaultDevice::dead() const {
  absl::MutexLock lock(&mu_);
  return dead_;
}

uint64_t FaultDevice::flushes() const {
  absl::MutexLock lock(&mu_);
  return flushes_;
}

uint64_t FaultDevice::pending_writes() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

}  // namespace cowkv
