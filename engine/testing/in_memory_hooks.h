// InMemoryHooks: TreeHooks for a tree that lives in one engine transaction
// (nothing is ever clean or shared, nothing is dropped), for tests of the
// tree and of what sits on one (the extent tree) without a TxnManager.
// Blocks are handed out 4 KiB apart above `first_bytenr`.
#ifndef COWKV_ENGINE_TESTING_IN_MEMORY_HOOKS_H_
#define COWKV_ENGINE_TESTING_IN_MEMORY_HOOKS_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace testing {

class InMemoryHooks : public TreeHooks {
 public:
  InMemoryHooks(uint64_t generation, uint64_t first_bytenr)
      : generation_(generation), next_(first_bytenr) {}
  uint64_t generation() const override { return generation_; }
  absl::StatusOr<uint64_t> AllocTreeBlock(uint64_t, uint8_t) override {
    next_ += 4096;
    return next_;
  }
  absl::Status CowTreeBlock(uint64_t, const Node&) override { return absl::OkStatus(); }
  absl::Status FreeTreeBlock(uint64_t, const Node&) override { return absl::OkStatus(); }
  absl::StatusOr<bool> ShouldDescendForDrop(uint64_t, format::ChildPtr, int) override {
    return absl::UnimplementedError("no drops here");
  }
  absl::Status DropChild(uint64_t, const Node&, int) override {
    return absl::UnimplementedError("no drops here");
  }
  absl::Status DropRoot(uint64_t, const Node&) override {
    return absl::UnimplementedError("no drops here");
  }

 private:
  const uint64_t generation_;
  uint64_t next_;
};

}  // namespace testing
}  // namespace cowkv

#endif  // COWKV_ENGINE_TESTING_IN_MEMORY_HOOKS_H_
