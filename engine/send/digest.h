// Digester: the SHA-256 of a subvolume's sendable content (`cowkv
// subvolume digest`), equal on both sides of a send and receive.
//
// Hashed, in key order, for each file item ('f') and KV item ('k'): u16 LE
// key length, key, u32 LE value length, the item value with its data
// extent's bytenr zeroed (the one field that is a local address), then,
// for an item with a written data extent, the extent's bytes (read chunk
// by chunk, each extent's crc verified). So inode numbers, names, links,
// modes, times, sizes, xattrs, extent layout, file data, KV values and
// their revisions all count; where the device put things does not. The
// KV history and leases are not part of it (they are not sent).
//
// Resumable: Step hashes a bounded number of items and remembers the last
// key, so the store can release its locks between steps.
#ifndef COWKV_ENGINE_SEND_DIGEST_H_
#define COWKV_ENGINE_SEND_DIGEST_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/send/sender.h"
#include "engine/send/sha256.h"
#include "engine/tree/tree.h"

namespace cowkv {
namespace send {

class Digester {
 public:
  // Hashes up to `max_items` more items of `tree`; true once every item is in.
  absl::StatusOr<bool> Step(Tree* tree, DataReader* data, size_t max_items);
  // Lower-case hex, once Step returned true.
  std::string Hex() { return DigestHex(hash_.Final()); }
  uint64_t items() const { return items_; }
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  absl::Status AddItem(absl::string_view key, absl::string_view value, DataReader* data);

  Sha256 hash_;
  std::string last_key_;
  bool started_ = false;
  uint64_t items_ = 0;
  uint64_t data_bytes_ = 0;
};

}  // namespace send
}  // namespace cowkv

#endif  // COWKV_ENGINE_SEND_DIGEST_H_
