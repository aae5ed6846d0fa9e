// Explicit little- and big-endian integer coding with bounds checks.
//
// Every on-disk integer is little-endian and goes through these helpers
// (LevelDB util/coding.h). Keys that must sort numerically in memcmp order
// (tree ids, bytenrs inside item keys) use the big-endian helpers. Nothing in
// the engine casts a struct onto a buffer.
#ifndef COWKV_ENGINE_BASE_CODING_H_
#define COWKV_ENGINE_BASE_CODING_H_

#include <cstdint>
#include <cstring>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/base/check.h"

namespace cowkv {

// Fixed-width integers, little- or big-endian, at any alignment: memcpy
// compiles to one load or store (plus a byte swap where the order differs).
namespace coding_internal {
template <typename T>
inline T Swap(T v) {
  if constexpr (sizeof(T) == 2) return static_cast<T>(__builtin_bswap16(v));
  if constexpr (sizeof(T) == 4) return static_cast<T>(__builtin_bswap32(v));
  if constexpr (sizeof(T) == 8) return static_cast<T>(__builtin_bswap64(v));
}
template <typename T>
inline void Store(char* p, T v, bool little) {
  const bool host_little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  if (little != host_little) v = Swap(v);
  std::memcpy(p, &v, sizeof(T));
}
template <typename T>
inline T Load(const char* p, bool little) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  const bool host_little = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;
  return little != host_little ? Swap(v) : v;
}
}  // namespace coding_internal

inline void EncodeLE16(char* p, uint16_t v) { coding_internal::Store(p, v, true); }
inline void EncodeLE32(char* p, uint32_t v) { coding_internal::Store(p, v, true); }
inline void EncodeLE64(char* p, uint64_t v) { coding_internal::Store(p, v, true); }
inline uint16_t DecodeLE16(const char* p) { return coding_internal::Load<uint16_t>(p, true); }
inline uint32_t DecodeLE32(const char* p) { return coding_internal::Load<uint32_t>(p, true); }
inline uint64_t DecodeLE64(const char* p) { return coding_internal::Load<uint64_t>(p, true); }
inline void EncodeBE64(char* p, uint64_t v) { coding_internal::Store(p, v, false); }
inline uint64_t DecodeBE64(const char* p) { return coding_internal::Load<uint64_t>(p, false); }

// Byte-wise key order (as memcmp, shorter first on a tie), comparing
// 8-byte big-endian words while both keys have one: keys that differ early,
// such as two extents' or two inodes' keys, need no memcmp call.
inline int CompareKeyBytes(absl::string_view a, absl::string_view b) {
  const size_t n = a.size() < b.size() ? a.size() : b.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const uint64_t x = DecodeBE64(a.data() + i), y = DecodeBE64(b.data() + i);
    if (x != y) return x < y ? -1 : 1;
  }
  for (; i < n; ++i) {
    const uint8_t x = static_cast<uint8_t>(a[i]), y = static_cast<uint8_t>(b[i]);
    if (x != y) return x < y ? -1 : 1;
  }
  return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
}

inline void PutLE32(std::string* dst, uint32_t v) {
  char b[4];
  EncodeLE32(b, v);
  dst->append(b, 4);
}
inline void PutLE64(std::string* dst, uint64_t v) {
  char b[8];
  EncodeLE64(b, v);
  dst->append(b, 8);
}
inline void PutBE64(std::string* dst, uint64_t v) {
  char b[8];
  EncodeBE64(b, v);
  dst->append(b, 8);
}

// Reads fixed-width fields from a byte string, refusing to run past its end.
// After any failed read ok() stays false and further reads return 0, so a
// decoder may read a whole record and test ok() once.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  uint8_t U8() { return Take(1) ? static_cast<uint8_t>(last_[0]) : 0; }
  uint16_t LE16() { return Take(2) ? DecodeLE16(last_) : 0; }
  uint32_t LE32() { return Take(4) ? DecodeLE32(last_) : 0; }
  uint64_t LE64() { return Take(8) ? DecodeLE64(last_) : 0; }
  uint64_t BE64() { return Take(8) ? DecodeBE64(last_) : 0; }
  absl::string_view Bytes(size_t n) {
    return Take(n) ? absl::string_view(last_, n) : absl::string_view();
  }

  bool ok() const { return ok_; }
  size_t remaining() const { return ok_ ? data_.size() - pos_ : 0; }

 private:
  bool Take(size_t n) {
    if (!ok_ || data_.size() - pos_ < n) {
      ok_ = false;
      return false;
    }
    last_ = data_.data() + pos_;
    pos_ += n;
    return true;
  }

  absl::string_view data_;
  size_t pos_ = 0;
  const char* last_ = nullptr;
  bool ok_ = true;
};

}  // namespace cowkv

#endif  // COWKV_ENGINE_BASE_CODING_H_
