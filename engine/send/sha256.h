// SHA-256 (FIPS 180-4), the digest of send streams and of `subvolume
// digest`. A small streaming implementation, so that engine/send needs no
// crypto library: Update any number of times, then Final once.
//
// Not for secrets: no constant-time claims, no key material ever passes.
#ifndef COWKV_ENGINE_SEND_SHA256_H_
#define COWKV_ENGINE_SEND_SHA256_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace cowkv {
namespace send {

class Sha256 {
 public:
  static constexpr size_t kDigestSize = 32;
  using Digest = std::array<uint8_t, kDigestSize>;

  Sha256();
  void Update(absl::string_view bytes);
  // The digest of everything updated so far. The object must not be
  // updated afterwards.
  Digest Final();

  // The running state after any number of Updates (before Final), as
  // bytes: 8 LE u32 words, u64 LE total length, then the total % 64
  // bytes not yet hashed (a resume token carries it: docs/format.md
  // "Resume token"). FromState refuses what State cannot have made.
  std::string State() const;
  static bool FromState(absl::string_view state, Sha256* out);

  static Digest Of(absl::string_view bytes) {
    Sha256 h;
    h.Update(bytes);
    return h.Final();
  }

 private:
  void Block(const uint8_t* p);

  std::array<uint32_t, 8> state_;
  std::array<uint8_t, 64> buf_{};
  size_t buf_len_ = 0;
  uint64_t total_bytes_ = 0;
};

// Lower-case hex of a digest.
std::string DigestHex(const Sha256::Digest& d);

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_SHA256_H_
