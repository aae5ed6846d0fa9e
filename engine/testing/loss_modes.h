// The four ways FaultDevice resolves unflushed writes at a power cut, as a
// gtest parameter list with readable names, shared by the crash tests.
#ifndef COWKV_ENGINE_TESTING_LOSS_MODES_H_
#define COWKV_ENGINE_TESTING_LOSS_MODES_H_

#include <string>

#include "engine/io/fault_device.h"
#include "gtest/gtest.h"

namespace cowkv {
namespace testing {

inline auto AllLossModes() {
  return ::testing::Values(FaultDevice::LossMode::kDropAll, FaultDevice::LossMode::kKeepAll,
                           FaultDevice::LossMode::kRandomSubset, FaultDevice::LossMode::kTorn);
}

inline std::string DescribeLossMode(FaultDevice::LossMode mode) {
  switch (mode) {
    case FaultDevice::LossMode::kDropAll: return "DropAll";
    case FaultDevice::LossMode::kKeepAll: return "KeepAll";
    case FaultDevice::LossMode::kRandomSubset: return "RandomSubset";
    case FaultDevice::LossMode::kTorn: return "Torn";
  }
  return "Unknown";
}

inline std::string LossModeName(const ::testing::TestParamInfo<FaultDevice::LossMode>& info) {
  return DescribeLossMode(info.param);
}

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_LOSS_MODES_H_
