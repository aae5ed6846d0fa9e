// A deterministic byte-string mutator for the decoder fuzz tests.
//
// No coverage feedback (the build has no libFuzzer): instead the mutations
// are biased the way on-disk formats are laid out. Headers sit at the front,
// so half of the offsets fall in the first 256 bytes; integer fields are
// naturally aligned, so half of the multi-byte overwrites are aligned to
// their width; and the values written are the ones that break length and
// range checks (0, 1, max, max-1, the top bit, sizes just past a limit,
// page-aligned values that wrap when a page is added). Everything comes from
// one std::mt19937_64, so a (seed, iteration) pair replays exactly.
#ifndef COWKV_ENGINE_FUZZ_MUTATOR_H_
#define COWKV_ENGINE_FUZZ_MUTATOR_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>

namespace cowkv {
namespace fuzz {

class Mutator {
 public:
  explicit Mutator(uint64_t seed) : rng_(seed) {}

  // Applies 1..4 random mutations to `s`.
  void Mutate(std::string* s) {
    const int n = 1 + static_cast<int>(Below(4));
    for (int i = 0; i < n; ++i) MutateOnce(s);
  }

  // A uniform number in [0, n); n > 0.
  uint64_t Below(uint64_t n) { return rng_() % n; }

 private:
  enum Op {
    kFlipBit,
    kSetByte,
    kNudgeByte,
    kSetInt,
    kTruncate,
    kAppend,
    kDuplicateChunk,
    kDeleteChunk,
    kNumOps,
  };

  void MutateOnce(std::string* s) {
    Op op = static_cast<Op>(Below(kNumOps));
    if (s->empty() && op != kAppend) op = kAppend;  // nothing to change yet
    switch (op) {
      case kFlipBit:
        (*s)[Offset(s->size(), 1)] ^= static_cast<char>(1u << Below(8));
        break;
      case kSetByte: {
        static constexpr uint8_t kBytes[] = {0, 1, 0x7f, 0x80, 0xff};
        (*s)[Offset(s->size(), 1)] = static_cast<char>(kBytes[Below(sizeof(kBytes))]);
        break;
      }
      case kNudgeByte: {
        // Off-by-a-few lengths and counts are where bounds checks slip.
        const int delta = 1 + static_cast<int>(Below(4));
        char& c = (*s)[Offset(s->size(), 1)];
        c = static_cast<char>(static_cast<uint8_t>(c) + (Below(2) ? delta : -delta));
        break;
      }
      case kSetInt:
        SetInt(s);
        break;
      case kTruncate:
        s->resize(Below(s->size()));
        break;
      case kAppend: {
        const size_t n = 1 + Below(16);
        for (size_t i = 0; i < n; ++i) s->push_back(static_cast<char>(rng_()));
        break;
      }
      case kDuplicateChunk: {
        const size_t len = 1 + Below(std::min<size_t>(s->size(), 64));
        const std::string chunk = s->substr(Below(s->size() - len + 1), len);
        s->insert(Below(s->size() + 1), chunk);
        break;
      }
      case kDeleteChunk: {
        const size_t len = 1 + Below(std::min<size_t>(s->size(), 64));
        s->erase(Below(s->size() - len + 1), len);
        break;
      }
      case kNumOps:
        break;
    }
  }

  // Overwrites 2, 4 or 8 bytes with an interesting integer, little-endian
  // (every on-disk integer) or, a quarter of the time, big-endian (keys).
  void SetInt(std::string* s) {
    static constexpr size_t kWidths[] = {2, 4, 8};
    const size_t width = kWidths[Below(3)];
    if (s->size() < width) {
      (*s)[Offset(s->size(), 1)] = static_cast<char>(0xff);
      return;
    }
    const uint64_t v = Interesting(width);
    const size_t off = Offset(s->size(), width);
    const bool big_endian = Below(4) == 0;
    for (size_t i = 0; i < width; ++i) {
      const size_t shift = 8 * (big_endian ? width - 1 - i : i);
      (*s)[off + i] = static_cast<char>(v >> shift);
    }
  }

  uint64_t Interesting(size_t width) {
    const uint64_t mask = width == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * width)) - 1;
    const uint64_t top = uint64_t{1} << (8 * width - 1);
    const uint64_t kValues[] = {
        0, 1, mask, mask - 1, top, top - 1,
        // Sizes around the format's limits: a node header, a name, a key,
        // a sector, a u16, the reserved head, 1 << 31, 1 << 32.
        16, 64, 255, 256, 1032, 4096, 65535, 65536, uint64_t{1} << 20, uint64_t{1} << 31,
        uint64_t{1} << 32,
        // Page-aligned values that wrap to zero when a 4/16/64 KiB node is added.
        ~uint64_t{4095}, ~uint64_t{16383}, ~uint64_t{65535},
    };
    if (Below(8) == 0) return rng_() & mask;
    return kValues[Below(sizeof(kValues) / sizeof(kValues[0]))] & mask;
  }

  // A random offset at which `width` bytes fit in `size` (width <= size).
  size_t Offset(size_t size, size_t width) {
    size_t limit = size - width + 1;
    if (Below(2) == 0) limit = std::min<size_t>(limit, 256);  // headers sit at the front
    size_t off = Below(limit);
    if (width > 1 && Below(2) == 0) off -= off % width;  // fields are naturally aligned
    return off;
  }

  std::mt19937_64 rng_;
};

}  // namespace fuzz
}  // namespace cowkv

#endif  // COWKV_ENGINE_FUZZ_MUTATOR_H_
